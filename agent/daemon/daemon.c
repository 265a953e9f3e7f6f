/* SPDX-License-Identifier: MIT */
/* The daemon: the mutex-protected session table, the reconcile pass (observe, then the job
 * runner's plan + execute, agent/daemon/executor-runner.c) and the
 * reconcile thread that wakes on API changes, manifest-dir events, QEMU exits and a timer. */
#include "agent/daemon/daemon-internal.h"
#include "agent/image/image.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#define RECONCILE_TICK_MS  1000
#define RESCAN_INTERVAL_NS (10ull * 1000 * 1000 * 1000)

static uint64_t system_real(void *userdata)
{
        (void)userdata;
        return fk_now_real_ns();
}

static uint64_t system_mono(void *userdata)
{
        (void)userdata;
        return fk_now_mono_ns();
}

const struct agent_clock agent_clock_system = {
        .now_real_ns = system_real,
        .now_mono_ns = system_mono,
};

struct agent_session *agent_daemon_find(struct agent_daemon *d, const char *ns, const char *name)
{
        for (size_t i = 0; i < d->n_sessions; i++)
                if (strcmp(d->sessions[i]->namespace, ns) == 0 &&
                    strcmp(d->sessions[i]->name, name) == 0)
                        return d->sessions[i];
        return NULL;
}

int agent_daemon_find_running(struct agent_daemon *d, const char *ns, const char *name,
                              struct agent_session **ret, struct fk_error *err)
{
        struct agent_session *s = agent_daemon_find(d, ns, name);

        if (!s)
                return fk_error_set(err, -ENOENT, "session %s/%s not found", ns, name);
        /* its VM may still run until the delete ends it, but its spec is gone */
        if (!s->spec)
                return fk_error_set(err, -ENOENT, "session %s/%s is being deleted", ns, name);
        /* Say why at once rather than let a call hang on a VM that cannot answer. */
        if (s->health.failing && s->vm)
                return fk_error_set(err, -EAGAIN, "session %s/%s: %s: %s; its VM is being ended",
                                    ns, name, s->health.fail_reason, s->health.fail_msg);
        if (s->health.io_stopped)
                return fk_error_set(err, -EAGAIN, "session %s/%s is %s: %s", ns, name,
                                    session_phase_to_string(s->phase),
                                    s->conditions[AGENT_COND_DISK_PRESSURE].message);
        if (s->phase == SESSION_PHASE_FAILED)
                return fk_error_set(err, -EAGAIN, "session %s/%s is Failed, not Running (%s: %s)",
                                    ns, name, s->conditions[AGENT_COND_READY].reason,
                                    s->conditions[AGENT_COND_READY].message);
        if (s->phase != SESSION_PHASE_RUNNING || !s->vm)
                return fk_error_set(err, -EAGAIN, "session %s/%s is %s, not Running", ns, name,
                                    session_phase_to_string(s->phase));
        *ret = s;
        return 0;
}

int agent_daemon_insert(struct agent_daemon *d, struct agent_session *s)
{
        if (d->n_sessions == d->alloc_sessions) {
                size_t n = d->alloc_sessions ? d->alloc_sessions * 2 : 16;
                struct agent_session **p = realloc(d->sessions, n * sizeof(*p));

                if (!p)
                        return -ENOMEM;
                d->sessions = p;
                d->alloc_sessions = n;
        }
        if (s->created_ns == 0)
                s->created_ns = agent_now_real(d);
        d->sessions[d->n_sessions++] = s;
        return 0;
}

void agent_daemon_remove(struct agent_daemon *d, struct agent_session *s)
{
        for (size_t i = 0; i < d->n_sessions; i++) {
                if (d->sessions[i] != s)
                        continue;
                memmove(&d->sessions[i], &d->sessions[i + 1],
                        (d->n_sessions - i - 1) * sizeof(*d->sessions));
                d->n_sessions--;
                agent_daemon_audit(d, s->namespace, s->name, "removed", "ok", 0);
                agent_intents_drop(s);
                agent_session_free(s);
                return;
        }
}

static int daemon_make_dirs(const struct node_config *cfg)
{
        cleanup_free char *state = NULL, *run = NULL, *stubs = NULL;
        int r;

        if (fk_asprintf(&state, "%s/sessions", cfg->state_dir) < 0 ||
            fk_asprintf(&run, "%s/sessions", cfg->run_dir) < 0 ||
            fk_asprintf(&stubs, "%s/restore-kernels", cfg->run_dir) < 0)
                return -ENOMEM;
        /* Older releases started restored QEMUs on stub kernels kept here; a QEMU reads its
         * kernel at start, so the ones still running need them no more. */
        (void)fk_rm_rf(stubs);
        r = fk_mkdir_p(state, 0700);
        if (r < 0)
                return log_error_errno(r, "create state dir %s: %m", state);
        r = fk_mkdir_p(run, 0700);
        if (r < 0)
                return log_error_errno(r, "create run dir %s: %m", run);
        return 0;
}

static int daemon_load_store(struct agent_daemon *d)
{
        struct agent_session **v = NULL;
        struct fk_error err = {0};
        size_t n = 0;
        int r;

        r = agent_store_open(d->cfg->state_dir, d->cfg->run_dir, &d->store, &err);
        if (r < 0)
                return log_error_errno(r, "state store: %s", err.msg);
        r = agent_store_load_sessions(d->store, d->cfg, &v, &n);
        if (r < 0)
                return log_error_errno(r, "load sessions from %s: %m", d->cfg->state_dir);
        for (size_t i = 0; i < n; i++) {
                if (r >= 0)
                        r = agent_daemon_insert(d, v[i]);
                if (r < 0)
                        agent_session_free(v[i]);
                else
                        log_info("session %s: restored from the state store", v[i]->key);
        }
        free(v);
        return r;
}

/* <stateDir>/audit.log; a broken chain is an error so nobody extends a tampered log. */
static int daemon_open_audit(struct agent_daemon *d)
{
        cleanup_free char *path = NULL;
        int r;

        if (fk_asprintf(&path, "%s/audit.log", d->cfg->state_dir) < 0)
                return -ENOMEM;
        r = agent_audit_open(path, &d->audit);
        if (r < 0)
                return log_error_errno(r, "open audit log %s: %m", path);
        return 0;
}

static void daemon_rescan(struct agent_daemon *d)
{
        struct agent_dir_scan scan = {0};
        int r;

        r = agent_dir_scan(d->cfg->manifest_dir, d->cfg, &scan);
        if (r < 0) {
                log_warning_errno(r, "scan manifest dir %s: %m", d->cfg->manifest_dir);
                return;
        }
        agent_daemon_sync_dir(d, &scan);
        agent_dir_scan_done(&scan);
}

/* Host totals for admission; without them (no /proc) nothing but maxSessions is enforced. */
static void daemon_node_resources(struct agent_daemon *d)
{
        struct cg_capacity cap = {0};
        struct fk_error err = {0};

        if (cg_node_capacity(NULL, &cap, &err) < 0)
                log_warning("node capacity: %s; admitting by maxSessions only", err.msg);
        d->node = (struct core_node_resources){
                .host_memory_bytes = cap.memory_bytes ? cap.memory_bytes : UINT64_MAX,
                .host_cpus = cap.cpus ? cap.cpus : UINT_MAX / 10000,
                .reserve_memory_bytes = (uint64_t)d->cfg->reserve_memory_mib * 1024 * 1024,
                .cpu_overcommit_percent = d->cfg->cpu_overcommit_percent,
                .max_sessions = d->cfg->max_sessions,
        };
}

int agent_daemon_new(const struct node_config *cfg, int accel, const struct agent_vm_ops *ops,
                     const struct agent_clock *clock, struct agent_daemon **ret)
{
        struct agent_daemon *d;
        int r;

        r = daemon_make_dirs(cfg);
        if (r < 0)
                return r;
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->cfg = cfg;
        d->accel = accel;
        d->ops = *ops;
        d->clock = *clock;
        d->watch_fd = -1;
        daemon_node_resources(d);
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->changed, NULL);
        pthread_cond_init(&d->watch_cond, NULL);
        pthread_cond_init(&d->health_wake, NULL);
        pthread_mutex_init(&d->fwd_lock, NULL);
        pthread_cond_init(&d->fwd_done, NULL);
        pthread_mutex_init(&d->images_lock, NULL);
        d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (d->wake_fd < 0) {
                r = -errno;
                agent_daemon_free(d);
                return log_error_errno(r, "eventfd: %m");
        }
        r = daemon_open_audit(d);
        if (r >= 0)
                r = daemon_load_store(d);
        if (r < 0) {
                agent_daemon_free(d);
                return r;
        }
        /* Scan the manifest dir first so adoption knows its sessions are wanted. */
        pthread_mutex_lock(&d->lock);
        d->last_scan_ns = agent_now_mono(d);
        daemon_rescan(d);
        pthread_mutex_unlock(&d->lock);
        agent_executor_adopt_all(d);
        agent_recover_at_start(d);
        *ret = d;
        return 0;
}

void agent_daemon_wake(struct agent_daemon *d)
{
        uint64_t one = 1;

        (void)!write(d->wake_fd, &one, sizeof(one));
}

int agent_daemon_reconcile(struct agent_daemon *d)
{
        uint64_t now = agent_now_mono(d);
        bool rescan = d->last_scan_ns == 0 || now - d->last_scan_ns >= RESCAN_INTERVAL_NS;
        int r;

        r = d->watch_fd >= 0 ? agent_dir_watch_drain(d->watch_fd) : 0;
        if (r != 0)
                rescan = true;
        if (r == 2 || r < 0) {
                close(d->watch_fd);
                d->watch_fd = -1;
        }
        /* The manifest dir came back after being removed: watch it again. */
        if (d->thread_started && d->watch_fd < 0 && access(d->cfg->manifest_dir, F_OK) == 0) {
                d->watch_fd = agent_dir_watch(d->cfg->manifest_dir, false);
                rescan = true;
        }
        pthread_mutex_lock(&d->lock);
        if (rescan) {
                d->last_scan_ns = now;
                daemon_rescan(d);
        }
        agent_health_observe_all(d);
        agent_executor_check_exits(d);
        /* before the planner: a due compaction takes the idle session ahead of a checkpoint
         * asked for meanwhile (which waits for it), so checkpoints in a row keep the chain
         * bounded */
        agent_compact_tick(d);
        r = agent_runner_plan(d, true);
        agent_give_back_tick(d);
        agent_dirty_log_tick(d);
        agent_audit_transitions(d);
        pthread_mutex_unlock(&d->lock);
        return r;
}

/* The fds the loop sleeps on: wake eventfd, inotify, and each idle VM's exit and health fds. */
static size_t daemon_pollfds(struct agent_daemon *d, struct pollfd **ret)
{
        struct pollfd *p;
        size_t n = 0;

        pthread_mutex_lock(&d->lock);
        p = calloc(2 * d->n_sessions + 2, sizeof(*p));
        if (p) {
                p[n++] = (struct pollfd){.fd = d->wake_fd, .events = POLLIN};
                if (d->watch_fd >= 0)
                        p[n++] = (struct pollfd){.fd = d->watch_fd, .events = POLLIN};
                for (size_t i = 0; i < d->n_sessions; i++) {
                        struct agent_session *s = d->sessions[i];
                        int fd = s->vm && !s->busy ? d->ops.exit_fd(s->vm->vm) : -1;

                        if (fd >= 0)
                                p[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
                        fd = s->vm && !s->busy && d->ops.health_fd ? d->ops.health_fd(s->vm->vm)
                                                                   : -1;
                        if (fd >= 0)
                                p[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
                }
        }
        pthread_mutex_unlock(&d->lock);
        *ret = p;
        return p ? n : 0;
}

static void *daemon_thread(void *userdata)
{
        struct agent_daemon *d = userdata;

        while (!atomic_load(&d->quit)) {
                cleanup_free struct pollfd *fds = NULL;
                size_t n;
                uint64_t v;

                (void)agent_daemon_reconcile(d);
                agent_sampler_tick(d, false);
                n = daemon_pollfds(d, &fds);
                if (n > 0)
                        (void)poll(fds, n, RECONCILE_TICK_MS);
                (void)!read(d->wake_fd, &v, sizeof(v));
        }
        return NULL;
}

int agent_daemon_start(struct agent_daemon *d)
{
        int r;

        agent_daemon_net_start(d);
        d->watch_fd = agent_dir_watch(d->cfg->manifest_dir, true);
        if (d->watch_fd < 0)
                log_warning_errno(d->watch_fd, "watch %s (falling back to periodic rescans): %m",
                                  d->cfg->manifest_dir);
        r = -pthread_create(&d->thread, NULL, daemon_thread, d);
        if (r < 0)
                return log_error_errno(r, "start reconcile thread: %m");
        d->thread_started = true;
        return agent_health_start(d);
}

int agent_daemon_wait_idle(struct agent_daemon *d, unsigned timeout_ms)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000;
        int idle;

        pthread_mutex_lock(&d->lock);
        while (d->workers > 0 && fk_now_mono_ns() < deadline) {
                struct timespec ts;

                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 50 * 1000 * 1000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&d->changed, &d->lock, &ts);
        }
        idle = d->workers == 0;
        pthread_mutex_unlock(&d->lock);
        return idle;
}

void agent_daemon_shutdown(struct agent_daemon *d)
{
        if (!d)
                return;
        atomic_store(&d->quit, true);
        agent_daemon_wake(d);
        if (d->thread_started) {
                pthread_join(d->thread, NULL);
                d->thread_started = false;
        }
        agent_health_stop(d);
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < d->n_sessions; i++)
                d->sessions[i]->cancel = true;
        pthread_mutex_unlock(&d->lock);
        while (!agent_daemon_wait_idle(d, 1000))
                log_info("waiting for %u action(s) to finish", d->workers);
}

struct agent_daemon *agent_daemon_free(struct agent_daemon *d)
{
        if (!d)
                return NULL;
        agent_daemon_shutdown(d);
        d->images = agent_image_store_free(d->images);
        pthread_mutex_destroy(&d->images_lock);
        for (size_t i = 0; i < d->n_sessions; i++) {
                agent_intents_drop(d->sessions[i]);
                agent_session_free(d->sessions[i]);
        }
        free(d->sessions);
        fk_strv_free(d->dir_errors);
        if (d->wake_fd >= 0)
                close(d->wake_fd);
        if (d->watch_fd >= 0)
                close(d->watch_fd);
        pthread_cond_destroy(&d->changed);
        pthread_cond_destroy(&d->watch_cond);
        pthread_cond_destroy(&d->health_wake);
        agent_audit_close(d->audit);
        agent_store_free(d->store);
        pthread_mutex_destroy(&d->lock);
        pthread_mutex_destroy(&d->fwd_lock);
        pthread_cond_destroy(&d->fwd_done);
        free(d);
        return NULL;
}

void agent_daemon_wait_pass(struct agent_daemon *d, uint64_t *revision, unsigned timeout_ms)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        pthread_mutex_lock(&d->lock);
        if (d->revision == *revision)
                pthread_cond_timedwait(&d->watch_cond, &d->lock, &ts);
        *revision = d->revision;
        pthread_mutex_unlock(&d->lock);
}
