/* SPDX-License-Identifier: MIT */
/* Cluster mode of forkletd: node registration with a lease and the sync of assigned sessions
 * (desired state in, status out); the etcd key layout and the node status document are in
 * core/core.h. Standalone forkletd (no controlPlane.etcd) never touches any of this. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct json_t json_t; /* jansson */
struct agent_daemon;
struct node_config;
struct session_manifest;

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
