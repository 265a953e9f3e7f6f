/* SPDX-License-Identifier: MIT */
/* Decodes and validates a Session document tree into struct session_manifest, reporting every
 * problem it finds, and the entry points that parse YAML files/buffers and JSON values. */
#include "manifest/manifest-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys known at an object: from the field table (manifest-fields.c). */
#define KNOWN(path)                                                                                \
        manifest_field_names(manifest_field_find(path),                                            \
                             (const char * [MANIFEST_FIELDS_MAX + 1]){NULL})

/* A present, non-null value (null counts as absent for optional fields). */
static const struct mnode *opt(const struct mnode *map, const char *key)
{
        const struct mnode *v = mnode_get(map, key);

        return v && !mnode_is_null(v) ? v : NULL;
}

/* A DNS-1123 name at map.key; keeps *ret (the default) when absent. */
static void decode_name(struct mctx *c, const struct mnode *map, const char *path, const char *key,
                        bool required, char **ret)
{
        const struct mnode *v = required ? mget_required(c, map, path, key) : opt(map, key);
        const char *s, *why;
        char p[MPATH_MAX];

        if (!v)
                return;
        mpath_key(p, sizeof(p), path, key);
        s = mget_string(c, v, p);
        if (!s)
                return;
        why = manifest_name_problem(s);
        if (why)
                mctx_err(c, v, p, "invalid name \"%s\": %s (a DNS-1123 label)", s, why);
        else
                mstrdup(c, s, ret);
}

static void decode_metadata(struct mctx *c, const struct mnode *meta, struct session_manifest *m)
{
        const struct mnode *v;

        if (!mget_map(c, meta, "metadata", KNOWN("metadata")))
                return;
        decode_name(c, meta, "metadata", "name", true, &m->name);
        decode_name(c, meta, "metadata", "namespace", false, &m->namespace);
        v = opt(meta, "labels");
        if (v)
                manifest_decode_kvs(c, v, "metadata.labels", false, &m->labels, &m->n_labels);
        v = opt(meta, "annotations");
        if (v)
                manifest_decode_annotations(c, v, &m->annotations, &m->n_annotations);
}

static void decode_egress(struct mctx *c, const struct mnode *n, struct session_manifest *m)
{
        char p[MPATH_MAX];

        if (!mget_seq(c, n, "spec.egress"))
                return;
        m->egress = calloc(n->n_items ? n->n_items : 1, sizeof(*m->egress));
        if (!m->egress) {
                c->oom = true;
                return;
        }
        for (size_t i = 0; i < n->n_items; i++) {
                const char *s =
                        mget_string(c, n->items[i], mpath_idx(p, sizeof(p), "spec.egress", i));
                struct fk_error e = {0};

                if (!s)
                        continue;
                if (manifest_egress_parse(s, &m->egress[m->n_egress], &e) == 0)
                        m->n_egress++;
                else if (e.code == -ENOMEM)
                        c->oom = true;
                else
                        mctx_err(c, n->items[i], p, "invalid egress entry \"%s\": %s", s, e.msg);
        }
}

static void decode_ports(struct mctx *c, const struct mnode *n, struct session_manifest *m)
{
        char p[MPATH_MAX];

        if (!mget_seq(c, n, "spec.ports"))
                return;
        m->ports = calloc(n->n_items ? n->n_items : 1, sizeof(*m->ports));
        if (!m->ports) {
                c->oom = true;
                return;
        }
        for (size_t i = 0; i < n->n_items; i++) {
                uint64_t v;

                mpath_idx(p, sizeof(p), "spec.ports", i);
                if (!mget_uint(c, n->items[i], p, 1, 65535, &v))
                        continue;
                for (size_t j = 0; j < i; j++) {
                        const struct mnode *o = n->items[j];

                        if (o->type == MNODE_SCALAR && o->kind == MSCALAR_INT &&
                            strtoull(o->text, NULL, 10) == v) {
                                mctx_err(c, n->items[i], p,
                                         "duplicate port %u (same as spec.ports[%zu])", (unsigned)v,
                                         j);
                                goto next;
                        }
                }
                m->ports[m->n_ports++] = (uint16_t)v;
        next:;
        }
}

static void decode_lifecycle(struct mctx *c, const struct mnode *n, struct session_manifest *m)
{
        const struct mnode *a;
        char p[MPATH_MAX];

        if (!mget_map(c, n, "spec.lifecycle", KNOWN("spec.lifecycle")))
                return;
        if ((a = opt(n, "runImageCommand")) && (a->type != MNODE_SCALAR || a->kind != MSCALAR_BOOL))
                mctx_err(c, a, "spec.lifecycle.runImageCommand", "must be true or false, got %s",
                         mnode_type_name(a));
        else if (a)
                m->run_image_command = a->text[0] == 't' || a->text[0] == 'T';
        a = mnode_get(n, "afterStart");
        if (!a)
                return;
        if (a->type != MNODE_SEQ || a->n_items == 0) {
                mctx_err(c, a, "spec.lifecycle.afterStart",
                         "must be a non-empty list of strings (a command and its arguments), "
                         "got %s",
                         a->type == MNODE_SEQ ? "an empty list" : mnode_type_name(a));
                return;
        }
        for (size_t i = 0; i < a->n_items; i++) {
                const char *s = mget_string(
                        c, a->items[i], mpath_idx(p, sizeof(p), "spec.lifecycle.afterStart", i));

                if (s && i == 0 && !*s)
                        mctx_err(c, a->items[i], p, "the command must not be empty");
                else if (s && fk_strv_push(&m->after_start, s) < 0)
                        c->oom = true;
        }
}

static void decode_checkpoints(struct mctx *c, const struct mnode *n, struct session_manifest *m)
{
        char p[MPATH_MAX], pn[MPATH_MAX];

        if (!mget_seq(c, n, "spec.checkpoints"))
                return;
        m->checkpoints = calloc(n->n_items ? n->n_items : 1, sizeof(*m->checkpoints));
        if (!m->checkpoints) {
                c->oom = true;
                return;
        }
        for (size_t i = 0; i < n->n_items; i++) {
                const struct mnode *it = n->items[i];
                char *name = NULL;
                bool dup = false;

                mpath_idx(p, sizeof(p), "spec.checkpoints", i);
                if (!mget_map(c, it, p, KNOWN("spec.checkpoints")))
                        continue;
                decode_name(c, it, p, "name", true, &name);
                if (!name)
                        continue;
                for (size_t j = 0; j < m->n_checkpoints && !dup; j++)
                        dup = strcmp(m->checkpoints[j].name, name) == 0;
                if (dup) {
                        mctx_err(c, mnode_get(it, "name"), mpath_key(pn, sizeof(pn), p, "name"),
                                 "duplicate checkpoint name \"%s\"", name);
                        free(name);
                        continue;
                }
                m->checkpoints[m->n_checkpoints++].name = name;
        }
}

static void decode_forks(struct mctx *c, const struct mnode *n, const struct node_config *cfg,
                         struct session_manifest *m)
{
        unsigned max = cfg ? cfg->max_forks_per_session : 32;
        cleanup_free const char **names = calloc(m->n_checkpoints + 1, sizeof(char *));
        const struct mnode *v;
        const char *s;
        uint64_t count;

        if (!names) {
                c->oom = true;
                return;
        }
        if (!mget_map(c, n, "spec.forks", KNOWN("spec.forks")))
                return;
        m->has_forks = true;
        v = mget_required(c, n, "spec.forks", "from");
        s = v ? mget_string(c, v, "spec.forks.from") : NULL;
        for (size_t i = 0; i < m->n_checkpoints; i++)
                names[i] = m->checkpoints[i].name;
        if (s) {
                bool found = false;

                for (size_t i = 0; i < m->n_checkpoints && !found; i++)
                        found = strcmp(names[i], s) == 0;
                if (found)
                        mstrdup(c, s, &m->forks_from);
                else
                        mctx_err_unknown(c, v, "spec.forks.from", "checkpoint", s, names,
                                         m->n_checkpoints);
        }
        v = mget_required(c, n, "spec.forks", "count");
        if (v && mget_uint(c, v, "spec.forks.count", 0, max, &count))
                m->forks_count = (unsigned)count;
}

/* sizeClass / image: with a node config they must be known there, else only a valid name. */
static void decode_ref(struct mctx *c, const struct mnode *spec, const char *key, const char *what,
                       const struct node_config *cfg, char **ret)
{
        bool is_image = strcmp(key, "image") == 0;
        size_t n = !cfg ? 0 : is_image ? cfg->n_images : cfg->n_size_classes;
        cleanup_free const char **names = NULL;
        cleanup_free char *val = NULL;
        char p[MPATH_MAX];

        decode_name(c, spec, "spec", key, false, &val);
        if (!val)
                return;
        if (cfg && !(is_image ? (const void *)node_config_find_image(cfg, val)
                              : (const void *)node_config_find_size_class(cfg, val))) {
                names = calloc(n + 1, sizeof(char *));
                if (!names) {
                        c->oom = true;
                        return;
                }
                for (size_t i = 0; i < n; i++)
                        names[i] = is_image ? cfg->images[i].name : cfg->size_classes[i].name;
                mctx_err_unknown(c, mnode_get(spec, key), mpath_key(p, sizeof(p), "spec", key),
                                 what, val, names, n);
                return;
        }
        free(*ret);
        *ret = TAKE_PTR(val);
}

static void decode_enum(struct mctx *c, const struct mnode *spec, const char *key, const char *what,
                        const char *const *names, size_t n, int *ret)
{
        const struct mnode *v = opt(spec, key);
        char p[MPATH_MAX];
        const char *s;

        if (!v)
                return;
        mpath_key(p, sizeof(p), "spec", key);
        s = mget_string(c, v, p);
        if (!s)
                return;
        for (size_t i = 0; i < n; i++)
                if (strcmp(s, names[i]) == 0) {
                        *ret = (int)i;
                        return;
                }
        mctx_err_unknown(c, v, p, what, s, names, n);
}

static void decode_spec(struct mctx *c, const struct mnode *spec, const struct node_config *cfg,
                        struct session_manifest *m)
{
        static const char *const states[] = {"Running", "Paused", "Stopped"};
        static const char *const policies[] = {"Never", "OnFailure"};
        const struct mnode *v;
        int e;

        if (!mget_map(c, spec, "spec", KNOWN("spec")))
                return;
        decode_ref(c, spec, "sizeClass", "class", cfg, &m->size_class);
        if (!manifest_decode_image_ref(c, spec, cfg, &m->image))
                decode_ref(c, spec, "image", "image", cfg, &m->image);
        e = (int)m->state;
        decode_enum(c, spec, "state", "state", states, ARRAY_SIZE(states), &e);
        m->state = (enum session_state)e;
        e = (int)m->restart_policy;
        decode_enum(c, spec, "restartPolicy", "restart policy", policies, ARRAY_SIZE(policies), &e);
        m->restart_policy = (enum restart_policy)e;
        if ((v = opt(spec, "env")))
                manifest_decode_kvs(c, v, "spec.env", true, &m->env, &m->n_env);
        if ((v = opt(spec, "egress")))
                decode_egress(c, v, m);
        if ((v = opt(spec, "ports")))
                decode_ports(c, v, m);
        if ((v = opt(spec, "lifecycle")))
                decode_lifecycle(c, v, m);
        if (v && m->run_image_command && !manifest_image_is_ref(m->image))
                mctx_err(c, mnode_get(v, "runImageCommand"), "spec.lifecycle.runImageCommand",
                         "needs an OCI image reference in spec.image (HOST/REPO:TAG), not the "
                         "node image \"%s\"",
                         m->image);
        if ((v = opt(spec, "checkpoints")))
                decode_checkpoints(c, v, m);
        if ((v = opt(spec, "forks")))
                decode_forks(c, v, cfg, m);
        if ((v = opt(spec, "nodeSelector")))
                manifest_decode_kvs(c, v, "spec.nodeSelector", false, &m->node_selector,
                                    &m->n_node_selector);
        if ((v = opt(spec, "secrets")))
                manifest_decode_secrets(c, v, cfg, m);
}

static int session_defaults(struct session_manifest *m)
{
        m->namespace = strdup("default");
        m->size_class = strdup("small");
        m->image = strdup("minimal");
        m->state = SESSION_STATE_RUNNING;
        m->restart_policy = RESTART_POLICY_NEVER;
        return m->namespace && m->size_class && m->image ? 0 : -ENOMEM;
}

int session_decode(struct mctx *c, const struct mnode *root, const struct node_config *cfg,
                   struct session_manifest **ret)
{
        struct session_manifest *m = calloc(1, sizeof(*m));
        unsigned before = c->n_errors;
        const struct mnode *v;

        if (!m || session_defaults(m) < 0) {
                session_manifest_free(m);
                return -ENOMEM;
        }
        m->source_line = root->line;
        if (mget_map(c, root, "", KNOWN(""))) {
                manifest_decode_header(c, root, "Session");
                v = mget_required(c, root, "", "metadata");
                if (v)
                        decode_metadata(c, v, m);
                if ((v = opt(root, "spec")))
                        decode_spec(c, v, cfg, m);
        }
        if (c->oom || c->n_errors != before || mstrdup(c, c->source, &m->source) < 0) {
                session_manifest_free(m);
                return c->oom ? -ENOMEM : -EINVAL;
        }
        *ret = m;
        return 0;
}

static void free_docs(struct mnode **docs, size_t n)
{
        for (size_t i = 0; i < n; i++)
                mnode_free(docs[i]);
        free(docs);
}

static void free_sessions(struct session_manifest **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                session_manifest_free(v[i]);
        free(v);
}

int manifest_parse_sessions(const char *buf, size_t size, const char *source,
                            const struct node_config *cfg, struct session_manifest ***ret,
                            size_t *ret_n, struct manifest_diag *diag)
{
        _cleanup_(mctx_finish) struct mctx c = {
                .diag = diag, .source = source ? source : "<input>", .diag_start = diag->n};
        struct session_manifest **v = NULL;
        struct mnode **docs = NULL;
        size_t n_docs = 0, n = 0;
        int r;

        if (size > MANIFEST_MAX_FILE_SIZE) {
                mctx_err(&c, NULL, "", "input is larger than %d bytes (1 MiB)",
                         MANIFEST_MAX_FILE_SIZE);
                return c.oom ? -ENOMEM : -EINVAL;
        }
        r = mnode_parse_yaml(&c, buf, size, &docs, &n_docs);
        if (r < 0)
                return r;
        if (n_docs == 0 && c.n_errors == 0)
                mctx_err(&c, NULL, "", "no Session document found");
        v = calloc(n_docs + 1, sizeof(*v));
        if (!v) {
                free_docs(docs, n_docs);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_docs && !c.oom; i++)
                if (session_decode(&c, docs[i], cfg, &v[n]) == 0)
                        n++;
        free_docs(docs, n_docs);
        if (c.oom || c.n_errors > 0) {
                free_sessions(v, n);
                return c.oom ? -ENOMEM : -EINVAL;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int manifest_load_sessions_file(const char *path, const struct node_config *cfg,
                                struct session_manifest ***ret, size_t *ret_n,
                                struct manifest_diag *diag)
{
        cleanup_free char *buf = NULL;
        size_t size = 0;
        int r = manifest_read_file(path, &buf, &size, diag);

        if (r < 0)
                return r;
        return manifest_parse_sessions(buf, size, path, cfg, ret, ret_n, diag);
}

int session_manifest_from_json(const json_t *j, const struct node_config *cfg,
                               struct session_manifest **ret, struct manifest_diag *diag)
{
        _cleanup_(mctx_finish) struct mctx c = {
                .diag = diag, .source = "<json>", .diag_start = diag->n};
        struct mnode *root = NULL;
        int r;

        r = mnode_from_json(&c, j, &root);
        if (r < 0)
                return c.oom ? -ENOMEM : r;
        r = session_decode(&c, root, cfg, ret);
        mnode_free(root);
        return r;
}
