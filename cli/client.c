/* SPDX-License-Identifier: MIT */
/* The CLI's HTTP client: libcurl over forkletd's unix socket or HTTPS (remote.c), whole
 * replies or a line-by-line stream (exec), and printing of the API's error replies. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CLI_MAX_REPLY (64u * 1024 * 1024)

struct sink {
        struct cli_response *resp;
        int (*line_fn)(const char *line, void *ud);
        void *ud;
        long status;
        CURL *curl;
        int error;       /* from line_fn or ENOMEM */
        size_t consumed; /* scratch: bytes of resp->body handed to line_fn */
};

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

/* Hands complete lines to line_fn once the status says the stream is a success. */
static void drain_lines(struct sink *s)
{
        char *start, *nl;

        while (!s->error && s->resp->body &&
               (nl = memchr((start = s->resp->body + s->consumed), '\n',
                            s->resp->size - s->consumed))) {
                *nl = '\0';
                s->consumed = (size_t)(nl - s->resp->body) + 1;
                if (nl > start)
                        s->error = s->line_fn(start, s->ud);
        }
        if (s->consumed > 0) {
                memmove(s->resp->body, s->resp->body + s->consumed, s->resp->size - s->consumed);
                s->resp->size -= s->consumed;
                s->resp->body[s->resp->size] = '\0';
                s->consumed = 0;
        }
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct sink *s = userdata;
        size_t n = size * nmemb;
        long status = 0;

        if (append(s->resp, data, n) < 0) {
                s->error = -ENOMEM;
                return 0;
        }
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
        if (s->line_fn && status >= 200 && status < 300)
                drain_lines(s);
        return s->error ? 0 : n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct sink *s = userdata;
        size_t n = size * nmemb;
        const char *key = "X-Forklet-Apply:";
        size_t k = strlen(key);

        if (n > k && strncasecmp(data, key, k) == 0 && !s->resp->apply) {
                const char *v = data + k;
                size_t len = n - k;

                while (len > 0 && (*v == ' ' || *v == '\t'))
                        v++, len--;
                while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n'))
                        len--;
                s->resp->apply = strndup(v, len);
        }
        return n;
}

static int perform(const struct cli *c, const char *method, const char *path, const void *body,
                   size_t body_size, bool raw, struct sink *s, struct fk_error *err)
{
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *hdr = NULL, *l;
        CURLcode cc;
        CURL *h;
        int r;

        if (!(h = curl_easy_init()))
                return fk_error_set(err, -ENOMEM, "out of memory");
        s->curl = h;
        l = curl_slist_append(hdr, raw ? "Content-Type: application/octet-stream"
                                       : "Content-Type: application/json");
        r = l ? cli_transport_setup(c, h, path, &l, errbuf, err)
              : fk_error_set(err, -ENOMEM, "out of memory");
        hdr = l;
        if (r < 0) {
                curl_easy_cleanup(h);
                curl_slist_free_all(hdr);
                return r;
        }
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        if (body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_size);
        }
        cc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdr); /* holds the bearer token: gone with the request */
        if (s->error)
                return fk_error_set(err, s->error < 0 ? s->error : -EIO, "%s %s: %s", method, path,
                                    s->error < 0 ? strerror(-s->error) : "aborted");
        if (cc != CURLE_OK)
                return fk_error_set(err, -ECONNREFUSED,
                                    "cannot reach forkletd at %s: %s (is it running? %s)",
                                    cli_target(c), errbuf[0] ? errbuf : curl_easy_strerror(cc),
                                    c->server ? "--server, --ca and --token-file select the "
                                                "server and its credentials"
                                              : "--socket or FORKLET_SOCKET selects the socket");
        s->resp->status = s->status;
        return 0;
}

int cli_request(const struct cli *c, const char *method, const char *path, const char *body,
                struct cli_response *ret, struct fk_error *err)
{
        struct cli_response resp = {0};
        struct sink s = {.resp = &resp};
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
        struct sink s = {.resp = &resp};
        int r;

        r = perform(c, method, path, body ? body : "", size, true, &s, err);
        if (r < 0) {
                cli_response_done(&resp);
                return r;
        }
        *ret = resp;
        return 0;
}

int cli_url_escape(const char *s, char **ret)
{
        char *e = curl_easy_escape(NULL, s, 0), *copy;

        if (!e)
                return -ENOMEM;
        copy = strdup(e);
        curl_free(e);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        return 0;
}

int cli_request_lines(const struct cli *c, const char *method, const char *path, const char *body,
                      int (*line_fn)(const char *line, void *ud), void *ud,
                      struct cli_response *ret, struct fk_error *err)
{
        struct cli_response resp = {0};
        struct sink s = {.resp = &resp, .line_fn = line_fn, .ud = ud};
        int r;

        r = perform(c, method, path, body, body ? strlen(body) : 0, false, &s, err);
        if (r >= 0 && resp.status >= 200 && resp.status < 300 && resp.size > 0) {
                /* A last line without a newline. */
                if (append(&resp, "\n", 1) >= 0)
                        drain_lines(&s);
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
