/* SPDX-License-Identifier: MIT */
/* What the MCP tools share: the JSON Schema of a tool's arguments and their check, both from
 * the tool's parameter table; tool results; one API call; waiting for sessions to run. */
#include "cli/mcp-internal.h"
#include "common/util.h"
#include "core/core.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NAME_PATTERN "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
#define WAIT_POLL_NS 250000000L
#define NAME_HINT    "lowercase letters, digits and '-', at most 63, a letter or digit at both ends"

const struct mcp_tool *mcp_tool_find(const char *name)
{
        for (const struct mcp_tool *t = mcp_tools; t->name; t++)
                if (strcmp(t->name, name) == 0)
                        return t;
        return NULL;
}

static json_t *param_schema(const struct mcp_param *p)
{
        static const char *const types[] = {
                [MCP_T_STRING] = "string",   [MCP_T_NAME] = "string",   [MCP_T_INTEGER] = "integer",
                [MCP_T_BOOLEAN] = "boolean", [MCP_T_STRINGS] = "array",
        };
        json_t *j = json_pack("{s:s, s:s}", "type", types[p->type], "description", p->description);
        json_t *e;

        if (!j)
                return NULL;
        if (p->type == MCP_T_NAME)
                json_object_set_new(j, "pattern", json_string(NAME_PATTERN));
        if (p->type == MCP_T_INTEGER) {
                json_object_set_new(j, "minimum", json_integer(p->min));
                json_object_set_new(j, "maximum", json_integer(p->max));
                if (!p->required)
                        json_object_set_new(j, "default", json_integer(p->def));
        }
        if (p->type == MCP_T_STRINGS) {
                json_object_set_new(j, "items", json_pack("{s:s}", "type", "string"));
                json_object_set_new(j, "minItems", json_integer(1));
        }
        if (p->choices && (e = json_array())) {
                for (const char *const *c = p->choices; *c; c++)
                        json_array_append_new(e, json_string(*c));
                json_object_set_new(j, "enum", e);
                json_object_set_new(j, "default", json_string(p->choices[0]));
        }
        return j;
}

json_t *mcp_tool_json(const struct mcp_tool *t)
{
        json_t *props = json_object(), *req = json_array(), *j;

        for (const struct mcp_param *p = t->params; props && req && p->name; p++) {
                if (json_object_set_new(props, p->name, param_schema(p)) < 0 ||
                    (p->required && json_array_append_new(req, json_string(p->name)) < 0)) {
                        json_decref(props);
                        props = NULL;
                }
        }
        if (!props || !req) {
                json_decref(props);
                json_decref(req);
                return NULL;
        }
        j = json_pack("{s:s, s:s, s:s, s:{s:s, s:o, s:o, s:b}, s:{s:s, s:b, s:b, s:b, s:b}}",
                      "name", t->name, "title", t->title, "description", t->description,
                      "inputSchema", "type", "object", "properties", props, "required", req,
                      "additionalProperties", 0, "annotations", "title", t->title, "readOnlyHint",
                      (t->hints & MCP_HINT_READ_ONLY) != 0, "destructiveHint",
                      (t->hints & MCP_HINT_DESTRUCTIVE) != 0, "idempotentHint",
                      (t->hints & MCP_HINT_IDEMPOTENT) != 0, "openWorldHint", 0);
        return j;
}

static const struct mcp_param *find_param(const struct mcp_tool *t, const char *name)
{
        for (const struct mcp_param *p = t->params; p->name; p++)
                if (strcmp(p->name, name) == 0)
                        return p;
        return NULL;
}

static int bad(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *msg, size_t size, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static int check_strings(const struct mcp_param *p, const json_t *v, char *msg, size_t size)
{
        json_t *item;
        size_t i;

        if (!json_is_array(v) || json_array_size(v) == 0)
                return bad(msg, size, "%s: must be a non-empty array of strings", p->name);
        json_array_foreach(v, i, item)
        {
                if (!json_is_string(item))
                        return bad(msg, size, "%s[%zu]: must be a string", p->name, i);
        }
        return 0;
}

static int check_string(const struct mcp_param *p, const json_t *v, char *msg, size_t size)
{
        const char *s = json_string_value(v);

        if (!s)
                return bad(msg, size, "%s: must be a string", p->name);
        if (p->type == MCP_T_NAME && !manifest_name_is_valid(s))
                return bad(msg, size, "%s: \"%.64s\" is not a valid name (%s)", p->name, s,
                           NAME_HINT);
        if (!p->choices)
                return 0;
        for (const char *const *c = p->choices; *c; c++)
                if (strcmp(*c, s) == 0)
                        return 0;
        return bad(msg, size, "%s: \"%.64s\" is not one of the values inputSchema allows", p->name,
                   s);
}

static int check_one(const struct mcp_param *p, const json_t *v, char *msg, size_t size)
{
        long long n;

        switch (p->type) {
        case MCP_T_INTEGER:
                if (!json_is_integer(v))
                        return bad(msg, size, "%s: must be an integer", p->name);
                n = (long long)json_integer_value(v);
                if (n < p->min || n > p->max)
                        return bad(msg, size, "%s: %lld is out of range (%lld..%lld)", p->name, n,
                                   p->min, p->max);
                return 0;
        case MCP_T_BOOLEAN:
                return json_is_boolean(v) ? 0
                                          : bad(msg, size, "%s: must be true or false", p->name);
        case MCP_T_STRINGS:
                return check_strings(p, v, msg, size);
        default:
                return check_string(p, v, msg, size);
        }
}

int mcp_tool_check_args(const struct mcp_tool *t, const json_t *args, char *msg, size_t size)
{
        const struct mcp_param *p;
        const char *key;
        json_t *v;
        int r;

        json_object_foreach((json_t *)args, key, v)
        {
                if (!(p = find_param(t, key)))
                        return bad(msg, size,
                                   "%.64s: unknown argument (inputSchema in tools/list names "
                                   "the known ones)",
                                   key);
                if ((r = check_one(p, v, msg, size)) < 0)
                        return r;
        }
        for (p = t->params; p->name; p++)
                if (p->required && !json_object_get(args, p->name))
                        return bad(msg, size, "%s: required (%s)", p->name, p->description);
        return 0;
}

const char *mcp_arg_string(const json_t *args, const char *name, const char *def)
{
        return json_string_value(json_object_get(args, name)) ?: def;
}

long long mcp_arg_int(const struct mcp_tool *t, const json_t *args, const char *name)
{
        const struct mcp_param *p = find_param(t, name);
        json_t *v = json_object_get(args, name);

        return json_is_integer(v) ? (long long)json_integer_value(v) : p ? p->def : 0;
}

void mcp_result_done(struct mcp_result *r)
{
        json_decref(r->structured);
        free(r->error);
        *r = (struct mcp_result){0};
}

int mcp_result_ok(struct mcp_result *r, json_t *structured)
{
        if (!structured)
                return -ENOMEM;
        r->structured = structured;
        return 0;
}

int mcp_result_error(struct mcp_result *r, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&r->error, fmt, ap);
        va_end(ap);
        if (n < 0) {
                r->error = NULL;
                return -ENOMEM;
        }
        return 0;
}

int mcp_result_api_error(struct mcp_result *r, const char *what, const struct cli_response *resp)
{
        cleanup_decref json_t *j = resp->body ? json_loads(resp->body, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(j, "message"));
        cleanup_free char *text = NULL;
        json_t *v;
        size_t i;

        if (fk_asprintf(&text, "%s: %s (HTTP %ld)", what,
                        msg ?: (resp->body && *resp->body ? resp->body : "error"),
                        resp->status) < 0)
                return -ENOMEM;
        json_array_foreach(json_object_get(j, "details"), i, v)
        {
                char *more = NULL;

                if (!json_is_string(v) || (msg && strcmp(json_string_value(v), msg) == 0))
                        continue;
                if (fk_asprintf(&more, "%s\n%s", text, json_string_value(v)) < 0)
                        return -ENOMEM;
                free(text);
                text = more;
        }
        r->error = TAKE_PTR(text);
        return 0;
}

void mcp_cli_for(const struct cli *c, const json_t *args, struct cli *c2)
{
        *c2 = *c;
        c2->namespace = mcp_arg_string(args, "namespace", c->namespace);
}

void mcp_reply_done(struct mcp_reply *rep)
{
        json_decref(rep->body);
        free(rep->apply);
        *rep = (struct mcp_reply){0};
}

int mcp_api_call(const struct cli *c, const char *what, const char *method, const char *path,
                 json_t *body, struct mcp_reply *rep, struct mcp_result *r)
{
        cleanup_free char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        struct cli_response resp = {0};
        struct fk_error err = {0};
        int k = 0;

        *rep = (struct mcp_reply){0};
        json_decref(body);
        if (body && !text)
                return -ENOMEM;
        if (cli_request(c, method, path, text, &resp, &err) < 0)
                return mcp_result_error(r, "%s: %s", what, err.msg) < 0 ? -ENOMEM : 1;
        rep->status = resp.status;
        if (resp.status / 100 != 2)
                k = mcp_result_api_error(r, what, &resp) < 0 ? -ENOMEM : 1;
        else if (!resp.body || resp.size == 0)
                k = (rep->body = json_object()) ? 0 : -ENOMEM;
        else if (!(rep->body = json_loads(resp.body, 0, NULL)))
                k = mcp_result_error(r, "%s: unreadable reply from forkletd", what) < 0 ? -ENOMEM
                                                                                        : 1;
        rep->apply = TAKE_PTR(resp.apply);
        cli_response_done(&resp);
        return k;
}

/* The Ready condition's message: why a session failed. */
static const char *ready_message(const json_t *s)
{
        json_t *conds = json_object_get(json_object_get(s, "status"), "conditions"), *v;
        size_t i;

        json_array_foreach(conds, i, v)
        {
                if (strcmp(json_string_value(json_object_get(v, "type")) ?: "", "Ready") == 0)
                        return json_string_value(json_object_get(v, "message"));
        }
        return NULL;
}

/* The phase of a session (a static string), "Absent" while it cannot be read; a Failed one
 * that will not be booted again (restartPolicy OnFailure would) sets *failed and fills r. */
static const char *phase_of(const struct cli *c, const char *name, struct mcp_result *r,
                            bool *failed)
{
        cleanup_decref json_t *j = NULL;
        struct fk_error err = {0};
        enum session_phase p;
        const char *policy;

        if (cli_get_session(c, name, &j, &err) < 0)
                return "Absent";
        p = session_phase_from_string(
                json_string_value(json_object_get(json_object_get(j, "status"), "phase")) ?: "");
        policy = json_string_value(json_object_get(json_object_get(j, "spec"), "restartPolicy"));
        if (p == _SESSION_PHASE_INVALID)
                return "Unknown";
        if (p == SESSION_PHASE_FAILED && !(policy && strcmp(policy, "OnFailure") == 0) &&
            !*failed) {
                *failed = true;
                (void)mcp_result_error(r, "session %s/%s is Failed: %s", c->namespace, name,
                                       ready_message(j) ?: "no reason recorded");
        }
        return session_phase_to_string(p);
}

int mcp_wait_running(const struct cli *c, const json_t *names, unsigned timeout_s,
                     json_t **ret_phases, struct mcp_result *r)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_s * 1000000000ull;
        json_t *phases = NULL, *v;
        size_t i, running;
        bool failed = false;

        for (;;) {
                json_decref(phases);
                if (!(phases = json_object()))
                        return -ENOMEM;
                running = 0;
                json_array_foreach(names, i, v)
                {
                        const char *ph = phase_of(c, json_string_value(v), r, &failed);

                        json_object_set_new(phases, json_string_value(v), json_string(ph));
                        running += strcmp(ph, "Running") == 0;
                }
                if (failed || running == json_array_size(names) || fk_now_mono_ns() >= deadline)
                        break;
                nanosleep(&(struct timespec){.tv_nsec = WAIT_POLL_NS}, NULL);
        }
        *ret_phases = phases;
        return failed ? -1 : running == json_array_size(names) ? 1 : 0;
}

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 if there is none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
        static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        size_t len = s[0] < 0x80             ? 1
                     : (s[0] & 0xe0) == 0xc0 ? 2
                     : (s[0] & 0xf0) == 0xe0 ? 3
                     : (s[0] & 0xf8) == 0xf0 ? 4
                                             : 0;
        uint32_t cp;

        if (len <= 1 || len > n)
                return len == 1 ? 1 : 0;
        cp = s[0] & (0x7f >> len);
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        /* overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8 */
        if (cp < min[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                return 0;
        return len;
}

/* Copies s into out (NULL: only counts) with U+FFFD for each invalid byte; the output size. */
static size_t utf8_clean(const unsigned char *s, size_t size, char *out, bool *lossy)
{
        size_t i = 0, o = 0, k;

        while (i < size) {
                k = utf8_seq(s + i, size - i);
                if (out)
                        memcpy(out + o, k ? (const char *)s + i : "\xef\xbf\xbd", k ? k : 3);
                o += k ? k : 3;
                i += k ? k : 1;
                *lossy |= k == 0;
        }
        return o;
}

json_t *mcp_text_json(const void *data, size_t size, bool *ret_lossy)
{
        cleanup_free char *out = NULL;
        bool lossy = false;
        size_t n;

        n = utf8_clean(data, size, NULL, &lossy);
        if (ret_lossy)
                *ret_lossy = lossy;
        if (!lossy)
                return json_stringn(data, size);
        if (!(out = malloc(n + 1)))
                return NULL;
        utf8_clean(data, size, out, &lossy);
        return json_stringn(out, n);
}
