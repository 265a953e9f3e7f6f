/* SPDX-License-Identifier: MIT */
/* spec.secrets: decoding and validation (names, exactly one source, minting needs the node's
 * mintCommand), and the model helpers (free, copy, equality, canonical JSON). */
#include "manifest/manifest-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

bool manifest_secret_file_allowed(const struct node_config *cfg, const char *path)
{
        cleanup_free char *norm = NULL;

        if (manifest_resolve_path(NULL, path, &norm) < 0)
                return false;
        for (size_t i = 0; cfg->secret_file_dirs && cfg->secret_file_dirs[i]; i++) {
                const char *d = cfg->secret_file_dirs[i];
                size_t n = strlen(d);

                if (n == 1 || (strncmp(norm, d, n) == 0 && norm[n] == '/'))
                        return true; /* "/" allows everything */
        }
        return false;
}

static const char *secret_name_problem(const char *s)
{
        if (strlen(s) > MANIFEST_SECRET_NAME_MAX)
                return "must be at most 63 characters";
        if (!manifest_env_name_problem(s) || !manifest_name_problem(s))
                return NULL;
        return "must be an environment variable name (letters, digits, '_') or a DNS-1123 label";
}

/* The name of one entry, or NULL (reported). Duplicates of earlier entries are reported. */
static const char *secret_name(struct mctx *c, const struct mnode *it, const char *path,
                               const struct session_manifest *m)
{
        const struct mnode *v = mget_required(c, it, path, "name");
        char p[MPATH_MAX];
        const char *s, *why;

        if (!v)
                return NULL;
        mpath_key(p, sizeof(p), path, "name");
        if (!(s = mget_string(c, v, p)))
                return NULL;
        if ((why = secret_name_problem(s))) {
                mctx_err(c, v, p, "invalid secret name \"%s\": %s", s, why);
                return NULL;
        }
        for (size_t j = 0; j < m->n_secrets; j++)
                if (strcmp(m->secrets[j].name, s) == 0) {
                        mctx_err(c, v, p, "duplicate secret name \"%s\"", s);
                        return NULL;
                }
        return s;
}

/* The source of one entry into sec: file (absolute) xor mint: true. */
static bool secret_source(struct mctx *c, const struct mnode *it, const char *path,
                          const struct node_config *cfg, struct secret_spec *sec)
{
        const struct mnode *f = mnode_get(it, "file"), *mi = mnode_get(it, "mint");
        char p[MPATH_MAX];
        const char *s;

        if (f && mnode_is_null(f))
                f = NULL;
        if (mi && (mnode_is_null(mi) || (mi->kind == MSCALAR_BOOL && !strcmp(mi->text, "false"))))
                mi = NULL;
        if (!f == !mi) {
                mctx_err(c, it, path,
                         "needs exactly one of \"file\" (a node path) or \"mint: true\"");
                return false;
        }
        if (mi) {
                if (mi->type != MNODE_SCALAR || mi->kind != MSCALAR_BOOL) {
                        mctx_err(c, mi, mpath_key(p, sizeof(p), path, "mint"),
                                 "must be true or false, got %s", mnode_type_name(mi));
                        return false;
                }
                if (cfg && !cfg->mint_command) {
                        mctx_err(c, mi, mpath_key(p, sizeof(p), path, "mint"),
                                 "this node has no secrets.mintCommand in its config");
                        return false;
                }
                sec->mint = true;
                return true;
        }
        mpath_key(p, sizeof(p), path, "file");
        if (!(s = mget_string(c, f, p)))
                return false;
        if (s[0] != '/') {
                mctx_err(c, f, p, "must be an absolute path on the node, got \"%s\"", s);
                return false;
        }
        if (cfg && !manifest_secret_file_allowed(cfg, s)) {
                mctx_err(c, f, p, "\"%s\" is not under the node's secrets.fileDirs", s);
                return false;
        }
        return mstrdup(c, s, &sec->file) >= 0;
}

void manifest_decode_secrets(struct mctx *c, const struct mnode *n, const struct node_config *cfg,
                             struct session_manifest *m)
{
        char p[MPATH_MAX];

        if (!mget_seq(c, n, "spec.secrets"))
                return;
        m->secrets = calloc(n->n_items + 1, sizeof(*m->secrets));
        if (!m->secrets) {
                c->oom = true;
                return;
        }
        for (size_t i = 0; i < n->n_items; i++) {
                struct secret_spec sec = {0};
                const char *name;

                mpath_idx(p, sizeof(p), "spec.secrets", i);
                if (!mget_map(c, n->items[i], p,
                              manifest_field_names(manifest_field_find("spec.secrets"),
                                                   (const char * [MANIFEST_FIELDS_MAX + 1]){NULL})))
                        continue;
                name = secret_name(c, n->items[i], p, m);
                if (!secret_source(c, n->items[i], p, cfg, &sec) || !name ||
                    mstrdup(c, name, &sec.name) < 0) {
                        free(sec.file);
                        continue;
                }
                m->secrets[m->n_secrets++] = sec;
        }
}

void manifest_secrets_free(struct secret_spec *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].name);
                free(v[i].file);
        }
        free(v);
}

int manifest_secrets_copy(const struct secret_spec *v, size_t n, struct secret_spec **ret)
{
        struct secret_spec *c = calloc(n + 1, sizeof(*c));

        *ret = c;
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                c[i].mint = v[i].mint;
                c[i].name = strdup(v[i].name);
                c[i].file = v[i].file ? strdup(v[i].file) : NULL;
                if (!c[i].name || (v[i].file && !c[i].file))
                        return -ENOMEM; /* the caller frees *ret with n entries */
        }
        return 0;
}

bool manifest_secrets_equal(const struct secret_spec *a, size_t na, const struct secret_spec *b,
                            size_t nb)
{
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (strcmp(a[i].name, b[i].name) != 0 || a[i].mint != b[i].mint ||
                    !a[i].file != !b[i].file || (a[i].file && strcmp(a[i].file, b[i].file) != 0))
                        return false;
        return true;
}

json_t *manifest_secrets_json(const struct secret_spec *v, size_t n)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++) {
                json_t *o = v[i].mint
                                    ? json_pack("{s:s, s:b}", "name", v[i].name, "mint", 1)
                                    : json_pack("{s:s, s:s}", "name", v[i].name, "file", v[i].file);

                if (!o || json_array_append_new(a, o) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}
