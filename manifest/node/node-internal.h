/* SPDX-License-Identifier: MIT */
/* Inside fk_manifest_node only: defaults, the sections decoded in their own files. */
#pragma once

#include "manifest/node/node.h"

/* Built-in NodeConfig defaults into a zeroed struct (fields that depend on others: see
 * node_config_finish). */
int node_config_init_defaults(struct node_config *c);
int node_config_finish(struct node_config *c);
/* The api section's rules across fields (manifest-node-api.c): TLS for a non-loopback listen,
 * a token for any listen, cert and key together, api.url; fills the default api.url. api is
 * the api map (for positions). Reports into c. */
void node_config_check_api(struct mctx *c, const struct mnode *api, struct node_config *cfg);
/* The health and diskPressure sections (manifest-node-health.c); v is the section's map. */
void node_config_decode_health(struct mctx *c, const struct mnode *v, struct node_config *cfg);
void node_config_decode_disk_pressure(struct mctx *c, const struct mnode *v,
                                      struct node_config *cfg);
/* The memoryGiveBack section (manifest-node-memory.c); v is the section's map. */
void node_config_decode_give_back(struct mctx *c, const struct mnode *v, struct node_config *cfg);
/* The registries section (manifest-node-registries.c) and freeing it. */
void node_config_decode_registries(struct mctx *c, const struct mnode *v, const char *base_dir,
                                   struct node_config *cfg);
void node_config_registries_free(struct node_config *c);
/* Without an images section: minimal plus every image directory under <stateDir>/images. */
int node_config_default_images(struct node_config *c);
