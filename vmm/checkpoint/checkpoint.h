/* SPDX-License-Identifier: MIT */
/* fk_vmm_checkpoint: the QEMU side of the fork engine over a VM's QMP client: stop-and-copy
 * checkpoints (device state, sparse copy of the RAM file) and their load, migration streams to
 * and from a file, live checkpoints (precopy, background snapshot). Above fk_vmm. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct qmp_client;
typedef struct json_t json_t; /* jansson */

/* ---- checkpoints (fork engine) --------------------------------------------------------- */

struct vmm_checkpoint_stats {
        uint64_t pause_ns;    /* guest paused from stop to cont */
        uint64_t state_bytes; /* device state file */
        uint64_t ram_bytes;   /* data extents of RAM copied (touched RAM) */
};

/* cont of a VM stopped for a migration that completed: QEMU (>= 4.0) refuses it ("Migration
 * is not finalized yet") until its migration thread has left finish-migrate, a moment after
 * query-migrate or the MIGRATION event said completed, so it is sent again every 0.1 ms then, for
 * timeout_ms at most. refused and last_refused_ns (each may be NULL, written as they happen):
 * how many QEMU refused, and when the last one was. Any other error at once. */
int vmm_cont_migrated(struct qmp_client *qmp, unsigned timeout_ms, unsigned *refused,
                      uint64_t *last_refused_ns, struct fk_error *err);
/* Checkpoints a VM whose RAM is the share=on file mem_path into the existing directory dir:
 * QMP stop, device state with x-ignore-shared to dir/state, sparse copy of the RAM file to
 * dir/ram, cont. The VM is resumed also when saving fails (a failed checkpoint leaves the session
 * running); partial files in dir are the caller's to remove. Does not log. */
int vmm_checkpoint_save(struct qmp_client *qmp, const char *mem_path, const char *dir,
                        unsigned timeout_ms, struct vmm_checkpoint_stats *ret,
                        struct fk_error *err);
/* Loads dir/state into a QEMU started with incoming_defer whose RAM is dir/ram mapped
 * share=off (copy-on-write), then resumes it when resume is true. The copy does not announce
 * its NICs (announce-rounds 0), but for one round when its virtio-net offers the guest announce
 * (vmm_config.guest_announce: QEMU 7.2 would crash at the guest's next NIC reset). */
int vmm_checkpoint_load(struct qmp_client *qmp, const char *dir, bool resume, bool guest_announce,
                        unsigned timeout_ms, struct fk_error *err);
enum {
        VMM_COPY_NO_OFFLOAD = 1 << 0, /* read/write only, no copy_file_range (tests) */
};

struct vmm_copy_stats {
        uint64_t data_bytes;    /* in the source's data extents */
        uint64_t written_bytes; /* written to dst (the fallback skips all-zero blocks) */
        bool fallback;          /* copy_file_range refused (EXDEV...): read/write did it */
};

/* Copies src (not a symlink) to a new file dst (O_EXCL, 0600) keeping holes: each data extent
 * (SEEK_DATA/SEEK_HOLE) through copy_file_range() and, once that is refused in this call (EXDEV
 * between filesystems of different types since Linux 5.19, ENOSYS, EOPNOTSUPP, EINVAL), with
 * pread/pwrite that skips all-zero blocks for the rest. On failure dst is removed. Returns 0
 * or -errno from the failing call (-ENOSPC: dst's filesystem is full); ret may be NULL. Does
 * not log. */
int vmm_sparse_copy(const char *src, const char *dst, unsigned flags, struct vmm_copy_stats *ret);
/* Migration to / from a file for a paused VM (fork materialize): save writes the stream to
 * path (ignore_shared: skip share=on RAM; off: the full RAM goes into the stream); load feeds
 * path into a QEMU started with incoming_defer (the capability must match the save). Both
 * wait for completion; the VM stays paused. Path must not contain a single quote. */
int vmm_migrate_save_file(struct qmp_client *qmp, const char *path, bool ignore_shared,
                          unsigned timeout_ms, struct fk_error *err);
int vmm_migrate_load_file(struct qmp_client *qmp, const char *path, bool ignore_shared,
                          unsigned timeout_ms, struct fk_error *err);

/* ---- live checkpoints (checkpoint-live.c) ----------------------------------------------- */

/* Called while the guest is stopped at the switch-over (block layer still active): freeze the
 * disk here so it matches the saved RAM. A failure aborts the checkpoint (the guest runs on). */
typedef int (*vmm_switchover_fn)(void *userdata, struct fk_error *err);

struct vmm_live_opts {
        unsigned converge_ms; /* precopy this long, then stop the guest to finish */
        unsigned timeout_ms;  /* the whole save */
        /* a QMP command to run first at the switch-over (the disk freeze), e.g.
         * blockdev-snapshot; precopy sends it ahead but for its last bytes (qmp_arm), so the
         * pause does not wait for QEMU to read it; NULL: none. switch_args: borrowed. */
        const char *switch_command;
        json_t *switch_args;
        vmm_switchover_fn switchover; /* after switch_command; NULL: nothing */
        /* a second QMP connection to the same QEMU (borrowed; NULL: none): with a
         * switch_command, migrate-continue is armed on it too, so both are parsed ahead (one
         * monitor parses one command at a time) */
        struct qmp_client *continue_qmp;
        /* precopy: called once the stream is complete, the guest still stopped, before cont
         * (bench-precopy-ram compares the guest's RAM with the stream here); NULL: none */
        vmm_switchover_fn completed;
        void *userdata;
        /* background-snapshot (userfaultfd write-protect: the RAM of the instant of the stop)
         * instead of precopy with pause-before-switchover (on QEMU 7.2 under TCG a precopy
         * stream of a guest writing memory misses pages written just before the stop when the
         * host is busy: docs/fork-engine.md; its global state says "running": load it into a
         * QEMU started with start_paused) */
        bool background;
        /* precopy: poll query-migrate and query-status for the switch-over, the completion and
         * postmigrate instead of waiting for QEMU's MIGRATION events (bench-live-pause's
         * baseline); poll_us: how often the switch-over is looked for then, 0: 1000 */
        bool poll;
        unsigned poll_us;
        /* precopy, events: no pause before the switch-over; the disk freeze (switch_command,
         * switchover) runs once the migration completed, the guest still stopped and QEMU's
         * block layer inactive, then cont. The same instant for RAM and disk, without QEMU
         * 7.2's 1 ms wait in migration_maybe_pause and migrate-continue's round trip. */
        bool switch_after;
};

/* The precopy pause, step by step (each from the end of the one before; the first from the
 * guest's stop, stop_ns): what vmm_live_stats.step_ns holds. */
enum vmm_live_step {
        VMM_LIVE_SEEN,        /* until QEMU said pre-switchover (event, or a query-migrate) */
        VMM_LIVE_SWITCH,      /* o->switchover (the disk freeze) */
        VMM_LIVE_CONTINUE,    /* migrate-continue's reply */
        VMM_LIVE_COMPLETED,   /* until QEMU said completed (it writes the devices); with
                               * switch_after the first step (seen and continue are 0) */
        VMM_LIVE_POSTMIGRATE, /* polled: until query-status said postmigrate; events: the conts
                               * QEMU refused before it left finish-migrate */
        VMM_LIVE_CALLBACK,    /* o->completed */
        VMM_LIVE_CONT,        /* cont's reply (QEMU re-activates the block layer) */
        _VMM_LIVE_STEP_MAX,
};
const char *vmm_live_step_to_string(enum vmm_live_step s);

struct vmm_live_stats {
        uint64_t
                step_ns[_VMM_LIVE_STEP_MAX]; /* precopy: the pause by step; their sum is pause_ns */
        unsigned polls;                      /* precopy: QMP queries while the guest was stopped */
        uint64_t downtime_ms;                /* QEMU's query-migrate "downtime" */
        /* the guest stopped (QEMU's STOP event; polled without it: the last reply that saw it
         * run), monotonic */
        uint64_t stop_ns;
        uint64_t pause_ns;     /* stop_ns .. cont returned */
        uint64_t total_ns;     /* migrate .. cont */
        uint64_t stream_bytes; /* the stream file (touched RAM + device state) */
        bool forced;           /* did not converge in converge_ms: stopped to finish */
};

/* Saves a running VM into the stream file (created 0600, replaced), x-ignore-shared off. With
 * o->background: stop, o->switchover, migrate with background-snapshot (QEMU resumes the guest
 * once its RAM is write-protected), wait for completion. Else precopy: the guest runs while RAM
 * is copied and stops for the last pages; with pause-before-switchover o->switchover runs, the
 * device state is written, then cont; with o->switch_after the last pages and the device state
 * are written first, then o->switchover, then cont. The stream holds RAM and devices (load it
 * with vmm_migrate_load_file, ignore_shared false). -EOPNOTSUPP (err says why) when QEMU
 * refused before the migration started (not running, a capability or the migration refused;
 * with background the guest was stopped briefly and o->switchover may have run): take the
 * stop-and-copy path. On any other failure the migration is cancelled (or, completed, left),
 * the guest left running and the stream removed. Does not log. */
int vmm_checkpoint_live(struct qmp_client *qmp, const char *stream, const struct vmm_live_opts *o,
                        struct vmm_live_stats *ret, struct fk_error *err);
/* What a killed forkletd left of a live checkpoint in a QEMU it adopts: a migration still
 * running (a precopy source stopped at the switch-over waits there for ever, and refuses cont)
 * is cancelled, which restarts a guest QEMU stopped for it, and the live capabilities go off (a
 * later stop-and-copy save would wait at a switch-over); after a cancel the parameters are a
 * live checkpoint's again (an interrupted vmm_dirty_log_reset throttled the bandwidth). 1: a
 * migration was cancelled, 0: none ran, -errno with err. Does not log. */
int vmm_live_abandon(struct qmp_client *qmp, unsigned timeout_ms, struct fk_error *err);
/* Clears QEMU's migration dirty bitmap (dirty-log.c): a migration into /dev/null, throttled so
 * it reads no RAM page, cancelled once its setup synced the bitmap; max-bandwidth put back. For a
 * VM with the RAM tail, once it booted: its first live checkpoint then finds only the pages written
 * since dirty, not all of them (each costs a TLB scan under QEMU's big lock). The caller must not
 * checkpoint meanwhile. *ret_setup_ms (may be NULL): QEMU's setup-time of it, nearly all the
 * sync's. 0 or -errno with err; the migration is cancelled either way. */
int vmm_dirty_log_reset(struct qmp_client *qmp, unsigned timeout_ms, unsigned *ret_setup_ms,
                        struct fk_error *err);
