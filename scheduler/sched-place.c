/* SPDX-License-Identifier: MIT */
/* The placement decision: filter nodes (ready, size class, selector, capacity) and score them
 * by policy. Pure. */
#include "scheduler/sched.h"
#include "manifest/manifest.h"

#define MIB ((uint64_t)1024 * 1024)

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

const char *sched_policy_to_string(enum sched_policy p)
{
        static const char *const t[] = {"spread", "pack"};

        return p >= 0 && p < _SCHED_POLICY_MAX ? t[p] : NULL;
}

enum sched_policy sched_policy_from_string(const char *s)
{
        for (int i = 0; i < _SCHED_POLICY_MAX; i++)
                if (s && strcmp(s, sched_policy_to_string((enum sched_policy)i)) == 0)
                        return (enum sched_policy)i;
        return _SCHED_POLICY_INVALID;
}

static const struct sched_class *find_class(const struct sched_node *n, const char *name)
{
        for (size_t i = 0; i < n->n_classes; i++)
                if (strcmp(n->classes[i].name, name) == 0)
                        return &n->classes[i];
        return NULL;
}

static bool selector_matches(const struct sched_node *n, const struct sched_request *r)
{
        for (size_t i = 0; i < r->n_selector; i++) {
                bool hit = false;

                for (size_t k = 0; k < n->n_labels && !hit; k++)
                        hit = !strcmp(n->labels[k].key, r->selector[i].key) &&
                              !strcmp(n->labels[k].value, r->selector[i].value);
                if (!hit)
                        return false;
        }
        return true;
}

enum reject { REJ_NOT_READY, REJ_CLASS, REJ_SELECTOR, REJ_SESSIONS, REJ_MEMORY, REJ_CPU, _REJ_MAX };

int64_t sched_node_fit(const struct sched_node *n, const struct sched_class *c,
                       enum core_resource *ret_short)
{
        /* The node's capacity as its admission computes it, from what it published (exact
         * bytes) plus the class charges of what this scheduler placed there. */
        struct core_capacity cap = {
                .allocatable = {.vcpus = n->vcpus ? n->vcpus : UINT_MAX,
                                .memory_bytes = n->memory_bytes},
                .used = {.vcpus = n->local_vcpus + n->used_vcpus,
                         .memory_bytes = n->local_memory_bytes + n->used_memory_mib * MIB},
                .allocatable_sessions = n->max_sessions,
                .used_sessions = n->local_sessions + n->used_sessions,
        };
        struct core_charge want = {.vcpus = n->vcpus ? c->vcpus : 0,
                                   .memory_bytes = c->charge_mib * MIB};

        if (!n->max_sessions) { /* admission reads 0 as unlimited; a node never publishes 0 */
                if (ret_short)
                        *ret_short = CORE_RESOURCE_SESSIONS;
                return -ENOSPC;
        }
        if (core_capacity_admit(&cap, &want, ret_short) < 0)
                return -ENOSPC;
        return (int64_t)((cap.allocatable.memory_bytes - cap.used.memory_bytes -
                          want.memory_bytes) /
                         MIB);
}

/* Free memory after placing, or -1 with *why when the node does not fit. */
static int64_t fit(const struct sched_node *n, const struct sched_request *r, enum reject *why)
{
        static const enum reject by_resource[_CORE_RESOURCE_MAX] = {
                [CORE_RESOURCE_MEMORY] = REJ_MEMORY,
                [CORE_RESOURCE_CPU] = REJ_CPU,
                [CORE_RESOURCE_SESSIONS] = REJ_SESSIONS,
        };
        enum core_resource short_ = CORE_RESOURCE_MEMORY;
        const struct sched_class *c;
        int64_t f;

        if (!n->ready || !n->has_status)
                return *why = REJ_NOT_READY, -1;
        c = find_class(n, r->size_class);
        if (!c)
                return *why = REJ_CLASS, -1;
        if (!selector_matches(n, r))
                return *why = REJ_SELECTOR, -1;
        f = sched_node_fit(n, c, &short_);
        if (f < 0)
                return *why = by_resource[short_], -1;
        return f;
}

static bool better(const struct sched_node *a, int64_t free_a, const struct sched_node *b,
                   int64_t free_b, enum sched_policy p)
{
        unsigned sa = a->local_sessions + a->used_sessions;
        unsigned sb = b->local_sessions + b->used_sessions;

        if (free_a != free_b)
                return p == SCHED_POLICY_SPREAD ? free_a > free_b : free_a < free_b;
        if (sa != sb)
                return p == SCHED_POLICY_SPREAD ? sa < sb : sa > sb;
        return strcmp(a->name, b->name) < 0;
}

int sched_place(const struct sched_node *nodes, size_t n, const struct sched_request *req,
                enum sched_policy policy, size_t *ret_index, char *why, size_t why_size)
{
        static const char *const what[] = {"not ready",         "no size class",
                                           "selector mismatch", "too many sessions",
                                           "not enough memory", "not enough vCPUs"};
        unsigned rejected[_REJ_MAX] = {0};
        int64_t best_free = -1;
        size_t best = n;
        int len;

        for (size_t i = 0; i < n; i++) {
                enum reject r = REJ_NOT_READY;
                int64_t f = fit(&nodes[i], req, &r);

                if (f < 0)
                        rejected[r]++;
                else if (best == n || better(&nodes[i], f, &nodes[best], best_free, policy)) {
                        best = i;
                        best_free = f;
                }
        }
        if (best < n) {
                *ret_index = best;
                return 0;
        }
        len = snprintf(why, why_size, "0/%zu nodes fit size class \"%s\"", n, req->size_class);
        for (int r = 0; r < _REJ_MAX && len >= 0 && (size_t)len < why_size; r++)
                if (rejected[r])
                        len += snprintf(why + len, why_size - (size_t)len, "; %u %s", rejected[r],
                                        what[r]);
        return -ENOSPC;
}
