/* SPDX-License-Identifier: MIT */
/* forklet-scheduler: the cluster state it mirrors from etcd, the pure placement function
 * (size-class fit, nodeSelector, spread|pack) and the daemon loop that places unplaced
 * sessions with a create-only CAS and reports Unschedulable and Lost. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cluster/cluster.h"
#include "core/core.h"

struct kv;
struct etcd_client;

enum sched_policy {
        SCHED_POLICY_SPREAD, /* the node with the most free memory (then fewest sessions) */
        SCHED_POLICY_PACK,   /* the fullest node that still fits */
        _SCHED_POLICY_MAX,
        _SCHED_POLICY_INVALID = -1,
};
const char *sched_policy_to_string(enum sched_policy p);
enum sched_policy sched_policy_from_string(const char *s);

struct sched_class {
        char *name;          /* owned */
        unsigned memory_mib; /* guest RAM */
        unsigned vcpus;
        uint64_t charge_mib; /* what the node's admission charges one (chargeMiB; else RAM) */
};

/* A node as its status document and lease say; used_* are what the scheduler accounts. */
struct sched_node {
        char name[CORE_CLUSTER_NAME_MAX];
        bool has_status;   /* P/nodes/NODE/status seen */
        bool ready;        /* P/nodes/NODE/lease exists */
        struct kv *labels; /* owned array */
        size_t n_labels;
        struct sched_class *classes; /* owned array */
        size_t n_classes;
        unsigned max_sessions;
        uint64_t memory_mib;   /* allocatable to sessions (MemTotal - reserve) */
        uint64_t memory_bytes; /* the same exactly (memoryBytes; else memory_mib MiB) */
        unsigned vcpus;        /* allocatable vCPUs (with overcommit); 0: not published, no check */
        /* held by sessions not from the cluster, as the node's admission charges them */
        unsigned local_sessions;
        uint64_t local_memory_mib;
        uint64_t local_memory_bytes; /* exactly (localChargedBytes; else local_memory_mib MiB) */
        unsigned local_vcpus;
        unsigned used_sessions; /* cluster sessions placed on it (accounted, class charges) */
        uint64_t used_memory_mib;
        unsigned used_vcpus;
};

struct sched_request {
        const char *size_class;
        const struct kv *selector; /* borrowed */
        size_t n_selector;
};

/* Whether one more session of class c fits node n next to its local and accounted usage, by
 * the node's own admission check (core_capacity_admit on the published numbers). Returns the
 * free memory (MiB) left after it, or -ENOSPC with *ret_short (may be NULL). Pure. */
int64_t sched_node_fit(const struct sched_node *n, const struct sched_class *c,
                       enum core_resource *ret_short);

/* Picks a node for req among nodes[0..n): ready, has the size class, labels match every
 * selector entry, sessions, memory and vCPUs fit after local and accounted usage
 * (sched_node_fit); policy breaks the tie (then the name, so the result is deterministic).
 * Pure. Returns 0 with *ret_index, or -ENOSPC with why saying how many nodes were rejected for
 * what. */
int sched_place(const struct sched_node *nodes, size_t n, const struct sched_request *req,
                enum sched_policy policy, size_t *ret_index, char *why, size_t why_size);

/* A session under P/sessions/NS/NAME/. */
struct sched_session {
        char ns[CORE_CLUSTER_NAME_MAX];
        char name[CORE_CLUSTER_NAME_MAX];
        bool has_spec;
        int64_t spec_create_rev; /* placement order: oldest first */
        char *size_class;        /* owned; from spec.sizeClass (default small) */
        struct kv *selector;     /* owned array, spec.nodeSelector */
        size_t n_selector;
        char *node;   /* owned or NULL: unplaced */
        char *status; /* owned status text as seen, or NULL */
        char *phase;  /* owned status.phase or NULL */
};

struct sched_state {
        char *prefix; /* owned */
        struct sched_node *nodes;
        size_t n_nodes, alloc_nodes;
        struct sched_session *sessions;
        size_t n_sessions, alloc_sessions;
};

int sched_state_init(struct sched_state *st, const char *prefix);
void sched_state_done(struct sched_state *st);
/* Applies one key: value NULL for a delete; create_rev orders sessions. Keys outside the
 * layout are ignored. 0 or -ENOMEM. */
int sched_state_apply(struct sched_state *st, const char *key, const char *value,
                      int64_t create_rev);
/* Recomputes every node's used_* from the placed sessions. */
void sched_state_account(struct sched_state *st);
struct sched_node *sched_state_node(struct sched_state *st, const char *name);

/* ---- the daemon ---------------------------------------------------------------------------- */

struct sched_options {
        const char *const *endpoints; /* etcd, NULL-terminated */
        const char *prefix;
        enum sched_policy policy;
        const char *id; /* this instance, for logs */
};

struct sched_stats {
        unsigned placed;     /* CAS won */
        unsigned lost_races; /* CAS lost: another scheduler placed it first */
        unsigned lost;       /* sessions marked Lost */
};

/* Runs until *stop becomes true (checked at least every 250 ms). Logs what it does.
 * ret_stats (may be NULL) is filled on return. 0 or -errno on a setup failure. */
int sched_run(const struct sched_options *o, const volatile bool *stop, struct sched_stats *ret);
