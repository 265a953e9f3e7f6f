/* SPDX-License-Identifier: MIT */
/* Helpers every document kind uses: reading its file, the apiVersion/kind header and string
 * maps (labels, environment) into key=value arrays. */
#include "manifest/doc/doc.h"
#include "common/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int manifest_decode_header(struct mctx *c, const struct mnode *root, const char *kind)
{
        const struct mnode *v;
        const char *s;

        v = mget_required(c, root, "", "apiVersion");
        s = v ? mget_string(c, v, "apiVersion") : NULL;
        if (s && strcmp(s, MANIFEST_API_VERSION) != 0)
                mctx_err(c, v, "apiVersion", "unsupported apiVersion \"%s\" (expected \"%s\")", s,
                         MANIFEST_API_VERSION);
        v = mget_required(c, root, "", "kind");
        s = v ? mget_string(c, v, "kind") : NULL;
        if (s && strcmp(s, kind) != 0)
                mctx_err(c, v, "kind", "expected kind \"%s\", got \"%s\"", kind, s);
        return 0;
}

static int kv_push(struct mctx *c, struct kv **arr, size_t *n, const char *k, const char *v)
{
        struct kv *a = realloc(*arr, (*n + 1) * sizeof(**arr));

        if (!a)
                return c->oom = true, -ENOMEM;
        *arr = a;
        a[*n] = (struct kv){strdup(k), strdup(v)};
        if (!a[*n].key || !a[*n].value) {
                free(a[*n].key);
                free(a[*n].value);
                return c->oom = true, -ENOMEM;
        }
        (*n)++;
        return 0;
}

/* labels (is_env false) or env (is_env true): a string-to-string map. */
void manifest_decode_kvs(struct mctx *c, const struct mnode *n, const char *path, bool is_env,
                         struct kv **ret, size_t *ret_n)
{
        char p[MPATH_MAX];

        if (!mget_map(c, n, path, NULL))
                return;
        for (size_t i = 0; i + 1 < n->n_items; i += 2) {
                const struct mnode *k = n->items[i], *v = n->items[i + 1];
                const char *key, *val, *why;

                if (k->type != MNODE_SCALAR || k->kind == MSCALAR_NULL ||
                    mnode_get(n, k->text) != v)
                        continue; /* reported by mget_map */
                key = k->text;
                mpath_key(p, sizeof(p), path, key);
                why = is_env ? manifest_env_name_problem(key) : manifest_label_key_problem(key);
                if (why) {
                        mctx_err(c, k, p, "invalid %s \"%s\": %s",
                                 is_env ? "environment variable name" : "label key", key, why);
                        continue;
                }
                val = mget_string(c, v, p);
                if (!val)
                        continue;
                why = is_env ? NULL : manifest_label_value_problem(val);
                if (why)
                        mctx_err(c, v, p, "invalid label value \"%s\": %s", val, why);
                else
                        kv_push(c, ret, ret_n, key, val);
        }
}

int manifest_read_file(const char *path, char **ret, size_t *ret_size, struct manifest_diag *diag)
{
        int r = fk_read_file(path, MANIFEST_MAX_FILE_SIZE, ret, ret_size);

        if (r == -EFBIG) {
                if (manifest_diag_add(diag, "%s: file is larger than %d bytes (1 MiB)", path,
                                      MANIFEST_MAX_FILE_SIZE) < 0)
                        return -ENOMEM;
                return -EINVAL;
        }
        if (r < 0 && manifest_diag_add(diag, "%s: cannot read: %s", path, strerror(-r)) < 0)
                return -ENOMEM;
        return r;
}
