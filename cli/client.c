/* SPDX-License-Identifier: MIT */
/* The CLI's HTTP client: requests over forkletd's unix socket (http-unix.c, native) or HTTPS
 * (remote.c, libcurl), whole replies or a line-by-line stream (exec), and printing of the API's
 * error replies. */
#include "cli/cli.h"
#include "cli/http-internal.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void cli_response_done(struct cli_response *r)
{
        free(r->body);
        free(r->apply);
        *r = (struct cli_response){0};
}

static int append(struct cli_response *r, const char *data, size_t n)
{
        char *p;

        if (r->size + n > CLI_MAX_REPLY)
                return -EFBIG;
        p = realloc(r->body, r->size + n + 1);
        if (!p)
                return -ENOMEM;
        memcpy(p + r->size, data, n);
        r->body = p;
        r->size += n;
        p[r->size] = '\0';
        return 0;
}

/* Hands complete lines to line_fn and keeps only the unfinished one. */
static void drain_lines(struct cli_sink *s)
{
        struct cli_response *r = s->resp;
        size_t consumed = 0;
        char *start, *nl;

        while (!s->error && r->body &&
               (nl = memchr((start = r->body + consumed), '\n', r->size - consumed))) {
                *nl = '\0';
                consumed = (size_t)(nl - r->body) + 1;
                if (nl > start)
                        s->error = s->line_fn(start, s->ud);
        }
        if (consumed > 0) {
                memmove(r->body, r->body + consumed, r->size - consumed);
                r->size -= consumed;
                r->body[r->size] = '\0';
        }
}

int cli_sink_body(struct cli_sink *s, const char *data, size_t n)
{
        int r;

        if (s->error)
                return s->error;
        r = append(s->resp, data, n);
        if (r < 0)
                return (s->error = r);
        if (s->line_fn && s->resp->status >= 200 && s->resp->status < 300)
                drain_lines(s);
        return s->error;
}

int cli_sink_header(struct cli_sink *s, const char *name, const char *value)
{
        if (strcasecmp(name, "X-Forklet-Apply") != 0 || s->resp->apply)
                return 0;
        s->resp->apply = strdup(value);
        return s->resp->apply ? 0 : -ENOMEM;
}

static int perform(const struct cli *c, const char *method, const char *path, const void *body,
                   size_t body_size, bool raw, struct cli_sink *s, struct fk_error *err)
{
        const struct cli_http_request rq = {
                .method = method, .path = path, .body = body, .body_size = body_size, .raw = raw};

        if (c->server)
                return cli_tls_perform(c, &rq, s, err);
        return cli_unix_perform(c, &rq, s, err);
}

int cli_request(const struct cli *c, const char *method, const char *path, const char *body,
                struct cli_response *ret, struct fk_error *err)
{
        struct cli_response resp = {0};
        struct cli_sink s = {.resp = &resp};
        int r;

        r = perform(c, method, path, body, body ? strlen(body) : 0, false, &s, err);
        if (r < 0) {
                cli_response_done(&resp);
                return r;
        }
        *ret = resp;
        return 0;
}

int cli_request_raw(const struct cli *c, const char *method, const char *path, const void *body,
                    size_t size, struct cli_response *ret, struct fk_error *err)
{
        struct cli_response resp = {0};
        struct cli_sink s = {.resp = &resp};
        int r;

        r = perform(c, method, path, body ? body : "", size, true, &s, err);
        if (r < 0) {
                cli_response_done(&resp);
                return r;
        }
        *ret = resp;
        return 0;
}

/* Percent-encodes all but the unreserved characters (RFC 3986 2.3), as curl_easy_escape. */
int cli_url_escape(const char *s, char **ret)
{
        static const char hex[] = "0123456789ABCDEF";
        char *out = malloc(strlen(s) * 3 + 1), *o = out;

        if (!out)
                return -ENOMEM;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
                        *o++ = (char)*p;
                } else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = '\0';
        *ret = out;
        return 0;
}

int cli_request_lines(const struct cli *c, const char *method, const char *path, const char *body,
                      int (*line_fn)(const char *line, void *ud), void *ud,
                      struct cli_response *ret, struct fk_error *err)
{
        struct cli_response resp = {0};
        struct cli_sink s = {.resp = &resp, .line_fn = line_fn, .ud = ud};
        int r;

        r = perform(c, method, path, body, body ? strlen(body) : 0, false, &s, err);
        if (r >= 0 && resp.status >= 200 && resp.status < 300 && resp.size > 0) {
                /* A last line without a newline. */
                if (append(&resp, "\n", 1) >= 0)
                        drain_lines(&s);
                if (s.error)
                        r = fk_error_set(err, s.error < 0 ? s.error : -EIO, "%s %s: %s", method,
                                         path, s.error < 0 ? strerror(-s.error) : "aborted");
        }
        if (r < 0) {
                cli_response_done(&resp);
                return r;
        }
        *ret = resp;
        return 0;
}

void cli_print_api_error(const char *what, const struct cli_response *r)
{
        json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(j, "message"));
        json_t *details = json_object_get(j, "details"), *v;
        size_t i;

        fprintf(stderr, "%s: %s (HTTP %ld)\n", what,
                msg ? msg : (r->body && *r->body ? r->body : "error"), r->status);
        json_array_foreach(details, i, v)
        {
                if (json_is_string(v) && (!msg || strcmp(json_string_value(v), msg) != 0))
                        fprintf(stderr, "  %s\n", json_string_value(v));
        }
        json_decref(j);
}

/* msg against doc's file when it is a daemon validation message, else a copy of msg. */
static char *relocated(const char *msg, const struct cli_manifest_doc *doc)
{
        char *out = NULL;

        if (doc->buf &&
            manifest_json_diag_relocate(msg, doc->buf, doc->size, doc->index, doc->file, &out) == 0)
                return out;
        return strdup(msg);
}

void cli_print_api_error_at(const char *what, const struct cli_response *r,
                            const struct cli_manifest_doc *doc)
{
        json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(j, "message"));
        json_t *details = json_object_get(j, "details"), *v;
        cleanup_free char *first = msg ? relocated(msg, doc) : NULL;
        size_t i;

        if (!first) {
                json_decref(j);
                cli_print_api_error(what, r);
                return;
        }
        fprintf(stderr, "%s: %s (HTTP %ld)\n", what, first, r->status);
        json_array_foreach(details, i, v)
        {
                cleanup_free char *line = NULL;

                if (!json_is_string(v) || strcmp(json_string_value(v), msg) == 0)
                        continue;
                line = relocated(json_string_value(v), doc);
                fprintf(stderr, "  %s\n", line ? line : json_string_value(v));
        }
        json_decref(j);
}

int cli_session_path(const struct cli *c, const char *name, const char *suffix, char **ret)
{
        return fk_asprintf(ret, "/api/v1alpha1/namespaces/%s/sessions/%s%s", c->namespace, name,
                           suffix ? suffix : "");
}

int cli_get_session(const struct cli *c, const char *name, json_t **ret, struct fk_error *err)
{
        cleanup_free char *path = NULL;
        struct cli_response resp = {0};
        json_t *j;
        int r;

        if (cli_session_path(c, name, NULL, &path) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = cli_request(c, "GET", path, NULL, &resp, err);
        if (r < 0)
                return r;
        if (resp.status == 404) {
                cli_response_done(&resp);
                return fk_error_set(err, -ENOENT, "session %s/%s not found", c->namespace, name);
        }
        j = resp.status == 200 ? json_loads(resp.body, 0, NULL) : NULL;
        if (!j)
                r = fk_error_set(err, -EIO, "GET %s: HTTP %ld: %s", path, resp.status,
                                 resp.body ? resp.body : "");
        cli_response_done(&resp);
        if (r < 0)
                return r;
        *ret = j;
        return 0;
}
