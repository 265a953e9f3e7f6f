/* SPDX-License-Identifier: MIT */
/* The executor: the VM lifecycle actions of the job runner (boot, stop, pause, resume,
 * destroy, fail) through the VM ops, long ones in a worker thread per action with the session
 * busy meanwhile; the other actions are in executor-runner.c and executor-ops.c. */
#include "agent/agent-internal.h"
#include "agent/image/image.h"
#include "agent/jail/jail.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AGENT_BOOT_TIMEOUT_MS 120000
#define AGENT_STOP_STEP_MS    10000
#define AGENT_BACKOFF_MAX_S   60

/* FORKLET_BOOT_TIMEOUT_S in forkletd's environment (10-3600) replaces the 120 s a boot may take
 * to agent-ready: many cold boots at once under TCG on a busy host take longer (bench-fork-steps
 * sets it for its N cold boots). */
static unsigned boot_timeout_ms(void)
{
        const char *v = getenv("FORKLET_BOOT_TIMEOUT_S");
        char *end = NULL;
        unsigned long s = v ? strtoul(v, &end, 10) : 0;

        if (!v || !*v || *end || s < 10 || s > 3600)
                return AGENT_BOOT_TIMEOUT_MS;
        return (unsigned)s * 1000;
}

struct job {
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
};

static struct job *job_free(struct job *j)
{
        if (!j)
                return NULL;
        agent_vm_ref_put(j->vm);
        agent_vm_ref_put(j->detached);
        free(j->run_dir);
        free(j->state_dir);
        free(j->kernel);
        free(j->initrd);
        free(j->base_disk);
        free(j->rootfs);
        agent_restore_done(&j->restore);
        session_manifest_free(j->spec);
        free(j);
        return NULL;
}

static uint64_t now_real(struct agent_daemon *d)
{
        return d->clock.now_real_ns(d->clock.userdata);
}

static void session_failed(struct agent_daemon *d, struct agent_session *s, const char *reason,
                           const char *msg)
{
        unsigned shift = s->failures < 6 ? s->failures : 6;
        uint64_t backoff = FK_MIN(1ull << shift, AGENT_BACKOFF_MAX_S);

        agent_metrics_reconcile_error();
        s->phase = SESSION_PHASE_FAILED;
        s->started_ns = 0;
        s->failures++;
        s->retry_at_ns = d->clock.now_mono_ns(d->clock.userdata) + backoff * 1000000000ull;
        agent_session_set_condition(s, AGENT_COND_READY, "False", reason, now_real(d), "%s", msg);
        log_error("session %s: failed: %s", s->key, msg);
}

static void session_detach_vm(struct agent_session *s)
{
        s->vm = agent_vm_ref_put(s->vm);
        s->pid = 0;
        s->started_ns = 0;
}

/* "known: a, b" for messages. */
static const char *images_known(const struct node_config *cfg)
{
        static __thread char buf[160];
        size_t off = 0;

        off += (size_t)snprintf(buf, sizeof(buf), "known:");
        for (size_t i = 0; i < cfg->n_images && off < sizeof(buf); i++)
                off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s %s", i ? "," : "",
                                        cfg->images[i].name);
        if (cfg->n_images == 0)
                snprintf(buf, sizeof(buf), "none configured");
        return buf;
}

/* Resolves image and size class into the job (under the lock). -ENOENT with err when the image
 * is unknown or not built, -EINVAL for an unknown size class. */
static int job_boot_params(struct agent_daemon *d, struct agent_session *s, struct job *j,
                           struct fk_error *err)
{
        const struct size_class *sc = node_config_find_size_class(d->cfg, s->spec->size_class);
        /* an OCI reference boots on the node image minimal's kernel, initrd and workspace */
        bool oci = manifest_image_is_ref(s->spec->image);
        const char *name = oci ? "minimal" : s->spec->image;
        const char *why = oci ? ": its kernel, initrd and agent boot OCI images" : "";
        const struct image_spec *img = node_config_find_image(d->cfg, name);
        int r;

        if (!sc)
                return fk_error_set(err, -EINVAL, "unknown size class \"%s\"", s->spec->size_class);
        if (!img)
                return fk_error_set(err, -ENOENT, "image \"%s\" is not in the node config (%s)%s",
                                    name, images_known(d->cfg), why);
        j->sc = sc;
        j->vcpus = sc->vcpus;
        j->memory_mib = sc->memory_mib;
        if (fk_asprintf(&j->kernel, "%s/vmlinuz", img->dir) < 0 ||
            fk_asprintf(&j->initrd, "%s/initrd.img", img->dir) < 0 ||
            fk_asprintf(&j->base_disk, "%s/workspace.img", img->dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (access(j->base_disk, F_OK) < 0) {
                free(j->base_disk);
                j->base_disk = NULL;
        } else if (sc->disk_mib) {
                /* The class sizes the workspace (and the root overlay that lives on it). */
                free(j->base_disk);
                j->base_disk = NULL;
                if (agent_disk_workspace_base(d->cfg->state_dir, sc->disk_mib, &j->base_disk, err) <
                    0)
                        return err->code;
        }
        if (access(j->kernel, R_OK) < 0 || access(j->initrd, R_OK) < 0)
                return fk_error_set(
                        err, -ENOENT, "image \"%s\" is not built: %s missing (build it: %s)%s",
                        name, access(j->kernel, R_OK) < 0 ? j->kernel : j->initrd,
                        strcmp(name, "minimal") == 0 ? "cmake --build BUILD --target guest-image"
                                                     : "see docs/images.md",
                        why);
        if (oci && (r = agent_image_job_rootfs(d, s, j->state_dir, &j->rootfs, err)) < 0)
                return r;
        if (!oci && fk_asprintf(&j->rootfs, "%s/rootfs.img", img->dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (!oci && access(j->rootfs, R_OK) < 0) {
                free(j->rootfs);
                j->rootfs = NULL;
        }
        return 0;
}

static int job_prepare_dirs(struct job *j, bool fresh_run_dir)
{
        int r = 0;

        if (fresh_run_dir)
                r = fk_rm_rf(j->run_dir);
        if (r >= 0)
                r = fk_mkdir_p(j->run_dir, 0700);
        if (r >= 0)
                r = fk_mkdir_p(j->state_dir, 0700);
        return r;
}

/* Takes d->lock, adding the wait to the boot's lock time. */
static void job_lock(struct job *j)
{
        uint64_t t = fk_now_mono_ns();

        pthread_mutex_lock(&j->d->lock);
        j->timing.ns[AGENT_BOOT_STEP_LOCK] += fk_now_mono_ns() - t;
}

/* Adds the time since *t to step and moves *t on. */
static void job_lap(struct job *j, enum agent_boot_step step, uint64_t *t)
{
        uint64_t now = fk_now_mono_ns();

        j->timing.ns[step] += now - *t;
        *t = now;
}

static int job_spawned(void *ctx, pid_t pid, const json_t *record)
{
        struct job *j = ctx;
        struct fk_error err = {0};
        json_t *rec = record ? json_deep_copy(record) : json_pack("{s:i}", "pid", (int)pid);
        int r = agent_store_set(j->d->store, j->key, AGENT_STORE_VM, rec, &err);

        if (r < 0) {
                log_error("session %s: QEMU pid %d ends: %s", j->key, (int)pid, err.msg);
                return r;
        }
        job_lock(j);
        j->s->pid = pid;
        pthread_mutex_unlock(&j->d->lock);
        return 0;
}

/* The VM of key is gone: its record goes too (a stale one is harmless: adopt checks the start
 * time). */
void agent_vm_record_clear(struct agent_daemon *d, const char *key)
{
        struct fk_error err = {0};
        json_t *vm = agent_store_get(d->store, key, AGENT_STORE_VM);

        if (vm && agent_store_set(d->store, key, AGENT_STORE_VM, NULL, &err) < 0)
                log_warning("session %s: %s", key, err.msg);
        json_decref(vm);
}

/* ops.boot inside a journal entry, so a restart finds a boot the crash interrupted. */
static int boot_journaled(struct agent_daemon *d, struct job *j, const struct agent_boot_params *p,
                          void **ret_vm, struct fk_error *err)
{
        cleanup_free char *jid = agent_boot_journal_begin(d->cfg->state_dir, j->key, j->run_dir);
        int r;

        r = d->ops.boot(d->ops.userdata, p, ret_vm, err);
        agent_boot_journal_end(d->cfg->state_dir, jid);
        return r;
}

/* Records the cgroup the VM runs in (under the lock). */
static void session_set_cgroup(struct agent_daemon *d, struct agent_session *s, bool on)
{
        free(s->res.cgroup_path);
        s->res.cgroup_path = NULL;
        s->res.has_cgroup =
                on && d->cg && cg_manager_cgroup_path(d->cg, s->key, &s->res.cgroup_path) >= 0;
}

/* The session's cgroup is made and joined by QEMU before exec; gone again on failure. */
static int boot_in_cgroup(struct agent_daemon *d, struct job *j, struct agent_boot_params *p,
                          void **ret_vm, struct fk_error *err)
{
        struct cg_join *join = NULL;
        struct agent_jail jail = {0};
        uint64_t t = fk_now_mono_ns();
        int r;

        r = agent_resources_prepare(d, j->key, j->sc, &join, err);
        job_lap(j, AGENT_BOOT_STEP_CGROUP, &t);
        if (r < 0)
                return r;
        if (join)
                p->pre_exec[p->n_pre_exec++] =
                        (struct agent_pre_exec){cg_join_pre_exec, join, "join cgroup"};
        /* last: after the cgroup join and the netns entry, which need root */
        if (d->ops.jailable && d->cfg->jail_uid_count)
                r = agent_jail_prepare(d->cfg, p, &jail, err);
        job_lap(j, AGENT_BOOT_STEP_JAIL, &t);
        if (r >= 0)
                r = boot_journaled(d, j, p, ret_vm, err);
        agent_jail_done(&jail);
        cg_join_free(join);
        if (r < 0)
                agent_resources_teardown(d, j->key);
        return r;
}

/* spec.secrets for this boot: minted with the session, its parent and the new fork id. */
static int job_secrets(struct job *j, struct agent_secret_set *ret, struct agent_boot_params *p,
                       struct fk_error *err)
{
        int r;

        r = agent_secrets_resolve(j->d->cfg, j->spec, j->key, j->parent_key,
                                  j->restore.ck_dir ? j->restore.fork_id : NULL, ret, err);
        p->secrets = ret->v;
        p->n_secrets = ret->n;
        return r;
}

/* status.identity after a successful boot (under the lock). A restore succeeds only once the
 * guest took the new identity and fresh entropy, on a QEMU with a new vmgenid; a cold boot's
 * kernel seeded itself and copied nothing. */
static void job_ledger(struct job *j, const struct agent_secret_set *secrets)
{
        struct fk_error err = {0};
        bool restored = j->restore.ck_dir != NULL;
        json_t *id =
                agent_identity_ledger(restored && j->restore.fork_id[0] ? j->restore.fork_id : NULL,
                                      restored && j->restore.ck_id[0] ? j->restore.ck_id : NULL,
                                      secrets, restored, !restored || j->restore.fork_id[0]);

        json_decref(j->s->identity);
        j->s->identity = id;
        if (id &&
            agent_store_set(j->d->store, j->key, AGENT_STORE_IDENTITY, json_incref(id), &err) < 0)
                log_warning("session %s: %s", j->key, err.msg);
        if (j->restore.private_ram && !j->restore.rollback &&
            json_array_size(json_object_get(id, "inheritedSecrets")))
                agent_metrics_add_forks_inherited_secrets(1);
}

/* Under the lock, the boot done: its breakdown into status.bootTiming and, for a fork, one
 * ForkTiming event. */
static void job_timing_done(struct job *j, uint64_t t0, uint64_t t_locked)
{
        uint64_t now = fk_now_mono_ns(), t = t_locked;
        /* a rollback maps its checkpoint private too (x-live): a fork is a restore that is no
         * rollback */
        bool fork = j->restore.ck_dir && j->restore.private_ram && !j->restore.rollback;
        char text[AGENT_EVENT_MESSAGE_MAX];

        job_lap(j, AGENT_BOOT_STEP_FINISH, &t);
        j->timing.ns[AGENT_BOOT_STEP_TOTAL] = now - (j->requested_ns ? j->requested_ns : t0);
        j->s->boot_timing = j->timing;
        j->s->has_boot_timing = true;
        /* the event for forks only: the ring is short and other boots' steps are in status */
        if (!fork)
                return;
        agent_boot_timing_format(&j->timing, text, sizeof(text));
        agent_session_add_event(j->s, now_real(j->d), false, "ForkTiming", "%s", text);
}

static void job_boot(struct job *j)
{
        struct agent_daemon *d = j->d;
        struct fk_error err = {0};
        struct agent_boot_params p = {
                .key = j->key,
                .name = j->name,
                .run_dir = j->run_dir,
                .state_dir = j->state_dir,
                .kernel = j->kernel,
                .initrd = j->initrd,
                .vcpus = j->vcpus,
                .memory_mib = j->memory_mib,
                .accel = d->accel,
                .boot_timeout_ms = boot_timeout_ms(),
                .cancel = &j->s->cancel,
                .spawned = job_spawned,
                .spawned_ctx = j,
                .timing = &j->timing,
                /* a restored guest runs code it mostly has translated once already */
                .tb_size_mib = j->restore.ck_dir ? AGENT_RESTORED_TB_MIB : 0,
        };
        cleanup_free char *disk = NULL, *mem = NULL, *stub_kernel = NULL, *stub_initrd = NULL;
        _cleanup_(agent_secret_set_done) struct agent_secret_set secrets = {0};
        uint64_t t0 = fk_now_mono_ns(), t = t0;
        void *vm = NULL;
        int r;

        /* queue: since the request, less what the request itself spent on this fork */
        if (j->requested_ns && t0 > j->requested_ns)
                j->timing.ns[AGENT_BOOT_STEP_QUEUE] =
                        t0 - j->requested_ns -
                        FK_MIN(t0 - j->requested_ns, j->timing.ns[AGENT_BOOT_STEP_LOCK] +
                                                             j->timing.ns[AGENT_BOOT_STEP_LINKS]);
        r = job_prepare_dirs(j, true);
        if (r >= 0)
                r = job_secrets(j, &secrets, &p, &err);
        if (r < 0)
                fk_error_set(&err, r, "create %s: %s", j->run_dir, strerror(-r));
        agent_checkpoint_clean_partial(j->state_dir);
        if (r >= 0 && (j->restore.ck_dir || j->restore.layer))
                r = agent_restore_prepare(&j->restore, d->store, j->key, j->state_dir, j->run_dir,
                                          &disk, &mem, &err);
        if (r >= 0 && !disk && j->base_disk)
                r = agent_disk_prepare(d->store, j->state_dir, j->key, j->base_disk, &disk, &err);
        if (r >= 0 && disk && (r = agent_disk_compact(disk, AGENT_DISK_MAX_DEPTH, &err)) > 0)
                log_info("session %s: disk chain compacted onto its base", j->key);
        /* a restored guest never boots its kernel again: QEMU need not hold a copy */
        if (r >= 0 && j->restore.ck_dir &&
            agent_restore_kernel(d->cfg->run_dir, j->kernel, &stub_kernel, &stub_initrd) >= 0) {
                p.kernel = stub_kernel;
                p.initrd = stub_initrd;
        }
        p.disk = disk;
        p.rootfs = j->rootfs;
        p.mem_path = mem;
        p.restore_dir = j->restore.ck_dir;
        p.mem_private = j->restore.private_ram;
        p.fork_id = j->restore.fork_id[0] ? j->restore.fork_id : NULL;
        /* guest RAM shared with a file in runDir grows into it: on a full tmpfs the guest dies
         * of SIGBUS, so it must fit before the boot (a fork's private RAM does not write it) */
        if (r >= 0 && !p.mem_private)
                r = agent_space_check(j->run_dir, "runDir",
                                      (uint64_t)p.memory_mib * 1024 * 1024 -
                                              FK_MIN((uint64_t)p.memory_mib * 1024 * 1024,
                                                     mem ? agent_space_allocated(mem) : 0),
                                      "boot", &err);
        job_lap(j, AGENT_BOOT_STEP_DISK, &t);
        if (r >= 0 && d->net_ops && !j->net)
                r = d->net_ops->setup(d->cfg, j->key, j->spec, &j->net, &err);
        if (r >= 0 && j->net)
                d->net_ops->boot_params(j->net, &p);
        job_lap(j, AGENT_BOOT_STEP_NETNS, &t);
        if (r >= 0)
                r = boot_in_cgroup(d, j, &p, &vm, &err);
        t = fk_now_mono_ns();
        if (r >= 0)
                agent_restore_release(j->key, j->state_dir, &j->restore);
        job_lap(j, AGENT_BOOT_STEP_FINISH, &t);
        /* a fork's start is a fork; a rollback's restore is timed by the rollback request */
        if (!j->restore.ck_dir || !j->restore.rollback)
                agent_metrics_op_done(j->restore.ck_dir ? AGENT_OP_FORK : AGENT_OP_BOOT, r, t0);
        job_lock(j);
        t = fk_now_mono_ns();
        if (j->net && !j->s->net) { /* kept after a failed boot too: reused, or torn down */
                j->s->net = j->net;
                j->s->net_ops = d->net_ops;
        }
        session_set_cgroup(d, j->s, r >= 0);
        d->last_sample_ns = 0; /* its figures at the next pass, not a second later */
        if (r >= 0 && !(j->s->vm = agent_vm_ref_new(vm, &d->ops))) {
                d->ops.free(d->ops.userdata, vm);
                r = fk_error_set(&err, -ENOMEM, "out of memory");
        }
        if (r < 0) {
                j->s->pid = 0;
                agent_vm_record_clear(d, j->key);
                session_failed(d, j->s, agent_restore_reason(&j->restore, true),
                               err.msg[0] ? err.msg : strerror(-r));
                return;
        }
        job_ledger(j, &secrets);
        agent_health_reset(j->s);
        j->s->pid = d->ops.pid(vm);
        j->s->phase = SESSION_PHASE_RUNNING;
        j->s->started_ns = now_real(d);
        j->s->failures = 0;
        agent_session_set_condition(j->s, AGENT_COND_READY, "True", "Running", now_real(d),
                                    "guest agent ready, QEMU pid %d", (int)j->s->pid);
        log_info("session %s: running (pid %d)%s", j->s->key, (int)j->s->pid,
                 j->restore.ck_dir ? ", restored from a checkpoint" : "");
        j->s->post_start = CORE_POST_START_NONE;
        if (j->restore.ck_dir)
                agent_restore_finish(d, j->s, &j->restore);
        job_timing_done(j, t0, t);
        if (j->restore.ck_dir)
                return;
        /* Cold boot: afterStart, then spec.checkpoints, are the planner's next actions. */
        j->s->post_start = agent_post_start_first(j->s->spec);
}

/* stop, destroy and fail (a dead guest: no poweroff asked, phase Failed) */
static void job_stop(struct job *j, bool destroy)
{
        struct agent_daemon *d = j->d;
        bool fail = j->kind == CORE_ACTION_FAIL, dead = fail || j->dead;
        struct agent_vm_health h = {0};
        int r;

        agent_fwd_close_key(d, j->key);
        if (j->vm) {
                uint64_t t0 = fk_now_mono_ns();

                /* a paused VM is frozen: let it see the poweroff */
                (void)agent_resources_freeze(d, j->key, false, NULL);
                r = dead && d->ops.kill
                            ? d->ops.kill(d->ops.userdata, j->vm->vm, 2000)
                            : d->ops.stop(d->ops.userdata, j->vm->vm, AGENT_STOP_STEP_MS);
                agent_metrics_op_done(AGENT_OP_STOP, r, t0);
                if (r < 0)
                        log_warning_errno(r, "session %s: stop: %m; killing its cgroup", j->key);
                /* its last console lines, now that QEMU is gone */
                if (fail && d->ops.health)
                        (void)d->ops.health(d->ops.userdata, j->vm->vm, &h);
        }
        /* force-stop and cleanup: whatever is left in the cgroup dies, then it goes */
        agent_resources_teardown(d, j->key);
        if (destroy && (r = agent_jail_forget(j->state_dir)) < 0)
                log_warning_errno(r, "session %s: revoke the jail's file grants: %m", j->key);
        r = fk_rm_rf(j->run_dir);
        if (!destroy)
                agent_vm_record_clear(d, j->key);
        if (r >= 0 && destroy)
                r = fk_rm_rf(j->state_dir);
        if (r < 0)
                log_warning_errno(r, "session %s: remove files: %m", j->key);
        if (destroy && r >= 0)
                agent_store_forget(d->store, j->key);
        if (destroy)
                agent_daemon_net_destroy(d, j->s);
        pthread_mutex_lock(&d->lock);
        /* Freed by job_free, outside the lock (closing QMP and the agent may take a while). */
        j->detached = TAKE_PTR(j->s->vm);
        session_detach_vm(j->s);
        session_set_cgroup(d, j->s, false);
        j->s->res.frozen = false;
        if (destroy) {
                log_info("session %s: deleted, VM and files removed", j->s->key);
                agent_daemon_remove(d, j->s);
                j->s = NULL;
                return;
        }
        if (fail) {
                session_failed(d, j->s, agent_health_failed(d, j->s, &h), j->s->health.fail_msg);
                return;
        }
        if (j->s->phase == SESSION_PHASE_FAILED && j->s->spec &&
            j->s->spec->state != SESSION_STATE_STOPPED) {
                /* stopped to restart (restartPolicy): it stays Failed with its reason */
                log_info("session %s: stopped after a failure", j->s->key);
                return;
        }
        j->s->phase = SESSION_PHASE_STOPPED;
        agent_session_set_condition(j->s, AGENT_COND_READY, "False", "Stopped", now_real(d), "%s",
                                    "spec.state is Stopped");
        log_info("session %s: stopped", j->s->key);
}

static void job_pause_resume(struct job *j)
{
        struct agent_daemon *d = j->d;
        bool pause = j->kind == CORE_ACTION_PAUSE;
        struct fk_error err = {0};
        int r;

        uint64_t t0 = fk_now_mono_ns();

        /* QMP stop first (the guest halts cleanly), then freeze every QEMU thread; on
         * resume thaw first, since a frozen QEMU cannot answer QMP. */
        if (pause) {
                r = d->ops.pause(d->ops.userdata, j->vm->vm, &err);
                if (r >= 0)
                        r = agent_resources_freeze(d, j->key, true, &err);
        } else {
                r = agent_resources_freeze(d, j->key, false, &err);
                if (r >= 0)
                        r = d->ops.resume(d->ops.userdata, j->vm->vm, &err);
        }
        agent_metrics_op_done(pause ? AGENT_OP_PAUSE : AGENT_OP_RESUME, r, t0);
        pthread_mutex_lock(&d->lock);
        j->s->res.frozen = pause && r >= 0;
        /* a continue after a disk error: the next one waits for the next free-space check;
         * probes missed around a pause say nothing about the guest */
        j->s->health.io_resume_due = false;
        j->s->health.probe_failures = 0;
        if (r < 0) {
                log_error("session %s: %s: %s", j->s->key, core_action_to_string(j->kind),
                          err.msg[0] ? err.msg : strerror(-r));
                return;
        }
        j->s->phase = pause ? SESSION_PHASE_PAUSED : SESSION_PHASE_RUNNING;
        agent_session_set_condition(j->s, AGENT_COND_READY, pause ? "False" : "True",
                                    pause ? "Paused" : "Running", now_real(d), "%s", "");
}

/* The runner's worker body (agent_runner_spawn); every branch ends holding d->lock. */
static void job_body(void *userdata)
{
        struct job *j = userdata;
        struct agent_daemon *d = j->d;

        if (j->kind == CORE_ACTION_BOOT)
                job_boot(j);
        else if (j->kind == CORE_ACTION_STOP || j->kind == CORE_ACTION_DESTROY ||
                 j->kind == CORE_ACTION_FAIL)
                job_stop(j, j->kind == CORE_ACTION_DESTROY);
        else
                job_pause_resume(j);
        if (j->s) {
                j->s->busy = false;
                if (j->kind == CORE_ACTION_BOOT)
                        agent_runner_boot_done(d, j->s);
        }
        agent_runner_job_end(d, j->s);
}

/* Without the lock, once the job ended. */
static void job_release(void *userdata)
{
        struct job *j = userdata;
        struct agent_daemon *d = j->d;
        bool destroy = j->kind == CORE_ACTION_DESTROY;

        job_free(j);
        if (destroy) /* its image may be unused now */
                agent_image_collect(d);
}

static int job_new(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k,
                   struct job **ret)
{
        struct job *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        j->d = d;
        j->s = s;
        j->kind = k;
        snprintf(j->key, sizeof(j->key), "%s", s->key);
        snprintf(j->name, sizeof(j->name), "%s", s->name);
        if (agent_session_run_dir(d->cfg->run_dir, s->key, &j->run_dir) < 0 ||
            agent_session_state_dir(d->cfg->state_dir, s->key, &j->state_dir) < 0) {
                job_free(j);
                return -ENOMEM;
        }
        j->vm = agent_vm_ref_get(s->vm);
        j->dead = s->health.failing || s->health.io_stopped;
        *ret = j;
        return 0;
}

static int job_start(struct agent_daemon *d, struct job *j)
{
        int r = agent_runner_spawn(d, j->s, job_body, job_release, j);

        if (r < 0)
                job_free(j);
        return r;
}

static int executor_boot(struct agent_daemon *d, struct agent_session *s)
{
        struct fk_error err = {0};
        char what[192];
        struct job *j;
        int r;

        r = job_new(d, s, CORE_ACTION_BOOT, &j);
        if (r < 0)
                return r;
        r = job_boot_params(d, s, j, &err);
        if (r == -ENOENT || r == -EAGAIN || r == -EIO) {
                /* Pending, not Failed: the next reconcile pass boots it once the image is
                 * built (or the node config lists it, or its pull is done). Logged once per
                 * new message; a pull's progress is not worth a line. */
                job_free(j);
                if (r != -EAGAIN && strcmp(s->conditions[AGENT_COND_READY].message, err.msg) != 0)
                        log_warning("session %s: %s", s->key, err.msg);
                s->phase = SESSION_PHASE_PENDING;
                agent_session_set_condition(s, AGENT_COND_READY, "False",
                                            r == -ENOENT   ? "ImageNotFound"
                                            : r == -EAGAIN ? "Pulling"
                                                           : "PullFailed",
                                            now_real(d), "%s", err.msg);
                return 0;
        }
        if (r >= 0)
                r = agent_restore_plan(d, s, &j->restore, &err);
        if (r < 0) {
                job_free(j);
                session_failed(d, s, "InvalidSpec", err.msg);
                return 0;
        }
        /* a fork maps the checkpoint's RAM copy-on-write: charged by its share (admission.c) */
        s->res.fork = j->restore.private_ram;
        if (agent_daemon_admit(d, s, j->sc) < 0) {
                job_free(j);
                return 0;
        }
        s->res.vcpus = j->vcpus;
        s->res.memory_mib = j->memory_mib;
        snprintf(s->res.class_name, sizeof(s->res.class_name), "%s", j->sc->name);
        j->net = s->net;
        /* a fork's first boot: what its request spent is part of its breakdown */
        j->requested_ns = s->requested_ns;
        j->timing = s->requested_timing;
        s->requested_ns = 0;
        s->requested_timing = (struct agent_boot_timing){0};
        if (s->fork_parent)
                snprintf(j->parent_key, sizeof(j->parent_key), "%s.%s", s->namespace,
                         s->fork_parent);
        /* the network setup and the secrets read the spec in the job */
        if (s->spec && ((d->net_ops && !j->net) || s->spec->n_secrets) &&
            session_manifest_copy(s->spec, &j->spec) < 0) {
                job_free(j);
                return -ENOMEM;
        }
        s->phase = SESSION_PHASE_STARTING;
        s->cancel = false;
        agent_restore_describe(s, &j->restore, j->memory_mib, j->vcpus, what, sizeof(what));
        agent_session_set_condition(s, AGENT_COND_READY, "False",
                                    agent_restore_reason(&j->restore, false), now_real(d), "%s",
                                    what);
        log_info("session %s: booting", s->key);
        return job_start(d, j);
}

int agent_executor_run(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k)
{
        struct job *j;
        int r;

        switch (k) {
        case CORE_ACTION_OBSERVE:
                /* a changed size class and egress are the planner's RESIZE and EGRESS */
                s->observed_generation = s->generation;
                return 0;
        case CORE_ACTION_BOOT:
                return executor_boot(d, s);
        case CORE_ACTION_STOP:
                if (!s->vm) {
                        s->phase = SESSION_PHASE_STOPPED;
                        agent_session_set_condition(s, AGENT_COND_READY, "False", "Stopped",
                                                    now_real(d), "%s", "spec.state is Stopped");
                        return 0;
                }
                break;
        case CORE_ACTION_PAUSE:
        case CORE_ACTION_RESUME:
                if (!s->vm)
                        return -ESRCH;
                break;
        case CORE_ACTION_DESTROY:
        case CORE_ACTION_FAIL:
                break;
        default:
                return -EINVAL;
        }
        r = job_new(d, s, k, &j);
        if (r < 0)
                return r;
        return job_start(d, j);
}

void agent_executor_vm_gone(struct agent_daemon *d, struct agent_session *s, const char *reason,
                            const char *msg)
{
        session_detach_vm(s);
        agent_vm_record_clear(d, s->key);
        agent_fwd_close_key(d, s->key);
        session_failed(d, s, reason, msg);
        agent_resources_teardown(d, s->key);
        session_set_cgroup(d, s, false);
}

void agent_session_fail(struct agent_daemon *d, struct agent_session *s, const char *reason,
                        const char *msg)
{
        session_failed(d, s, reason, msg);
}
