/* SPDX-License-Identifier: MIT */
/* Cluster mode of forkletd: the etcd key layout, node capacity, node registration with a lease
 * and the sync of assigned sessions (desired state in, status out). Standalone forkletd (no
 * controlPlane.etcd) never touches any of this. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "common/error.h"

typedef struct json_t json_t; /* jansson */
struct agent_daemon;
struct node_config;
struct session_manifest;

/* ---- key layout (pure) -------------------------------------------------------------------
 * Under the prefix P (controlPlane.prefix, default /forklet):
 *   P/nodes/NODE/status             node status JSON (labels, api, capacity, ...), no lease
 *   P/nodes/NODE/lease              exists while the node's lease lives (Ready)
 *   P/sessions/NS/NAME/spec         the Session manifest JSON (forklet --etcd apply)
 *   P/sessions/NS/NAME/node         the node it is placed on (scheduler, create-only CAS)
 *   P/sessions/NS/NAME/status       status JSON (the node; the scheduler for Pending/Lost)
 */
enum cluster_key_kind {
        CLUSTER_KEY_OTHER,
        CLUSTER_KEY_NODE_STATUS,
        CLUSTER_KEY_NODE_LEASE,
        CLUSTER_KEY_SESSION_SPEC,
        CLUSTER_KEY_SESSION_NODE,
        CLUSTER_KEY_SESSION_STATUS,
};

#define CLUSTER_NAME_MAX 64

struct cluster_key {
        enum cluster_key_kind kind;
        char ns[CLUSTER_NAME_MAX];   /* sessions only */
        char name[CLUSTER_NAME_MAX]; /* node or session name */
};

/* Classifies key (which must start with prefix, no trailing '/'); anything else is OTHER. */
void cluster_key_parse(const char *prefix, const char *key, struct cluster_key *ret);
/* P/sessions/NS/NAME/<leaf> (leaf "" gives the directory with a trailing '/'); caller frees. */
int cluster_session_key(const char *prefix, const char *ns, const char *name, const char *leaf,
                        char **ret);
/* P/nodes/NODE/<leaf>; caller frees. */
int cluster_node_key(const char *prefix, const char *node, const char *leaf, char **ret);

/* ---- node capacity ------------------------------------------------------------------------ */

struct cluster_usage {
        unsigned sessions;       /* every session on the node with a manifest or a VM */
        uint64_t memory_mib;     /* sum of their size classes' RAM */
        unsigned local_sessions; /* of which not from the cluster (manifest dir, API) */
        uint64_t local_memory_mib;
};

/* What the node reports: its admission's own numbers (agent/capacity.c, agent/admission.c),
 * so the scheduler places by the same arithmetic the node admits by. */
struct cluster_node_report {
        struct agent_node_resources node; /* host, reserve, overcommit, maxSessions */
        struct agent_capacity all;        /* allocatable; used by every admitted session */
        struct agent_capacity local;      /* used by admitted sessions not from the cluster */
        struct cluster_usage use;
        /* published under api (each NULL: left out); borrowed */
        const char *api_pin; /* "sha256//..." of api.tlsCert's public key */
        const char *host_id; /* cluster_host_id() */
};

#define CLUSTER_HOST_ID_SIZE 33 /* 32 hex digits + NUL */
/* This host's id as nodes publish it in api.hostID (agent/cluster-host.c): the first 32 hex
 * digits of a SHA-256 over /etc/machine-id (else the hostname). 0 or -errno. */
int cluster_host_id(char out[CLUSTER_HOST_ID_SIZE]);

/* The node status document (new reference, NULL on ENOMEM): nodeName, labels, api, capacity
 * (allocatable totals and admission's parameters; per size class its charge and how many fit
 * an empty node), allocatable (what admission still takes; per size class how many fit now),
 * usage (sessions and RAM by source; admitted sessions and their charges), heartbeatTime.
 * Per-class charges come from agent_class_charge(cfg, ...). Pure. */
json_t *cluster_node_status_json(const struct node_config *cfg,
                                 const struct cluster_node_report *rep, uint64_t now_real_ns);

/* ---- the agent side ----------------------------------------------------------------------- */

struct cluster_agent;

struct cluster_agent_options {
        unsigned lease_ttl_s;       /* default 10 */
        unsigned heartbeat_s;       /* node status rewrite interval; default 5 */
        unsigned status_min_gap_ms; /* per session, between status writes; default 1000 */
};

/* Connects to cfg->etcd, registers the node (lease + status) and starts the threads that keep
 * the lease alive, mirror this node's assigned sessions into d and write their status back.
 * Works on while etcd is unreachable (retries; d keeps its last desired state). d and cfg are
 * borrowed and must outlive it; opts may be NULL. Logs what it does. 0 or -errno. */
int cluster_agent_start(struct agent_daemon *d, const struct node_config *cfg,
                        const struct cluster_agent_options *opts, struct cluster_agent **ret);
/* Stops the threads; the lease is left to expire (a restart within the TTL keeps the node
 * Ready and its VMs are adopted). Accepts NULL; returns NULL. */
struct cluster_agent *cluster_agent_stop(struct cluster_agent *a);

/* ---- what the daemon exposes to the sync (agent/daemon-cluster.c) --------------------------- */

/* Makes the daemon's cluster sessions exactly v[0..n) (manifests taken over, set to NULL in v
 * when consumed): new ones are created, changed ones updated, missing ones deleted. A name
 * already used by a manifest-dir or API session is left alone and ret_conflict[i] set (the
 * caller reports it in status). Persisted like API sessions so a restart adopts their VMs.
 * Takes the daemon lock; does not log per session unless something changes. */
int agent_daemon_sync_cluster(struct agent_daemon *d, struct session_manifest **v, size_t n,
                              bool *ret_conflict);
/* {"NS/NAME": status} for every cluster session with a manifest (new reference). */
int agent_daemon_cluster_status(struct agent_daemon *d, json_t **ret);
/* The node's capacity as its admission sees it and its usage by source, for the node status. */
void agent_daemon_node_report(struct agent_daemon *d, struct cluster_node_report *ret);
/* Whether the cluster session NS/NAME waits Pending for room it never got on this node (an
 * admission rejected it and it never booted here, so it can be placed elsewhere). */
bool agent_daemon_cluster_unadmitted(struct agent_daemon *d, const char *ns, const char *name);
