/* SPDX-License-Identifier: MIT */
/* Inside fk_agent_daemon only: the daemon struct, the fork engine, intents and the job runner,
 * status held in memory, guest health, resource control, the daemon's side of networking,
 * jails and images. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "agent/daemon/daemon.h"
#include "agent/disk/disk.h"
#include "agent/image/image.h"
#include "agent/obs/obs.h"
#include "agent/net/net.h"
#include "agent/runfs/runfs.h"
#include "agent/secrets/secrets.h"
#include "agent/session/session.h"
#include "agent/store/store.h"
#include "common/util.h"
#include "manifest/manifest.h"

/* ---- fork engine (checkpoint.c, fork.c) ------------------------------------------------------ */

/* What a boot restores from (resolved under the lock, carried out by the boot job). */
struct agent_restore {
        char *ck_dir; /* owned: checkpoint dir (state, ram), NULL: cold boot */
        char *layer;  /* owned: disk layer the new overlay goes over, NULL: keep the disk */
        /* owned: the checkpoint's own dir, where the overlay every fork and rollback of it makes
         * is kept as a template (agent_disk_create_overlay_from); NULL: none */
        char *template_dir;
        bool private_ram;    /* map ck_dir/ram share=off (copy-on-write): forks and rollbacks */
        bool rollback;       /* the session's own checkpoint (else a fork's first start) */
        bool balloon;        /* its source had a balloon device (meta.json "balloon") */
        bool balloon_hint;   /* ... with free page hinting (meta.json "balloonHint") */
        bool ram_tail;       /* its source's RAM had the tail (meta.json "ramTail") */
        bool guest_announce; /* its source's NIC offered the guest announce ("guestAnnounce") */
        char fork_id[96];    /* identity for the guest */
        char ck_id[48];      /* the checkpoint's id (for the lineage) */
};
void agent_restore_done(struct agent_restore *r);
/* Under the lock: fills r for s's next boot (fork first start, rollback, snapshot restore). */
int agent_restore_plan(struct agent_daemon *d, struct agent_session *s, struct agent_restore *r,
                       struct fk_error *err);
/* In the boot job: new overlay, RAM copy. *ret_disk / *ret_mem: heap paths (mem NULL: default). */
int agent_restore_prepare(const struct agent_restore *r, struct agent_store *st, const char *key,
                          const char *state_dir, const char *run_dir, char **ret_disk,
                          char **ret_mem, struct fk_error *err);
/* After a cold boot (executor-poststart.c, the runner's afterStart job): what is due first for spec
 * m; run lifecycle.afterStart in vm (no lock held; copies the spec under it); under the lock, its
 * outcome: AfterStart True and the declared checkpoints next, or the failure as a state
 * (AfterStart False, Ready False or Failed with restartPolicy OnFailure, post_start FAILED). */
enum core_post_start agent_post_start_first(const struct session_manifest *m);
int agent_after_start_run(struct agent_daemon *d, struct agent_session *s, struct agent_vm_ref *vm,
                          struct fk_error *err);
void agent_after_start_done(struct agent_daemon *d, struct agent_session *s, int r,
                            const struct fk_error *err);
/* Under the lock: the spec.checkpoints names s has no checkpoint of (strv, NULL: none). */
int agent_checkpoints_missing(struct agent_daemon *d, struct agent_session *s, char ***ret);
/* Starts the job for k (CHECKPOINT, SNAPSHOT, ROLLBACK, AFTER_START, DECLARED_CHECKPOINTS) on
 * s (under the lock; s busy until it ends). A failed prepare ends the intent at once. */
int agent_runner_op(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k);
/* Under the lock: phase Failed with reason and msg, back-off for a restart. Logs. */
void agent_session_fail(struct agent_daemon *d, struct agent_session *s, const char *reason,
                        const char *msg);
/* The checkpoint mechanics (the job runner's run step, no lock held, s busy): saves vm into a
 * new checkpoint of s named name (may be NULL); *ret_id (41 bytes). Logs the result. */
int agent_checkpoint_take(struct agent_daemon *d, struct agent_session *s, struct agent_vm_ref *vm,
                          const char *name, char *ret_id, struct fk_error *err);
/* After the VM moved onto overlay disk: records it as the active one with the VM's record
 * (ops.record) in the session's state record. Logs a failure (the switch cannot be undone). */
void agent_checkpoint_record_disk(struct agent_daemon *d, const char *key, struct agent_vm_ref *vm,
                                  const char *disk);
/* Removes partial checkpoints left by a crash (".*.partial" dirs) of the session state dir. */
void agent_checkpoint_clean_partial(const char *state_dir);
/* Removes the ".*.partial" entries of dir root (rm -rf). Logs what it removed. */
void agent_clean_partial_in(const char *root);
/* Removes partial snapshot exports (<stateDir>/snapshots/.*.partial) left by a crash. Logs. */
void agent_snapshot_clean_partial(const char *state_dir);
/* Checkpoint dir of key/id (caller frees). */
int agent_checkpoint_dir(const char *state_dir, const char *key, const char *id, char **ret);
/* spec.forks of p (under the lock; the planner decides which): make the missing forks, delete
 * the ones beyond the count, or say why they wait (Forks condition). */
void agent_forks_scale_up(struct agent_daemon *d, struct agent_session *p);
void agent_forks_trim(struct agent_daemon *d, struct agent_session *p);
void agent_forks_waiting(struct agent_daemon *d, struct agent_session *p);
/* Planner inputs for p's spec.forks (under the lock): forks present by name below the count,
 * forks spec.forks made at or beyond it, whether the checkpoint spec.forks.from exists. */
void agent_forks_observe(struct agent_daemon *d, struct agent_session *p, unsigned *ret_have,
                         unsigned *ret_beyond, bool *ret_source);
/* Under the lock: creates count forks NAME-fork-N of p from its checkpoint id (a POST forks
 * intent); *ret: the new names. Fails with nothing made, or returns what it made. */
int agent_fork_create_many(struct agent_daemon *d, struct agent_session *p, const char *id,
                           unsigned count, json_t **ret, struct fk_error *err);
/* Rollback's two halves (the runner): under the lock, the checks before the VM stops (own
 * checkpoint, free space) and s->rollback_to set; then the boot restores from it. */
int agent_rollback_prepare(struct agent_daemon *d, struct agent_session *s, const char *id,
                           struct fk_error *err);
/* A rollback replacing a VM with a RAM file of its own (its run dir's mem.ram: a booted VM,
 * whose QEMU it has just killed) moves that file to <runDir>/sessions/.replaced/KEY.ram (the
 * same filesystem: runDir/sessions may be a tmpfs of its own), out of the new boot's way: its
 * pages stay until agent_rollback_drop_ram, once the new VM runs, where the boot used to free
 * them (or the killed QEMU's exit did) right before the new QEMU's start. forkletd's start
 * empties the dir once it has adopted its VMs. Logged on failure; no lock needed. */
#define AGENT_REPLACED_RAM_DIR "sessions/.replaced"
void agent_rollback_set_aside_ram(struct agent_daemon *d, const char *key);
/* The set-aside file's allocated bytes (0: none), which the boot's cgroup limits make room for
 * (agent_resources_prepare) until it is dropped; drop: true when there was one. */
uint64_t agent_rollback_ram_aside(struct agent_daemon *d, const char *key);
bool agent_rollback_drop_ram(struct agent_daemon *d, const char *key);
/* At start, after adoption (which drops an adopted VM's own): every set-aside file left. */
void agent_rollback_drop_all_ram(struct agent_daemon *d);
/* Snapshot mechanics (the runner's run step, no lock): freezes vm's disk layer and exports
 * it with spec as snapshot id (<= 41 bytes) of session key whose state dir is sd. */
int agent_snapshot_take(struct agent_daemon *d, struct agent_vm_ref *vm, const char *sd,
                        const char *key, json_t *spec, const char *id, struct fk_error *err);
/* id is "snap_" and hex digits, shorter than 42 bytes. */
bool agent_snapshot_id_is_valid(const char *id);
/* fn(stateDir/snapshots, ID, its meta.json) for every snapshot there with a readable meta (only
 * the one named only, when set), until fn returns < 0, which is returned (snapshot-admin.c). */
typedef int agent_snapshot_fn(const char *root, const char *id, json_t *meta, void *arg);
int agent_snapshot_each(const char *state_dir, const char *only, agent_snapshot_fn *fn, void *arg);
/* A new snapshot id "snap_<hex>" into buf (>= 42 bytes). */
void agent_snapshot_new_id(char *buf);
/* The Ready reason of a boot that restores r (RollingBack, Forking, Restoring, Booting), or of
 * its failure (RollbackFailed, ForkFailed, RestoreFailed, BootFailed). A static string. */
const char *agent_restore_reason(const struct agent_restore *r, bool failed);
/* What that boot does, for the condition message ("rolling back to checkpoint ck_..."). */
void agent_restore_describe(const struct agent_session *s, const struct agent_restore *r,
                            unsigned mib, unsigned vcpus, char *buf, size_t size);
/* Not under the lock (the session is busy): after a successful restore, its files: the
 * restored mark and lineage written, a fork's origin links and their grants released. In
 * state_dir; logs a failed revoke as a warning. */
void agent_restore_release(const char *key, const char *state_dir, const struct agent_restore *r);
/* Under the lock: after a successful restore (fork id; a rollback records its RolledBack
 * event). */
void agent_restore_finish(struct agent_daemon *d, struct agent_session *s,
                          const struct agent_restore *r);
/* Writes meta.json of checkpoint dir (atomically). */
int agent_checkpoint_write_meta(const char *dir, json_t *meta);
/* The Writing phase (checkpoint-write.c). A thread turns the stream in dir into state + ram
 * through vm (a reference is taken), marks the checkpoint Ready or removes it, and adds an
 * event to session key. Logs. */
int agent_checkpoint_write_start(struct agent_daemon *d, const char *key, const char *id,
                                 const char *dir, const char *frozen, struct agent_vm_ref *vm);
/* Whether this process is writing checkpoint dir now. Thread-safe. */
bool agent_checkpoint_writing(const char *dir);
/* Whether this process is writing s's checkpoint id now (under the lock). */
bool agent_checkpoint_id_writing(struct agent_daemon *d, const struct agent_session *s,
                                 const char *id);
/* Whether a checkpoint's meta says Writing. */
bool agent_checkpoint_meta_writing(const json_t *meta);
/* Removes checkpoints under root left Writing (not by this process): after a crash. Logs. */
void agent_checkpoint_clean_writing(const char *root);
/* Under the lock: waits (releasing it) while dir of s is being written; -ENOENT with err when
 * the write failed or s was deleted meanwhile. */
int agent_checkpoint_wait_written(struct agent_daemon *d, const struct agent_session *s,
                                  const char *dir, const char *id, struct fk_error *err);
/* Complete checkpoints in state dir sd, oldest first: meta objects + sizeBytes (new ref). */
json_t *agent_checkpoints_list(const char *sd);
json_t *agent_checkpoint_read_meta(const char *dir);
/* Under the lock: -ENOENT naming the owner of id when it is another session's. */
int agent_checkpoint_not_found(struct agent_daemon *d, const struct agent_session *s,
                               const char *id, struct fk_error *err);
/* Under the lock: the dir of s's own checkpoint id (caller frees), else as above. */
int agent_checkpoint_own_dir(struct agent_daemon *d, const struct agent_session *s, const char *id,
                             char **ret, struct fk_error *err);
/* Under the lock: status.forks, status.checkpoints, status.forkOf, status.forkId into j. */
int agent_fork_status_patch(struct agent_daemon *d, struct agent_session *s, json_t *j);

/* ---- intents and the job runner (intent.c, executor-runner.c, executor-ops.c) ------------- */

/* One request waiting on a session: kind and parameters, when it came, its outcome. Queued on
 * the session (s->intents) until the planner decides it; the runner ends it. */
struct agent_intent {
        enum core_intent_kind kind;
        char arg[64];           /* ROLLBACK: checkpoint id; FORK: the checkpoint forked from */
        unsigned count;         /* FORK */
        char idem_key[160];     /* the request's Idempotency-Key, "" without */
        uint64_t requested_ns;  /* wall */
        uint64_t since_mono_ns; /* the injected clock: the planner's busy wait */
        uint64_t t0_mono_ns;    /* the system clock: metrics and audit latency */
        bool running;           /* a job serves it */
        bool settling; /* ROLLBACK: restored, until the planner paused or stopped it as asked */
        bool ran;      /* a job served it (not refused by the planner) */
        bool done;
        int r; /* outcome: >= 0 or -errno with err */
        struct fk_error err;
        char id[64];   /* CHECKPOINT, SNAPSHOT: the new id */
        json_t *names; /* FORK: the new names (owned) */
        int refs;      /* the queue's and each waiter's */
        struct agent_intent *next;
};

/* Under the lock: the oldest intent of s no job serves yet, or NULL. */
struct agent_intent *agent_intent_pending(const struct agent_session *s);
/* Under the lock: an intent of s of kind not ended, or NULL. */
struct agent_intent *agent_intent_find(const struct agent_session *s, enum core_intent_kind kind);
/* Under the lock: in ends with r (err may be NULL); metrics, audit, waiters woken, dequeued. */
void agent_intent_complete(struct agent_daemon *d, struct agent_session *s, struct agent_intent *in,
                           int r, const struct fk_error *err);
/* Under the lock: the oldest pending intent of s ends refused with r (its message here). */
void agent_intent_reject(struct agent_daemon *d, struct agent_session *s, int r);
/* Ends every intent of s (-ENOENT) before s is freed. */
void agent_intents_drop(struct agent_session *s);

/* Under the lock: plans every session (agent/daemon/daemon.c's pass), runs every action when all,
 * else only the actions that serve intents (a request's thread does not start boots). */
int agent_runner_plan(struct agent_daemon *d, bool all);
/* Under the lock: agent_runner_plan(d, false). */
void agent_runner_dispatch(struct agent_daemon *d);
/* Under the lock: runs one planned action (new kinds here, the VM lifecycle in executor.c). */
int agent_runner_execute(struct agent_daemon *d, struct agent_session *s,
                         const struct core_action *a);
/* Under the lock: runs body(ctx) in a worker thread with s busy and d->workers counted; body is
 * called without the lock and returns holding it, its job ended (agent_runner_job_end); then
 * release(ctx) runs unlocked. The one place jobs get threads. */
int agent_runner_spawn(struct agent_daemon *d, struct agent_session *s, void (*body)(void *ctx),
                       void (*release)(void *ctx), void *ctx);
/* Under the lock: a request (an intent) or a spec change waits for s: its background job cuts
 * itself short instead of holding the session for seconds (a give-back in its wait for the
 * guest's stats or inflating: the guest gets its memory back; a live compaction: its stream is
 * cancelled, and it runs again once s is idle). The job clears s->yield when it starts. */
void agent_runner_yield(struct agent_session *s);
/* Under the lock: agent_runner_spawn for a background job (a give-back, a live compaction): s's
 * yield flag cleared and s marked background, which a wait for a phase does not wait for. */
int agent_runner_spawn_background(struct agent_daemon *d, struct agent_session *s,
                                  void (*body)(void *ctx), void (*release)(void *ctx), void *ctx);
/* Under the lock, from a job's end: s is idle again; intents waiting on it are decided. */
void agent_runner_job_end(struct agent_daemon *d, struct agent_session *s);
/* Under the lock, from the end of the boot job a rollback started, and of the pause or stop
 * job after it: the rollback intent ends (0 when s is Running again, or Paused or Stopped as its
 * spec asks, after that job; -EIO with the Ready message otherwise). */
void agent_runner_boot_done(struct agent_daemon *d, struct agent_session *s);
/* Under the lock, each planner pass: a settling rollback ends once s is in its spec's state. */
void agent_runner_rollback_settled(struct agent_daemon *d, struct agent_session *s);

struct agent_daemon {
        const struct node_config *cfg; /* borrowed */
        int accel;
        struct agent_vm_ops ops;
        struct agent_clock clock;
        pthread_mutex_t lock;
        pthread_cond_t changed;          /* an action finished */
        struct agent_session **sessions; /* owned array */
        size_t n_sessions, alloc_sessions;
        unsigned workers;  /* actions in flight */
        char **dir_errors; /* owned strv: invalid manifest-dir files, for node status */
        int wake_fd;       /* eventfd */
        int watch_fd;      /* inotify, -1 when unavailable */
        pthread_t thread;
        bool thread_started;
        atomic_bool quit;
        uint64_t last_scan_ns;
        struct agent_audit *audit;       /* owned, NULL when the log cannot be opened */
        struct agent_store *store;       /* owned: every session's state record */
        pthread_cond_t watch_cond;       /* broadcast after each reconcile pass (API watchers) */
        uint64_t revision;               /* counts reconcile passes, under lock */
        struct cg_manager *cg;           /* borrowed, NULL: no resource control */
        struct core_node_resources node; /* host totals and the config's reserve */
        const struct agent_net_ops *net_ops; /* NULL: no session networking */
        pthread_mutex_t fwd_lock;            /* port-forward relays */
        struct agent_fwd *fwds;              /* list of live relays */
        pthread_cond_t fwd_done;             /* a relay thread finished */
        unsigned n_fwd_threads;              /* relay threads running */
        bool fwd_closing;                    /* the API is stopping: no new relays */
        uint64_t last_sample_ns;             /* monotonic, the sampler's last pass; 0: due */
        pthread_t health_thread;             /* liveness probes (health.c) */
        bool health_started;
        pthread_cond_t health_wake;       /* broadcast to end the health thread early */
        pthread_mutex_t images_lock;      /* guards images' creation */
        struct agent_image_store *images; /* owned, made on first use (agent/image/image.h) */
};

/* ---- the VM lifecycle jobs (executor.c; the boot in executor-boot.c) ----------------------- */

#define AGENT_BOOT_TIMEOUT_MS 120000 /* QEMU's start to the guest agent answering */

/* One boot, stop, pause, resume, destroy or fail of a session, run in a worker thread. */
struct agent_job {
        struct agent_daemon *d;
        struct agent_session *s; /* busy while the job runs, so never freed under it */
        enum core_action_kind kind;
        struct agent_vm_ref *vm;       /* owned reference (stop, pause, resume, destroy) */
        struct agent_vm_ref *detached; /* the session's reference after a stop, owned */
        char *run_dir, *state_dir, *kernel, *initrd; /* owned */
        char *base_disk;                             /* owned, NULL: image has no workspace */
        char *rootfs;                                /* owned, NULL: image has no root disk */
        struct agent_restore restore;                /* what the boot restores from */
        unsigned vcpus, memory_mib;
        const struct size_class *sc; /* borrowed from the (immutable) node config */
        char key[2 * 64 + 2], name[64];
        struct session_manifest *spec;   /* owned copy for a network setup (boot) */
        void *net;                       /* the session's network (borrowed) or a new one */
        char parent_key[2 * 64 + 2];     /* a fork's parent session ("" otherwise) */
        struct agent_boot_timing timing; /* this boot's steps (the job thread writes it) */
        uint64_t requested_ns;           /* mono: the fork request, 0: none */
        bool dead; /* the guest cannot power off (died, or stopped by a disk error) */
        /* how long a dead guest may take to end QEMU by itself before it is killed */
        unsigned exit_grace_ms;
};
/* A job of kind k for s (under the lock; takes a reference on s's VM). */
int agent_job_new(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k,
                  struct agent_job **ret);
/* Runs j in a worker thread (agent_runner_spawn); frees it when that fails. */
int agent_job_start(struct agent_daemon *d, struct agent_job *j);
struct agent_job *agent_job_free(struct agent_job *j);
/* Under the lock: admits and plans s's boot and starts its job. */
int agent_executor_boot(struct agent_daemon *d, struct agent_session *s);
/* The boot job's body (worker thread, no lock held; returns holding it). */
void agent_job_boot(struct agent_job *j);
/* Under the lock: records the cgroup s's VM runs in (on) or that it has none. */
void agent_session_set_cgroup(struct agent_daemon *d, struct agent_session *s, bool on);

/* The daemon's clock (injected: tests drive it). */
static inline uint64_t agent_now_real(const struct agent_daemon *d)
{
        return d->clock.now_real_ns(d->clock.userdata);
}
static inline uint64_t agent_now_mono(const struct agent_daemon *d)
{
        return d->clock.now_mono_ns(d->clock.userdata);
}

/* ---- memory back to the host (give-back.c) ---------------------------------------------- */

/* What decides whether a session's VM gives memory back now (pure, table-tested). */
struct agent_give_back_in {
        bool enabled;     /* memoryGiveBack.enabled */
        bool idle;        /* Running with a VM, no job, no request pending, boot work done */
        bool private_ram; /* a fork or rolled-back session: its RAM file is a checkpoint's */
        bool off;         /* its VM cannot (no balloon device) */
        bool due;         /* a live checkpoint of it was written */
        uint64_t now_ns, next_check_ns, interval_ns; /* interval 0: no periodic checks */
        uint64_t ram_file_bytes;  /* its RAM file's allocated bytes (read when a check is due) */
        uint64_t threshold_bytes; /* the least worth giving back */
};
enum agent_give_back_why {
        AGENT_GIVE_BACK_NONE,
        AGENT_GIVE_BACK_CHECKPOINT, /* after a live checkpoint's Writing phase */
        AGENT_GIVE_BACK_CHECK,      /* periodic: gives back when the guest's stats say it pays */
};
enum agent_give_back_why agent_give_back_decide(const struct agent_give_back_in *in);
const char *agent_give_back_why_to_string(enum agent_give_back_why w);
/* Under the lock, after each reconcile pass: starts a give-back job (the session busy) for
 * every session that is due. Logs. */
void agent_give_back_tick(struct agent_daemon *d);
/* Under the lock: a live checkpoint of s was written (its save read every RAM page). */
void agent_give_back_after_checkpoint(struct agent_daemon *d, struct agent_session *s);
/* Running with a VM, no job, nothing asked of it, its cold boot's own work done (give-back.c). */
bool agent_session_idle(const struct agent_session *s);

/* ---- a restored VM's dirty bitmap (dirty-log.c) --------------------------------------------- */

/* Under the lock, after each reconcile pass: starts the reset job (the session busy) for every
 * restored session that is due, has been idle since its not-before time and, for a fork, is the
 * only fork of its checkpoint. Logs. */
void agent_dirty_log_tick(struct agent_daemon *d);
/* Under the lock, when a rollback or a fork's first start (fork) has restored s's VM (or
 * forkletd adopted such a VM): its bitmap is cleared once s is idle. */
void agent_dirty_log_after_restore(struct agent_daemon *d, struct agent_session *s, bool fork);

/* ---- live disk compaction (compact.c) ---------------------------------------------------- */

/* Under the lock, after each reconcile pass: starts a compaction job (the session busy) for
 * every idle session whose chain may have grown (a checkpoint or snapshot, another VM) and
 * none of whose checkpoints is Writing (its helper QEMU opens the layers as the jail's uid).
 * Logs. */
void agent_compact_tick(struct agent_daemon *d);
/* Under the lock: s's disk chain grew by a layer (a checkpoint or snapshot was taken). */
void agent_compact_after_checkpoint(struct agent_daemon *d, struct agent_session *s);
/* Removes the checkpoint layers of the session in state dir sd (<sd>/disk/layer-ck_ID.qcow2)
 * whose checkpoint is gone and that no chain needs any more: not the live chain (active; NULL:
 * not known, nothing is removed) nor any remaining checkpoint's. Only while nothing changes the
 * chain (the session not busy, or its own job). Logs what it removed; returns how many. */
unsigned agent_checkpoint_free_layers(const char *sd, const char *active);
/* Whether a checkpoint of the session with key is being written (Writing). */
bool agent_checkpoint_session_writing(struct agent_daemon *d, const char *key);

/* ---- status held in memory (status-cache.c) ------------------------------------------------ */

/* Under the lock: s's checkpoints (borrowed; loaded from its state dir only when not held). */
json_t *agent_ck_cache(struct agent_daemon *d, struct agent_session *s);
/* Under the lock: loads s's checkpoint list again; the job that changed it calls this. */
void agent_ck_cache_reload(struct agent_daemon *d, struct agent_session *s);
/* Without the lock: samples the cgroup figures of every session with a cgroup when the interval
 * passed (or force), reading the files unlocked and storing the result under the lock. */
void agent_sampler_tick(struct agent_daemon *d, bool force);

/* Under d->lock. */
struct agent_session *agent_daemon_find(struct agent_daemon *d, const char *ns, const char *name);
/* Under d->lock: the session ns/name if it is Running with a VM; else -ENOENT or -EAGAIN with
 * err naming it and its phase. */
int agent_daemon_find_running(struct agent_daemon *d, const char *ns, const char *name,
                              struct agent_session **ret, struct fk_error *err);
int agent_daemon_insert(struct agent_daemon *d, struct agent_session *s);
/* Under d->lock: s's desired state goes (removed from the store first; on failure nothing
 * changes and err, may be NULL, says why), its VM is destroyed by the next pass. Does not log. */
int agent_daemon_mark_deleted(struct agent_daemon *d, struct agent_session *s,
                              struct fk_error *err);
void agent_daemon_remove(struct agent_daemon *d, struct agent_session *s);
/* Merges a manifest-dir scan into the table (under the lock). */
void agent_daemon_sync_dir(struct agent_daemon *d, struct agent_dir_scan *scan);
/* Starts the action for s (under the lock; long ones run in a worker thread). */
int agent_executor_run(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k);
/* Notices QEMU exits of idle sessions (under the lock). */
void agent_executor_check_exits(struct agent_daemon *d);
/* Under the lock: s's VM exited without a job: detaches it, its relays and its cgroup; Failed
 * with reason and msg (restartPolicy decides about a new boot). */
void agent_executor_vm_gone(struct agent_daemon *d, struct agent_session *s, const char *reason,
                            const char *msg);
/* Removes the VM record from key's state record (its QEMU is gone); logs a failure. */
void agent_vm_record_clear(struct agent_daemon *d, const char *key);
/* Re-attaches to the VMs the state records name (before the thread starts). */
void agent_executor_adopt_all(struct agent_daemon *d);

/* ---- guest health (health.c, disk-pressure.c) -------------------------------------------- */

/* A new VM is attached to s (boot, adoption): its health starts over. */
void agent_health_reset(struct agent_session *s);
/* Under d->lock, each reconcile pass: reads every idle VM's health (ops.health) and acts on it:
 * DiskPressure, OOM events, a dead guest marked for CORE_ACTION_FAIL. */
void agent_health_observe_all(struct agent_daemon *d);
/* One round of liveness probes (ops.ping) of the Running sessions that are due; takes d->lock
 * itself. The health thread calls it; tests call it directly. */
void agent_health_probe_round(struct agent_daemon *d);
/* The health thread (probes); stop joins it. Without ops.ping or with probes off: no thread. */
int agent_health_start(struct agent_daemon *d);
void agent_health_stop(struct agent_daemon *d);
/* Under d->lock: s's QEMU exited by itself with status/why: the Ready reason (32 bytes) and a
 * message saying why (console panic and OOM lines, a failure already found). Records
 * s->last_failure. */
void agent_health_exited(struct agent_daemon *d, struct agent_session *s, int status,
                         const char *why, char *ret_reason, char *msg, size_t size);
/* Under d->lock: a FAIL job ended s's VM; h (may be NULL) is its final report. Records
 * s->last_failure and returns the reason for the failed phase. */
const char *agent_health_failed(struct agent_daemon *d, struct agent_session *s,
                                const struct agent_vm_health *h);
/* Pure: is the guest dead? panics (GuestOOM when the panic or earlier OOM kills say memory,
 * else GuestPanicked), then probe_failures >= threshold (GuestUnresponsive, threshold 0: off).
 * Returns the reason (static) and fills msg, or NULL when it is alive. */
const char *agent_health_verdict(const struct agent_vm_health *h, unsigned probe_failures,
                                 unsigned threshold, const char *probe_error, char *msg,
                                 size_t size);
/* Under d->lock: DiskPressure as h says (phase Paused while stopped), free-space checks and
 * the resume decision (diskPressure.resume auto). */
void agent_disk_pressure_observe(struct agent_daemon *d, struct agent_session *s,
                                 const struct agent_vm_health *h);

/* Operations: orphan cleanup and the audit of phase transitions (recover.c; the journal's
 * recovery is agent/obs/obs.h's). audit_transitions runs under d->lock; at_start takes it. */
void agent_recover_at_start(struct agent_daemon *d);
void agent_audit_transitions(struct agent_daemon *d);
/* Audits a daemon-side event (caller "forkletd"); thread-safe, no lock needed. */
void agent_daemon_audit(struct agent_daemon *d, const char *ns, const char *name,
                        const char *action, const char *result, double latency_s);

/* ---- resource control (resources.c, admission.c) ------------------------------------------ */

struct cg_limits;
struct cg_join;
struct size_class;

/* cgroup limits of a size class: CPU quota (class cpu), weight 100 per core, memory.max =
 * RAM + qemuOverheadMiB (+ the TCG translation cache under tcg), memory.high = max - that
 * overhead/4, pids, ioWeight. Pure. */
void agent_resources_limits(const struct node_config *cfg, const struct size_class *sc, bool tcg,
                            struct cg_limits *ret);
/* Before a boot (worker thread, no lock): kills leftovers in the session's cgroup, creates it
 * with the class limits and prepares the pre-exec join (*ret caller-owned). 0 without
 * resource control (*ret NULL). Errors in err. */
int agent_resources_prepare(struct agent_daemon *d, const char *key, const struct size_class *sc,
                            struct cg_join **ret, struct fk_error *err);
/* The class limits again, for a VM of memory_mib MiB (0: the class's), once the room
 * agent_resources_prepare made for a rollback's set-aside RAM file is no longer needed. Logs a
 * failure. */
void agent_resources_reset_limits(struct agent_daemon *d, const char *key,
                                  const struct size_class *sc, unsigned memory_mib);
/* After the processes are gone (or to force them): thaws, kills what is left, removes the
 * cgroup. Logs warnings. No-op without resource control. */
void agent_resources_teardown(struct agent_daemon *d, const char *key);
/* Freeze (pause) or thaw (resume) the session's cgroup; 0 without resource control. */
int agent_resources_freeze(struct agent_daemon *d, const char *key, bool frozen,
                           struct fk_error *err);
/* Adds status.cgroup and status.resources (live counters) to a Session's status object
 * (under d->lock). */
/* Under the lock: status.cgroup and the last sampled status.resources (no file is read). */
void agent_resources_status(struct agent_daemon *d, const struct agent_session *s, json_t *status);
/* A changed size class on a running session (under d->lock): applies CPU, pids and io
 * live, sets the Resources condition (RestartRequired when vcpus or RAM differ). */
void agent_resources_resize(struct agent_daemon *d, struct agent_session *s);

/* The capacity charge of s while admitted (forks re-measured by PSS). Under d->lock. */
struct core_charge agent_session_charge(struct agent_daemon *d, const struct agent_session *s);
/* The node's capacity now (under d->lock). */
void agent_daemon_capacity(struct agent_daemon *d, struct core_capacity *ret);
/* The same with only the sessions not from the control plane counted as used (under d->lock):
 * what the node publishes as its local usage. */
void agent_daemon_capacity_local(struct agent_daemon *d, struct core_capacity *ret);
/* Whether s may boot now (under d->lock). -ENOSPC: it stays Pending with an Insufficient*
 * condition (set here); 0: admitted, s->res.charge set. */
int agent_daemon_admit(struct agent_daemon *d, struct agent_session *s,
                       const struct size_class *sc);
/* Node capacity as JSON for /api/v1alpha1/node (under d->lock). */
json_t *agent_capacity_json(struct agent_daemon *d);
/* ---- networking (daemon-net.c, net.c) --------------------------------------------------- */

void agent_daemon_net_start(struct agent_daemon *d);
/* Live egress update after a spec change (under the lock). */
void agent_daemon_net_observe(struct agent_daemon *d, struct agent_session *s);
/* Removes s's network (worker thread, s busy): teardown of its handle, or by name. */
void agent_daemon_net_destroy(struct agent_daemon *d, struct agent_session *s);

/* ---- the jail of a boot (jail-boot.c) ------------------------------------------------------- */
struct agent_jail;
/* Jails the QEMU that p describes: allocates the uid (j->uid), agent_jail_setup with the
 * session's ledger, sets p->jail_uid and appends agent_jail_pre_exec(j) to p->pre_exec (last).
 * j must outlive the spawn; agent_jail_done(j) after it. Returns 0 or -errno with err set;
 * does not log. */
int agent_jail_prepare(const struct node_config *cfg, struct agent_boot_params *p,
                       struct agent_jail *j, struct fk_error *err);

/* ---- images, the daemon's side (image-session.c, api-images.c)
 * ----------------------------------------------------- */

struct agent_daemon;
struct agent_session;

/* The digest a session booted from: <session state dir>/image-digest ("" when none). */
int agent_image_session_digest(const char *session_state_dir, char *ret, size_t size);
int agent_image_session_record(const char *session_state_dir, const char *digest);
/* Under d->lock, for a boot of s (spec.image a reference; sd its state dir): the rootfs
 * (heap) and ImageReady True, or ImageReady False (Pulling: -EAGAIN, PullFailed: -EIO or
 * -EPERM) with err. Records the digest in sd. */
int agent_image_job_rootfs(struct agent_daemon *d, struct agent_session *s, const char *sd,
                           char **ret_rootfs, struct fk_error *err);
/* What exec and afterStart of session key apply from its image: the image's Env followed by
 * env, its WorkingDir and User, and (want_command) Entrypoint + Cmd. -ENOENT: not an OCI session.
 * Without d->lock. */
struct agent_image_exec {
        char **env;  /* owned strv */
        char *cwd;   /* owned or NULL */
        char *user;  /* owned or NULL (root) */
        char **argv; /* owned or NULL */
};
int agent_image_exec_prepare(struct agent_daemon *d, const char *key, char *const *env,
                             bool want_command, struct agent_image_exec *ret);
void agent_image_exec_done(struct agent_image_exec *x);

/* Removes the images nothing uses any more (not those pulled by hand). Without d->lock. */
void agent_image_collect(struct agent_daemon *d);
