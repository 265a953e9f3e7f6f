/* SPDX-License-Identifier: MIT */
/* fk_agent_obs: forkletd's operations record, below everything else in agent/: process-wide
 * metrics (counters, latency histograms, their Prometheus text), the hash-chained audit log,
 * the operation journal's files, sd_notify, and where one boot's time went (the boot timing
 * steps, their text and JSON). Depends on common/ only. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

struct agent_daemon;

/* Operations with a latency histogram (forklet_operation_duration_seconds{op}). */
enum agent_op {
        AGENT_OP_BOOT,
        AGENT_OP_EXEC,
        AGENT_OP_STOP,
        AGENT_OP_PAUSE,
        AGENT_OP_RESUME,
        AGENT_OP_CHECKPOINT,
        AGENT_OP_FORK,
        AGENT_OP_ROLLBACK,
        _AGENT_OP_MAX,
};
const char *agent_op_to_string(enum agent_op op);

/* Process-wide metrics, all thread-safe and callable from any module of forkletd; none logs.
 * observe: one finished operation and its wall time; failed: one failed operation. */
void agent_metrics_observe(enum agent_op op, double seconds);
void agent_metrics_failed(enum agent_op op);
/* Convenience: observe (r >= 0) or count a failure (r < 0) of op started at t0_mono_ns. */
void agent_metrics_op_done(enum agent_op op, int r, uint64_t t0_mono_ns);
void agent_metrics_reconcile_error(void);
void agent_metrics_add_forks(unsigned n);
/* Forks whose ledger lists inherited (copied, unchanged) secrets. */
void agent_metrics_add_forks_inherited_secrets(unsigned n);
void agent_metrics_add_checkpoint_bytes(uint64_t bytes);
/* Guest health: VM stops on a disk I/O error, guest OOM kills seen on the console, guests that
 * died (reason: "GuestPanicked", "GuestOOM", "GuestUnresponsive"; static string). */
void agent_metrics_add_io_error_stops(unsigned n);
void agent_metrics_add_guest_oom_kills(unsigned n);
void agent_metrics_guest_failure(const char *reason);
/* Per-session resource usage, read at scrape time through a hook (the cgroup wiring sets it;
 * none: no per-session series). fn returns 0 and fills ret, or -errno to skip the session.
 * key is "<namespace>.<name>". */
struct agent_session_stats {
        uint64_t cpu_usage_ns;
        uint64_t memory_bytes;
        uint64_t pids;
};
void agent_metrics_set_session_stats_hook(int (*fn)(void *userdata, const char *key,
                                                    struct agent_session_stats *ret),
                                          void *userdata);
/* Zeroes every counter and histogram (tests). */
void agent_metrics_reset(void);
/* The process-wide part of the exposition (histograms, counters, forkletd's own process) onto f;
 * the daemon renders its sessions first (agent_daemon_metrics_text). */
void agent_metrics_render(FILE *f);
/* One metric's # HELP and # TYPE lines. */
void agent_metrics_header(FILE *f, const char *name, const char *type, const char *help);
/* The per-session usage through the hook: 0 and *ret filled, -ENOENT without a hook or a
 * figure for key. */
int agent_metrics_session_stats(const char *key, struct agent_session_stats *ret);

/* The audit log: append-only JSON lines, each carrying "prev" (SHA-256 of the previous line,
 * 64 zeros for the first) and "hash" (SHA-256 of the line up to its hash field), fsynced. */
struct agent_audit;
struct agent_audit_entry {
        const char *caller;  /* "uid:0", "token:1a2b3c4d", "forkletd" */
        const char *session; /* "<namespace>/<name>" or NULL */
        const char *action;  /* "apply", "delete", "transition", ... */
        const char *result;  /* "201", "Running", ... */
        double latency_s;
        uint64_t time_ns; /* the daemon's clock (CLOCK_REALTIME ns); 0: the system clock now */
};
/* Opens (creates, mode 0600) path and reads the chain head. Returns 0 or -errno; logs nothing. */
int agent_audit_open(const char *path, struct agent_audit **ret);
struct agent_audit *agent_audit_close(struct agent_audit *a);
/* Appends one line and fsyncs it. Thread-safe. Returns 0 or -errno. */
int agent_audit_append(struct agent_audit *a, const struct agent_audit_entry *e);
/* Checks every line of the file: valid JSON, its own hash, and prev against the line before.
 * 0 when intact (*ret_lines lines); -EBADMSG with *ret_bad_line (1-based) and err saying why;
 * other -errno when unreadable. */
int agent_audit_verify(const char *path, size_t *ret_lines, size_t *ret_bad_line,
                       struct fk_error *err);

/* The operation journal under <stateDir>/journal: an entry is written (atomically, fsynced)
 * before a multi-step operation and removed after it, so a restart finds operations a crash
 * interrupted and finishes or undoes them through the handler registered for the op.
 * begin: data is stolen (may be NULL); *ret_id is a heap string. */
int agent_journal_begin(const char *state_dir, const char *op, const char *key, json_t *data,
                        char **ret_id);
/* Replaces the entry's data (stolen), e.g. after each step. */
int agent_journal_update(const char *state_dir, const char *id, json_t *data);
/* Removes the entry (missing: 0). */
int agent_journal_end(const char *state_dir, const char *id);
/* Recovery handler for op, called on restart under the daemon lock after VMs were adopted,
 * with the session key and the entry's data (borrowed). Returns 0 when finished or undone (the
 * entry is removed), < 0 to keep the entry for the next start. At most 16 ops. */
/* The boot journal entry the executor writes around ops.boot ("boot", data {runDir}); begin
 * returns the id or NULL (logged: a boot without a journal still runs); end accepts NULL. */
char *agent_boot_journal_begin(const char *state_dir, const char *key, const char *run_dir);
void agent_boot_journal_end(const char *state_dir, const char *id);
/* d is the caller's (opaque here), handed to the handler. */
typedef int (*agent_journal_recover_fn)(struct agent_daemon *d, const char *key, json_t *data);
int agent_journal_register(const char *op, agent_journal_recover_fn fn);
/* Hands every entry under <state_dir>/journal to its op's handler (at start, under the
 * daemon's lock); removes the ones recovered and the unreadable ones. Logs. */
void agent_journal_recover_all(struct agent_daemon *d, const char *state_dir);

/* Sends state ("READY=1", "STOPPING=1", ...) to systemd's $NOTIFY_SOCKET. 1 sent, 0 not
 * under systemd, -errno on failure. Logs nothing. */
int agent_sd_notify(const char *state);

/* ---- boot timing (boot-timing.c) --------------------------------------------------------- */

/* Where one boot's time went (the fork timing breakdown), in ns; 0: the step did not run.
 * The executor times its steps, the VM backend the ones inside ops.boot. */
enum agent_boot_step {
        AGENT_BOOT_STEP_QUEUE,     /* request to the boot job's start (planner pass, busy flag) */
        AGENT_BOOT_STEP_LOCK,      /* the fork's work waiting for the daemon lock */
        AGENT_BOOT_STEP_LINKS,     /* origin/ hard links and the session record (fork request) */
        AGENT_BOOT_STEP_DISK,      /* run dir, secrets, the overlay over the checkpoint's layer */
        AGENT_BOOT_STEP_NETNS,     /* the session's netns, veth, tap, nftables */
        AGENT_BOOT_STEP_CGROUP,    /* its cgroup made and limited */
        AGENT_BOOT_STEP_JAIL,      /* the jail's uid, file grants and mount plan */
        AGENT_BOOT_STEP_SPAWN,     /* fork to exec of QEMU, pre-exec hooks included */
        AGENT_BOOT_STEP_PRE_EXEC,  /* of which the child's hooks (join netns and cgroup, tap,
                                    * jail mounts), measured in the child */
        AGENT_BOOT_STEP_QEMU,      /* exec to QMP connected */
        AGENT_BOOT_STEP_RESTORE,   /* incoming migration of the checkpoint's device state */
        AGENT_BOOT_STEP_AGENT,     /* guest agent connected and answering */
        AGENT_BOOT_STEP_IDENTITY,  /* fork id, entropy, secrets, identity file, clock */
        AGENT_BOOT_STEP_DIRTY_LOG, /* cold boot under TCG: QEMU's migration dirty bitmap cleared
                                    * (vmm_dirty_log_reset) */
        AGENT_BOOT_STEP_FINISH,    /* status, grants on the links revoked, origin/ removed */
        AGENT_BOOT_STEP_TOTAL,     /* request (or job start) to Running */
        _AGENT_BOOT_STEP_MAX,
};

struct agent_boot_timing {
        uint64_t ns[_AGENT_BOOT_STEP_MAX];
        unsigned retries; /* cold boots ended and started again (a guest that lost its timer) */
};

/* "queue", "lock", ... (the status.bootTiming keys without "Ms"); NULL when out of range. */
const char *agent_boot_step_to_string(enum agent_boot_step s);
/* "links 2 ms, disk 14 ms, ..., total 480 ms": the steps that ran (ns > 0), in order, each
 * rounded to a ms (at least 1 when it ran), then ", N retries" if any, into buf (truncated to
 * size). Pure. */
void agent_boot_timing_format(const struct agent_boot_timing *t, char *buf, size_t size);
/* {"queueMs": 1.2, ...} for the steps that ran (ms with 0.1 precision), "retries": N if any;
 * NULL: out of memory. */
json_t *agent_boot_timing_json(const struct agent_boot_timing *t);
