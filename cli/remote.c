/* SPDX-License-Identifier: MIT */
/* The CLI's transports: forkletd's unix socket, or its TCP listener over HTTPS with a bearer
 * token (--server, --token-file, and the server verified by --ca, a public-key pin or the
 * system CA store; --cert/--key for mutual TLS). */
#include "cli/cli.h"
#include "common/cleanup.h"
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

int cli_transport_setup(const struct cli *c, CURL *h, const char *path, struct curl_slist **hdr,
                        char *errbuf, struct fk_error *err)
{
        cleanup_free char *url = NULL;
        const char *base = c->server ? c->server : "http://localhost";
        size_t n = strlen(base);
        int r;

        while (n > 0 && base[n - 1] == '/')
                n--;
        if (fk_asprintf(&url, "%.*s%s", (int)n, base, path) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (c->server) {
                r = setup_tls(c, h, hdr, err);
                if (r < 0)
                        return r;
        } else {
                curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket);
        }
        errbuf[0] = '\0';
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_URL, url); /* curl copies it */
        return 0;
}
