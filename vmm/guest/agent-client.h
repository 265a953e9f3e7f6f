/* SPDX-License-Identifier: MIT */
/* Guest agent calls beyond the ones in vmm/vmm.h (files, identity after a fork, filesystem
 * freeze). Same rules: thread-safe, -errno returns, err filled on failure, no logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vmm/vmm.h"

/* Protocol version and agent version string the guest announced on this connection (NULL
 * before its HELLO). The string is owned by a and valid until the next reconnect. */
const char *vmm_agent_guest_version(struct vmm_agent *a);

/* Writes data to path in the guest (created with mode, truncated first), in chunks. */
int vmm_agent_write_file(struct vmm_agent *a, const char *path, const void *data, size_t size,
                         unsigned mode, unsigned timeout_ms, struct fk_error *err);
/* Reads the guest file path into a heap buffer (caller frees *ret); -EFBIG past max bytes. */
int vmm_agent_read_file(struct vmm_agent *a, const char *path, size_t max, void **ret,
                        size_t *ret_size, unsigned timeout_ms, struct fk_error *err);

/* After a fork or rollback: gives the guest its fork id (written to /run/forklet/fork-id),
 * a hostname (NULL/"": keep) and fresh entropy (credited, then the CRNG is reseeded). */
int vmm_agent_set_identity(struct vmm_agent *a, const char *fork_id, const char *hostname,
                           const void *entropy, size_t entropy_size, unsigned timeout_ms,
                           struct fk_error *err);

/* Sets the guest's CLOCK_REALTIME to realtime_ns (after a resume or a restore: the guest clock
 * does not advance while QEMU is stopped). Agents older than the message answer -ENOSYS. */
int vmm_agent_set_time(struct vmm_agent *a, uint64_t realtime_ns, unsigned timeout_ms,
                       struct fk_error *err);

/* FIFREEZE / FITHAW the filesystem mounted at path (e.g. "/workspace"). Idempotent. */
int vmm_agent_fsfreeze(struct vmm_agent *a, const char *path, bool freeze, unsigned timeout_ms,
                       struct fk_error *err);
