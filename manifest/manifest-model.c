/* SPDX-License-Identifier: MIT */
/* The Session model: enum tables, free, deep copy, equality, and the canonical JSON rendering
 * (fixed key order, defaults filled in). */
#include "manifest/manifest-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[_SESSION_STATE_MAX] = {"Running", "Paused", "Stopped"};
static const char *const policy_names[_RESTART_POLICY_MAX] = {"Never", "OnFailure"};

static int lookup(const char *const *names, int n, const char *s)
{
        for (int i = 0; s && i < n; i++)
                if (strcmp(names[i], s) == 0)
                        return i;
        return -1;
}

const char *session_state_to_string(enum session_state s)
{
        return s >= 0 && s < _SESSION_STATE_MAX ? state_names[s] : NULL;
}

enum session_state session_state_from_string(const char *s)
{
        return (enum session_state)lookup(state_names, _SESSION_STATE_MAX, s);
}

const char *restart_policy_to_string(enum restart_policy p)
{
        return p >= 0 && p < _RESTART_POLICY_MAX ? policy_names[p] : NULL;
}

enum restart_policy restart_policy_from_string(const char *s)
{
        return (enum restart_policy)lookup(policy_names, _RESTART_POLICY_MAX, s);
}

static void kvs_free(struct kv *kv, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(kv[i].key);
                free(kv[i].value);
        }
        free(kv);
}

struct session_manifest *session_manifest_free(struct session_manifest *m)
{
        if (!m)
                return NULL;
        free(m->name);
        free(m->namespace);
        kvs_free(m->labels, m->n_labels);
        kvs_free(m->annotations, m->n_annotations);
        free(m->size_class);
        free(m->image);
        kvs_free(m->env, m->n_env);
        for (size_t i = 0; i < m->n_egress; i++)
                egress_rule_done(&m->egress[i]);
        free(m->egress);
        free(m->ports);
        fk_strv_free(m->after_start);
        for (size_t i = 0; i < m->n_checkpoints; i++)
                free(m->checkpoints[i].name);
        free(m->checkpoints);
        free(m->forks_from);
        kvs_free(m->node_selector, m->n_node_selector);
        manifest_secrets_free(m->secrets, m->n_secrets);
        free(m->source);
        free(m);
        return NULL;
}

static int dup_str(const char *s, char **ret)
{
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int kvs_copy(const struct kv *kv, size_t n, struct kv **ret)
{
        *ret = calloc(n + 1, sizeof(**ret));
        if (!*ret)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (dup_str(kv[i].key, &(*ret)[i].key) < 0 ||
                    dup_str(kv[i].value, &(*ret)[i].value) < 0)
                        return -ENOMEM;
        return 0;
}

/* Copies the arrays; on failure the partial copy is freed by the caller (counts are set). */
static int copy_arrays(const struct session_manifest *m, struct session_manifest *c)
{
        if (kvs_copy(m->labels, m->n_labels, &c->labels) < 0 ||
            kvs_copy(m->annotations, m->n_annotations, &c->annotations) < 0 ||
            kvs_copy(m->env, m->n_env, &c->env) < 0 ||
            kvs_copy(m->node_selector, m->n_node_selector, &c->node_selector) < 0)
                return -ENOMEM;
        c->egress = calloc(m->n_egress + 1, sizeof(*c->egress));
        c->ports = calloc(m->n_ports + 1, sizeof(*c->ports));
        c->checkpoints = calloc(m->n_checkpoints + 1, sizeof(*c->checkpoints));
        if (!c->egress || !c->ports || !c->checkpoints)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_egress; i++) {
                c->egress[i] = m->egress[i];
                c->egress[i].raw = c->egress[i].host = NULL;
                if (dup_str(m->egress[i].raw, &c->egress[i].raw) < 0 ||
                    dup_str(m->egress[i].host, &c->egress[i].host) < 0)
                        return -ENOMEM;
        }
        if (m->n_ports)
                memcpy(c->ports, m->ports, m->n_ports * sizeof(*m->ports));
        for (size_t i = 0; i < m->n_checkpoints; i++)
                if (dup_str(m->checkpoints[i].name, &c->checkpoints[i].name) < 0)
                        return -ENOMEM;
        if (m->after_start && fk_strv_copy(m->after_start, &c->after_start) < 0)
                return -ENOMEM;
        return manifest_secrets_copy(m->secrets, m->n_secrets, &c->secrets);
}

int session_manifest_copy(const struct session_manifest *m, struct session_manifest **ret)
{
        struct session_manifest *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        *c = *m;
        c->labels = c->annotations = c->env = c->node_selector = NULL;
        c->egress = NULL;
        c->ports = NULL;
        c->after_start = NULL;
        c->checkpoints = NULL;
        c->secrets = NULL;
        if (dup_str(m->name, &c->name) < 0 || dup_str(m->namespace, &c->namespace) < 0 ||
            dup_str(m->size_class, &c->size_class) < 0 || dup_str(m->image, &c->image) < 0 ||
            dup_str(m->forks_from, &c->forks_from) < 0 || dup_str(m->source, &c->source) < 0 ||
            copy_arrays(m, c) < 0) {
                session_manifest_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

static bool str_eq(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

static bool kvs_eq(const struct kv *a, size_t na, const struct kv *b, size_t nb)
{
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!str_eq(a[i].key, b[i].key) || !str_eq(a[i].value, b[i].value))
                        return false;
        return true;
}

static bool egress_eq(const struct egress_rule *a, const struct egress_rule *b)
{
        return str_eq(a->raw, b->raw) && a->kind == b->kind && str_eq(a->host, b->host) &&
               a->family == b->family && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0 &&
               a->prefix_len == b->prefix_len && a->port == b->port;
}

static bool lists_eq(const struct session_manifest *a, const struct session_manifest *b)
{
        if (a->n_egress != b->n_egress || a->n_ports != b->n_ports ||
            a->n_checkpoints != b->n_checkpoints)
                return false;
        for (size_t i = 0; i < a->n_egress; i++)
                if (!egress_eq(&a->egress[i], &b->egress[i]))
                        return false;
        for (size_t i = 0; i < a->n_ports; i++)
                if (a->ports[i] != b->ports[i])
                        return false;
        for (size_t i = 0; i < a->n_checkpoints; i++)
                if (!str_eq(a->checkpoints[i].name, b->checkpoints[i].name))
                        return false;
        if (!a->after_start != !b->after_start || a->run_image_command != b->run_image_command)
                return false;
        return !a->after_start || fk_strv_equal(a->after_start, b->after_start);
}

bool session_manifest_equal(const struct session_manifest *a, const struct session_manifest *b)
{
        if (!a || !b)
                return a == b;
        return kvs_eq(a->labels, a->n_labels, b->labels, b->n_labels) &&
               kvs_eq(a->annotations, a->n_annotations, b->annotations, b->n_annotations) &&
               session_manifest_spec_equal(a, b);
}

bool session_manifest_spec_equal(const struct session_manifest *a, const struct session_manifest *b)
{
        if (!a || !b)
                return a == b;
        return str_eq(a->name, b->name) && str_eq(a->namespace, b->namespace) &&
               str_eq(a->size_class, b->size_class) && str_eq(a->image, b->image) &&
               a->state == b->state && a->restart_policy == b->restart_policy &&
               kvs_eq(a->env, a->n_env, b->env, b->n_env) && lists_eq(a, b) &&
               a->has_forks == b->has_forks && str_eq(a->forks_from, b->forks_from) &&
               a->forks_count == b->forks_count &&
               kvs_eq(a->node_selector, a->n_node_selector, b->node_selector, b->n_node_selector) &&
               manifest_secrets_equal(a->secrets, a->n_secrets, b->secrets, b->n_secrets);
}

/* json_object_set_new that remembers a failure. */
static void set(json_t *o, const char *k, json_t *v, bool *ok)
{
        if (!v || json_object_set_new(o, k, v) < 0)
                *ok = false;
}

static void push(json_t *a, json_t *v, bool *ok)
{
        if (!v || json_array_append_new(a, v) < 0)
                *ok = false;
}

static json_t *kvs_json(const struct kv *kv, size_t n, bool *ok)
{
        json_t *o = json_object();

        for (size_t i = 0; o && i < n; i++)
                set(o, kv[i].key, json_string(kv[i].value), ok);
        return o;
}

static json_t *spec_lists_json(const struct session_manifest *m, json_t *s, bool *ok)
{
        json_t *a;

        set(s, "egress", a = json_array(), ok);
        for (size_t i = 0; a && i < m->n_egress; i++)
                push(a, json_string(m->egress[i].raw), ok);
        set(s, "ports", a = json_array(), ok);
        for (size_t i = 0; a && i < m->n_ports; i++)
                push(a, json_integer(m->ports[i]), ok);
        if (m->after_start || m->run_image_command) {
                json_t *l = json_object();

                set(s, "lifecycle", l, ok);
                if (m->after_start)
                        set(l ? l : s, "afterStart", a = json_array(), ok);
                for (size_t i = 0; m->after_start && a && m->after_start[i]; i++)
                        push(a, json_string(m->after_start[i]), ok);
                if (m->run_image_command)
                        set(l ? l : s, "runImageCommand", json_true(), ok);
        }
        set(s, "checkpoints", a = json_array(), ok);
        for (size_t i = 0; a && i < m->n_checkpoints; i++)
                push(a, json_pack("{s:s}", "name", m->checkpoints[i].name), ok);
        if (m->has_forks)
                set(s, "forks",
                    json_pack("{s:s?,s:I}", "from", m->forks_from, "count",
                              (json_int_t)m->forks_count),
                    ok);
        /* Only when set, so manifests without it render as before. */
        if (m->n_node_selector)
                set(s, "nodeSelector", kvs_json(m->node_selector, m->n_node_selector, ok), ok);
        if (m->n_secrets)
                set(s, "secrets", manifest_secrets_json(m->secrets, m->n_secrets), ok);
        return s;
}

json_t *session_manifest_to_json(const struct session_manifest *m)
{
        json_t *j = json_object(), *md = json_object(), *s = json_object();
        bool ok = j && md && s;

        if (!ok) {
                json_decref(j);
                json_decref(md);
                json_decref(s);
                return NULL;
        }
        set(j, "apiVersion", json_string(MANIFEST_API_VERSION), &ok);
        set(j, "kind", json_string("Session"), &ok);
        set(j, "metadata", md, &ok);
        set(md, "name", json_string(m->name), &ok);
        set(md, "namespace", json_string(m->namespace), &ok);
        set(md, "labels", kvs_json(m->labels, m->n_labels, &ok), &ok);
        if (m->n_annotations) /* only when set, so manifests without them render as before */
                set(md, "annotations", kvs_json(m->annotations, m->n_annotations, &ok), &ok);
        set(j, "spec", s, &ok);
        set(s, "sizeClass", json_string(m->size_class), &ok);
        set(s, "image", json_string(m->image), &ok);
        set(s, "state", json_string(session_state_to_string(m->state)), &ok);
        set(s, "restartPolicy", json_string(restart_policy_to_string(m->restart_policy)), &ok);
        set(s, "env", kvs_json(m->env, m->n_env, &ok), &ok);
        spec_lists_json(m, s, &ok);
        if (!ok) {
                json_decref(j);
                return NULL;
        }
        return j;
}
