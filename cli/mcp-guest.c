/* SPDX-License-Identifier: MIT */
/* The MCP tools that reach into a guest: exec (the API's JSON-line stream collected into
 * stdout, stderr and the exit status), read_file and write_file (raw bytes through the API's
 * files resource, as text or base64 in MCP). */
#include "cli/mcp-internal.h"
#include "common/util.h"
#include "core/core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXEC_DEFAULT_TIMEOUT_S 300
#define EXEC_DEFAULT_CAP       (1024 * 1024)
#define EXEC_MAX_CAP           (16 * 1024 * 1024)
/* base64 grows 4/3; stay under the API's body limit (as forklet exec -i does). */
#define EXEC_MAX_STDIN (CORE_API_MAX_BODY / 4 * 3 - 65536)

static const char *const encodings[] = {"utf-8", "base64", NULL};

#define P_SESSION                                                                                  \
        {                                                                                          \
                .name = "session", .type = MCP_T_NAME, .required = true,                           \
                .description = "the session's name (metadata.name); it must be Running"            \
        }
#define P_NAMESPACE                                                                                \
        {                                                                                          \
                .name = "namespace", .type = MCP_T_NAME,                                           \
                .description = "the session's namespace (default: forklet's -n, else \"default\")" \
        }
#define P_PATH(what)                                                                               \
        {                                                                                          \
                .name = "path", .type = MCP_T_STRING, .required = true,                            \
                .description = "the absolute guest path of the file to " what                      \
        }

const struct mcp_param mcp_exec_params[] = {
        P_SESSION,
        {.name = "argv",
         .type = MCP_T_STRINGS,
         .required = true,
         .description = "the program and its arguments, e.g. [\"uname\", \"-s\"]"},
        {.name = "stdin",
         .type = MCP_T_STRING,
         .description = "text for the command's standard input (default: none)"},
        {.name = "timeout_seconds",
         .type = MCP_T_INTEGER,
         .min = 0,
         .max = 86400,
         .def = EXEC_DEFAULT_TIMEOUT_S,
         .description = "kill the command after this many seconds (0: no limit)"},
        {.name = "output_cap_bytes",
         .type = MCP_T_INTEGER,
         .min = 1,
         .max = EXEC_MAX_CAP,
         .def = EXEC_DEFAULT_CAP,
         .description = "bytes of stdout and stderr together to keep; the rest is dropped and "
                        "output_capped says so"},
        P_NAMESPACE,
        {0},
};

const struct mcp_param mcp_read_file_params[] = {
        P_SESSION,
        P_PATH("read"),
        {.name = "encoding",
         .type = MCP_T_STRING,
         .choices = encodings,
         .description = "utf-8: the content as text (a file that is not UTF-8 is refused); "
                        "base64: any bytes"},
        P_NAMESPACE,
        {0},
};

const struct mcp_param mcp_write_file_params[] = {
        P_SESSION,
        P_PATH("write (created or replaced)"),
        {.name = "content",
         .type = MCP_T_STRING,
         .required = true,
         .description = "the file's content, as text or base64 (see encoding)"},
        {.name = "encoding",
         .type = MCP_T_STRING,
         .choices = encodings,
         .description = "how content is given: utf-8 text or base64 bytes"},
        {.name = "mode",
         .type = MCP_T_STRING,
         .description = "octal permission bits, e.g. \"0755\" (default \"0644\")"},
        P_NAMESPACE,
        {0},
};

/* ---- exec ----------------------------------------------------------------------------------- */

struct exec_out {
        char *data[2]; /* owned: stdout, stderr */
        size_t size[2];
        size_t cap, kept; /* bytes of both to keep, and kept so far */
        bool have_exit, capped, timed_out;
        int exit_code, signal;
        char *error; /* owned: the command could not be run */
        int err;     /* -ENOMEM */
};

static void exec_out_done(struct exec_out *o)
{
        free(o->data[0]);
        free(o->data[1]);
        free(o->error);
}

static void keep(struct exec_out *o, int stream, const void *data, size_t size)
{
        size_t n = FK_MIN(size, o->cap - o->kept);
        char *p;

        o->capped |= n < size;
        if (n == 0)
                return;
        p = realloc(o->data[stream], o->size[stream] + n);
        if (!p) {
                o->err = -ENOMEM;
                return;
        }
        memcpy(p + o->size[stream], data, n);
        o->data[stream] = p;
        o->size[stream] += n;
        o->kept += n;
}

static int on_line(const char *line, void *userdata)
{
        struct exec_out *o = userdata;
        cleanup_decref json_t *j = json_loads(line, 0, NULL);
        json_t *v;
        void *data = NULL;
        size_t size = 0;

        if ((v = json_object_get(j, "data")) &&
            fk_base64_decode(json_string_value(v) ?: "", json_string_length(v), &data, &size) >=
                    0) {
                const char *stream = json_string_value(json_object_get(j, "stream")) ?: "";

                keep(o, strcmp(stream, "stderr") == 0, data, size);
                free(data);
        } else if ((v = json_object_get(j, "exit_code")) && json_is_integer(v)) {
                o->exit_code = (int)json_integer_value(v);
                o->have_exit = true;
        } else if ((v = json_object_get(j, "signal")) && json_is_integer(v)) {
                o->signal = (int)json_integer_value(v);
                o->exit_code = 128 + o->signal;
                o->have_exit = true;
        } else if ((v = json_object_get(j, "error")) && !o->error)
                o->error = strdup(json_string_value(v) ?: "error");
        o->timed_out |= json_is_true(json_object_get(j, "timed_out"));
        o->capped |= json_is_true(json_object_get(j, "output_capped"));
        return o->err;
}

static int exec_body(const struct mcp_tool *t, const json_t *args, char **ret, struct mcp_result *r)
{
        const char *in = mcp_arg_string(args, "stdin", NULL);
        cleanup_decref json_t *b = NULL;
        char *b64 = NULL;

        b = json_pack("{s:O, s:I, s:I}", "argv", json_object_get(args, "argv"), "timeout_ms",
                      (json_int_t)mcp_arg_int(t, args, "timeout_seconds") * 1000, "output_cap",
                      (json_int_t)mcp_arg_int(t, args, "output_cap_bytes"));
        if (!b)
                return -ENOMEM;
        if (in && strlen(in) > EXEC_MAX_STDIN)
                return mcp_result_error(r, "exec: stdin: %zu bytes, more than the %u allowed",
                                        strlen(in), (unsigned)EXEC_MAX_STDIN) < 0
                               ? -ENOMEM
                               : 1;
        if (in && (fk_base64_encode(in, strlen(in), &b64) < 0 ||
                   json_object_set_new(b, "stdin", json_string(b64)) < 0)) {
                free(b64);
                return -ENOMEM;
        }
        free(b64);
        *ret = json_dumps(b, JSON_COMPACT);
        return *ret ? 0 : -ENOMEM;
}

static json_t *exec_result(const struct exec_out *o)
{
        json_t *out = json_pack("{s:i, s:o, s:o, s:b, s:b}", "exit_code", o->exit_code, "stdout",
                                mcp_text_json(o->data[0] ?: "", o->size[0], NULL), "stderr",
                                mcp_text_json(o->data[1] ?: "", o->size[1], NULL), "timed_out",
                                o->timed_out, "output_capped", o->capped);

        if (out && o->signal)
                json_object_set_new(out, "signal", json_integer(o->signal));
        return out;
}

int mcp_tool_exec(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const struct mcp_tool *t = mcp_tool_find("exec");
        cleanup_free char *body = NULL, *path = NULL;
        struct exec_out o = {.cap = (size_t)mcp_arg_int(t, args, "output_cap_bytes")};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        struct cli c2;
        int k;

        k = exec_body(t, args, &body, r);
        if (k != 0)
                return k < 0 ? k : 0;
        mcp_cli_for(c, args, &c2);
        if (cli_session_path(&c2, mcp_arg_string(args, "session", ""), "/exec", &path) < 0)
                return -ENOMEM;
        if (cli_request_lines(&c2, "POST", path, body, on_line, &o, &resp, &err) < 0)
                k = o.err ?: mcp_result_error(r, "exec: %s", err.msg);
        else if (resp.status != 200)
                k = mcp_result_api_error(r, "exec", &resp);
        else if (o.error)
                k = mcp_result_error(r, "exec: %s", o.error);
        else if (!o.have_exit)
                k = mcp_result_error(r, "exec: the stream ended without an exit status");
        else
                k = mcp_result_ok(r, exec_result(&o));
        cli_response_done(&resp);
        exec_out_done(&o);
        return k;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* The files path of args.path, with &mode= when mode is given. */
static int files_path(const struct cli *c, const json_t *args, const unsigned *mode, struct cli *c2,
                      char **ret)
{
        cleanup_free char *esc = NULL, *suffix = NULL;

        mcp_cli_for(c, args, c2);
        if (cli_url_escape(mcp_arg_string(args, "path", ""), &esc) < 0 ||
            (mode ? fk_asprintf(&suffix, "/files?path=%s&mode=%o", esc, *mode)
                  : fk_asprintf(&suffix, "/files?path=%s", esc)) < 0)
                return -ENOMEM;
        return cli_session_path(c2, mcp_arg_string(args, "session", ""), suffix, ret);
}

static int read_result(const json_t *args, const struct cli_response *resp, struct mcp_result *r)
{
        bool b64 = strcmp(mcp_arg_string(args, "encoding", "utf-8"), "base64") == 0, lossy;
        const char *path = mcp_arg_string(args, "path", "");
        json_t *content = NULL;
        char *text = NULL;

        if (b64) {
                if (fk_base64_encode(resp->body ?: "", resp->size, &text) < 0)
                        return -ENOMEM;
                content = json_string(text);
                free(text);
        } else {
                content = mcp_text_json(resp->body ?: "", resp->size, &lossy);
                if (content && lossy) {
                        json_decref(content);
                        return mcp_result_error(r,
                                                "read_file: %s (%zu bytes) is not UTF-8 text: "
                                                "read it with encoding \"base64\"",
                                                path, resp->size);
                }
        }
        if (!content)
                return -ENOMEM;
        return mcp_result_ok(r, json_pack("{s:s, s:I, s:s, s:o}", "path", path, "size",
                                          (json_int_t)resp->size, "encoding",
                                          b64 ? "base64" : "utf-8", "content", content));
}

int mcp_tool_read_file(const struct cli *c, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL;
        struct cli_response resp = {0};
        struct fk_error err = {0};
        struct cli c2;
        int k;

        if (files_path(c, args, NULL, &c2, &path) < 0)
                return -ENOMEM;
        if (cli_request(&c2, "GET", path, NULL, &resp, &err) < 0)
                return mcp_result_error(r, "read_file: %s", err.msg);
        if (resp.status != 200)
                k = mcp_result_api_error(r, "read_file", &resp);
        else
                k = read_result(args, &resp, r);
        cli_response_done(&resp);
        return k;
}

/* args.mode as permission bits; -EINVAL when it is not 1-4 octal digits. */
static int parse_mode(const json_t *args, unsigned *ret)
{
        const char *m = mcp_arg_string(args, "mode", "0644");

        if (strlen(m) < 1 || strlen(m) > 4 || strspn(m, "01234567") != strlen(m))
                return -EINVAL;
        *ret = (unsigned)strtoul(m, NULL, 8);
        return 0;
}

int mcp_tool_write_file(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const char *content = mcp_arg_string(args, "content", "");
        bool b64 = strcmp(mcp_arg_string(args, "encoding", "utf-8"), "base64") == 0;
        cleanup_free char *path = NULL;
        cleanup_free void *bytes = NULL;
        struct cli_response resp = {0};
        struct fk_error err = {0};
        size_t size = strlen(content);
        unsigned mode;
        struct cli c2;
        int k;

        if (parse_mode(args, &mode) < 0)
                return mcp_result_error(r,
                                        "write_file: mode: \"%.16s\" is not octal permission "
                                        "bits such as \"0644\"",
                                        mcp_arg_string(args, "mode", ""));
        if (b64 && fk_base64_decode(content, size, &bytes, &size) < 0)
                return mcp_result_error(r, "write_file: content: not valid base64 (encoding is "
                                           "\"base64\")");
        if (files_path(c, args, &mode, &c2, &path) < 0)
                return -ENOMEM;
        if (cli_request_raw(&c2, "PUT", path, b64 ? bytes : content, size, &resp, &err) < 0)
                return mcp_result_error(r, "write_file: %s", err.msg);
        if (resp.status != 200)
                k = mcp_result_api_error(r, "write_file", &resp);
        else
                k = mcp_result_ok(r, json_pack("{s:s, s:I, s:s}", "path",
                                               mcp_arg_string(args, "path", ""), "size",
                                               (json_int_t)size, "mode",
                                               mcp_arg_string(args, "mode", "0644")));
        cli_response_done(&resp);
        return k;
}
