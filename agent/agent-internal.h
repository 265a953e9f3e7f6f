/* SPDX-License-Identifier: MIT */
/* Inside fk_agent only: the session record, the daemon, the status JSON, the state store and
 * the manifest-directory source. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "agent/agent.h"
#include "agent/store/store.h"
#include "common/util.h"
#include "manifest/manifest.h"

enum agent_source {
        AGENT_SOURCE_API,
        AGENT_SOURCE_FILE,
        AGENT_SOURCE_CLUSTER, /* assigned by the control plane (agent/daemon-cluster.c) */
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
/* TCG translation cache (MiB) of a restored guest (fork, rollback): see docs/benchmarks.md */
#define AGENT_RESTORED_TB_MIB   64
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
        bool seen;            /* scratch for the manifest-dir sync */
        int audited_phase;    /* phase last written to the audit log, -1: none yet */
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

/* ---- workspace disk (disk.c): qcow2 overlays under <state>/disk ---------------------------- */

/* <state>/disk (caller frees). */
int agent_disk_dir(const char *state_dir, char **ret);
/* The active overlay of session key whose state dir is sd (a path in sd/disk, caller frees),
 * from its state record; -ENOENT when none was made yet (or the file is gone). */
int agent_disk_active(struct agent_store *st, const char *sd, const char *key, char **ret);
/* Records path (a file in key's disk dir) as its active overlay (err as agent_store_update). */
int agent_disk_set_active(struct agent_store *st, const char *key, const char *path,
                          struct fk_error *err);
/* A free name <state>/disk/PREFIX-N.qcow2 (creates the dir; caller frees). */
int agent_disk_next_path(const char *state_dir, const char *prefix, char **ret);
/* Virtual size of a qcow2 image (its header) or size of a raw file. */
int agent_disk_virtual_size(const char *path, uint64_t *ret);
/* qemu-img create -f qcow2 -u -b backing -F raw|qcow2 path SIZE (format sniffed). err set. */
int agent_disk_create_overlay(const char *path, const char *backing, struct fk_error *err);
/* Depth of the backing chain of a qcow2 (1: no backing) and its bottom file (heap, may be NULL
 * when not wanted). Reads the headers, no qemu-img. */
int agent_disk_chain(const char *path, unsigned *ret_depth, char **ret_base);
/* When path's chain is deeper than max_depth, rebases it (qemu-img rebase, not while a QEMU
 * writes it) straight onto the chain's bottom. 1 compacted, 0 nothing to do, -errno + err. */
int agent_disk_compact(const char *path, unsigned max_depth, struct fk_error *err);
#define AGENT_DISK_MAX_DEPTH 16
/* Allocated bytes of path and every layer under it (an upper bound of what qemu-img convert
 * writes). */
uint64_t agent_disk_chain_allocated(const char *path);
/* Hard-links layer and every layer under it that lives in the same directory into dst_dir
 * (created), keeping their names, so the chain resolves there without the source dir (backing
 * names inside a directory are relative). *ret (may be NULL): the link of layer (heap). */
int agent_disk_link_chain(const char *layer, const char *dst_dir, char **ret, struct fk_error *err);

/* qemu-img convert -U -O qcow2 src dst: a standalone copy of a (read-only) chain. */
int agent_disk_convert(const char *src, const char *dst, struct fk_error *err);
/* The active overlay, created over base (the image's raw workspace.img) the first time and
 * recorded in key's state record. *ret is a heap path. err set on failure. */
int agent_disk_prepare(struct agent_store *st, const char *sd, const char *key, const char *base,
                       char **ret, struct fk_error *err);
/* The empty ext4 workspace base of mib MiB (label "workspace") that size classes with diskMiB
 * boot over: <node_state_dir>/disks/workspace-<mib>M.img, made once (sparse, mkfs.ext4 under a
 * temp name, renamed into place) and shared read-only by every overlay. *ret is a heap path. */
int agent_disk_workspace_base(const char *node_state_dir, unsigned mib, char **ret,
                              struct fk_error *err);

/* ---- secrets (secrets.c): spec.secrets values for one boot ---------------------------------- */

#define AGENT_SECRET_MAX      (64 * 1024) /* a file or a mint's stdout beyond this is refused */
#define AGENT_MINT_TIMEOUT_MS 10000
#define AGENT_SECRETS_DIR     "/run/forklet/secrets" /* in the guest (tmpfs) */

struct agent_secret {
        char name[MANIFEST_SECRET_NAME_MAX + 1];
        unsigned char *value; /* owned, wiped when freed */
        size_t size;
        bool minted;
};
struct agent_secret_set {
        struct agent_secret *v; /* owned array of n */
        size_t n;
};
/* Wipes and frees the values; leaves s empty. */
void agent_secret_set_done(struct agent_secret_set *s);
/* cmd + "--session" key "--parent" parent "--fork-id" fork_id (NULL: ""). Caller frees *ret. */
int agent_secrets_mint_argv(char *const *cmd, const char *key, const char *parent,
                            const char *fork_id, char ***ret);
/* Runs argv (argv[0] absolute; stdin /dev/null, stderr inherited) and returns its stdout
 * (heap, caller frees): -EFBIG past max bytes, -ETIMEDOUT (killed), -EPROTO on a non-zero exit,
 * -ENODATA when empty. Messages never hold the output. */
int agent_secrets_run(char *const *argv, size_t max, unsigned timeout_ms, unsigned char **ret,
                      size_t *ret_size, struct fk_error *err);
/* Every secret of m for one boot of session key (files read, minted ones minted with parent and
 * fork_id). On failure nothing is returned. Does not log. */
/* status.identity for a boot that delivered secrets (checkpoint: the id restored from, NULL
 * on a cold boot; restored: the guest accepted a new identity). New reference or NULL. */
json_t *agent_identity_ledger(const char *fork_id, const char *checkpoint,
                              const struct agent_secret_set *secrets, bool restored, bool reseeded);
int agent_secrets_resolve(const struct node_config *cfg, const struct session_manifest *m,
                          const char *key, const char *parent, const char *fork_id,
                          struct agent_secret_set *ret, struct fk_error *err);

/* ---- fork engine (checkpoint.c, fork.c) ------------------------------------------------------ */

/* What a boot restores from (resolved under the lock, carried out by the boot job). */
struct agent_restore {
        char *ck_dir;     /* owned: checkpoint dir (state, ram), NULL: cold boot */
        char *layer;      /* owned: disk layer the new overlay goes over, NULL: keep the disk */
        bool private_ram; /* map ck_dir/ram share=off (copy-on-write): forks and rollbacks */
        bool rollback;    /* the session's own checkpoint (else a fork's first start) */
        bool balloon;     /* its source had a balloon device (meta.json "balloon") */
        char fork_id[96]; /* identity for the guest */
        char ck_id[48];   /* the checkpoint's id (for the lineage) */
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
/* Snapshot mechanics (the runner's run step, no lock): freezes vm's disk layer and exports
 * it with spec as snapshot id (<= 41 bytes) of session key whose state dir is sd. */
int agent_snapshot_take(struct agent_daemon *d, struct agent_vm_ref *vm, const char *sd,
                        const char *key, json_t *spec, const char *id, struct fk_error *err);
/* A new snapshot id "snap_<hex>" into buf (>= 42 bytes). */
void agent_snapshot_new_id(char *buf);
/* The Ready reason of a boot that restores r (RollingBack, Forking, Restoring, Booting), or of
 * its failure (RollbackFailed, ForkFailed, RestoreFailed, BootFailed). A static string. */
const char *agent_restore_reason(const struct agent_restore *r, bool failed);
/* What that boot does, for the condition message ("rolling back to checkpoint ck_..."). */
void agent_restore_describe(const struct agent_session *s, const struct agent_restore *r,
                            unsigned mib, unsigned vcpus, char *buf, size_t size);
/* The kernel and initrd for a restored QEMU (agent/restore-kernel.c): a stub of the bzImage
 * kernel (setup header and code plus a page) and a one-page initrd, made once per kernel under
 * <run_root>/restore-kernels. -EINVAL: not a bzImage (boot with the real one). Does not log. */
int agent_restore_kernel(const char *run_root, const char *kernel, char **ret_kernel,
                         char **ret_initrd);
/* The stub's length for a kernel whose first n bytes are head (file_size in all), or -EINVAL
 * when it is not a bzImage of boot protocol 2.00+ with a payload. Pure. */
long agent_restore_kernel_stub_len(const uint8_t *head, size_t n, uint64_t file_size);
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
        bool ran;               /* a job served it (not refused by the planner) */
        bool done;
        int r; /* outcome: >= 0 or -errno with err */
        struct fk_error err;
        char id[64];   /* CHECKPOINT, SNAPSHOT: the new id */
        json_t *names; /* FORK: the new names (owned) */
        int refs;      /* the queue's and each waiter's */
        struct agent_intent *next;
};

struct agent_intent_args {
        enum core_intent_kind kind;
        const char *arg;      /* see struct agent_intent */
        unsigned count;       /* FORK */
        const char *idem_key; /* NULL: none */
};
struct agent_intent_outcome {
        char id[64];
        json_t *names; /* new reference or NULL */
};
/* Records the intent on ns/name, lets the runner decide, and waits up to timeout_ms for its
 * outcome (an unnamed checkpoint joins one queued or in flight). -ETIMEDOUT when it is still
 * queued (then withdrawn) or running; else its outcome. Takes the lock. */
int agent_daemon_intent(struct agent_daemon *d, const char *ns, const char *name,
                        const struct agent_intent_args *a, unsigned timeout_ms,
                        struct agent_intent_outcome *ret, struct fk_error *err);
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

/* Under the lock: plans every session (agent/daemon.c's pass), runs every action when all,
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
/* Under the lock, from a job's end: s is idle again; intents waiting on it are decided. */
void agent_runner_job_end(struct agent_daemon *d, struct agent_session *s);
/* Under the lock, from the boot job's end: the rollback intent it served ends (0 when s is
 * Running again, -EIO with the Ready message otherwise). */
void agent_runner_boot_done(struct agent_daemon *d, struct agent_session *s);

/* Per-session directories (caller frees). */
int agent_session_run_dir(const char *run_dir, const char *key, char **ret);
int agent_session_state_dir(const char *state_dir, const char *key, char **ret);

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
        struct agent_image_store *images; /* owned, made on first use (agent/image.h) */
};

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
/* status.lastFailure (new reference) or JSON null. */
json_t *agent_failure_json(const struct agent_failure *f);
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
 * RAM + qemuOverheadMiB, memory.high = max - overhead/4, pids, ioWeight. Pure. */
void agent_resources_limits(const struct node_config *cfg, const struct size_class *sc,
                            struct cg_limits *ret);
/* Before a boot (worker thread, no lock): kills leftovers in the session's cgroup, creates it
 * with the class limits and prepares the pre-exec join (*ret caller-owned). 0 without
 * resource control (*ret NULL). Errors in err. */
int agent_resources_prepare(struct agent_daemon *d, const char *key, const struct size_class *sc,
                            struct cg_join **ret, struct fk_error *err);
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
/* True when pid is a process of the node whose runDir is run_dir: a QEMU forkletd started
 * names "<run_dir>/sessions/" on its command line. Reads /proc/PID/cmdline; does not log. */
bool agent_resources_pid_is_ours(pid_t pid, const char *run_dir);
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

/* The netns name of a session of this node: "fk<hash(stateDir)>-<key>" (shortened with a hash
 * when too long), and the prefix alone. */
int agent_net_name(const struct node_config *cfg, const char *key, char *buf, size_t size);
void agent_net_prefix(const struct node_config *cfg, char *buf, size_t size);
/* Re-attaches networks of adopted VMs and removes orphans (before the thread starts). */
void agent_daemon_net_start(struct agent_daemon *d);
/* Live egress update after a spec change (under the lock). */
void agent_daemon_net_observe(struct agent_daemon *d, struct agent_session *s);
/* Removes s's network (worker thread, s busy): teardown of its handle, or by name. */
void agent_daemon_net_destroy(struct agent_daemon *d, struct agent_session *s);

/* Port-forward relays: a connected fd to guest port of a Running session, from inside its netns
 * (-ENOENT, -EAGAIN not Running, -EPERM port not in spec.ports, -ECONNREFUSED ...; err says). */
int agent_daemon_port_connect(struct agent_daemon *d, const char *ns, const char *name,
                              uint16_t port, struct fk_error *err);
/* The same checks without connecting: 0 or -errno with err. */
int agent_daemon_port_connect_check(struct agent_daemon *d, const char *ns, const char *name,
                                    uint16_t port, struct fk_error *err);
struct agent_fwd;
/* Registers a relay between two fds (both owned by the caller's relay thread) under key. */
int agent_fwd_register(struct agent_daemon *d, const char *key, int a, int b,
                       struct agent_fwd **ret);
void agent_fwd_unregister(struct agent_daemon *d, struct agent_fwd *f);
/* Counts a relay thread (begin before it starts, end as its very last step). */
void agent_fwd_thread_begin(struct agent_daemon *d);
void agent_fwd_thread_end(struct agent_daemon *d);
/* Shuts down every relay and waits until their threads are done (API shutdown). */
void agent_fwd_close_all(struct agent_daemon *d);
/* Shuts down every relay of key (session stopping or deleted). */
void agent_fwd_close_key(struct agent_daemon *d, const char *key);

/* ---- API internals ----------------------------------------------------------------------- */

struct MHD_Connection;

/* A request being served: route, collected body, the daemon. */
struct api_request {
        struct agent_daemon *d;
        const struct node_config *cfg;
        struct api_route route;
        const char *method; /* borrowed from MHD */
        const char *url;    /* borrowed from MHD (path only) */
        char *body;         /* owned, NUL-terminated */
        size_t body_size;
        bool too_large;
        bool tcp;        /* arrived on the TCP listener */
        char caller[64]; /* "uid:N" or "token:ID" for the audit log */
        uint64_t t0_ns;  /* monotonic arrival time */
};

/* ---- API authentication, idempotency, operational endpoints (api-auth.c, api-idem.c,
 * api-watch.c) ------------------------------------------------------------------------- */

#define API_TOKEN_MIN 32

struct api_token {
        char value[1024];
        size_t size;
        char id[2 * FK_SHA256_SIZE + 1]; /* first 12 hex digits of SHA-256(value) */
};
/* Loads a bearer token: a file of mode 0600 or stricter, >= API_TOKEN_MIN printable bytes
 * (a trailing newline is ignored). Errors in err. */
int api_token_load(const char *path, struct api_token *ret, struct fk_error *err);
/* Constant-time in the length of the expected token. */
bool api_token_equal(const struct api_token *t, const char *given);
/* TCP: checks "Authorization: Bearer" (-EACCES); unix: the peer's uid. Fills caller. */
int api_authenticate(struct MHD_Connection *c, bool tcp, const struct api_token *t, char *caller,
                     size_t size);
struct sockaddr_in;
/* "A.B.C.D:PORT" -> address; without tls, addresses outside 127.0.0.0/8 are refused (-EPERM). */
int api_parse_listen(const char *listen, bool tls, struct sockaddr_in *ret, struct fk_error *err);

/* TLS of the TCP listener (api-tls.c). */
#define API_TLS_PIN_MAX 64 /* "sha256//" + 44 base64 characters + NUL */
struct api_tls {
        bool on;
        char *cert, *key, *client_ca; /* owned PEM text (client_ca NULL: no client certs) */
        char pin[API_TLS_PIN_MAX];    /* the certificate's public-key pin */
};
/* Loads api.tlsCert/tlsKey/tlsClientCA (nothing when unset; ret->on false). The key file must
 * be a regular file not readable by group or others (-EPERM naming api.tlsKey). */
int api_tls_load(const struct node_config *cfg, struct api_tls *ret, struct fk_error *err);
/* Frees the PEM texts (the key is wiped first); leaves t zeroed. */
void api_tls_done(struct api_tls *t);
struct MHD_OptionItem;
/* Fills opts (max >= 5 entries) with MHD's TLS options, MHD_OPTION_END-terminated; returns
 * how many (0 when TLS is off). The strings stay borrowed from t. */
size_t api_tls_options(const struct api_tls *t, struct MHD_OptionItem *opts, size_t max);
/* Mutual TLS: 0 when the client presented a certificate that api.tlsClientCA verifies. */
int api_tls_check_client(struct MHD_Connection *c);

/* A reply as sent (status, JSON text, X-Forklet-Apply), for Idempotency-Key replays and the
 * audit. api_reply_json notes every reply in the thread's active capture. */
struct api_capture {
        unsigned status;
        char *body;  /* owned */
        char *apply; /* owned */
};
void api_capture_begin(struct api_capture *c);
void api_capture_end(void);
void api_capture_note(unsigned status, const char *text, const char *apply);
void api_capture_done(struct api_capture *c);
struct api_idem;
struct api_idem *api_idem_new(void);
struct api_idem *api_idem_free(struct api_idem *m);
/* 0: first use (the caller must api_idem_finish), 1: *ret_replay filled (caller frees with
 * api_capture_done), -EINVAL: key reused for another request, -ENOSPC: table full. */
int api_idem_begin(struct api_idem *m, const char *key, const char *fingerprint,
                   struct api_capture *ret_replay);
/* Stores result (taken) for replays; a streamed reply (no body) forgets the key. */
void api_idem_finish(struct api_idem *m, const char *key, struct api_capture *result);
int api_reply_capture(struct MHD_Connection *c, const struct api_capture *cap);
int api_handle_metrics(struct MHD_Connection *c, struct api_request *req);
int api_handle_audit_verify(struct MHD_Connection *c, struct api_request *req);
/* Streams session events until the client leaves or *stopping is set. */
int api_handle_watch(struct MHD_Connection *c, struct api_request *req,
                     const atomic_bool *stopping);

/* Queue a reply (status + JSON, reference stolen) on the connection. Return MHD_YES/NO. */
int api_reply_json(struct MHD_Connection *c, unsigned status, json_t *j, const char *apply_result);
/* {"kind":"Status","code","reason","message","details":[...]}; details may be NULL. */
int api_reply_error(struct MHD_Connection *c, unsigned status, const char *reason,
                    char *const *details, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* Maps a -errno from the daemon to an HTTP status and reason. */
unsigned api_status_from_errno(int r, const char **ret_reason);
int api_handle_sessions(struct MHD_Connection *c, struct api_request *req);
/* The server's view of exec streams: the stopping flag they watch, and how many are open. */
struct api_exec_streams {
        const atomic_bool *stopping;
        atomic_uint *open;
};
/* Streams an exec; the stream ends with an error line once *es->stopping is set. */
int api_handle_exec(struct MHD_Connection *c, struct api_request *req,
                    const struct api_exec_streams *es);
int api_handle_log(struct MHD_Connection *c, struct api_request *req);
/* checkpoints, forks, rollback, snapshots, restore of a session. */
int api_handle_fork(struct MHD_Connection *c, struct api_request *req);
int api_handle_action(struct MHD_Connection *c, struct api_request *req);
int api_handle_files(struct MHD_Connection *c, struct api_request *req);
/* .../NAME/portforward?port=P (GET: check; POST + Upgrade: relay). */
int api_handle_portforward(struct MHD_Connection *c, struct api_request *req);
/* Pre-check for exec: -ENOENT / -EAGAIN with err. */
int agent_daemon_exec_check(struct agent_daemon *d, const char *ns, const char *name,
                            struct fk_error *err);

/* ---- Kubernetes API conventions (api-kube*.c, docs/kubernetes.md) ------------------------ */

struct manifest_diag;
/* GET/POST/PUT/PATCH/DELETE of an API_ROUTE_KUBE path (watch streams end at *stopping). */
int api_kube_handle(struct MHD_Connection *c, struct api_request *req, const atomic_bool *stopping);
/* Discovery and OpenAPI documents (api-kube-discovery.c, api-kube-openapi.c); new references,
 * NULL on ENOMEM. */
json_t *api_kube_version_json(void);
json_t *api_kube_discovery_json(enum api_kube_path p);
json_t *api_kube_openapi_root(void);
json_t *api_kube_openapi_gv(void);

/* metav1.Status (api-kube-status.c). Pure: the Status object for a failure. causes (stolen,
 * may be NULL) is details.causes. */
json_t *api_kube_status_json(unsigned code, const char *reason, const char *name,
                             const char *message, json_t *causes);
/* -errno of a daemon call -> HTTP code and Kubernetes reason. */
unsigned api_kube_errno_status(int r, const char **ret_reason);
/* Validator messages ("<json>: spec.egress[0]: invalid ...") -> [{reason, field, message}]. */
json_t *api_kube_causes(char *const *messages, size_t n);
/* Queue a Status reply (logs nothing). */
int api_kube_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
                          const char *name, json_t *causes, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
int api_kube_reply_errno(struct MHD_Connection *c, int r, const char *name, const char *msg);

/* Selectors (api-kube-select.c). Pure. */
#define API_KUBE_SELECTOR_MAX 16
enum api_kube_sel_op { KSEL_EQ, KSEL_NE, KSEL_EXISTS, KSEL_NOT_EXISTS, KSEL_IN, KSEL_NOT_IN };
struct api_kube_req {
        enum api_kube_sel_op op;
        char key[256];
        char values[8][64]; /* EQ/NE: values[0]; IN/NOT_IN: n_values of them */
        size_t n_values;
};
struct api_kube_selector {
        struct api_kube_req reqs[API_KUBE_SELECTOR_MAX];
        size_t n;
};
/* labelSelector syntax (a=b, a==b, a!=b, a, !a, a in (x,y), a notin (x)); NULL/"": match all.
 * -EINVAL with err naming the problem. */
int api_kube_label_selector_parse(const char *s, struct api_kube_selector *ret,
                                  struct fk_error *err);
/* fieldSelector: metadata.name, metadata.namespace, status.phase with =, == or !=. */
int api_kube_field_selector_parse(const char *s, struct api_kube_selector *ret,
                                  struct fk_error *err);
/* Does a Session object match (labels from metadata.labels; fields by their path)? */
bool api_kube_labels_match(const struct api_kube_selector *s, const json_t *obj);
bool api_kube_fields_match(const struct api_kube_selector *s, const json_t *obj);

/* JSON merge patch, RFC 7386 (api-kube-patch.c). Pure: returns the patched document (new
 * reference; target is not changed), NULL on ENOMEM. */
json_t *api_kube_merge_patch(const json_t *target, const json_t *patch);

/* Resource versions and uids (api-kube-rv.c): every object seen gets a resourceVersion that
 * changes when its content does, from one counter seeded by the wall clock (so it grows
 * across restarts). Observing a full list also records deletions for watches. */
/* Stamps metadata.uid/resourceVersion and apiVersion/kind on each item of a full list (all
 * namespaces); returns the list's resourceVersion. */
uint64_t api_kube_observe_list(json_t *items);
/* Stamps one object (a GET or a write reply). */
void api_kube_observe_one(json_t *obj);
/* The events after rv: calls fn(type, object, rv) in resourceVersion order for objects
 * changed (ADDED/MODIFIED) or deleted since; returns the newest rv visited (>= rv). */
uint64_t api_kube_changes_since(uint64_t rv,
                                int (*fn)(void *ud, const char *type, json_t *obj, uint64_t rv),
                                void *ud);
/* The uid of a session: a UUID from its namespace, name and creationTimestamp. Pure. */
void api_kube_uid(const char *ns, const char *name, const char *created, char out[37]);

/* Table responses for kubectl get (api-kube-table.c). Pure (now_s: wall clock seconds). */
/* Does the Accept header ask for meta.k8s.io Table? */
bool api_kube_wants_table(const char *accept);
/* A Table of objects (borrowed); with_columns false leaves columnDefinitions out (watch
 * events after the first); include: "None", "Object" or NULL (PartialObjectMetadata). */
json_t *api_kube_table(json_t *const *objs, size_t n, const char *include, bool with_columns,
                       const char *rv, int64_t now_s);
/* "5s", "3m", "2h", "4d": kubectl's AGE. */
void api_kube_age(int64_t seconds, char *buf, size_t size);

/* Watches (api-kube-watch.c): ?watch=1 on a sessions collection. */
struct api_kube_watch_opts {
        char ns[API_PATH_SEGMENT_MAX]; /* "" = all namespaces */
        struct api_kube_selector labels, fields;
        uint64_t since; /* resourceVersion; 0: ADDED for every object first */
        bool table, bookmarks;
        char include[16];
        unsigned timeout_s; /* timeoutSeconds; 0: none */
};
/* Appends {"type": type, "object": obj} and a newline to the watch stream buffer *out (heap,
 * *out_size bytes). 0 or -ENOMEM (the buffer unchanged). */
int api_watch_event_append(char **out, size_t *out_size, const char *type, json_t *obj);
/* Sleeps until the reconcile pass after *revision (or timeout_ms, whole seconds), then sets
 * *revision to the daemon's (api-watch.c; both watches use it). Takes d->lock. */
void api_watch_wait_pass(struct agent_daemon *d, uint64_t *revision, unsigned timeout_ms);
int api_kube_watch(struct MHD_Connection *c, struct api_request *req,
                   const struct api_kube_watch_opts *o, const atomic_bool *stopping);

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
/* The daemon's store, made on first use (NULL only on ENOMEM or an unusable stateDir). */
struct agent_image_store *agent_daemon_images(struct agent_daemon *d);
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
/* Who uses digest: "session NS/NAME (N checkpoints)", "snapshot ID" (strv, caller frees);
 * ret_in_use (may be NULL): every digest any of them uses. Takes d->lock. */
int agent_image_users(struct agent_daemon *d, const char *digest, char ***ret_users,
                      char ***ret_in_use);
/* Removes the images nothing uses any more (not those pulled by hand). Without d->lock. */
void agent_image_collect(struct agent_daemon *d);
/* GET/POST /api/v1alpha1/images, GET/DELETE /api/v1alpha1/images/ID (api-images.c). */
struct MHD_Connection;
struct api_request;
int api_handle_images(struct MHD_Connection *c, struct api_request *req);
