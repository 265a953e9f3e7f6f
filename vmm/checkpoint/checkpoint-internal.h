/* SPDX-License-Identifier: MIT */
/* Inside vmm/checkpoint/ only: what its stop-and-copy and live paths share. */
#pragma once

#include "common/error.h"

struct qmp_client;

/* Hands path to QEMU (getfd, opened for writing with "migrate", reading otherwise) and starts
 * command ("migrate" or "migrate-incoming") on it; does not wait for the end. 0 or -errno. */
int vmm_migrate_start_fd(struct qmp_client *qmp, const char *command, const char *path,
                         unsigned timeout_ms, struct fk_error *err);
