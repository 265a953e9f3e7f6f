/* SPDX-License-Identifier: MIT */
/* Lifecycle verbs on the session table: pause/resume/stop/start change spec.state of an API
 * session (persisted like an apply), waiting for a phase, and guest file transfer. */
#include "agent/daemon/daemon-internal.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#define WAIT_SLICE_MS 100

static int set_state_locked(struct agent_daemon *d, struct agent_session *s, int state,
                            bool *ret_changed, struct fk_error *err)
{
        const char *want = session_state_to_string((enum session_state)state);
        enum session_state old;
        int r;

        if (!s->spec)
                return fk_error_set(err, -EBUSY, "session %s/%s is being deleted", s->namespace,
                                    s->name);
        /* `forklet resume` continues a VM a disk error stopped (diskPressure.resume manual) */
        if (state == SESSION_STATE_RUNNING && s->health.io_stopped) {
                s->health.io_resume_due = true;
                agent_daemon_wake(d);
        }
        if ((int)s->spec->state == state) {
                *ret_changed = false;
                return 0;
        }
        /* Pausing is for a machine that runs; booting one just to pause it is never meant. */
        if (state == SESSION_STATE_PAUSED && s->spec->state == SESSION_STATE_STOPPED)
                return fk_error_set(err, -EAGAIN, "session %s/%s is Stopped; start it first",
                                    s->namespace, s->name);
        /* The file is the source of truth for a manifest-dir session: an override here would
         * be lost (or, worse, fight the file) on the next edit, so say what to change. */
        if (s->source == AGENT_SOURCE_FILE)
                return fk_error_set(err, -EPERM,
                                    "session %s/%s is defined by %s; set spec.state: %s there",
                                    s->namespace, s->name, s->source_file, want);
        if (s->source == AGENT_SOURCE_CLUSTER)
                return fk_error_set(err, -EPERM,
                                    "session %s/%s is assigned by the control plane; set "
                                    "spec.state: %s and apply it with forklet --etcd",
                                    s->namespace, s->name, want);
        old = s->spec->state;
        s->spec->state = (enum session_state)state;
        s->generation++;
        r = agent_store_save(d->store, s, err);
        if (r < 0) { /* what runs is what is stored */
                s->spec->state = old;
                s->generation--;
                return r;
        }
        log_info("session %s: spec.state %s (generation %" PRIu64 ")", s->key, want, s->generation);
        *ret_changed = true;
        return 0;
}

int agent_daemon_set_state(struct agent_daemon *d, const char *ns, const char *name, int state,
                           bool *ret_changed, struct fk_error *err)
{
        struct agent_session *s;
        bool changed = false;
        int r;

        if (!session_state_to_string((enum session_state)state))
                return fk_error_set(err, -EINVAL, "invalid state %d", state);
        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        r = s ? set_state_locked(d, s, state, &changed, err)
              : fk_error_set(err, -ENOENT, "session %s/%s not found", ns, name);
        pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return r;
        if (changed)
                agent_daemon_wake(d);
        *ret_changed = changed;
        return 0;
}

/* 1: reached, 0: keep waiting, <0: will not get there (err says why). Under the lock. */
static int phase_check(const struct agent_session *s, enum session_phase want, struct fk_error *err)
{
        const struct agent_condition *ready = &s->conditions[AGENT_COND_READY];

        if (!s->spec)
                return fk_error_set(err, -ENOENT, "session %s/%s was deleted", s->namespace,
                                    s->name);
        /* a give-back or compaction that started once the phase was reached leaves it be */
        if ((s->busy && !s->background) || s->observed_generation != s->generation)
                return 0;
        /* afterStart and the declared checkpoints of a new VM are still to run */
        if (s->phase == SESSION_PHASE_RUNNING && (s->post_start == CORE_POST_START_AFTER_START ||
                                                  s->post_start == CORE_POST_START_CHECKPOINTS))
                return 0;
        /* A guest seen dead (a panic, unanswered probes) still shows its phase until its VM
         * is ended, which may take the seconds a panic report needs: no phase is reached yet. */
        if (s->health.failing && s->vm)
                return 0;
        if (s->phase == want)
                return 1;
        if (s->phase == SESSION_PHASE_FAILED && want != SESSION_PHASE_FAILED &&
            s->spec->restart_policy != RESTART_POLICY_ON_FAILURE)
                return fk_error_set(err, -EIO, "session %s/%s failed: %s: %s", s->namespace,
                                    s->name, ready->reason, ready->message);
        if (s->phase == SESSION_PHASE_PENDING && ready->set &&
            strcmp(ready->reason, "ImageNotFound") == 0)
                return fk_error_set(err, -ENOENT, "session %s/%s is Pending: %s", s->namespace,
                                    s->name, ready->message);
        return 0;
}

int agent_daemon_wait_phase(struct agent_daemon *d, const char *ns, const char *name,
                            enum session_phase want, unsigned timeout_ms, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000;
        struct agent_session *s;
        int r;

        pthread_mutex_lock(&d->lock);
        for (;;) {
                s = agent_daemon_find(d, ns, name);
                r = s ? phase_check(s, want, err)
                      : fk_error_set(err, -ENOENT, "session %s/%s not found", ns, name);
                if (r != 0)
                        break;
                /* A waiting API thread must not hold up forkletd's shutdown. */
                if (atomic_load(&d->quit)) {
                        r = fk_error_set(err, -ESHUTDOWN, "forkletd is shutting down");
                        break;
                }
                if (fk_now_mono_ns() >= deadline) {
                        r = fk_error_set(err, -ETIMEDOUT, "session %s/%s: still %s after %u ms", ns,
                                         name, session_phase_to_string(s->phase), timeout_ms);
                        break;
                }
                /* Workers broadcast when they finish; exits noticed by the reconcile thread
                 * do not, hence the slices. */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += WAIT_SLICE_MS * 1000000L;
                ts.tv_sec += ts.tv_nsec / 1000000000L;
                ts.tv_nsec %= 1000000000L;
                pthread_cond_timedwait(&d->changed, &d->lock, &ts);
        }
        pthread_mutex_unlock(&d->lock);
        return r < 0 ? r : 0;
}

/* A reference to the VM of a Running session (or -ENOENT / -EAGAIN with err). */
static int running_vm(struct agent_daemon *d, const char *ns, const char *name,
                      struct agent_vm_ref **ret, struct fk_error *err)
{
        struct agent_session *s = NULL;
        int r;

        pthread_mutex_lock(&d->lock);
        r = agent_daemon_find_running(d, ns, name, &s, err);
        if (r >= 0)
                *ret = agent_vm_ref_get(s->vm);
        pthread_mutex_unlock(&d->lock);
        return r;
}

int agent_daemon_write_file(struct agent_daemon *d, const char *ns, const char *name,
                            const char *path, const void *data, size_t size, unsigned mode,
                            struct fk_error *err)
{
        struct agent_vm_ref *vm = NULL;
        int r;

        if (!d->ops.write_file)
                return fk_error_set(err, -EOPNOTSUPP, "file transfer not supported");
        r = running_vm(d, ns, name, &vm, err);
        if (r < 0)
                return r;
        r = d->ops.write_file(d->ops.userdata, vm->vm, path, data, size, mode, err);
        agent_vm_ref_put(vm);
        return r;
}

int agent_daemon_read_file(struct agent_daemon *d, const char *ns, const char *name,
                           const char *path, size_t max, void **ret, size_t *ret_size,
                           struct fk_error *err)
{
        struct agent_vm_ref *vm = NULL;
        int r;

        if (!d->ops.read_file)
                return fk_error_set(err, -EOPNOTSUPP, "file transfer not supported");
        r = running_vm(d, ns, name, &vm, err);
        if (r < 0)
                return r;
        r = d->ops.read_file(d->ops.userdata, vm->vm, path, max, ret, ret_size, err);
        agent_vm_ref_put(vm);
        return r;
}
