/* SPDX-License-Identifier: MIT */
/* Builds the positioned document tree from libyaml events (rejecting anchors, aliases, deep
 * nesting and non-UTF-8 input) or from a jansson value. */
#include "manifest/doc/doc.h"
#include "common/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct mnode *mnode_free(struct mnode *n)
{
        if (!n)
                return NULL;
        for (size_t i = 0; i < n->n_items; i++)
                mnode_free(n->items[i]);
        free(n->items);
        free(n->text);
        free(n);
        return NULL;
}

static int mnode_append(struct mnode *parent, struct mnode *child)
{
        if (parent->n_items == parent->alloc) {
                size_t a = parent->alloc ? parent->alloc * 2 : 8;
                struct mnode **p = realloc(parent->items, a * sizeof(*p));

                if (!p)
                        return -ENOMEM;
                parent->items = p;
                parent->alloc = a;
        }
        parent->items[parent->n_items++] = child;
        return 0;
}

static struct mnode *mnode_new(enum mnode_type type, unsigned line, unsigned col)
{
        struct mnode *n = calloc(1, sizeof(*n));

        if (!n)
                return NULL;
        n->type = type;
        n->line = line;
        n->col = col;
        return n;
}

static struct mnode *mnode_new_scalar(enum mscalar_kind kind, const char *text, size_t len,
                                      unsigned line, unsigned col)
{
        struct mnode *n = mnode_new(MNODE_SCALAR, line, col);

        if (!n)
                return NULL;
        n->kind = kind;
        n->len = len;
        n->text = malloc(len + 1);
        if (!n->text)
                return mnode_free(n);
        memcpy(n->text, text, len);
        n->text[len] = 0;
        return n;
}

static const char *skip_digits(const char *s, size_t *n)
{
        *n = 0;
        while (*s >= '0' && *s <= '9') {
                s++;
                (*n)++;
        }
        return s;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? (integers already excluded) */
static bool is_float(const char *s)
{
        size_t a, b = 0, e;

        if (*s == '+' || *s == '-')
                s++;
        if (strcmp(s, ".inf") == 0 || strcmp(s, ".Inf") == 0 || strcmp(s, ".INF") == 0)
                return true;
        s = skip_digits(s, &a);
        if (*s == '.')
                s = skip_digits(s + 1, &b);
        if (a + b == 0)
                return false;
        if (*s == 'e' || *s == 'E') {
                s++;
                if (*s == '+' || *s == '-')
                        s++;
                s = skip_digits(s, &e);
                if (e == 0)
                        return false;
        }
        return *s == 0;
}

static bool is_int(const char *s)
{
        size_t n;

        if (*s == '+' || *s == '-')
                s++;
        s = skip_digits(s, &n);
        return n > 0 && *s == 0;
}

enum mscalar_kind mscalar_resolve(const char *s)
{
        static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
        static const char *const bools[] = {"true", "True", "TRUE", "false", "False", "FALSE"};

        for (size_t i = 0; i < ARRAY_SIZE(nulls); i++)
                if (strcmp(s, nulls[i]) == 0)
                        return MSCALAR_NULL;
        for (size_t i = 0; i < ARRAY_SIZE(bools); i++)
                if (strcmp(s, bools[i]) == 0)
                        return MSCALAR_BOOL;
        if (!strchr("+-.0123456789", s[0]))
                return MSCALAR_STRING;
        if (is_int(s))
                return MSCALAR_INT;
        if (is_float(s) || strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 ||
            strcmp(s, ".NAN") == 0)
                return MSCALAR_FLOAT;
        return MSCALAR_STRING;
}

/* libyaml reader errors carry a byte offset, not a mark: turn it into line:col (columns
 * count characters, like libyaml's marks). */
static void offset_to_pos(const char *buf, size_t size, size_t off, unsigned *line, unsigned *col)
{
        *line = 1;
        *col = 1;
        for (size_t i = 0; i < off && i < size; i++) {
                if (buf[i] == '\n') {
                        (*line)++;
                        *col = 1;
                } else if (((unsigned char)buf[i] & 0xC0) != 0x80) {
                        (*col)++;
                }
        }
}

static void report_parser_error(struct mctx *c, const yaml_parser_t *p, const char *buf,
                                size_t size)
{
        struct mnode pos = {0};

        if (p->error == YAML_READER_ERROR) {
                offset_to_pos(buf, size, p->problem_offset, &pos.line, &pos.col);
                if (p->problem_value >= 0 && strstr(p->problem, "UTF-8"))
                        mctx_err(c, &pos, "",
                                 "input is not valid UTF-8 (%s 0x%02x); manifests must be UTF-8 "
                                 "text",
                                 p->problem, (unsigned)p->problem_value);
                else if (strstr(p->problem, "UTF-8"))
                        mctx_err(c, &pos, "",
                                 "input is not valid UTF-8 (%s); manifests must be UTF-8 text",
                                 p->problem);
                else
                        mctx_err(c, &pos, "", "invalid input: %s", p->problem);
                return;
        }
        pos.line = (unsigned)p->problem_mark.line + 1;
        pos.col = (unsigned)p->problem_mark.column + 1;
        if (p->context)
                mctx_err(c, &pos, "", "YAML syntax error: %s %s started at %u:%u", p->problem,
                         p->context, (unsigned)p->context_mark.line + 1,
                         (unsigned)p->context_mark.column + 1);
        else
                mctx_err(c, &pos, "", "YAML syntax error: %s",
                         p->problem ? p->problem : "unknown error");
        if (p->problem_mark.index < size && buf[p->problem_mark.index] == '\t')
                mctx_err(c, &pos, "", "tabs are not allowed for indentation; use spaces");
}

struct ybuild {
        struct mctx *c;
        struct mnode *stack[MANIFEST_MAX_DEPTH + 1];
        size_t depth;
        struct mnode *root;
        struct mnode **docs;
        size_t n_docs;
};

static int ybuild_attach(struct ybuild *b, struct mnode *n)
{
        if (b->depth == 0) {
                mnode_free(b->root);
                b->root = n;
                return 0;
        }
        if (mnode_append(b->stack[b->depth - 1], n) < 0) {
                mnode_free(n);
                return -ENOMEM;
        }
        return 0;
}

static void check_anchor(struct mctx *c, const yaml_char_t *anchor, const struct mnode *pos)
{
        if (anchor)
                mctx_err(c, pos, "", "YAML anchors and aliases are not allowed (anchor \"%s\")",
                         (const char *)anchor);
}

static struct mnode *scalar_from_event(const yaml_event_t *ev, unsigned line, unsigned col)
{
        const char *tag = (const char *)ev->data.scalar.tag;
        const char *v = (const char *)ev->data.scalar.value;
        enum mscalar_kind k = MSCALAR_STRING;

        if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            (!tag || (strcmp(tag, YAML_STR_TAG) != 0 && strcmp(tag, "!") != 0)))
                k = mscalar_resolve(v);
        return mnode_new_scalar(k, v, ev->data.scalar.length, line, col);
}

/* Keeps a finished document unless it is empty. */
static int ybuild_end_document(struct ybuild *b)
{
        if (b->root && !mnode_is_null(b->root)) {
                struct mnode **d = realloc(b->docs, (b->n_docs + 1) * sizeof(*d));

                if (!d)
                        return -ENOMEM;
                b->docs = d;
                b->docs[b->n_docs++] = TAKE_PTR(b->root);
        }
        b->root = mnode_free(b->root);
        return 1;
}

static int ybuild_start_collection(struct ybuild *b, const yaml_event_t *ev,
                                   const struct mnode *pos)
{
        bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
        struct mnode *n;

        check_anchor(b->c, seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor,
                     pos);
        if (b->depth >= MANIFEST_MAX_DEPTH) {
                mctx_err(b->c, pos, "", "nesting deeper than %d levels", MANIFEST_MAX_DEPTH);
                return -E2BIG;
        }
        n = mnode_new(seq ? MNODE_SEQ : MNODE_MAP, pos->line, pos->col);
        if (!n || ybuild_attach(b, n) < 0)
                return -ENOMEM;
        b->stack[b->depth++] = n;
        return 1;
}

/* Handles one event; returns 1 to go on, 0 at stream end, -ENOMEM, or -E2BIG (too deep). */
static int ybuild_event(struct ybuild *b, const yaml_event_t *ev)
{
        unsigned line = (unsigned)ev->start_mark.line + 1,
                 col = (unsigned)ev->start_mark.column + 1;
        struct mnode *n = NULL;
        struct mnode pos = {.line = line, .col = col};

        switch (ev->type) {
        case YAML_STREAM_END_EVENT:
                return 0;
        case YAML_DOCUMENT_START_EVENT:
                b->depth = 0;
                b->root = mnode_free(b->root);
                return 1;
        case YAML_DOCUMENT_END_EVENT:
                return ybuild_end_document(b);
        case YAML_ALIAS_EVENT:
                mctx_err(b->c, &pos, "", "YAML anchors and aliases are not allowed (alias \"%s\")",
                         (const char *)ev->data.alias.anchor);
                n = mnode_new_scalar(MSCALAR_NULL, "", 0, line, col);
                if (n)
                        n->alias = true;
                break;
        case YAML_SCALAR_EVENT:
                check_anchor(b->c, ev->data.scalar.anchor, &pos);
                n = scalar_from_event(ev, line, col);
                break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
                return ybuild_start_collection(b, ev, &pos);
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
                if (b->depth > 0)
                        b->depth--;
                return 1;
        default:
                return 1;
        }
        if (!n)
                return -ENOMEM;
        return ybuild_attach(b, n) < 0 ? -ENOMEM : 1;
}

int mnode_parse_yaml(struct mctx *c, const char *buf, size_t size, struct mnode ***ret_docs,
                     size_t *ret_n)
{
        struct ybuild b = {.c = c};
        yaml_parser_t p;
        int r = 1;

        if (!yaml_parser_initialize(&p))
                return -ENOMEM;
        /* libyaml asserts on a NULL input */
        yaml_parser_set_input_string(&p, (const unsigned char *)(buf ? buf : ""), buf ? size : 0);
        /* Forcing UTF-8 makes libyaml reject UTF-16 input instead of silently decoding it. */
        yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
        while (r > 0 && !c->oom && c->n_errors < MANIFEST_MAX_DIAG) {
                yaml_event_t ev;

                if (!yaml_parser_parse(&p, &ev)) {
                        if (p.error == YAML_MEMORY_ERROR)
                                r = -ENOMEM;
                        else
                                report_parser_error(c, &p, buf, size);
                        break;
                }
                r = ybuild_event(&b, &ev);
                yaml_event_delete(&ev);
        }
        yaml_parser_delete(&p);
        mnode_free(b.root);
        if (r == -ENOMEM || c->oom) {
                for (size_t i = 0; i < b.n_docs; i++)
                        mnode_free(b.docs[i]);
                free(b.docs);
                return -ENOMEM;
        }
        *ret_docs = b.docs;
        *ret_n = b.n_docs;
        return 0;
}

static int json_scalar(const json_t *j, struct mnode **ret)
{
        char tmp[64];
        const char *s = tmp;
        size_t len;
        enum mscalar_kind k;

        switch (json_typeof(j)) {
        case JSON_STRING:
                s = json_string_value(j);
                len = json_string_length(j);
                k = MSCALAR_STRING;
                *ret = mnode_new_scalar(k, s, len, 0, 0);
                return *ret ? 0 : -ENOMEM;
        case JSON_INTEGER:
                snprintf(tmp, sizeof(tmp), "%" JSON_INTEGER_FORMAT, json_integer_value(j));
                k = MSCALAR_INT;
                break;
        case JSON_REAL:
                snprintf(tmp, sizeof(tmp), "%.17g", json_real_value(j));
                k = MSCALAR_FLOAT;
                break;
        case JSON_TRUE:
        case JSON_FALSE:
                snprintf(tmp, sizeof(tmp), "%s", json_is_true(j) ? "true" : "false");
                k = MSCALAR_BOOL;
                break;
        default:
                tmp[0] = 0;
                k = MSCALAR_NULL;
                break;
        }
        *ret = mnode_new_scalar(k, s, strlen(s), 0, 0);
        return *ret ? 0 : -ENOMEM;
}

static int json_to_tree(struct mctx *c, const json_t *j, unsigned depth, struct mnode **ret);

static int json_children(struct mctx *c, const json_t *j, unsigned depth, struct mnode *n)
{
        struct mnode *child;
        const char *key;
        json_t *v;
        size_t i;
        int r;

        if (json_is_array(j)) {
                json_array_foreach(j, i, v)
                {
                        r = json_to_tree(c, v, depth + 1, &child);
                        if (r < 0)
                                return r;
                        if (mnode_append(n, child) < 0)
                                return mnode_free(child), -ENOMEM;
                }
                return 0;
        }
        json_object_foreach((json_t *)j, key, v)
        {
                child = mnode_new_scalar(MSCALAR_STRING, key, strlen(key), 0, 0);
                if (!child || mnode_append(n, child) < 0)
                        return mnode_free(child), -ENOMEM;
                r = json_to_tree(c, v, depth + 1, &child);
                if (r < 0)
                        return r;
                if (mnode_append(n, child) < 0)
                        return mnode_free(child), -ENOMEM;
        }
        return 0;
}

static int json_to_tree(struct mctx *c, const json_t *j, unsigned depth, struct mnode **ret)
{
        struct mnode *n;
        int r;

        if (!json_is_object(j) && !json_is_array(j))
                return json_scalar(j, ret);
        if (depth >= MANIFEST_MAX_DEPTH) {
                mctx_err(c, NULL, "", "nesting deeper than %d levels", MANIFEST_MAX_DEPTH);
                return -EINVAL;
        }
        n = mnode_new(json_is_object(j) ? MNODE_MAP : MNODE_SEQ, 0, 0);
        if (!n)
                return -ENOMEM;
        r = json_children(c, j, depth, n);
        if (r < 0)
                return mnode_free(n), r;
        *ret = n;
        return 0;
}

int mnode_from_json(struct mctx *c, const json_t *j, struct mnode **ret)
{
        return json_to_tree(c, j, 0, ret);
}
