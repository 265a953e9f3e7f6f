/* SPDX-License-Identifier: MIT */
/* The executor: the VM lifecycle actions of the job runner (boot, stop, pause, resume,
 * destroy, fail) through the VM ops, long ones in a worker thread per action with the session
 * busy meanwhile; the other actions are in executor-runner.c and executor-ops.c. */
#include "agent/daemon/daemon-internal.h"
#include "agent/image/image.h"
#include "agent/jail/jail.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AGENT_STOP_STEP_MS  10000
#define AGENT_BACKOFF_MAX_S 60

struct agent_job *agent_job_free(struct agent_job *j)
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

static void session_detach_vm(struct agent_session *s)
{
        s->vm = agent_vm_ref_put(s->vm);
        s->pid = 0;
        s->started_ns = 0;
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

/* Records the cgroup the VM runs in (under the lock). */
void agent_session_set_cgroup(struct agent_daemon *d, struct agent_session *s, bool on)
{
        free(s->res.cgroup_path);
        s->res.cgroup_path = NULL;
        s->res.has_cgroup =
                on && d->cg && cg_manager_cgroup_path(d->cg, s->key, &s->res.cgroup_path) >= 0;
}

/* A guest that panicked prints its report (the panic line comes first, then the registers and
 * the call trace) and reboots, which ends QEMU: killing it at the panic line would cut the
 * report from the console log and the failure's console tail. */
#define AGENT_PANIC_GRACE_MS 3000

/* Waits up to timeout_ms for the VM's QEMU to exit by itself. */
static void wait_exit(struct agent_daemon *d, void *vm, unsigned timeout_ms)
{
        struct pollfd p = {.fd = d->ops.exit_fd ? d->ops.exit_fd(vm) : -1, .events = POLLIN};
        int r;

        if (p.fd < 0)
                return;
        do
                r = poll(&p, 1, (int)timeout_ms);
        while (r < 0 && errno == EINTR);
}

/* stop, destroy and fail (a dead guest: no poweroff asked, phase Failed) */
static void job_stop(struct agent_job *j, bool destroy)
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
                if (j->exit_grace_ms)
                        wait_exit(d, j->vm->vm, j->exit_grace_ms);
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
        agent_session_set_cgroup(d, j->s, false);
        j->s->res.frozen = false;
        if (destroy) {
                log_info("session %s: deleted, VM and files removed", j->s->key);
                agent_daemon_remove(d, j->s);
                j->s = NULL;
                return;
        }
        if (fail) {
                agent_session_fail(d, j->s, agent_health_failed(d, j->s, &h),
                                   j->s->health.fail_msg);
                return;
        }
        if (j->s->phase == SESSION_PHASE_FAILED && j->s->spec &&
            j->s->spec->state != SESSION_STATE_STOPPED) {
                /* stopped to restart (restartPolicy): it stays Failed with its reason */
                log_info("session %s: stopped after a failure", j->s->key);
                return;
        }
        j->s->phase = SESSION_PHASE_STOPPED;
        agent_session_set_condition(j->s, AGENT_COND_READY, "False", "Stopped", agent_now_real(d),
                                    "%s", "spec.state is Stopped");
        log_info("session %s: stopped", j->s->key);
}

static void job_pause_resume(struct agent_job *j)
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
                                    pause ? "Paused" : "Running", agent_now_real(d), "%s", "");
}

/* The runner's worker body (agent_runner_spawn); every branch ends holding d->lock. */
static void job_body(void *userdata)
{
        struct agent_job *j = userdata;
        struct agent_daemon *d = j->d;

        if (j->kind == CORE_ACTION_BOOT)
                agent_job_boot(j);
        else if (j->kind == CORE_ACTION_STOP || j->kind == CORE_ACTION_DESTROY ||
                 j->kind == CORE_ACTION_FAIL)
                job_stop(j, j->kind == CORE_ACTION_DESTROY);
        else
                job_pause_resume(j);
        if (j->s) {
                j->s->busy = false;
                if (j->kind == CORE_ACTION_BOOT || j->kind == CORE_ACTION_PAUSE ||
                    j->kind == CORE_ACTION_STOP)
                        agent_runner_boot_done(d, j->s);
        }
        agent_runner_job_end(d, j->s);
}

/* Without the lock, once the job ended. */
static void job_release(void *userdata)
{
        struct agent_job *j = userdata;
        struct agent_daemon *d = j->d;
        bool destroy = j->kind == CORE_ACTION_DESTROY;

        /* a rollback's boot: the replaced VM's RAM goes now, not beside the new QEMU's start,
         * and with it the room the boot's limits made for it; the session's end: the RAM */
        if (destroy)
                (void)agent_rollback_drop_ram(d, j->key);
        else if (j->kind == CORE_ACTION_BOOT && agent_rollback_drop_ram(d, j->key))
                agent_resources_reset_limits(d, j->key, j->sc, j->memory_mib);
        agent_job_free(j);
        if (destroy) /* its image may be unused now */
                agent_image_collect(d);
}

int agent_job_new(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k,
                  struct agent_job **ret)
{
        struct agent_job *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        j->d = d;
        j->s = s;
        j->kind = k;
        snprintf(j->key, sizeof(j->key), "%s", s->key);
        snprintf(j->name, sizeof(j->name), "%s", s->name);
        if (agent_session_run_dir(d->cfg->run_dir, s->key, &j->run_dir) < 0 ||
            agent_session_state_dir(d->cfg->state_dir, s->key, &j->state_dir) < 0) {
                agent_job_free(j);
                return -ENOMEM;
        }
        j->vm = agent_vm_ref_get(s->vm);
        j->dead = s->health.failing || s->health.io_stopped;
        j->exit_grace_ms = s->health.failing && s->health.reboots ? AGENT_PANIC_GRACE_MS : 0;
        *ret = j;
        return 0;
}

int agent_job_start(struct agent_daemon *d, struct agent_job *j)
{
        int r = agent_runner_spawn(d, j->s, job_body, job_release, j);

        if (r < 0)
                agent_job_free(j);
        return r;
}

int agent_executor_run(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k)
{
        struct agent_job *j;
        int r;

        switch (k) {
        case CORE_ACTION_OBSERVE:
                /* a changed size class and egress are the planner's RESIZE and EGRESS */
                s->observed_generation = s->generation;
                return 0;
        case CORE_ACTION_BOOT:
                return agent_executor_boot(d, s);
        case CORE_ACTION_STOP:
                if (!s->vm) {
                        s->phase = SESSION_PHASE_STOPPED;
                        agent_session_set_condition(s, AGENT_COND_READY, "False", "Stopped",
                                                    agent_now_real(d), "%s",
                                                    "spec.state is Stopped");
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
        r = agent_job_new(d, s, k, &j);
        if (r < 0)
                return r;
        return agent_job_start(d, j);
}

void agent_executor_vm_gone(struct agent_daemon *d, struct agent_session *s, const char *reason,
                            const char *msg)
{
        session_detach_vm(s);
        agent_vm_record_clear(d, s->key);
        agent_fwd_close_key(d, s->key);
        agent_session_fail(d, s, reason, msg);
        agent_resources_teardown(d, s->key);
        agent_session_set_cgroup(d, s, false);
}

void agent_session_fail(struct agent_daemon *d, struct agent_session *s, const char *reason,
                        const char *msg)
{
        unsigned shift = s->failures < 6 ? s->failures : 6;
        uint64_t backoff = FK_MIN(1ull << shift, AGENT_BACKOFF_MAX_S);

        agent_metrics_reconcile_error();
        s->phase = SESSION_PHASE_FAILED;
        s->started_ns = 0;
        s->failures++;
        s->retry_at_ns = agent_now_mono(d) + backoff * 1000000000ull;
        agent_session_set_condition(s, AGENT_COND_READY, "False", reason, agent_now_real(d), "%s",
                                    msg);
        log_error("session %s: failed: %s", s->key, msg);
}
