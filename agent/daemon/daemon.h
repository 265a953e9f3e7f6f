/* SPDX-License-Identifier: MIT */
/* fk_agent_daemon: forkletd's session table and its one job runner (the planner is fk_core's):
 * what the API, cluster mode and forkletd's main call. VM operations come behind an ops struct
 * (agent/vm/vm.h), time behind a clock. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "core/core.h"
#include "agent/vm/vm.h"

typedef struct json_t json_t; /* jansson */
struct node_config;
struct session_manifest;
struct agent_net_ops;
struct agent_audit_entry;
struct core_cluster_node_report;

struct agent_clock {
        uint64_t (*now_real_ns)(void *userdata);
        uint64_t (*now_mono_ns)(void *userdata);
        void *userdata;
};
/* The system clock (fk_now_real_ns / fk_now_mono_ns). */
extern const struct agent_clock agent_clock_system;

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

/* The Prometheus text exposition (version 0.0.4) of the daemon: sessions by phase plus the
 * process-wide metrics (agent/obs/obs.h). *ret is a heap string. Returns 0 or -ENOMEM. */
int agent_daemon_metrics_text(struct agent_daemon *d, char **ret);

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
/* The snapshots taken of ns's sessions, {"kind": "SnapshotList", "items": [...]}, or with id
 * that one snapshot (-ENOENT when it is not ns's): id, namespace, session, created, sizeBytes
 * (allocated), image, usedBy (the sessions whose disk chain it is under, restored ones that have
 * not booted included). New reference. */
int agent_daemon_snapshot_list(struct agent_daemon *d, const char *ns, const char *id, json_t **ret,
                               struct fk_error *err);
/* Removes snapshot id of ns; -EBUSY naming its users (usedBy) while there are any. */
int agent_daemon_snapshot_delete(struct agent_daemon *d, const char *ns, const char *id,
                                 struct fk_error *err);
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

/* Pre-check for exec: -ENOENT / -EAGAIN with err. */
int agent_daemon_exec_check(struct agent_daemon *d, const char *ns, const char *name,
                            struct fk_error *err);

/* The daemon's store, made on first use (NULL only on ENOMEM or an unusable stateDir). */
struct agent_image_store *agent_daemon_images(struct agent_daemon *d);

/* Who uses digest: "session NS/NAME (N checkpoints)", "snapshot ID" (strv, caller frees);
 * ret_in_use (may be NULL): every digest any of them uses. Takes d->lock. */
int agent_image_users(struct agent_daemon *d, const char *digest, char ***ret_users,
                      char ***ret_in_use);

/* Audits an API request (e->time_ns from the daemon's clock); thread-safe, no lock needed. */
void agent_daemon_audit_entry(struct agent_daemon *d, const struct agent_audit_entry *e);
/* Sleeps until the reconcile pass after *revision (or timeout_ms, whole seconds), then sets
 * *revision to the daemon's (the API's watches). Takes the lock. */
void agent_daemon_wait_pass(struct agent_daemon *d, uint64_t *revision, unsigned timeout_ms);

/* ---- cluster mode (daemon-cluster.c): what the daemon exposes to agent/cluster ---------- */

/* Makes the daemon's cluster sessions exactly v[0..n) (manifests taken over, set to NULL in v
 * when consumed): new ones are created, changed ones updated, missing ones deleted. A name
 * already used by a manifest-dir or API session is left alone and ret_conflict[i] set (the
 * caller reports it in status). Persisted like API sessions so a restart adopts their VMs.
 * Takes the daemon lock; does not log per session unless something changes. */
int agent_daemon_sync_cluster(struct agent_daemon *d, struct session_manifest **v, size_t n,
                              bool *ret_conflict);
/* {"NS/NAME": status} for every cluster session with a manifest (new reference). */
int agent_daemon_cluster_status(struct agent_daemon *d, json_t **ret);
/* The node's capacity as its admission sees it and its usage by source, for the node status. */
void agent_daemon_node_report(struct agent_daemon *d, struct core_cluster_node_report *ret);
/* Whether the cluster session NS/NAME waits Pending for room it never got on this node (an
 * admission rejected it and it never booted here, so it can be placed elsewhere). */
bool agent_daemon_cluster_unadmitted(struct agent_daemon *d, const char *ns, const char *name);
