/* SPDX-License-Identifier: MIT */
/* NodeConfig registries: [{host, authFile, insecure}] (manifest-oci-ref.c matches references
 * against them). Plain HTTP (insecure) only for loopback hosts. */
#include "manifest/node/node-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const registry_fields[] = {"host", "authFile", "insecure", NULL};

static const struct mnode *opt(const struct mnode *map, const char *key)
{
        const struct mnode *v = mnode_get(map, key);

        return v && !mnode_is_null(v) ? v : NULL;
}

void node_config_registries_free(struct node_config *c)
{
        for (size_t i = 0; i < c->n_registries; i++) {
                free(c->registries[i].host);
                free(c->registries[i].auth_file);
        }
        free(c->registries);
        c->registries = NULL;
        c->n_registries = 0;
}

static bool decode_host(struct mctx *c, const struct mnode *it, const char *path,
                        const struct node_config *cfg, struct registry_spec *rs)
{
        const struct mnode *v = mget_required(c, it, path, "host");
        char p[MPATH_MAX], probe[MANIFEST_OCI_HOST_MAX + 8];
        struct oci_ref ref;
        const char *s;

        mpath_key(p, sizeof(p), path, "host");
        if (!v || !(s = mget_string(c, v, p)))
                return false;
        snprintf(probe, sizeof(probe), "%s/x", s);
        if (strcmp(s, "*") != 0 &&
            (strlen(s) >= MANIFEST_OCI_HOST_MAX || manifest_oci_ref_parse(probe, &ref, NULL) < 0)) {
                mctx_err(c, v, p,
                         "invalid registry host \"%s\": expected HOST[:PORT] (a name with a '.', "
                         "localhost or an IPv4 address) or \"*\" for any registry",
                         s);
                return false;
        }
        for (size_t i = 0; i < cfg->n_registries; i++)
                if (strcasecmp(cfg->registries[i].host, s) == 0) {
                        mctx_err(c, v, p, "duplicate registry \"%s\"", s);
                        return false;
                }
        return mstrdup(c, s, &rs->host) >= 0;
}

static void decode_registry(struct mctx *c, const struct mnode *it, const char *path,
                            const char *base_dir, struct node_config *cfg)
{
        struct registry_spec *rs = &cfg->registries[cfg->n_registries];
        const struct mnode *v;
        char p[MPATH_MAX];
        const char *s;

        if (!mget_map(c, it, path, registry_fields) || !decode_host(c, it, path, cfg, rs))
                return;
        if ((v = opt(it, "insecure"))) {
                if (v->type != MNODE_SCALAR || v->kind != MSCALAR_BOOL)
                        mctx_err(c, v, mpath_key(p, sizeof(p), path, "insecure"),
                                 "must be true or false, got %s", mnode_type_name(v));
                else
                        rs->insecure = v->text[0] == 't' || v->text[0] == 'T';
        }
        if (rs->insecure && !manifest_registry_host_is_loopback(rs->host))
                mctx_err(c, v, mpath_key(p, sizeof(p), path, "insecure"),
                         "plain HTTP is allowed for loopback registries only (127.0.0.0/8, "
                         "localhost), not \"%s\": serve it over TLS",
                         rs->host);
        if ((v = opt(it, "authFile")) &&
            (s = mget_string(c, v, mpath_key(p, sizeof(p), path, "authFile")))) {
                if (!*s)
                        mctx_err(c, v, p, "path must not be empty");
                else if (manifest_resolve_path(base_dir, s, &rs->auth_file) < 0)
                        c->oom = true;
        }
        cfg->n_registries++;
}

void node_config_decode_registries(struct mctx *c, const struct mnode *v, const char *base_dir,
                                   struct node_config *cfg)
{
        char p[MPATH_MAX];

        if (!mget_seq(c, v, "registries"))
                return;
        cfg->registries = calloc(v->n_items + 1, sizeof(*cfg->registries));
        if (!cfg->registries)
                return (void)(c->oom = true);
        for (size_t i = 0; i < v->n_items; i++)
                decode_registry(c, v->items[i], mpath_idx(p, sizeof(p), "registries", i), base_dir,
                                cfg);
}
