/* SPDX-License-Identifier: MIT */
/* forkletd: the session table and its executor (VM operations behind an ops struct, time behind
 * a clock), the manifest-dir source and the API. Phases, the planner and capacity arithmetic
 * are the pure core (core/core.h). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "core/core.h"
#include "agent/image/image.h"
#include "agent/obs/obs.h"

typedef struct json_t json_t; /* jansson */
struct node_config;
struct session_manifest;
struct vmm_exec_request;
struct vmm_exec_result;

/* ---- injected clock and VM operations -------------------------------------------------------- */

struct agent_clock {
        uint64_t (*now_real_ns)(void *userdata);
        uint64_t (*now_mono_ns)(void *userdata);
        void *userdata;
};
/* The system clock (fk_now_real_ns / fk_now_mono_ns). */
extern const struct agent_clock agent_clock_system;

/* The serial console log of a session: <state dir>/console.log, at most AGENT_CONSOLE_MAX
 * bytes, the previous boot's (or the overflow) in console.log.1. */
#define AGENT_CONSOLE_LOG "console.log"
#define AGENT_CONSOLE_MAX (1024u * 1024)

/* Where one boot's time went (the fork timing breakdown), in ns; 0: the step did not run.
 * The executor times its steps, the VM backend the ones inside ops.boot. */
enum agent_boot_step {
        AGENT_BOOT_STEP_QUEUE,    /* request to the boot job's start (planner pass, busy flag) */
        AGENT_BOOT_STEP_LOCK,     /* the fork's work waiting for the daemon lock */
        AGENT_BOOT_STEP_LINKS,    /* origin/ hard links and the session record (fork request) */
        AGENT_BOOT_STEP_DISK,     /* run dir, secrets, the overlay over the checkpoint's layer */
        AGENT_BOOT_STEP_NETNS,    /* the session's netns, veth, tap, nftables */
        AGENT_BOOT_STEP_CGROUP,   /* its cgroup made and limited */
        AGENT_BOOT_STEP_JAIL,     /* the jail's uid, file grants and mount plan */
        AGENT_BOOT_STEP_SPAWN,    /* fork to exec of QEMU, pre-exec hooks included */
        AGENT_BOOT_STEP_PRE_EXEC, /* of which the child's hooks (join netns and cgroup, tap,
                                   * jail mounts), measured in the child */
        AGENT_BOOT_STEP_QEMU,     /* exec to QMP connected */
        AGENT_BOOT_STEP_RESTORE,  /* incoming migration of the checkpoint's device state */
        AGENT_BOOT_STEP_AGENT,    /* guest agent connected and answering */
        AGENT_BOOT_STEP_IDENTITY, /* fork id, entropy, secrets, identity file, clock */
        AGENT_BOOT_STEP_FINISH,   /* status, grants on the links revoked, origin/ removed */
        AGENT_BOOT_STEP_TOTAL,    /* request (or job start) to Running */
        _AGENT_BOOT_STEP_MAX,
};

struct agent_boot_timing {
        uint64_t ns[_AGENT_BOOT_STEP_MAX];
};

/* "queue", "lock", ... (the status.bootTiming keys without "Ms"); NULL when out of range. */
const char *agent_boot_step_to_string(enum agent_boot_step s);
/* "links 2 ms, disk 14 ms, ..., total 480 ms": the steps that ran (ns > 0), in order, each
 * rounded to a ms (at least 1 when it ran), into buf (truncated to size). Pure. */
void agent_boot_timing_format(const struct agent_boot_timing *t, char *buf, size_t size);
/* {"queueMs": 1.2, ...} for the steps that ran (ms with 0.1 precision); NULL: out of memory. */
json_t *agent_boot_timing_json(const struct agent_boot_timing *t);

/* Everything needed to boot one session VM. Strings are borrowed for the call. */
#define AGENT_PRE_EXEC_MAX 4

struct agent_secret;

struct agent_boot_params {
        const char *key;       /* "<namespace>.<name>" */
        const char *name;      /* session name */
        const char *run_dir;   /* per-session run dir (exists, empty) */
        const char *state_dir; /* per-session state dir (exists) */
        const char *kernel;
        const char *initrd;
        unsigned vcpus;
        unsigned memory_mib;
        int accel;                   /* enum vmm_accel */
        unsigned boot_timeout_ms;    /* agent readiness */
        const volatile bool *cancel; /* set when the session is deleted meanwhile */
        /* Called once QEMU runs (before the guest is ready) with what identifies it (the record
         * adopt takes, borrowed): it is stored and status shows its pid. A failure (-errno)
         * ends the boot: nothing runs that the state store does not know. */
        int (*spawned)(void *ctx, pid_t pid, const json_t *record);
        void *spawned_ctx;
        /* Run in QEMU's child between fork and exec, in order (join the session's cgroup, enter
         * its netns, drop privileges, ...). Each must be async-signal-safe; the first failure
         * aborts the spawn with its -errno. Borrowed. */
        struct agent_pre_exec {
                int (*fn)(void *userdata);
                void *userdata;
                const char *step; /* named in a failure report ("join netns"), NULL: "hook N" */
        } pre_exec[AGENT_PRE_EXEC_MAX];
        size_t n_pre_exec;
        /* Extra kernel command line (e.g. forklet.ip=...), NULL: none. Borrowed. */
        const char *append;
        /* Extra QEMU inputs the session owns: workspace disk and tap, NULL: none. Borrowed. */
        const char *disk;
        const char *tap;
        const char *mac;
        /* The image's read-only root disk (rootfs.img, "debian"), NULL: the initramfs is the
         * root. The guest finds it by its label (AGENT_ROOTFS_LABEL). Borrowed. */
        const char *rootfs;
        /* Start from a checkpoint instead of a cold boot (fork, rollback); NULL: cold boot. */
        const char *restore_dir; /* holds "state" (device state saved with x-ignore-shared) */
        const char *mem_path;    /* guest RAM file; NULL: <run_dir>/mem.ram */
        bool mem_private;        /* map mem_path share=off (a fork's copy-on-write RAM) */
        const char *fork_id;     /* identity handed to the guest after a restore */
        uid_t jail_uid;          /* QEMU's own uid (agent/jail.h), 0: not jailed */
        /* spec.secrets values (agent-internal.h), written to /run/forklet/secrets/NAME mode
         * 0400 once the agent is ready: right after the identity on a restore. Borrowed. */
        const struct agent_secret *secrets;
        size_t n_secrets;
        /* The backend adds its steps' times (spawn ... identity) here; NULL: not timed. */
        struct agent_boot_timing *timing;
        /* TCG translation cache in MiB for this QEMU, 0: the vmm default. */
        unsigned tb_size_mib;
};

/* A checkpoint of a running VM (see agent_vm_ops.checkpoint). Strings borrowed. */
struct agent_checkpoint_params {
        const char *dir;         /* exists, empty: receives "state" and "ram" */
        const char *new_disk;    /* overlay (over frozen_disk) the VM continues on; NULL: no disk */
        const char *frozen_disk; /* the layer that now holds the disk as of the checkpoint */
        unsigned timeout_ms;
};

struct agent_checkpoint_result {
        uint64_t pause_ns;    /* guest paused */
        uint64_t ram_bytes;   /* touched RAM copied */
        uint64_t state_bytes; /* device state */
        bool disk_switched;   /* the VM now writes to new_disk (also when a later step failed) */
        bool materialized;    /* private RAM (a fork): full stream loaded into a helper QEMU */
        bool live;            /* the guest ran while its RAM was saved (else stop-and-copy) */
        bool background;      /* live by background snapshot (else precopy) */
        bool forced;          /* live, but did not converge: stopped to finish the copy */
        bool write_pending;   /* dir holds a stream: checkpoint_write makes state + ram */
        uint64_t downtime_ms; /* live: QEMU's reported downtime */
        uint64_t switch_ns;   /* live: the disk switch at the switch-over */
        char fallback[256];   /* stop-and-copy because the live path was refused: why */
};

/* What a VM backend saw of its guest since the VM was attached (agent_vm_ops.health): the
 * counters only grow. Text comes from the guest: printable ASCII only. */
#define AGENT_CONSOLE_TAIL 10  /* console lines kept */
#define AGENT_CONSOLE_LINE 160 /* bytes per line, NUL included */
struct agent_vm_health {
        unsigned panics;                /* console "Kernel panic" lines and GUEST_PANICKED events */
        char panic[AGENT_CONSOLE_LINE]; /* what the first one said */
        unsigned oom_kills;             /* console "Out of memory: Killed process" lines */
        char oom[AGENT_CONSOLE_LINE];   /* the last one */
        bool io_stopped;                /* QEMU stopped the VM on a disk error (BLOCK_IO_ERROR) */
        unsigned io_stops;              /* such stops so far */
        bool io_nospace;                /* the last error was ENOSPC */
        char io_device[64];             /* its device or node name */
        char io_reason[96];             /* and the errno text QEMU reported */
        char tail[AGENT_CONSOLE_TAIL][AGENT_CONSOLE_LINE]; /* last console lines, oldest first */
        unsigned n_tail;
};

/* VM operations the executor calls. A VM is an opaque handle owned by the caller of boot. */
struct agent_vm_ops {
        /* The backend runs QEMU as a process that the node's jail (agent/jail.h) can drop to
         * its own uid; false for test fakes. */
        bool jailable;
        /* Boots and waits for the guest agent. On failure cleans up what it started. */
        int (*boot)(void *userdata, const struct agent_boot_params *p, void **ret_vm,
                    struct fk_error *err);
        /* Re-attaches to a VM left running by a previous forkletd, from the record boot gave
         * (spawned) or record returned, kept in the state store (-ESRCH: gone). */
        int (*adopt)(void *userdata, const char *run_dir, const json_t *record, int accel,
                     void **ret_vm, struct fk_error *err);
        /* What identifies vm now (pid, start time, paths; new reference), after something
         * changed it (a checkpoint moves the disk); NULL in backends without records. */
        json_t *(*record)(void *vm);
        /* Graceful stop; returns once the process is gone. */
        int (*stop)(void *userdata, void *vm, unsigned timeout_ms);
        int (*pause)(void *userdata, void *vm, struct fk_error *err);
        int (*resume)(void *userdata, void *vm, struct fk_error *err);
        /* Runs a command (see vmm_agent_exec); thread-safe against the other ops. */
        int (*exec)(void *userdata, void *vm, const struct vmm_exec_request *req,
                    int (*out_fn)(int stream, const void *data, size_t size, void *ud),
                    void *out_userdata, struct vmm_exec_result *ret, struct fk_error *err);
        /* Pauses, saves device state and RAM into p->dir, moves the disk onto p->new_disk,
         * resumes (also on failure). A VM with private RAM (a fork) is materialized. NULL in
         * backends without checkpoints. */
        int (*checkpoint)(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                          struct agent_checkpoint_result *ret, struct fk_error *err);
        /* The bytes a checkpoint of vm writes at least (its RAM file's allocated blocks; twice
         * that for private RAM, which is materialized through a stream); NULL: unknown. */
        uint64_t (*checkpoint_bytes)(void *vm);
        /* After checkpoint returned write_pending (the guest runs again): turns the stream in
         * p->dir into the files forks map (state, ram) through a helper QEMU; fills ram_bytes
         * and state_bytes. Runs without the session busy, beside the running VM. NULL: never
         * pending. */
        int (*checkpoint_write)(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                                struct agent_checkpoint_result *ret, struct fk_error *err);
        /* Freezes the guest filesystem on /workspace, moves the disk onto new_disk (the old
         * overlay becomes read-only), thaws. */
        int (*snapshot_disk)(void *userdata, void *vm, const char *new_disk, struct fk_error *err);
        /* Guest files (see vmm_agent_write_file/read_file); NULL: not supported. */
        int (*write_file)(void *userdata, void *vm, const char *path, const void *data, size_t size,
                          unsigned mode, struct fk_error *err);
        int (*read_file)(void *userdata, void *vm, const char *path, size_t max, void **ret,
                         size_t *ret_size, struct fk_error *err);
        pid_t (*pid)(void *vm);
        /* A pollable fd readable once QEMU exited, or -1. */
        int (*exit_fd)(void *vm);
        /* 1 and a static reason when exited, 0 while running. */
        int (*poll_exit)(void *vm, int *ret_status, const char **ret_reason);
        /* Guest health (health.c); each NULL in a backend without it. health: what was seen so
         * far, without blocking (QMP events already sent, the console's report); only for a VM
         * no job uses (its QMP client is the job's). health_fd: readable when QEMU sent
         * something (poll), or -1. ping: one round trip to the guest agent; thread-safe.
         * kill: ends a VM whose guest cannot power off (QMP quit, SIGTERM, SIGKILL).
         * disk_free: free bytes on the filesystem holding the VM's disk (-ENOENT: no disk). */
        int (*health)(void *userdata, void *vm, struct agent_vm_health *ret);
        int (*health_fd)(void *vm);
        int (*ping)(void *userdata, void *vm, unsigned timeout_ms, struct fk_error *err);
        int (*kill)(void *userdata, void *vm, unsigned timeout_ms);
        int (*disk_free)(void *userdata, void *vm, uint64_t *ret);
        void (*free)(void *userdata, void *vm);
        void *userdata;
};
/* The real operations over vmm/ (QEMU, QMP, guest agent). */
extern const struct agent_vm_ops agent_vm_ops_qemu;

/* Session networking the executor calls (netns, tap, egress, resolver). A network is an opaque
 * handle owned by the session. Without ops (unit tests) sessions boot without a network. */
struct agent_net_ops {
        /* Sets up (or re-attaches to) the session's network with m's egress (m may be NULL:
         * open). Cleans up what it made on failure. */
        int (*setup)(const struct node_config *cfg, const char *key,
                     const struct session_manifest *m, void **ret, struct fk_error *err);
        /* Replaces the egress policy live (atomic; resolver names and nft sets together). */
        int (*update)(void *net, const struct session_manifest *m, struct fk_error *err);
        /* Adds the pre-exec hook (enter the netns), tap, MAC and kernel args to p; the
         * pointers stay valid while net lives. */
        void (*boot_params)(void *net, struct agent_boot_params *p);
        /* status.network (new reference). */
        json_t *(*status)(void *net);
        /* The session netns fd (borrowed, O_CLOEXEC). */
        int (*netns_fd)(void *net);
        /* Removes the kernel state (netns, links, tables, lease) and frees net. */
        int (*teardown)(void *net, struct fk_error *err);
        /* Stops the resolver and frees net; the kernel state stays (forkletd restart). */
        void (*free)(void *net);
        /* Removes networks of this node whose session key is not in keep_keys. Returns the
         * number removed. */
        int (*cleanup)(const struct node_config *cfg, char *const *keep_keys, struct fk_error *err);
};
/* The real network over net/ (root). */
extern const struct agent_net_ops agent_net_ops_real;

/* ---- the daemon ----------------------------------------------------------------------------- */

struct agent_daemon;

enum agent_apply_result {
        AGENT_APPLY_CREATED,
        AGENT_APPLY_CONFIGURED,
        AGENT_APPLY_UNCHANGED,
};
const char *agent_apply_result_to_string(enum agent_apply_result r);

/* Creates the daemon around a loaded node config (borrowed, must outlive it), resolved
 * accelerator, ops and clock (copied). Creates state/run dirs and loads the API sessions
 * stored under stateDir. Does not start threads. Logs what it does. */
int agent_daemon_new(const struct node_config *cfg, int accel, const struct agent_vm_ops *ops,
                     const struct agent_clock *clock, struct agent_daemon **ret);
struct cg_manager;
/* Before agent_daemon_new: thaws the cgroups of sessions that have a run dir, so VMs a previous
 * forkletd paused (QMP stop + freeze) can be reached again for adoption. Logs. */
void agent_cgroups_thaw_for_adoption(struct cg_manager *cg, const struct node_config *cfg);
/* Gives the daemon resource control before agent_daemon_start (cg borrowed, outlives d):
 * session cgroups from now on, and leftovers of sessions this node no longer knows are
 * removed (only when empty or holding QEMUs of this node's runDir). Logs. */
void agent_daemon_set_cgroups(struct agent_daemon *d, struct cg_manager *cg);
/* Gives the daemon session networking (before agent_daemon_start; ops borrowed, static). */
void agent_daemon_set_net(struct agent_daemon *d, const struct agent_net_ops *ops);
/* Starts the reconcile thread (which also watches the manifest directory). With networking it
 * first re-attaches the networks of adopted VMs and removes this node's orphaned ones. */
int agent_daemon_start(struct agent_daemon *d);
/* Asks the reconcile loop to run soon (thread-safe). */
void agent_daemon_wake(struct agent_daemon *d);
/* Stops the reconcile thread and waits for workers. VMs keep running (adopted on restart). */
void agent_daemon_shutdown(struct agent_daemon *d);
struct agent_daemon *agent_daemon_free(struct agent_daemon *d);
/* Runs one reconcile pass synchronously (tests; the thread calls it too). */
int agent_daemon_reconcile(struct agent_daemon *d);
/* Waits until no action is in flight (tests), up to timeout_ms. Returns 1 idle, 0 timeout. */
int agent_daemon_wait_idle(struct agent_daemon *d, unsigned timeout_ms);

/* Applies a validated manifest (taken over, freed on error too) from the API: persisted
 * under stateDir. -EEXIST + err when the name belongs to a manifest-dir file. */
int agent_daemon_apply(struct agent_daemon *d, struct session_manifest *m,
                       enum agent_apply_result *ret, struct fk_error *err);
/* Deletes an API session (-ENOENT; -EPERM for a manifest-dir session, with err). */
int agent_daemon_delete(struct agent_daemon *d, const char *ns, const char *name,
                        struct fk_error *err);
/* New references: one Session (metadata/spec/status), the SessionList, node info. */
int agent_daemon_session_json(struct agent_daemon *d, const char *ns, const char *name,
                              json_t **ret);
int agent_daemon_list_json(struct agent_daemon *d, json_t **ret);
int agent_daemon_node_json(struct agent_daemon *d, json_t **ret);
/* Path of the session's console log (caller frees); -ENOENT for an unknown session. */
int agent_daemon_console_path(struct agent_daemon *d, const char *ns, const char *name, char **ret);
/* Runs a command in a Running session; env of the spec is merged under req->env.
 * -ENOENT unknown session, -EAGAIN not Running (err says the phase). */
int agent_daemon_exec(struct agent_daemon *d, const char *ns, const char *name,
                      const struct vmm_exec_request *req,
                      int (*out_fn)(int stream, const void *data, size_t size, void *ud),
                      void *out_userdata, struct vmm_exec_result *ret, struct fk_error *err);

/* ---- operations: metrics, audit log, operation journal (agent/obs/obs.h) ----------------- */

/* The Prometheus text exposition (version 0.0.4) of the daemon: sessions by phase plus the
 * process-wide metrics (agent/obs/obs.h). *ret is a heap string. Returns 0 or -ENOMEM. */
int agent_daemon_metrics_text(struct agent_daemon *d, char **ret);

/* ---- fork engine (each call logs what it does; err says what failed) ------------------------ */

/* Checkpoints a Running session; *ret_id (>= 41 bytes) "ck_<hex>". A request arriving while
 * one is in flight gets the same id. -ENOENT, -EAGAIN not Running, -EBUSY. */
int agent_daemon_checkpoint_create(struct agent_daemon *d, const char *ns, const char *name,
                                   char *ret_id, struct fk_error *err);
/* {"kind": "CheckpointList", "items": [meta...]} (new reference). */
int agent_daemon_checkpoint_list(struct agent_daemon *d, const char *ns, const char *name,
                                 json_t **ret, struct fk_error *err);
/* -EBUSY naming the dependent forks unless cascade (then they are deleted too). */
int agent_daemon_checkpoint_delete(struct agent_daemon *d, const char *ns, const char *name,
                                   const char *id, bool cascade, struct fk_error *err);
/* Creates count fork sessions NAME-fork-N (next free N) of checkpoint id; they boot in
 * parallel through the reconcile loop. *ret: JSON array of the new names. */
int agent_daemon_fork(struct agent_daemon *d, const char *ns, const char *name, const char *id,
                      unsigned count, json_t **ret, struct fk_error *err);
/* Puts the session back to its own checkpoint id in place; returns once it runs again. */
int agent_daemon_rollback(struct agent_daemon *d, const char *ns, const char *name, const char *id,
                          struct fk_error *err);
/* Filesystem snapshot of the workspace disk (fsfreeze); *ret_id (>= 41 bytes) "snap_<hex>". */
int agent_daemon_snapshot_create(struct agent_daemon *d, const char *ns, const char *name,
                                 char *ret_id, struct fk_error *err);
/* A new session new_name (spec of the snapshot's session) booting fresh on the snapshot's disk. */
int agent_daemon_restore(struct agent_daemon *d, const char *ns, const char *snap,
                         const char *new_name, struct fk_error *err);
/* Sets spec.state (enum session_state) of a session: the pause/resume/stop/start verbs. For an
 * API session the change is persisted like an apply (generation + 1); *ret_changed is false
 * when the state already was that (a no-op that succeeds, also for manifest-dir sessions).
 * -ENOENT unknown; -EPERM for a manifest-dir session (err names the file to edit) or one the
 * control plane assigned; -EAGAIN pause of a Stopped session; -EBUSY being deleted. Logs the
 * change. */
int agent_daemon_set_state(struct agent_daemon *d, const char *ns, const char *name, int state,
                           bool *ret_changed, struct fk_error *err);
/* Waits until the session has acted on its current generation and sits in phase want.
 * -ETIMEDOUT; -EIO when it Failed (and will not restart); -ENOENT when it is gone or its
 * image is missing. err says which. */
int agent_daemon_wait_phase(struct agent_daemon *d, const char *ns, const char *name,
                            enum session_phase want, unsigned timeout_ms, struct fk_error *err);
/* Guest files of a Running session (-ENOENT, -EAGAIN not Running, guest errors), thread-safe.
 * read: *ret is a heap buffer (caller frees), -EFBIG past max bytes. */
int agent_daemon_write_file(struct agent_daemon *d, const char *ns, const char *name,
                            const char *path, const void *data, size_t size, unsigned mode,
                            struct fk_error *err);
int agent_daemon_read_file(struct agent_daemon *d, const char *ns, const char *name,
                           const char *path, size_t max, void **ret, size_t *ret_size,
                           struct fk_error *err);

/* ---- API ------------------------------------------------------------------------------------ */

enum api_route_kind {
        API_ROUTE_NOT_FOUND,
        API_ROUTE_BAD_NAME, /* a path segment is not a valid name */
        API_ROUTE_HEALTHZ,
        API_ROUTE_VERSION,
        API_ROUTE_NODE,
        API_ROUTE_SESSIONS,       /* /api/v1alpha1/sessions */
        API_ROUTE_NS_SESSIONS,    /* /api/v1alpha1/namespaces/NS/sessions */
        API_ROUTE_SESSION,        /* .../namespaces/NS/sessions/NAME */
        API_ROUTE_SESSION_EXEC,   /* .../NAME/exec */
        API_ROUTE_SESSION_LOG,    /* .../NAME/log */
        API_ROUTE_SESSION_ACTION, /* .../NAME/pause|resume|stop|start */
        API_ROUTE_SESSION_FILES,  /* .../NAME/files?path=/abs */
        API_ROUTE_SESSION_SUBRES, /* .../NAME/<other>: for later verbs (checkpoints, forks) */
        API_ROUTE_METRICS,        /* /metrics (Prometheus text) */
        API_ROUTE_AUDIT_VERIFY,   /* /api/v1alpha1/audit/verify */
        API_ROUTE_SESSION_FORK,   /* .../NAME/{checkpoints[/ID],forks,rollback,snapshots,restore} */
        API_ROUTE_IMAGES,         /* /api/v1alpha1/images[/ID] (item: ID) */
        API_ROUTE_KUBE,           /* Kubernetes conventions (api-kube*.c): route.kube says which */
};

/* API_ROUTE_KUBE paths. /apis/forklet.dev/v1alpha1/namespaces/NS/sessions/NAME/SUB for the
 * other subresources routes as /api/v1alpha1's (exec, checkpoints, ...). */
enum api_kube_path {
        API_KUBE_VERSION,     /* /version */
        API_KUBE_API,         /* /api */
        API_KUBE_APIS,        /* /apis */
        API_KUBE_GROUP,       /* /apis/forklet.dev */
        API_KUBE_RESOURCES,   /* /apis/forklet.dev/v1alpha1 */
        API_KUBE_OPENAPI,     /* /openapi/v3 */
        API_KUBE_OPENAPI_GV,  /* /openapi/v3/apis/forklet.dev/v1alpha1 */
        API_KUBE_SESSIONS,    /* /apis/forklet.dev/v1alpha1/sessions (all namespaces) */
        API_KUBE_NS_SESSIONS, /* .../namespaces/NS/sessions */
        API_KUBE_SESSION,     /* .../namespaces/NS/sessions/NAME */
        API_KUBE_STATUS,      /* .../namespaces/NS/sessions/NAME/status */
};

#define API_PATH_SEGMENT_MAX 64

struct api_route {
        enum api_route_kind kind;
        char ns[API_PATH_SEGMENT_MAX];
        char name[API_PATH_SEGMENT_MAX];
        char subresource[API_PATH_SEGMENT_MAX];
        char item[API_PATH_SEGMENT_MAX]; /* .../NAME/SUB/ITEM (checkpoint id), "" if none */
        enum api_kube_path kube;         /* API_ROUTE_KUBE */
};

/* Maps a URL path (no query) to a route. Pure. Names must be DNS-1123 labels. */
void api_route_parse(const char *path, struct api_route *ret);
/* seg: [api|apis-group] v1alpha1 namespaces NS sessions [NAME [SUB [ITEM]]] (n of them): the
 * session routes (api-route.c). */
void api_route_session(char seg[][API_PATH_SEGMENT_MAX], size_t n, struct api_route *r);
/* The Kubernetes-convention paths (api-kube-route.c): true and *r filled when seg is one. */
bool api_kube_route(char seg[][API_PATH_SEGMENT_MAX], size_t n, struct api_route *r);

/* The public-key pin of a PEM certificate: "sha256//" + base64(SHA-256(SubjectPublicKeyInfo
 * DER)), the form curl's CURLOPT_PINNEDPUBLICKEY takes (api-tls.c). out: >= 64 bytes. */
int api_tls_public_key_pin(const char *cert_pem, char *out, size_t size, struct fk_error *err);
/* The same for a certificate file (api.tlsCert). */
int api_tls_pin_file(const char *cert_path, char *out, size_t size, struct fk_error *err);

struct api_server;

/* Listens on a unix socket at path (replacing a stale one, mode 0600) and serves the API
 * with a thread per connection. Logs nothing; errors in err. */
int api_server_start(struct agent_daemon *d, const struct node_config *cfg, const char *path,
                     struct api_server **ret, struct fk_error *err);
/* Stops serving and removes the socket file; accepts NULL, returns NULL. */
struct api_server *api_server_stop(struct api_server *s);

/* ---- the node's filesystems (runfs.c) ------------------------------------------------------ */

/* One line of /proc/self/mountinfo (octal escapes undone). */
struct agent_mount {
        unsigned major, minor;
        char mount_point[PATH_MAX];
        char fstype[64];
        char source[256];
};
/* Parses one mountinfo line into *ret. Pure. Returns 0, -EINVAL (malformed), -ENAMETOOLONG
 * or -ENOMEM. */
int agent_mountinfo_parse(const char *line, struct agent_mount *ret);
/* A statfs f_type: a memory filesystem (tmpfs, ramfs, hugetlbfs)? Its name (NULL: unknown)?
 * Pure. */
bool agent_fs_magic_is_memory(long magic);
const char *agent_fs_magic_name(long magic);

struct agent_fs_info {
        bool memory;              /* tmpfs, ramfs or hugetlbfs: pages in RAM, not on a disk */
        uint64_t size, avail;     /* bytes (statfs f_blocks, f_bavail) */
        struct agent_mount mount; /* the mount holding the path (only fstype set when unknown) */
};
/* statfs and the mount of path (longest mount point above its resolved path on its device).
 * Returns 0 or -errno; does not log. */
int agent_fs_describe(const char *path, struct agent_fs_info *ret);
/* "ext4 (disk, /dev/vda on /, 53.2 GiB free of 80.0 GiB)" into buf. Pure. */
void agent_fs_format(const struct agent_fs_info *fi, char *buf, size_t size);
/* At start, before any session: creates <runDir>/sessions (where the session run dirs and so
 * the guest RAM files live) and logs the filesystems of runDir, stateDir and guest RAM. When
 * that directory is on a disk filesystem and empty, mounts a tmpfs on it (source
 * "forklet-ram"; one left by an earlier start is kept); failing that, guest RAM stays on disk
 * with a warning. Returns 0, or -errno (logged) when the directory cannot be made. */
int agent_runfs_setup(const struct node_config *cfg);
/* At forkletd's exit or --decommission: unmounts forkletd's tmpfs on <runDir>/sessions
 * unless a process of this node still runs (VMs keep running across a restart) or a forkletd
 * answers on the node's API socket. Logs what it did. Returns 1 unmounted, 0 nothing to do or
 * kept, -errno. */
int agent_runfs_release(const struct node_config *cfg);
