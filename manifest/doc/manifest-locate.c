/* SPDX-License-Identifier: MIT */
/* Maps a field path of a validation message ("spec.egress[1]", as mpath_key/mpath_idx write
 * them) back to a line and column of the YAML source it came from, so a client can print the
 * daemon's "<json>: PATH: ..." messages against the file it sent. */
#include "manifest/doc/doc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

#define JSON_SOURCE "<json>: "

/* The child of n that the front of path names; *rest is what follows it ("" at the end). */
static const struct mnode *step(const struct mnode *n, const char *path, const char **rest)
{
        const struct mnode *best = NULL;
        size_t best_len = 0;

        if (n->type == MNODE_SEQ && path[0] == '[') {
                char *end;
                unsigned long i = strtoul(path + 1, &end, 10);

                if (*end != ']' || i >= n->n_items)
                        return NULL;
                *rest = end + 1;
                return n->items[i];
        }
        if (n->type != MNODE_MAP)
                return NULL;
        /* keys may hold dots (label keys): take the longest key that ends at a separator */
        for (size_t i = 0; i + 1 < n->n_items; i += 2) {
                const struct mnode *k = n->items[i];
                size_t len = k->type == MNODE_SCALAR ? strlen(k->text) : 0;

                if (len > best_len && strncmp(path, k->text, len) == 0 &&
                    (path[len] == '\0' || path[len] == '.' || path[len] == '[')) {
                        best = n->items[i + 1];
                        best_len = len;
                }
        }
        if (!best)
                return NULL;
        *rest = path + best_len + (path[best_len] == '.');
        return best;
}

/* The node PATH names under root, or its deepest ancestor that exists. */
static const struct mnode *locate(const struct mnode *root, const char *path)
{
        const struct mnode *n = root;

        while (*path) {
                const char *rest = path;
                const struct mnode *next = step(n, path, &rest);

                if (!next || (next->line == 0 && next->col == 0))
                        break;
                n = next;
                path = rest;
        }
        return n;
}

int manifest_yaml_locate(const char *buf, size_t size, size_t doc, const char *path,
                         unsigned *ret_line, unsigned *ret_col)
{
        struct manifest_diag diag = {0};
        _cleanup_(mctx_finish) struct mctx c = {.diag = &diag, .source = "<input>"};
        struct mnode **docs = NULL;
        size_t n_docs = 0;
        int r;

        r = mnode_parse_yaml(&c, buf, size, &docs, &n_docs);
        manifest_diag_done(&diag);
        if (r < 0)
                return r;
        r = doc < n_docs ? 0 : -ENOENT;
        if (r == 0) {
                const struct mnode *n = locate(docs[doc], path ? path : "");

                *ret_line = n->line;
                *ret_col = n->col;
        }
        for (size_t i = 0; i < n_docs; i++)
                mnode_free(docs[i]);
        free(docs);
        return r;
}

/* The path of "PATH: TEXT" when PATH starts with a top-level Session field, else "". */
static char *message_path(const char *m)
{
        static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
        const char *colon = strstr(m, ": ");

        if (!colon)
                return strdup("");
        for (size_t i = 0; top[i]; i++) {
                size_t len = strlen(top[i]);

                if (strncmp(m, top[i], len) == 0 &&
                    (m[len] == ':' || m[len] == '.' || m[len] == '['))
                        return strndup(m, (size_t)(colon - m));
        }
        return strdup("");
}

int manifest_json_diag_relocate(const char *msg, const char *buf, size_t size, size_t doc,
                                const char *source, char **ret)
{
        cleanup_free char *path = NULL;
        const char *rest;
        unsigned line = 0, col = 0;
        int r;

        if (!msg || strncmp(msg, JSON_SOURCE, strlen(JSON_SOURCE)) != 0)
                return -EINVAL;
        rest = msg + strlen(JSON_SOURCE);
        path = message_path(rest);
        if (!path)
                return -ENOMEM;
        r = manifest_yaml_locate(buf, size, doc, path, &line, &col);
        if (r < 0)
                return r;
        if (line == 0)
                r = asprintf(ret, "%s: %s", source, rest);
        else
                r = asprintf(ret, "%s:%u:%u: %s", source, line, col, rest);
        return r < 0 ? -ENOMEM : 0;
}
