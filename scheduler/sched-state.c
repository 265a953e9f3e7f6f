/* SPDX-License-Identifier: MIT */
/* The scheduler's mirror of the cluster: nodes (status document, lease) and sessions (size
 * class and nodeSelector of the spec, placement, status phase) from etcd keys, and the
 * accounting of placed sessions against each node. No I/O. */
#include "core/cluster/cluster.h"
#include "scheduler/sched.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void kvs_free(struct kv *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].key);
                free(v[i].value);
        }
        free(v);
}

/* A JSON object of strings as a kv array (non-strings skipped). */
static int kvs_from_json(const json_t *o, struct kv **ret, size_t *ret_n)
{
        struct kv *v = calloc(json_object_size(o) + 1, sizeof(*v));
        const char *k;
        json_t *x;
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        json_object_foreach((json_t *)o, k, x)
        {
                if (!json_is_string(x))
                        continue;
                v[n].key = strdup(k);
                v[n].value = strdup(json_string_value(x));
                if (!v[n].key || !v[n].value) {
                        kvs_free(v, n + 1);
                        return -ENOMEM;
                }
                n++;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static void node_clear_status(struct sched_node *n)
{
        kvs_free(n->labels, n->n_labels);
        for (size_t i = 0; i < n->n_classes; i++)
                free(n->classes[i].name);
        free(n->classes);
        n->labels = NULL;
        n->classes = NULL;
        n->n_labels = n->n_classes = 0;
        n->has_status = false;
}

/* o.key as a count, or o.fallback when key is absent (negative: 0). */
static uint64_t int_or(const json_t *o, const char *key, const char *fallback)
{
        const json_t *v = json_object_get(o, key);
        json_int_t x;

        if (!json_is_integer(v))
                v = json_object_get(o, fallback);
        x = json_integer_value(v);
        return x > 0 ? (uint64_t)x : 0;
}

/* o.key (bytes), or mib MiB when absent. */
static uint64_t bytes_or(const json_t *o, const char *key, uint64_t mib)
{
        const json_t *v = json_object_get(o, key);

        return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v)
                                                                : mib << 20;
}

static int node_set_status(struct sched_node *n, const char *text)
{
        json_t *j = json_loads(text, 0, NULL), *cap, *classes, *x, *use;
        const char *k;
        int r = -EINVAL;

        node_clear_status(n);
        cap = json_object_get(j, "capacity");
        classes = json_object_get(cap, "sizeClasses");
        if (!json_is_object(cap) || !json_is_object(classes))
                goto out;
        r = kvs_from_json(json_object_get(j, "labels"), &n->labels, &n->n_labels);
        n->classes = calloc(json_object_size(classes) + 1, sizeof(*n->classes));
        if (r < 0 || !n->classes) {
                r = -ENOMEM;
                goto out;
        }
        json_object_foreach(classes, k, x)
        {
                struct sched_class *c = &n->classes[n->n_classes];

                c->name = strdup(k);
                if (!c->name) {
                        r = -ENOMEM;
                        goto out;
                }
                c->memory_mib = (unsigned)json_integer_value(json_object_get(x, "memoryMiB"));
                c->vcpus = (unsigned)json_integer_value(json_object_get(x, "vcpus"));
                c->charge_mib = int_or(x, "chargeMiB", "memoryMiB");
                n->n_classes++;
        }
        use = json_object_get(j, "usage");
        n->max_sessions = (unsigned)json_integer_value(json_object_get(cap, "sessions"));
        n->memory_mib = (uint64_t)json_integer_value(json_object_get(cap, "memoryMiB"));
        n->vcpus = (unsigned)json_integer_value(json_object_get(cap, "vcpus"));
        /* a node reporting admission's charges; else (older nodes) every session by its RAM */
        n->local_sessions = (unsigned)int_or(use, "localAdmittedSessions", "localSessions");
        n->local_memory_mib = int_or(use, "localChargedMiB", "localMemoryMiB");
        n->local_vcpus = (unsigned)json_integer_value(json_object_get(use, "localVcpus"));
        n->memory_bytes = bytes_or(cap, "memoryBytes", n->memory_mib);
        n->local_memory_bytes = bytes_or(use, "localChargedBytes", n->local_memory_mib);
        n->has_status = true;
        r = 0;
out:
        if (r < 0)
                node_clear_status(n);
        json_decref(j);
        return r == -EINVAL ? 0 : r; /* a malformed document: the node just cannot take work */
}

static void session_clear_spec(struct sched_session *s)
{
        free(s->size_class);
        kvs_free(s->selector, s->n_selector);
        s->size_class = NULL;
        s->selector = NULL;
        s->n_selector = 0;
        s->has_spec = false;
}

static int session_set_spec(struct sched_session *s, const char *text, int64_t create_rev)
{
        json_t *j = json_loads(text, 0, NULL), *spec = json_object_get(j, "spec");
        const char *cls = json_string_value(json_object_get(spec, "sizeClass"));
        int r;

        session_clear_spec(s);
        s->size_class = strdup(cls ? cls : "small");
        r = s->size_class ? kvs_from_json(json_object_get(spec, "nodeSelector"), &s->selector,
                                          &s->n_selector)
                          : -ENOMEM;
        json_decref(j);
        if (r < 0)
                return r;
        s->has_spec = true;
        s->spec_create_rev = create_rev;
        return 0;
}

static int set_str(char **field, const char *v)
{
        char *c = v ? strdup(v) : NULL;

        if (v && !c)
                return -ENOMEM;
        free(*field);
        *field = c;
        return 0;
}

static int session_set_status(struct sched_session *s, const char *text)
{
        json_t *j = text ? json_loads(text, 0, NULL) : NULL;
        int r = set_str(&s->status, text);

        if (r >= 0)
                r = set_str(&s->phase, json_string_value(json_object_get(j, "phase")));
        json_decref(j);
        return r;
}

#define GROW(arr, n, alloc)                                                                        \
        ({                                                                                         \
                int _r = 0;                                                                        \
                if ((n) == (alloc)) {                                                              \
                        size_t _a = (alloc) ? (alloc)*2 : 32;                                      \
                        void *_p = realloc((arr), _a * sizeof(*(arr)));                            \
                        if (_p) {                                                                  \
                                (arr) = _p;                                                        \
                                (alloc) = _a;                                                      \
                        } else                                                                     \
                                _r = -ENOMEM;                                                      \
                }                                                                                  \
                _r;                                                                                \
        })

struct sched_node *sched_state_node(struct sched_state *st, const char *name)
{
        for (size_t i = 0; i < st->n_nodes; i++)
                if (strcmp(st->nodes[i].name, name) == 0)
                        return &st->nodes[i];
        return NULL;
}

static struct sched_node *node_get(struct sched_state *st, const char *name)
{
        struct sched_node *n = sched_state_node(st, name);

        if (n || GROW(st->nodes, st->n_nodes, st->alloc_nodes) < 0)
                return n;
        n = &st->nodes[st->n_nodes++];
        *n = (struct sched_node){0};
        snprintf(n->name, sizeof(n->name), "%s", name);
        return n;
}

static struct sched_session *session_get(struct sched_state *st, const char *ns, const char *name,
                                         bool create)
{
        struct sched_session *s;

        for (size_t i = 0; i < st->n_sessions; i++)
                if (!strcmp(st->sessions[i].ns, ns) && !strcmp(st->sessions[i].name, name))
                        return &st->sessions[i];
        if (!create || GROW(st->sessions, st->n_sessions, st->alloc_sessions) < 0)
                return NULL;
        s = &st->sessions[st->n_sessions++];
        *s = (struct sched_session){0};
        snprintf(s->ns, sizeof(s->ns), "%s", ns);
        snprintf(s->name, sizeof(s->name), "%s", name);
        return s;
}

static void session_free(struct sched_session *s)
{
        session_clear_spec(s);
        free(s->node);
        free(s->status);
        free(s->phase);
}

/* Drops a session once none of its keys is left. */
static void session_gc(struct sched_state *st, struct sched_session *s)
{
        size_t i = (size_t)(s - st->sessions);

        if (s->has_spec || s->node || s->status)
                return;
        session_free(s);
        memmove(s, s + 1, (st->n_sessions - i - 1) * sizeof(*s));
        st->n_sessions--;
}

int sched_state_apply(struct sched_state *st, const char *key, const char *value,
                      int64_t create_rev)
{
        struct sched_session *s;
        struct sched_node *n;
        struct core_cluster_key k;
        int r = 0;

        core_cluster_key_parse(st->prefix, key, &k);
        switch (k.kind) {
        case CORE_CLUSTER_KEY_NODE_STATUS:
        case CORE_CLUSTER_KEY_NODE_LEASE:
                n = node_get(st, k.name);
                if (!n)
                        return -ENOMEM;
                if (k.kind == CORE_CLUSTER_KEY_NODE_LEASE)
                        n->ready = value != NULL;
                else if (value)
                        r = node_set_status(n, value);
                else
                        node_clear_status(n);
                return r;
        case CORE_CLUSTER_KEY_SESSION_SPEC:
        case CORE_CLUSTER_KEY_SESSION_NODE:
        case CORE_CLUSTER_KEY_SESSION_STATUS:
                s = session_get(st, k.ns, k.name, value != NULL);
                if (!s)
                        return value ? -ENOMEM : 0;
                if (k.kind == CORE_CLUSTER_KEY_SESSION_SPEC && value)
                        r = session_set_spec(s, value, create_rev);
                else if (k.kind == CORE_CLUSTER_KEY_SESSION_SPEC)
                        session_clear_spec(s);
                else if (k.kind == CORE_CLUSTER_KEY_SESSION_NODE)
                        r = set_str(&s->node, value);
                else
                        r = session_set_status(s, value);
                session_gc(st, s);
                return r;
        default:
                return 0;
        }
}

void sched_state_account(struct sched_state *st)
{
        for (size_t i = 0; i < st->n_nodes; i++) {
                st->nodes[i].used_sessions = 0;
                st->nodes[i].used_memory_mib = 0;
                st->nodes[i].used_vcpus = 0;
        }
        for (size_t i = 0; i < st->n_sessions; i++) {
                struct sched_session *s = &st->sessions[i];
                struct sched_node *n = s->node ? sched_state_node(st, s->node) : NULL;

                if (!n)
                        continue;
                n->used_sessions++;
                for (size_t c = 0; s->size_class && c < n->n_classes; c++)
                        if (!strcmp(n->classes[c].name, s->size_class)) {
                                n->used_memory_mib += n->classes[c].charge_mib;
                                n->used_vcpus += n->classes[c].vcpus;
                        }
        }
}

int sched_state_init(struct sched_state *st, const char *prefix)
{
        *st = (struct sched_state){.prefix = strdup(prefix)};
        return st->prefix ? 0 : -ENOMEM;
}

void sched_state_done(struct sched_state *st)
{
        for (size_t i = 0; i < st->n_nodes; i++)
                node_clear_status(&st->nodes[i]);
        for (size_t i = 0; i < st->n_sessions; i++)
                session_free(&st->sessions[i]);
        free(st->nodes);
        free(st->sessions);
        free(st->prefix);
        *st = (struct sched_state){0};
}
