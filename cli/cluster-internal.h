/* SPDX-License-Identifier: MIT */
/* Inside the CLI's cluster mode only: the etcd connection and reading sessions and nodes. */
#pragma once

#include "cli/cli.h"

struct etcd_client;

struct cli_cluster {
        struct etcd_client *etcd; /* owned */
        const char *prefix;       /* borrowed */
        const char *ns;           /* borrowed */
};

/* Connects (no I/O yet) from c->etcd ("URL[,URL...]"); prints and returns -errno on error. */
int cli_cluster_open(const struct cli *c, struct cli_cluster *ret);
void cli_cluster_close(struct cli_cluster *k);
/* Every session (with a spec) as Session JSON with status (status.phase Pending when none,
 * status.nodeName when placed); a JSON object "NS/NAME" -> Session. New reference. */
int cli_cluster_sessions(struct cli_cluster *k, json_t **ret, struct fk_error *err);
/* Every node: an object NAME -> node status + "ready" (lease alive). New reference. */
int cli_cluster_nodes(struct cli_cluster *k, json_t **ret, struct fk_error *err);

int cli_cluster_apply(struct cli_cluster *k, int argc, char **argv);
int cli_cluster_get(struct cli_cluster *k, int argc, char **argv);
int cli_cluster_delete(struct cli_cluster *k, int argc, char **argv);
int cli_cluster_wait(struct cli_cluster *k, int argc, char **argv);
