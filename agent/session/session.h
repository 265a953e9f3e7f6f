/* SPDX-License-Identifier: MIT */
/* fk_agent_session: the session record (desired and observed state, conditions, events, the VM
 * and network handles it owns), its JSON, its view in the state store and the directory source. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/obs/obs.h"
#include "agent/store/store.h"
#include "agent/vm/vm.h"
#include "core/core.h"

struct node_config;
struct session_manifest;
struct agent_net_ops;
struct agent_intent;

enum agent_source {
        AGENT_SOURCE_API,
        AGENT_SOURCE_FILE,
        AGENT_SOURCE_CLUSTER, /* assigned by the control plane (agent/daemon/daemon-cluster.c) */
};

enum agent_condition_type {
        AGENT_COND_READY,
        AGENT_COND_MANIFEST_VALID,
        AGENT_COND_RESOURCES,     /* size class applied live, or waiting for a restart */
        AGENT_COND_AFTER_START,   /* lifecycle.afterStart ran (True) or failed (False) */
        AGENT_COND_CHECKPOINTS,   /* every spec.checkpoints entry is taken */
        AGENT_COND_FORKS,         /* spec.forks has its count, or why it waits */
        AGENT_COND_DISK_PRESSURE, /* the VM was stopped by a disk write error (health.c) */
        AGENT_COND_IMAGE_READY,   /* spec.image is a reference: pulled, Pulling or PullFailed */
        _AGENT_COND_MAX,
};

struct agent_condition {
        bool set;
        const char *status; /* static "True" | "False" | "Unknown" */
        char reason[64];
        char message[256];
        uint64_t last_transition_ns; /* wall clock */
};

/* One entry of a session's recent history (a condition that changed), for `forklet describe`. */

#define AGENT_EVENTS_MAX        16
#define AGENT_EVENT_MESSAGE_MAX 192
struct agent_event {
        uint64_t time_ns; /* wall clock */
        bool warning;     /* "Warning" (condition not True) or "Normal" */
        char reason[64];
        char message[AGENT_EVENT_MESSAGE_MAX];
};

/* A refcounted VM handle so an exec in flight keeps it alive across a stop. */
struct agent_vm_ref {
        atomic_int refs;
        void *vm;
        const struct agent_vm_ops *ops;
};
struct agent_vm_ref *agent_vm_ref_new(void *vm, const struct agent_vm_ops *ops);
struct agent_vm_ref *agent_vm_ref_get(struct agent_vm_ref *r);
/* Drops one reference; the last one frees the VM through ops. Returns NULL. */
struct agent_vm_ref *agent_vm_ref_put(struct agent_vm_ref *r);

/* What resource control knows about a session (resources.c). */
struct agent_session_res {
        bool fork;                 /* RAM copy-on-write on a checkpoint: charged by PSS */
        bool has_cgroup;           /* its cgroup exists (created at boot, removed at teardown) */
        bool frozen;               /* frozen by pause */
        char *cgroup_path;         /* owned, as /proc/PID/cgroup shows it, NULL without */
        struct core_charge charge; /* held while admitted; set at boot */
        /* The shape it booted with: vcpus and RAM change only with a restart. */
        unsigned vcpus, memory_mib;
        /* adopted while the boot of a rollback had the limits raised for the replaced VM's RAM
         * (agent_rollback_set_aside_ram): the RAM of the adopted VM, for the limits to be set
         * back once the cgroups are known (agent_daemon_set_cgroups); 0: nothing to do */
        unsigned reset_limits_mib;
        char class_name[64]; /* size class last applied to the cgroup */
        char last_short[32]; /* the Insufficient* reason last logged, "" when admitted */
        json_t *sample;      /* owned: the last cgroup figures with sampledAt, or NULL */
};

/* What forkletd knows about a session's guest beyond its phase (health.c). */
struct agent_session_health {
        /* liveness probes (the health thread) */
        uint64_t next_probe_ns;  /* monotonic */
        unsigned probe_failures; /* in a row */
        char probe_error[128];   /* the last failure */
        /* what of the VM's agent_vm_health was acted on already */
        unsigned oom_seen, io_stops_seen;
        bool io_stopped;      /* DiskPressure: QEMU stopped the VM on a disk write error */
        bool io_resume_due;   /* space is back (or `forklet resume`): continue it */
        uint64_t io_check_ns; /* monotonic: next free-space check */
        /* a dead guest whose VM is being ended (CORE_ACTION_FAIL) */
        bool failing;
        /* it panicked on its console: it reboots once its report is out (panic=-1), which ends
         * QEMU (-no-reboot) */
        bool reboots;
        char fail_reason[32];
        char fail_msg[256];
};

/* Memory back to the host (give-back.c): what the daemon knows of a session's VM. */
struct agent_session_give_back {
        const struct agent_vm_ref *vm; /* the VM the rest is about (compared, never used) */
        bool due;                      /* a live checkpoint of it was written: give back next */
        bool off;                      /* it cannot (no balloon, private RAM): until another VM */
        uint64_t next_check_ns;        /* monotonic: the next periodic check */
};

/* Live disk compaction (compact.c): what the daemon knows of a session's VM's disk chain. */
struct agent_session_compact {
        const struct agent_vm_ref *vm; /* the VM the rest is about (compared, never used) */
        bool due;                      /* its chain may have grown: look at it when idle */
        bool checkpointed;             /* ... by a checkpoint or snapshot of this VM */
};

/* A restored VM's migration dirty bitmap (dirty-log.c): cleared once idle, not in a checkpoint. */
struct agent_session_dirty_log {
        const struct agent_vm_ref *vm; /* the VM the rest is about (compared, never used) */
        bool due;                      /* restored, its bitmap not cleared yet */
        bool fork;                     /* ... by a fork's first start: not while it has siblings */
        uint64_t not_before_ns;        /* monotonic: not while the rollback's caller goes on */
};

/* Why the last VM of a session died, kept after it is gone for `forklet describe`. */
struct agent_failure {
        uint64_t time_ns; /* wall, 0: none */
        char reason[32];
        char message[256];
        char tail[AGENT_CONSOLE_TAIL][AGENT_CONSOLE_LINE]; /* its last console lines */
        unsigned n_tail;
};

struct agent_session {
        char *namespace; /* owned */
        char *name;      /* owned */
        char *key;       /* owned "<namespace>.<name>" */
        /* desired */
        struct session_manifest *spec; /* owned; NULL once the manifest is deleted */
        uint64_t generation;
        enum agent_source source;
        char *source_file;   /* owned, AGENT_SOURCE_FILE only */
        uint64_t created_ns; /* wall */
        uint64_t deleted_ns; /* wall, 0: not deleting */
        /* observed */
        enum session_phase phase;
        uint64_t observed_generation;
        uint64_t started_ns; /* wall, 0: not running */
        uint64_t retry_at_ns;
        unsigned failures;
        struct agent_condition conditions[_AGENT_COND_MAX];
        struct agent_event events[AGENT_EVENTS_MAX]; /* ring, oldest at events_next when full */
        unsigned n_events, events_next;
        struct agent_vm_ref *vm;             /* owned reference or NULL */
        void *net;                           /* owned network handle (net_ops) or NULL */
        const struct agent_net_ops *net_ops; /* set with net */
        pid_t pid;
        bool busy;
        volatile bool cancel; /* read by a boot in flight */
        /* a request or a spec change waits for the session: its background job (a give-back,
         * a live disk compaction) cuts itself short (agent_runner_yield; read by the job's
         * thread, hence volatile) */
        volatile bool yield;
        /* the job it is busy with is a background one (a give-back, a live compaction): it
         * changes no phase, so a wait for one need not wait for it */
        bool background;
        bool seen;         /* scratch for the manifest-dir sync */
        int audited_phase; /* phase last written to the audit log, -1: none yet */
        struct agent_session_res res;
        /* fork engine */
        char *fork_parent;     /* owned: session this one was forked from (same ns) or NULL */
        char *fork_checkpoint; /* owned: the parent's checkpoint id */
        char *fork_id;         /* owned: identity the guest got on its last restore */
        char *rollback_to;     /* owned: own checkpoint id the next boot restores */
        char *from_snapshot;   /* owned: snapshot id whose disk the first boot starts on */
        struct agent_intent *intents;    /* owned queue: requests not ended yet, oldest first */
        enum core_post_start post_start; /* what is left after the VM's cold boot */
        bool fork_by_spec;               /* made by the parent's spec.forks (scaled by it) */
        json_t *identity; /* owned status.identity of the running machine (names only) or NULL */
        /* the fork timing breakdown: what the fork request spent (links, lock) and when (mono,
         * 0: not a requested fork), then the last boot's steps (status.bootTiming) */
        struct agent_boot_timing requested_timing;
        uint64_t requested_ns;
        struct agent_boot_timing boot_timing;
        bool has_boot_timing;
        json_t *ck_cache; /* owned: its checkpoints as agent_checkpoints_list gives, NULL: load */
        struct agent_session_health health;
        struct agent_failure last_failure;
        struct agent_session_give_back give_back;
        struct agent_session_compact compact;
        struct agent_session_dirty_log dirty_log;
};

struct agent_session *agent_session_new(const char *ns, const char *name);
struct agent_session *agent_session_free(struct agent_session *s);
/* Sets a condition; lastTransitionTime changes only when status changes. A change records an
 * event: Normal when the condition is True or its reason is a step someone asked for (Booting,
 * Forking, RollingBack, Restoring, Paused, Stopped), else Warning. */
void agent_session_set_condition(struct agent_session *s, enum agent_condition_type t,
                                 const char *status, const char *reason, uint64_t now_ns,
                                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Records an event that changes no condition (Checkpointed, RolledBack, CheckpointFailed). */
void agent_session_add_event(struct agent_session *s, uint64_t now_ns, bool warning,
                             const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* Session JSON (metadata, spec, status) with times rendered as RFC 3339. */
json_t *agent_session_to_json(const struct agent_session *s, int accel);
json_t *agent_session_status_json(const struct agent_session *s, int accel);
/* status.lastFailure (new reference) or JSON null. */
json_t *agent_failure_json(const struct agent_failure *f);

/* One manifest-directory file and what it yielded on the last scan. */
struct agent_dir_file {
        char *path;                      /* owned */
        struct session_manifest **items; /* owned, NULL when invalid */
        size_t n_items;
        char **errors; /* owned strv, NULL when valid */
};
struct agent_dir_scan {
        struct agent_dir_file *files; /* owned array */
        size_t n;
};
/* Reads every *.yaml / *.yml in dir (a missing dir yields nothing). Does not log. */
int agent_dir_scan(const char *dir, const struct node_config *cfg, struct agent_dir_scan *ret);
void agent_dir_scan_done(struct agent_dir_scan *s);
/* An inotify fd watching dir (created first if missing and create is set), or -errno. */
int agent_dir_watch(const char *dir, bool create);
/* Drains pending inotify events: 0 nothing relevant, 1 a manifest file changed, 2 the
 * directory itself went away (the watch is dead; rescan and watch again). */
int agent_dir_watch_drain(int fd);

/* ---- the store's view of sessions (store-session.c) --------------------------------------- */

/* store-session.c: s's desired state as AGENT_STORE_SESSION (new reference or NULL), stored
 * (err as agent_store_update), its removal (the rest of the record stays until the state dir
 * goes), and every stored session at start (invalid ones are logged and skipped). */
json_t *agent_store_session_json(const struct agent_session *s);
int agent_store_save(struct agent_store *st, const struct agent_session *s, struct fk_error *err);
int agent_store_remove(struct agent_store *st, const char *key, struct fk_error *err);
int agent_store_load_sessions(struct agent_store *st, const struct node_config *cfg,
                              struct agent_session ***ret, size_t *ret_n);

/* Per-session directories (caller frees). */
int agent_session_run_dir(const char *run_dir, const char *key, char **ret);
int agent_session_state_dir(const char *state_dir, const char *key, char **ret);
