/* SPDX-License-Identifier: MIT */
/* fk_agent_net: a session's network as the daemon sees it (agent_net_ops: netns, tap, egress,
 * resolver) and the real one over net/. */
#pragma once

#include <stddef.h>

#include "common/error.h"

typedef struct json_t json_t; /* jansson */
struct node_config;
struct session_manifest;
struct agent_boot_params;

/* Session networking the executor calls (netns, tap, egress, resolver). A network is an opaque
 * handle owned by the session. Without ops (unit tests) sessions boot without a network. */
struct agent_net_ops {
        /* Sets up (or re-attaches to) the session's network with m's egress (m may be NULL:
         * open). Cleans up what it made on failure. */
        int (*setup)(const struct node_config *cfg, const char *key,
                     const struct session_manifest *m, void **ret, struct fk_error *err);
        /* Replaces the egress policy live (atomic; resolver names and nft sets together). */
        int (*update)(void *net, const struct session_manifest *m, struct fk_error *err);
        /* Adds the pre-exec hook (enter the netns), tap, MAC and kernel args to p; the
         * pointers stay valid while net lives. */
        void (*boot_params)(void *net, struct agent_boot_params *p);
        /* status.network (new reference). */
        json_t *(*status)(void *net);
        /* The session netns fd (borrowed, O_CLOEXEC). */
        int (*netns_fd)(void *net);
        /* Removes the kernel state (netns, links, tables, lease) and frees net. */
        int (*teardown)(void *net, struct fk_error *err);
        /* Stops the resolver and frees net; the kernel state stays (forkletd restart). */
        void (*free)(void *net);
        /* Removes networks of this node whose session key is not in keep_keys. Returns the
         * number removed. */
        int (*cleanup)(const struct node_config *cfg, char *const *keep_keys, struct fk_error *err);
};
/* The real network over net/ (root). */
extern const struct agent_net_ops agent_net_ops_real;

/* The netns name of a session of this node: "fk<hash(stateDir)>-<key>" (shortened with a hash
 * when too long), and the prefix alone. */
int agent_net_name(const struct node_config *cfg, const char *key, char *buf, size_t size);
void agent_net_prefix(const struct node_config *cfg, char *buf, size_t size);
/* Re-attaches networks of adopted VMs and removes orphans (before the thread starts). */
