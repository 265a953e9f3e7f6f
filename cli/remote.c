/* SPDX-License-Identifier: MIT */
/* The CLI's HTTPS transport: forkletd's TCP listener with a bearer token (--server,
 * --token-file, and the server verified by --ca, a public-key pin or the system CA store;
 * --cert/--key for mutual TLS), over libcurl, which the forklet binary loads only here
 * (common/curl-load.h). The unix socket has its own transport (http-unix.c). */
#include "cli/cli.h"
#include "cli/http-internal.h"
#include "common/cleanup.h"
#include "common/curl-load.h"
#include "common/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 1024

void cli_global_env(struct cli *c)
{
        static const struct {
                size_t off;
                const char *env;
        } map[] = {
                {offsetof(struct cli, server), "FORKLET_SERVER"},
                {offsetof(struct cli, token_file), "FORKLET_TOKEN_FILE"},
                {offsetof(struct cli, ca), "FORKLET_CA"},
                {offsetof(struct cli, cert), "FORKLET_CERT"},
                {offsetof(struct cli, key), "FORKLET_KEY"},
        };

        for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
                const char **f = (const char **)((char *)c + map[i].off);
                const char *v = getenv(map[i].env);

                if (!*f && v && *v)
                        *f = v;
        }
}

const char *cli_target(const struct cli *c)
{
        return c->server ? c->server : c->socket;
}

/* "Authorization: Bearer TOKEN" from the token file (trailing whitespace dropped). */
static int token_header(const struct cli *c, char **ret, struct fk_error *err)
{
        cleanup_free char *buf = NULL;
        size_t n = 0;
        int r;

        if (!c->token_file)
                return fk_error_set(err, -EINVAL,
                                    "%s: the TCP API needs a bearer token: --token-file FILE or "
                                    "FORKLET_TOKEN_FILE",
                                    c->server);
        r = fk_read_file(c->token_file, TOKEN_MAX, &buf, &n);
        if (r < 0)
                return fk_error_set(err, r, "--token-file %s: %s", c->token_file, strerror(-r));
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
                buf[--n] = '\0';
        if (n == 0 || strpbrk(buf, " \t\r\n"))
                return fk_error_set(err, -EINVAL, "--token-file %s: empty or not one token",
                                    c->token_file);
        r = fk_asprintf(ret, "Authorization: Bearer %s", buf);
        explicit_bzero(buf, n);
        return r < 0 ? fk_error_set(err, -ENOMEM, "out of memory") : 0;
}

static int setup_tls(const struct cli *c, CURL *h, struct curl_slist **hdr, struct fk_error *err)
{
        cleanup_free char *auth = NULL;
        struct curl_slist *l;
        int r;

        if (strncmp(c->server, "https://", 8) != 0)
                return fk_error_set(err, -EINVAL,
                                    "--server %s: expected https://HOST:PORT (the API is only "
                                    "served to other hosts over TLS)",
                                    c->server);
        r = token_header(c, &auth, err);
        if (r < 0)
                return r;
        l = curl_slist_append(*hdr, auth);
        explicit_bzero(auth, strlen(auth));
        if (!l)
                return fk_error_set(err, -ENOMEM, "out of memory");
        *hdr = l;
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
        curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
        if (c->ca) {
                /* the CA's signature and the host name (an IP SAN for an address) */
                curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
        } else if (c->pin) {
                /* the node's own key, as it published it: no CA needed, nothing else passes */
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (c->pin)
                curl_easy_setopt(h, CURLOPT_PINNEDPUBLICKEY, c->pin);
        if (c->cert)
                curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
        if (c->key)
                curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
        return 0;
}

/* Points h at path on c->server with the bearer token from c->token_file (appended to *hdr)
 * and the server verified by c->ca, else c->pin, else the system CA store. errbuf
 * (CURL_ERROR_SIZE) receives curl's detail. */
static int transport_setup(const struct cli *c, CURL *h, const char *path, struct curl_slist **hdr,
                           char *errbuf, struct fk_error *err)
{
        cleanup_free char *url = NULL;
        size_t n = strlen(c->server);
        int r;

        while (n > 0 && c->server[n - 1] == '/')
                n--;
        if (fk_asprintf(&url, "%.*s%s", (int)n, c->server, path) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = setup_tls(c, h, hdr, err);
        if (r < 0)
                return r;
        errbuf[0] = '\0';
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_URL, url); /* curl copies it */
        return 0;
}

struct tls_reading {
        struct cli_sink *s;
        CURL *curl;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct tls_reading *x = userdata;
        long status = 0;

        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
        x->s->resp->status = status;
        return cli_sink_body(x->s, data, size * nmemb) ? 0 : size * nmemb;
}

/* One header line "Name: value\r\n" (also the status line and the blank one, skipped). */
static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct tls_reading *x = userdata;
        size_t n = size * nmemb;
        const char *colon = memchr(data, ':', n);
        cleanup_free char *name = NULL, *value = NULL;
        const char *v;
        size_t len;

        if (!colon)
                return n;
        v = colon + 1;
        len = n - (size_t)(v - data);
        while (len > 0 && (*v == ' ' || *v == '\t'))
                v++, len--;
        while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
                len--;
        name = strndup(data, (size_t)(colon - data));
        value = strndup(v, len);
        if (!name || !value || cli_sink_header(x->s, name, value) < 0)
                return 0;
        return n;
}

static void request_setup(CURL *h, const struct cli_http_request *rq, struct curl_slist *hdr,
                          struct tls_reading *x)
{
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        if (rq->body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_size);
        }
}

int cli_tls_perform(const struct cli *c, const struct cli_http_request *rq, struct cli_sink *s,
                    struct fk_error *err)
{
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *hdr = NULL;
        struct tls_reading x = {.s = s};
        struct fk_error load = {0};
        long status = 0;
        CURLcode cc = CURLE_OK;
        int r;

        r = fk_curl_load(&load);
        if (r < 0)
                return fk_error_set(err, r, "--server needs libcurl: %s", load.msg);
        if (!(x.curl = curl_easy_init()))
                return fk_error_set(err, -ENOMEM, "out of memory");
        hdr = curl_slist_append(NULL, rq->raw ? "Content-Type: application/octet-stream"
                                              : "Content-Type: application/json");
        r = hdr ? transport_setup(c, x.curl, rq->path, &hdr, errbuf, err)
                : fk_error_set(err, -ENOMEM, "out of memory");
        if (r >= 0) {
                request_setup(x.curl, rq, hdr, &x);
                cc = curl_easy_perform(x.curl);
                curl_easy_getinfo(x.curl, CURLINFO_RESPONSE_CODE, &status);
        }
        curl_easy_cleanup(x.curl);
        curl_slist_free_all(hdr); /* holds the bearer token: gone with the request */
        if (r < 0)
                return r;
        if (s->error)
                return fk_error_set(err, s->error < 0 ? s->error : -EIO, "%s %s: %s", rq->method,
                                    rq->path, s->error < 0 ? strerror(-s->error) : "aborted");
        if (cc != CURLE_OK)
                return fk_error_set(err, -ECONNREFUSED,
                                    "cannot reach forkletd at %s: %s (is it running? --server, "
                                    "--ca and --token-file select the server and its "
                                    "credentials)",
                                    c->server, errbuf[0] ? errbuf : curl_easy_strerror(cc));
        s->resp->status = status;
        return 0;
}
