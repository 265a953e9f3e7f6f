/* SPDX-License-Identifier: MIT */
/* fk_core_cluster: what the nodes, the scheduler and forklet agree on in cluster mode: the etcd
 * key layout and the node status document (built from the node's admission numbers, so the
 * scheduler places by the arithmetic the node admits by). Pure; above fk_core. */
#pragma once

#include <stdint.h>

#include "core/core.h"

/* ---- cluster: etcd key layout -------------------------------------------------------------------
 * Under the prefix P (controlPlane.prefix, default /forklet):
 *   P/nodes/NODE/status             node status JSON (labels, api, capacity, ...), no lease
 *   P/nodes/NODE/lease              exists while the node's lease lives (Ready)
 *   P/sessions/NS/NAME/spec         the Session manifest JSON (forklet --etcd apply)
 *   P/sessions/NS/NAME/node         the node it is placed on (scheduler, create-only CAS)
 *   P/sessions/NS/NAME/status       status JSON (the node; the scheduler for Pending/Lost)
 */
enum core_cluster_key_kind {
        CORE_CLUSTER_KEY_OTHER,
        CORE_CLUSTER_KEY_NODE_STATUS,
        CORE_CLUSTER_KEY_NODE_LEASE,
        CORE_CLUSTER_KEY_SESSION_SPEC,
        CORE_CLUSTER_KEY_SESSION_NODE,
        CORE_CLUSTER_KEY_SESSION_STATUS,
};

#define CORE_CLUSTER_NAME_MAX 64

struct core_cluster_key {
        enum core_cluster_key_kind kind;
        char ns[CORE_CLUSTER_NAME_MAX];   /* sessions only */
        char name[CORE_CLUSTER_NAME_MAX]; /* node or session name */
};

/* Classifies key (which must start with prefix, no trailing '/'); anything else is OTHER. */
void core_cluster_key_parse(const char *prefix, const char *key, struct core_cluster_key *ret);
/* P/sessions/NS/NAME/<leaf> (leaf "" gives the directory with a trailing '/'); caller frees. */
int core_cluster_session_key(const char *prefix, const char *ns, const char *name, const char *leaf,
                             char **ret);
/* P/nodes/NODE/<leaf>; caller frees. */
int core_cluster_node_key(const char *prefix, const char *node, const char *leaf, char **ret);

/* ---- cluster: the node status document ----------------------------------------------------- */

struct core_cluster_usage {
        unsigned sessions;       /* every session on the node with a manifest or a VM */
        uint64_t memory_mib;     /* sum of their size classes' RAM */
        unsigned local_sessions; /* of which not from the cluster (manifest dir, API) */
        uint64_t local_memory_mib;
};

/* What the node reports: its admission's own numbers (core/capacity.c, agent/daemon/admission.c),
 * so the scheduler places by the same arithmetic the node admits by. */
struct core_cluster_node_report {
        struct core_node_resources node; /* host, reserve, overcommit, maxSessions */
        struct core_capacity all;        /* allocatable; used by every admitted session */
        struct core_capacity local;      /* used by admitted sessions not from the cluster */
        struct core_cluster_usage use;
        /* published under api (each NULL: left out); borrowed */
        const char *api_pin; /* "sha256//..." of api.tlsCert's public key */
        const char *host_id; /* fk_host_id() (common/util.h) */
};

/* The node status document (new reference, NULL on ENOMEM): nodeName, labels, api, capacity
 * (allocatable totals and admission's parameters; per size class its charge and how many fit
 * an empty node), allocatable (what admission still takes; per size class how many fit now),
 * usage (sessions and RAM by source; admitted sessions and their charges), heartbeatTime.
 * Per-class charges come from core_class_charge(cfg, ...). Pure. */
json_t *core_cluster_node_status_json(const struct node_config *cfg,
                                      const struct core_cluster_node_report *rep,
                                      uint64_t now_real_ns);
