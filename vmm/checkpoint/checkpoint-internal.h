/* SPDX-License-Identifier: MIT */
/* Inside vmm/checkpoint/ only: what its stop-and-copy and live paths share. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "vmm/checkpoint/checkpoint.h"

struct qmp_client;

/* Hands path to QEMU (getfd, opened for writing with "migrate", reading otherwise) and starts
 * command ("migrate" or "migrate-incoming") on it; does not wait for the end. 0 or -errno. */
int vmm_migrate_start_fd(struct qmp_client *qmp, const char *command, const char *path,
                         unsigned timeout_ms, struct fk_error *err);

/* ---- the live checkpoint's pieces (checkpoint-live.c, checkpoint-live-events.c) -------- */

/* query-migrate's status into buf (-EIO with QEMU's reason when "failed"); *ret_info keeps the
 * reply (new reference) when asked. */
int vmm_live_migrate_status(struct qmp_client *qmp, unsigned timeout_ms, char *buf, size_t size,
                            json_t **ret_info, struct fk_error *err);
/* The live capabilities on (bg: background-snapshot, else events and, with pause,
 * pause-before-switchover) or all off. */
int vmm_live_set_caps(struct qmp_client *qmp, bool on, bool bg, bool pause, unsigned timeout_ms,
                      struct fk_error *err);
void vmm_live_sleep_ns(uint64_t ns);
/* Ends step s of the pause: its time since *mark, and *mark moves on. */
void vmm_live_step_end(struct vmm_live_stats *st, enum vmm_live_step s, uint64_t *mark);
/* When the guest stopped, by QEMU's queued STOP event (its timestamp on the monotonic clock);
 * fallback when there is none or it is later than fallback. */
uint64_t vmm_live_stopped_at(struct qmp_client *qmp, uint64_t fallback);
/* The precopy conversation by QEMU's events, the migration started: the switch-over, the
 * switch, the completion and cont (pause and steps into *st). */
int vmm_live_run_events(struct qmp_client *qmp, const struct vmm_live_opts *o,
                        struct vmm_live_stats *st, struct fk_error *err);
/* Completes what the event-driven conversation armed, unrun, on both connections. */
void vmm_live_disarm(struct qmp_client *qmp, const struct vmm_live_opts *o, unsigned timeout_ms);
