/* SPDX-License-Identifier: MIT */
/* forklet tree NAME: a session's lineage drawn from the API's SessionList, kubectl-tree style.
 * Checkpoints hang under the checkpoint they came from (status.checkpoints[].parent) or the
 * session, forks under the checkpoint they were made from (status.forkOf), to any depth. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TREE_MAX_DEPTH 64

/* A session or one of its checkpoints; every string is borrowed from the list. */
struct tnode {
        bool is_ck;
        const char *session; /* the session, or the checkpoint's owner */
        const char *id;      /* checkpoint id */
        const char *ck_name; /* checkpoint name or NULL */
        const char *phase;
        const char *created;
        const char *from_session; /* a fork: status.forkOf.session */
        const char *from_ck;      /* a fork: forkOf.checkpoint; a checkpoint: its parent */
        bool shown;
};

struct trow {
        char *name; /* owned: tree prefix and label */
        size_t cols;
        const char *phase;
        char age[16];
        bool mark;
};

struct tree {
        struct tnode *n;
        size_t len;
        struct trow *rows;
        size_t n_rows;
        const struct cli_tree_opts *o;
};

static const char *str_at(const json_t *obj, const char *key)
{
        return json_string_value(json_object_get(obj, key));
}

static int push_node(struct tree *t, const struct tnode *n)
{
        struct tnode *p = realloc(t->n, (t->len + 1) * sizeof(*p));

        if (!p)
                return -ENOMEM;
        t->n = p;
        t->n[t->len++] = *n;
        return 0;
}

static int add_session(struct tree *t, const json_t *s)
{
        json_t *st = json_object_get(s, "status"), *of = json_object_get(st, "forkOf"), *ck;
        struct tnode n = {
                .session = str_at(json_object_get(s, "metadata"), "name"),
                .phase = str_at(st, "phase"),
                .created = str_at(json_object_get(s, "metadata"), "creationTimestamp"),
                .from_session = str_at(of, "session"),
                .from_ck = str_at(of, "checkpoint"),
        };
        size_t i;
        int r;

        if (!n.session)
                return 0;
        r = push_node(t, &n);
        json_array_foreach(json_object_get(st, "checkpoints"), i, ck)
        {
                struct tnode c = {.is_ck = true,
                                  .session = n.session,
                                  .id = str_at(ck, "id"),
                                  .ck_name = str_at(ck, "name"),
                                  .created = str_at(ck, "created"),
                                  .from_ck = str_at(ck, "parent")};

                if (r >= 0 && c.id)
                        r = push_node(t, &c);
        }
        return r;
}

static ssize_t find(const struct tree *t, bool is_ck, const char *session, const char *id)
{
        for (size_t i = 0; i < t->len; i++)
                if (t->n[i].is_ck == is_ck && !strcmp(t->n[i].session, session) &&
                    (!is_ck || !strcmp(t->n[i].id, id)))
                        return (ssize_t)i;
        return -1;
}

/* Whether c hangs under p: a checkpoint of p's session whose parent is p (a checkpoint) or is
 * not one of the session's own (p the session); a fork from p, or from a checkpoint of p's
 * session that is gone (p the session). */
static bool is_child(const struct tree *t, const struct tnode *p, const struct tnode *c)
{
        const char *owner = c->is_ck ? c->session : c->from_session;
        bool known;

        if (!owner || strcmp(owner, p->session) != 0 || (!c->is_ck && c == p))
                return false;
        /* a checkpoint naming itself as parent (a malformed list) hangs under its session */
        known = c->from_ck && !(c->is_ck && !strcmp(c->from_ck, c->id)) &&
                find(t, true, p->session, c->from_ck) >= 0;
        if (p->is_ck)
                return known && !strcmp(c->from_ck, p->id);
        return !known;
}

static const char *sort_name(const struct tnode *n)
{
        return n->is_ck ? n->id : n->session;
}

/* Oldest first; a checkpoint before a fork of the same second; then by name (fork-2 < fork-10). */
static int cmp_nodes(const void *a, const void *b)
{
        const struct tnode *x = *(const struct tnode *const *)a,
                           *y = *(const struct tnode *const *)b;
        int r = strcmp(x->created ? x->created : "", y->created ? y->created : "");

        if (r == 0)
                r = (int)y->is_ck - (int)x->is_ck;
        return r ? r : strverscmp(sort_name(x), sort_name(y));
}

static void label(const struct tree *t, const struct tnode *n, char *buf, size_t size)
{
        if (n->is_ck)
                snprintf(buf, size, "Checkpoint/%s%s%s%s", n->id, n->ck_name ? " (" : "",
                         n->ck_name ? n->ck_name : "", n->ck_name ? ")" : "");
        else if (n->from_ck && strcmp(n->session, t->o->root) != 0 &&
                 find(t, true, n->from_session, n->from_ck) < 0)
                snprintf(buf, size, "Session/%s (from %s, deleted)", n->session, n->from_ck);
        else
                snprintf(buf, size, "Session/%s", n->session);
}

static int add_row(struct tree *t, const struct tnode *n, const char *prefix, size_t depth)
{
        struct trow *p = realloc(t->rows, (t->n_rows + 1) * sizeof(*p)), *row;
        char text[256];

        if (!p)
                return -ENOMEM;
        t->rows = p;
        row = &t->rows[t->n_rows];
        *row = (struct trow){.phase = n->is_ck ? "-" : (n->phase ? n->phase : "-"),
                             .mark = !n->is_ck && t->o->mark && !strcmp(t->o->mark, n->session)};
        label(t, n, text, sizeof(text));
        if (fk_asprintf(&row->name, "%s%s", prefix, text) < 0)
                return -ENOMEM;
        /* every connector ("├─", "└─", "│ ", "  ") is two columns */
        row->cols = 2 * depth + strlen(text);
        cli_format_age(n->created, t->o->now_s, row->age, sizeof(row->age));
        t->n_rows++;
        return 0;
}

/* prefix: what the lines above leave open for this row, connector included. */
static int walk(struct tree *t, struct tnode *n, const char *prefix, const char *below,
                size_t depth)
{
        cleanup_free struct tnode **kids = NULL;
        size_t k = 0;
        int r;

        n->shown = true;
        r = add_row(t, n, prefix, depth);
        if (r < 0 || depth >= TREE_MAX_DEPTH)
                return r;
        kids = calloc(t->len, sizeof(*kids));
        if (!kids)
                return -ENOMEM;
        for (size_t i = 0; i < t->len; i++)
                if (!t->n[i].shown && is_child(t, n, &t->n[i]))
                        kids[k++] = &t->n[i];
        qsort(kids, k, sizeof(*kids), cmp_nodes);
        for (size_t i = 0; i < k && r >= 0; i++) {
                cleanup_free char *p = NULL, *b = NULL;
                bool last = i + 1 == k;

                if (kids[i]->shown)
                        continue; /* reached through another branch of a malformed list */
                if (fk_asprintf(&p, "%s%s", below, last ? "└─" : "├─") < 0 ||
                    fk_asprintf(&b, "%s%s", below, last ? "  " : "│ ") < 0)
                        return -ENOMEM;
                r = walk(t, kids[i], p, b, depth + 1);
        }
        return r;
}

static int print_rows(const struct tree *t, char **ret)
{
        const char *indent = t->o->indent ? t->o->indent : "";
        size_t w = strlen("NAME"), size = 0;
        char *text = NULL;
        FILE *f;

        for (size_t i = 0; i < t->n_rows; i++)
                if (t->rows[i].cols > w)
                        w = t->rows[i].cols;
        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%s%-*s  %-10s %s\n", indent, (int)w, "NAME", "PHASE", "AGE");
        for (size_t i = 0; i < t->n_rows; i++) {
                const struct trow *row = &t->rows[i];

                fprintf(f, "%s%s%*s  %-10s %s%s\n", indent, row->name, (int)(w - row->cols), "",
                        row->phase, row->age, row->mark ? "  <- this session" : "");
        }
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        return 0;
}

int cli_tree_render(const json_t *list, const struct cli_tree_opts *o, char **ret)
{
        struct tree t = {.o = o};
        json_t *s;
        ssize_t root;
        size_t i;
        int r = 0;

        json_array_foreach(json_object_get(list, "items"), i, s)
        {
                const char *ns = str_at(json_object_get(s, "metadata"), "namespace");

                if (r >= 0 && ns && !strcmp(ns, o->ns))
                        r = add_session(&t, s);
        }
        root = r >= 0 && o->root ? find(&t, false, o->root, NULL) : -1;
        if (r >= 0 && root < 0)
                r = -ENOENT;
        if (r >= 0)
                r = walk(&t, &t.n[root], "", "", 0);
        if (r >= 0)
                r = print_rows(&t, ret);
        for (i = 0; i < t.n_rows; i++)
                free(t.rows[i].name);
        free(t.rows);
        free(t.n);
        return r;
}

static const json_t *find_item(const json_t *list, const char *ns, const char *name)
{
        json_t *s;
        size_t i;

        json_array_foreach(json_object_get(list, "items"), i, s)
        {
                json_t *md = json_object_get(s, "metadata");

                if (!strcmp(str_at(md, "name") ?: "", name) &&
                    !strcmp(str_at(md, "namespace") ?: "", ns))
                        return s;
        }
        return NULL;
}

const char *cli_tree_root(const json_t *list, const char *ns, const char *name)
{
        const json_t *s = find_item(list, ns, name), *up;
        size_t limit = json_array_size(json_object_get(list, "items"));

        if (!s)
                return NULL;
        /* bounded: a list whose forkOf links form a cycle stops after one lap */
        for (size_t step = 0; step < limit; step++) {
                const char *parent =
                        str_at(json_object_get(json_object_get(s, "status"), "forkOf"), "session");

                if (!parent || !(up = find_item(list, ns, parent)))
                        break;
                s = up;
        }
        return str_at(json_object_get(s, "metadata"), "name");
}

int cli_get_namespace_list(const struct cli *c, json_t **ret, struct fk_error *err)
{
        cleanup_free char *path = NULL;
        struct cli_response resp = {0};
        json_t *j;
        int r;

        if (fk_asprintf(&path, "/api/v1alpha1/namespaces/%s/sessions", c->namespace) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = cli_request(c, "GET", path, NULL, &resp, err);
        if (r < 0)
                return r;
        j = resp.status == 200 ? json_loads(resp.body, 0, NULL) : NULL;
        if (!j) {
                json_t *e = resp.body ? json_loads(resp.body, 0, NULL) : NULL;

                r = fk_error_set(err, -EIO, "list sessions of %s: %s (HTTP %ld)", c->namespace,
                                 str_at(e, "message") ?: "unreadable reply", resp.status);
                json_decref(e);
        }
        cli_response_done(&resp);
        if (j)
                *ret = j;
        return r;
}

int cli_tree(const struct cli *c, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct fk_error err = {0};
        cleanup_free char *text = NULL;
        json_t *list = NULL;
        int r;

        if (cli_parse_files(argc, argv, "tree", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        free(a.files);
        if (cli_get_namespace_list(c, &list, &err) < 0) {
                fprintf(stderr, "forklet tree: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        r = cli_tree_render(list,
                            &(struct cli_tree_opts){.ns = c->namespace,
                                                    .root = a.name,
                                                    .now_s = (long long)time(NULL)},
                            &text);
        json_decref(list);
        if (r == -ENOENT)
                fprintf(stderr, "forklet tree: session %s/%s not found\n", c->namespace, a.name);
        else if (r < 0)
                fprintf(stderr, "forklet tree: %s\n", strerror(-r));
        else
                fputs(text, stdout);
        return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
