/* SPDX-License-Identifier: MIT */
/* NodeConfig api section across fields: a TCP listener needs a token, a non-loopback one needs
 * TLS (api.tlsCert + api.tlsKey), and the https URL other hosts reach it at (api.url). */
#include "manifest/node/node-internal.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

/* The address part of "A.B.C.D:PORT" (already checked to be IPv4 with a port). */
static bool listen_addr(const char *listen, struct in_addr *ret)
{
        const char *colon = strrchr(listen, ':');
        char host[INET_ADDRSTRLEN];

        if (!colon || (size_t)(colon - listen) >= sizeof(host))
                return false;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        return inet_pton(AF_INET, host, ret) == 1;
}

static const struct mnode *at(const struct mnode *api, const char *key)
{
        const struct mnode *v = mnode_get(api, key);

        return v ? v : api;
}

static void check_tls_pair(struct mctx *c, const struct mnode *api, const struct node_config *cfg)
{
        if (cfg->api_tls_cert && !cfg->api_tls_key)
                mctx_err(c, at(api, "tlsCert"), "api.tlsKey",
                         "required with api.tlsCert: the PEM private key of the certificate");
        if (cfg->api_tls_key && !cfg->api_tls_cert)
                mctx_err(c, at(api, "tlsKey"), "api.tlsCert",
                         "required with api.tlsKey: the PEM certificate of the key");
        if (cfg->api_tls_client_ca && !cfg->api_tls_cert)
                mctx_err(c, at(api, "tlsClientCA"), "api.tlsClientCA",
                         "needs api.tlsCert and api.tlsKey (client certificates are checked "
                         "only on a TLS listener)");
        if ((cfg->api_tls_cert || cfg->api_tls_key) && !cfg->api_listen)
                mctx_err(c, at(api, cfg->api_tls_cert ? "tlsCert" : "tlsKey"), "api.listen",
                         "required with api.tlsCert/api.tlsKey: the IPv4:PORT the TLS listener "
                         "serves on");
}

/* api.url: given (https://HOST:PORT, no path) or derived from a specific listen address. */
static void check_url(struct mctx *c, const struct mnode *api, struct node_config *cfg,
                      const struct in_addr *a)
{
        const char *u = cfg->api_url;
        bool tls = cfg->api_tls_cert && cfg->api_tls_key;

        if (u && !tls) {
                mctx_err(c, at(api, "url"), "api.url",
                         "needs api.tlsCert and api.tlsKey (the URL is served over https)");
                return;
        }
        if (u && (strncmp(u, "https://", 8) != 0 || !u[8] || strpbrk(u + 8, "/?#@ \t")))
                mctx_err(c, at(api, "url"), "api.url",
                         "invalid URL \"%s\": expected https://HOST:PORT (no path), the address "
                         "other hosts reach api.listen at",
                         u);
        if (u || !tls || !cfg->api_listen)
                return;
        if (a->s_addr == htonl(INADDR_ANY)) {
                if (cfg->etcd && cfg->etcd[0])
                        mctx_err(c, at(api, "listen"), "api.url",
                                 "required when api.listen is 0.0.0.0 in cluster mode: the "
                                 "https://HOST:PORT other hosts reach this node at");
                return;
        }
        if (fk_asprintf(&cfg->api_url, "https://%s", cfg->api_listen) < 0)
                c->oom = true;
}

void node_config_check_api(struct mctx *c, const struct mnode *api, struct node_config *cfg)
{
        struct in_addr a = {0};
        bool loopback;

        check_tls_pair(c, api, cfg);
        if (cfg->api_listen && !listen_addr(cfg->api_listen, &a))
                return;
        loopback = (ntohl(a.s_addr) >> 24) == 127;
        if (cfg->api_listen && !cfg->api_token_file)
                mctx_err(c, at(api, "listen"), "api.tokenFile",
                         "required with api.listen: every TCP request must carry "
                         "\"Authorization: Bearer TOKEN\" (a file of mode 0600 holding at least "
                         "32 bytes)");
        if (cfg->api_listen && !loopback && !cfg->api_tls_cert && !cfg->api_tls_key)
                mctx_err(c, at(api, "listen"), "api.listen",
                         "\"%s\" is not a loopback address: serving the API beyond this host "
                         "needs TLS: set api.tlsCert and api.tlsKey (PEM files) or listen on "
                         "127.0.0.1",
                         cfg->api_listen);
        check_url(c, api, cfg, &a);
}
