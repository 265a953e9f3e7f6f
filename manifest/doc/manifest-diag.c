/* SPDX-License-Identifier: MIT */
/* Diagnostics: the message list, "did you mean" suggestions, and the typed getters that check
 * a tree node and report FILE:LINE:COL: path: message when it is not what the schema wants. */
#include "manifest/doc/doc.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void manifest_diag_done(struct manifest_diag *d)
{
        if (!d)
                return;
        for (size_t i = 0; i < d->n; i++)
                free(d->messages[i]);
        free(d->messages);
        d->messages = NULL;
        d->n = 0;
}

__attribute__((format(printf, 2, 0))) static int diag_addv(struct manifest_diag *d, const char *fmt,
                                                           va_list ap)
{
        char *m, **nv;

        if (vasprintf(&m, fmt, ap) < 0)
                return -ENOMEM;
        nv = realloc(d->messages, (d->n + 2) * sizeof(char *));
        if (!nv) {
                free(m);
                return -ENOMEM;
        }
        d->messages = nv;
        d->messages[d->n++] = m;
        d->messages[d->n] = NULL;
        return 0;
}

int manifest_diag_add(struct manifest_diag *d, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = diag_addv(d, fmt, ap);
        va_end(ap);
        return r;
}

static void mctx_add_key(struct mctx *c, const struct mnode *n)
{
        size_t idx = c->diag->n - 1 - c->diag_start;
        uint64_t *k = realloc(c->keys, (idx + 1) * sizeof(*k));

        if (!k) {
                c->oom = true;
                return;
        }
        c->keys = k;
        k[idx] = n ? ((uint64_t)n->line << 32) | n->col : 0;
}

void mctx_finish(struct mctx *c)
{
        size_t n = c->oom || !c->keys ? 0 : c->diag->n - c->diag_start;
        char **m = n ? c->diag->messages + c->diag_start : NULL;

        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && c->keys[j - 1] > c->keys[j]; j--) {
                        uint64_t k = c->keys[j];
                        char *s = m[j];

                        c->keys[j] = c->keys[j - 1];
                        m[j] = m[j - 1];
                        c->keys[j - 1] = k;
                        m[j - 1] = s;
                }
        free(c->keys);
        c->keys = NULL;
}

void mctx_err(struct mctx *c, const struct mnode *n, const char *path, const char *fmt, ...)
{
        cleanup_free char *msg = NULL;
        char pos[64] = "";
        va_list ap;
        int r;

        c->n_errors++;
        if (c->n_errors > MANIFEST_MAX_DIAG + 1 || (n && n->alias))
                return;
        if (c->n_errors == MANIFEST_MAX_DIAG + 1) {
                struct mnode last = {.line = UINT32_MAX, .col = UINT32_MAX};

                if (manifest_diag_add(c->diag, "%s: too many errors, stopping", c->source) < 0)
                        c->oom = true;
                else
                        mctx_add_key(c, &last);
                return;
        }
        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0) {
                msg = NULL;
                c->oom = true;
                return;
        }
        if (n && n->line > 0)
                snprintf(pos, sizeof(pos), ":%u:%u", n->line, n->col);
        if (manifest_diag_add(c->diag, "%s%s: %s%s%s", c->source, pos, path, path[0] ? ": " : "",
                              msg) < 0)
                c->oom = true;
        else
                mctx_add_key(c, n);
}

const char *mpath_key(char *buf, size_t size, const char *parent, const char *key)
{
        snprintf(buf, size, "%s%s%s", parent, parent[0] ? "." : "", key);
        return buf;
}

const char *mpath_idx(char *buf, size_t size, const char *parent, size_t i)
{
        snprintf(buf, size, "%s[%zu]", parent, i);
        return buf;
}

bool mnode_is_null(const struct mnode *n)
{
        return n && n->type == MNODE_SCALAR && n->kind == MSCALAR_NULL;
}

const char *mnode_type_name(const struct mnode *n)
{
        static const char *const kinds[] = {
                [MSCALAR_STRING] = "a string", [MSCALAR_INT] = "an integer",
                [MSCALAR_FLOAT] = "a number",  [MSCALAR_BOOL] = "a boolean",
                [MSCALAR_NULL] = "null",
        };

        if (n->type == MNODE_MAP)
                return "a mapping";
        if (n->type == MNODE_SEQ)
                return "a list";
        return kinds[n->kind];
}

const struct mnode *mnode_get(const struct mnode *map, const char *key)
{
        if (!map || map->type != MNODE_MAP)
                return NULL;
        for (size_t i = 0; i + 1 < map->n_items; i += 2) {
                const struct mnode *k = map->items[i];

                if (k->type == MNODE_SCALAR && strcmp(k->text, key) == 0)
                        return map->items[i + 1];
        }
        return NULL;
}

static bool key_known(const char *key, const char *const *known)
{
        for (size_t i = 0; known[i]; i++)
                if (strcmp(key, known[i]) == 0)
                        return true;
        return false;
}

static const struct mnode *first_key(const struct mnode *map, size_t before, const char *key)
{
        for (size_t i = 0; i < before; i += 2) {
                const struct mnode *k = map->items[i];

                if (k->type == MNODE_SCALAR && strcmp(k->text, key) == 0)
                        return k;
        }
        return NULL;
}

bool mget_map(struct mctx *c, const struct mnode *n, const char *path, const char *const *known)
{
        char p[MPATH_MAX];

        if (n->type != MNODE_MAP) {
                mctx_err(c, n, path, "expected a mapping, got %s", mnode_type_name(n));
                return false;
        }
        for (size_t i = 0; i + 1 < n->n_items; i += 2) {
                const struct mnode *k = n->items[i], *first;
                size_t nk = 0;

                if (k->type != MNODE_SCALAR || k->kind == MSCALAR_NULL) {
                        mctx_err(c, k, path, "keys must be strings, got %s", mnode_type_name(k));
                        continue;
                }
                mpath_key(p, sizeof(p), path, k->text);
                first = first_key(n, i, k->text);
                if (first) {
                        if (first->line > 0)
                                mctx_err(c, k, p, "duplicate key (first at %u:%u)", first->line,
                                         first->col);
                        else
                                mctx_err(c, k, p, "duplicate key");
                        continue;
                }
                if (!known || key_known(k->text, known))
                        continue;
                while (known[nk])
                        nk++;
                mctx_err_unknown(c, k, p, "field", k->text, known, nk);
        }
        return true;
}

bool mget_seq(struct mctx *c, const struct mnode *n, const char *path)
{
        if (n->type == MNODE_SEQ)
                return true;
        mctx_err(c, n, path, "expected a list, got %s", mnode_type_name(n));
        return false;
}

const char *mget_string(struct mctx *c, const struct mnode *n, const char *path)
{
        if (n->type != MNODE_SCALAR || n->kind == MSCALAR_NULL) {
                mctx_err(c, n, path, "expected a string, got %s", mnode_type_name(n));
                return NULL;
        }
        if (strlen(n->text) != n->len) {
                mctx_err(c, n, path, "strings must not contain NUL characters");
                return NULL;
        }
        return n->text;
}

bool mget_uint(struct mctx *c, const struct mnode *n, const char *path, uint64_t min, uint64_t max,
               uint64_t *ret)
{
        uint64_t v;
        char *end;

        if (n->type != MNODE_SCALAR || n->kind != MSCALAR_INT) {
                if (n->type == MNODE_SCALAR && n->kind == MSCALAR_STRING)
                        mctx_err(c, n, path, "expected an integer, got a string \"%s\"", n->text);
                else
                        mctx_err(c, n, path, "expected an integer, got %s", mnode_type_name(n));
                return false;
        }
        errno = 0;
        v = strtoull(n->text[0] == '+' ? n->text + 1 : n->text, &end, 10);
        if (n->text[0] == '-' && strspn(n->text + 1, "0") != strlen(n->text + 1)) {
                mctx_err(c, n, path, "%s is out of range (%" PRIu64 "..%" PRIu64 ")", n->text, min,
                         max);
                return false;
        }
        if (n->text[0] == '-')
                v = 0;
        if (errno == ERANGE || v < min || v > max) {
                mctx_err(c, n, path, "%s is out of range (%" PRIu64 "..%" PRIu64 ")", n->text, min,
                         max);
                return false;
        }
        *ret = v;
        return true;
}

bool mget_double(struct mctx *c, const struct mnode *n, const char *path, double min, double max,
                 double *ret)
{
        double v;

        if (n->type != MNODE_SCALAR || (n->kind != MSCALAR_INT && n->kind != MSCALAR_FLOAT)) {
                mctx_err(c, n, path, "expected a number, got %s", mnode_type_name(n));
                return false;
        }
        v = strtod(n->text, NULL);
        if (strcasestr(n->text, "inf") || strcasestr(n->text, "nan"))
                v = NAN;
        if (!(v >= min && v <= max)) {
                mctx_err(c, n, path, "%s is out of range (%g..%g)", n->text, min, max);
                return false;
        }
        *ret = v;
        return true;
}

const struct mnode *mget_required(struct mctx *c, const struct mnode *map, const char *path,
                                  const char *key)
{
        const struct mnode *v = mnode_get(map, key);
        char p[MPATH_MAX];

        mpath_key(p, sizeof(p), path, key);
        if (!v)
                mctx_err(c, map, p, "required field missing");
        else if (mnode_is_null(v))
                mctx_err(c, v, p, "required field is empty");
        else
                return v;
        return NULL;
}

int mstrdup(struct mctx *c, const char *s, char **ret)
{
        char *d = strdup(s);

        if (!d) {
                c->oom = true;
                return -ENOMEM;
        }
        free(*ret);
        *ret = d;
        return 0;
}

static size_t edit_distance(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];

        if (la >= 63 || lb >= 63)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                prev[j] = j;
        for (size_t i = 1; i <= la; i++) {
                cur[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) !=
                                                    tolower((unsigned char)b[j - 1]));
                        cur[j] = FK_MIN(FK_MIN(prev[j] + 1, cur[j - 1] + 1), sub);
                }
                memcpy(prev, cur, (lb + 1) * sizeof(size_t));
        }
        return prev[lb];
}

const char *manifest_suggest(const char *s, const char *const *cands, size_t n)
{
        const char *best = NULL;
        size_t best_d = SIZE_MAX, limit = FK_MAX((size_t)2, strlen(s) / 3);

        for (size_t i = 0; i < n; i++) {
                size_t d = edit_distance(s, cands[i]);

                if (d < best_d) {
                        best_d = d;
                        best = cands[i];
                }
        }
        if (best && best_d <= limit && best_d < strlen(s))
                return best;
        return NULL;
}

void mctx_err_unknown(struct mctx *c, const struct mnode *n, const char *path, const char *what,
                      const char *v, const char *const *cands, size_t n_cands)
{
        const char *s = manifest_suggest(v, cands, n_cands);
        char known[512] = "";
        size_t len = 0;

        if (s) {
                mctx_err(c, n, path, "unknown %s \"%s\" (did you mean \"%s\"?)", what, v, s);
                return;
        }
        for (size_t i = 0; i < n_cands && len < sizeof(known); i++)
                len += (size_t)snprintf(known + len, sizeof(known) - len, "%s%s", i ? ", " : "",
                                        cands[i]);
        if (n_cands == 0)
                mctx_err(c, n, path, "unknown %s \"%s\" (none are defined)", what, v);
        else
                mctx_err(c, n, path, "unknown %s \"%s\" (known: %s)", what, v, known);
}
