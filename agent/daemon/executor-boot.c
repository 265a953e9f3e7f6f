/* SPDX-License-Identifier: MIT */
/* The boot job of the executor: a session's boot parameters (image, size class, disk,
 * secrets, restore), its network, cgroup and jail, QEMU spawned through the VM ops and the
 * timing of every step; executor.c runs it in a worker thread. */
#include "agent/daemon/daemon-internal.h"
#include "agent/image/image.h"
#include "agent/jail/jail.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdatomic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* FORKLET_BOOT_TIMEOUT_S in forkletd's environment (10-3600) replaces the 120 s a boot may take
 * to agent-ready: many cold boots at once under TCG on a busy host take longer (bench-fork-steps
 * sets it for its N cold boots). */
static unsigned boot_timeout_ms(void)
{
        const char *v = getenv("FORKLET_BOOT_TIMEOUT_S");
        char *end = NULL;
        unsigned long s = v ? strtoul(v, &end, 10) : 0;

        static atomic_bool warned;

        if (!v)
                return AGENT_BOOT_TIMEOUT_MS;
        if (!*v || *end || s < 10 || s > 3600) {
                if (!atomic_exchange(&warned, true))
                        log_warning("FORKLET_BOOT_TIMEOUT_S=%s ignored: give 10 to 3600 (seconds); "
                                    "boots may take %u s",
                                    v, AGENT_BOOT_TIMEOUT_MS / 1000);
                return AGENT_BOOT_TIMEOUT_MS;
        }
        return (unsigned)s * 1000;
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
static int job_boot_params(struct agent_daemon *d, struct agent_session *s, struct agent_job *j,
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

static int job_prepare_dirs(struct agent_job *j, bool fresh_run_dir)
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
static void job_lock(struct agent_job *j)
{
        uint64_t t = fk_now_mono_ns();

        pthread_mutex_lock(&j->d->lock);
        j->timing.ns[AGENT_BOOT_STEP_LOCK] += fk_now_mono_ns() - t;
}

/* Adds the time since *t to step and moves *t on. */
static void job_lap(struct agent_job *j, enum agent_boot_step step, uint64_t *t)
{
        uint64_t now = fk_now_mono_ns();

        j->timing.ns[step] += now - *t;
        *t = now;
}

static int job_spawned(void *ctx, pid_t pid, const json_t *record)
{
        struct agent_job *j = ctx;
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

/* ops.boot inside a journal entry, so a restart finds a boot the crash interrupted. */
static int boot_journaled(struct agent_daemon *d, struct agent_job *j,
                          const struct agent_boot_params *p, void **ret_vm, struct fk_error *err)
{
        cleanup_free char *jid = agent_boot_journal_begin(d->cfg->state_dir, j->key, j->run_dir);
        int r;

        r = d->ops.boot(d->ops.userdata, p, ret_vm, err);
        agent_boot_journal_end(d->cfg->state_dir, jid);
        return r;
}

/* The session's cgroup is made and joined by QEMU before exec; gone again on failure. */
static int boot_in_cgroup(struct agent_daemon *d, struct agent_job *j, struct agent_boot_params *p,
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

/* FORKLET_BALLOON_HINT=on in forkletd's environment gives cold boots the balloon's free page
 * hinting (vmm_config.balloon_hint). Off by default: a precopy checkpoint with it holds the
 * pages the guest hinted, and every fork of it gives them back to its guest's allocator as it
 * starts, which writes about 2 MiB of each fork's guest memory (docs/fork-engine.md). */
static bool balloon_hint_wanted(void)
{
        const char *v = getenv("FORKLET_BALLOON_HINT");

        return v && strcmp(v, "on") == 0;
}

/* spec.secrets for this boot: minted with the session, its parent and the new fork id. */
static int job_secrets(struct agent_job *j, struct agent_secret_set *ret,
                       struct agent_boot_params *p, struct fk_error *err)
{
        int r;

        r = agent_secrets_resolve(j->d->cfg, j->spec, j->key, j->parent_key,
                                  j->restore.ck_dir ? j->restore.fork_id : NULL, ret, err);
        p->secrets = ret->v;
        p->n_secrets = ret->n;
        return r;
}

/* status.identity after a successful boot (under the lock). A restore succeeds only once the
 * guest took the new identity and fresh entropy (the reseed: a microvm guest never sees its
 * QEMU's vmgenid); a cold boot's kernel seeded itself and copied nothing. */
static void job_ledger(struct agent_job *j, const struct agent_secret_set *secrets)
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
static void job_timing_done(struct agent_job *j, uint64_t t0, uint64_t t_locked)
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
        agent_session_add_event(j->s, agent_now_real(j->d), false, "ForkTiming", "%s", text);
}

void agent_job_boot(struct agent_job *j)
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
        cleanup_free char *disk = NULL, *mem = NULL;
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
        p.disk = disk;
        p.rootfs = j->rootfs;
        p.mem_path = mem;
        p.restore_dir = j->restore.ck_dir;
        p.mem_private = j->restore.private_ram;
        /* every cold boot gets the balloon; a restore exactly when its checkpoint's source had
         * it (a virtio device must exist on both sides of the migration) */
        p.balloon = j->restore.ck_dir ? j->restore.balloon : true;
        p.balloon_hint = j->restore.ck_dir ? j->restore.balloon_hint : balloon_hint_wanted();
        /* a restore has its checkpoint's RAM size (a cold boot's is the backend's choice) */
        p.ram_tail = j->restore.ck_dir && j->restore.ram_tail;
        p.guest_announce = j->restore.ck_dir && j->restore.guest_announce;
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
        agent_session_set_cgroup(d, j->s, r >= 0);
        d->last_sample_ns = 0; /* its figures at the next pass, not a second later */
        if (r >= 0 && !(j->s->vm = agent_vm_ref_new(vm, &d->ops))) {
                d->ops.free(d->ops.userdata, vm);
                r = fk_error_set(&err, -ENOMEM, "out of memory");
        }
        if (r < 0) {
                j->s->pid = 0;
                agent_vm_record_clear(d, j->key);
                agent_session_fail(d, j->s, agent_restore_reason(&j->restore, true),
                                   err.msg[0] ? err.msg : strerror(-r));
                return;
        }
        job_ledger(j, &secrets);
        agent_health_reset(j->s);
        j->s->pid = d->ops.pid(vm);
        j->s->phase = SESSION_PHASE_RUNNING;
        j->s->started_ns = agent_now_real(d);
        j->s->failures = 0;
        agent_session_set_condition(j->s, AGENT_COND_READY, "True", "Running", agent_now_real(d),
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

int agent_executor_boot(struct agent_daemon *d, struct agent_session *s)
{
        struct fk_error err = {0};
        char what[192];
        struct agent_job *j;
        int r;

        r = agent_job_new(d, s, CORE_ACTION_BOOT, &j);
        if (r < 0)
                return r;
        r = job_boot_params(d, s, j, &err);
        if (r == -ENOENT || r == -EAGAIN || r == -EIO) {
                /* Pending, not Failed: the next reconcile pass boots it once the image is
                 * built (or the node config lists it, or its pull is done). Logged once per
                 * new message; a pull's progress is not worth a line. */
                agent_job_free(j);
                if (r != -EAGAIN && strcmp(s->conditions[AGENT_COND_READY].message, err.msg) != 0)
                        log_warning("session %s: %s", s->key, err.msg);
                s->phase = SESSION_PHASE_PENDING;
                agent_session_set_condition(s, AGENT_COND_READY, "False",
                                            r == -ENOENT   ? "ImageNotFound"
                                            : r == -EAGAIN ? "Pulling"
                                                           : "PullFailed",
                                            agent_now_real(d), "%s", err.msg);
                return 0;
        }
        if (r >= 0)
                r = agent_restore_plan(d, s, &j->restore, &err);
        if (r < 0) {
                agent_job_free(j);
                agent_session_fail(d, s, "InvalidSpec", err.msg);
                return 0;
        }
        /* a fork maps the checkpoint's RAM copy-on-write: charged by its share (admission.c) */
        s->res.fork = j->restore.private_ram;
        if (agent_daemon_admit(d, s, j->sc) < 0) {
                agent_job_free(j);
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
                agent_job_free(j);
                return -ENOMEM;
        }
        s->phase = SESSION_PHASE_STARTING;
        s->cancel = false;
        agent_restore_describe(s, &j->restore, j->memory_mib, j->vcpus, what, sizeof(what));
        agent_session_set_condition(s, AGENT_COND_READY, "False",
                                    agent_restore_reason(&j->restore, false), agent_now_real(d),
                                    "%s", what);
        log_info("session %s: booting", s->key);
        return agent_job_start(d, j);
}
