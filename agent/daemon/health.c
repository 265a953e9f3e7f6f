/* SPDX-License-Identifier: MIT */
/* Guest health: what a VM's console and QMP events say (kernel panics, the OOM killer), liveness
 * probes of its guest agent (the health thread), and why a session whose guest died is Failed
 * (the FAIL action ends its VM; restartPolicy decides about the next boot). */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROBE_TIMEOUT_MAX_MS 5000
#define PROBE_BATCH          64
#define HEALTH_TICK_MS       500
#define OOM_SUFFIX_MAX       (AGENT_CONSOLE_LINE + 96)
#define MSG_MAX              512 /* guest text included; conditions keep less */

/* Copies src cut to size (messages carry guest text of any length). */
static void copy_cut(char *dst, size_t size, const char *src)
{
        size_t n = strlen(src);

        if (n >= size)
                n = size - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
}

void agent_health_reset(struct agent_session *s)
{
        memset(&s->health, 0, sizeof(s->health));
}

/* The kernel's own words for running out of memory in a panic. */
static bool says_memory(const char *panic)
{
        return strstr(panic, "ut of memory") || strstr(panic, "deadlocked on memory") ||
               strstr(panic, "panic_on_oom");
}

/* " (the OOM killer killed N processes, the last: ...)" or "". */
static void oom_suffix(const struct agent_vm_health *h, char *buf, size_t size)
{
        buf[0] = '\0';
        if (h->oom_kills)
                snprintf(buf, size, " (the guest's OOM killer killed %u process%s, the last: %s)",
                         h->oom_kills, h->oom_kills == 1 ? "" : "es", h->oom);
}

const char *agent_health_verdict(const struct agent_vm_health *h, unsigned probe_failures,
                                 unsigned threshold, const char *probe_error, char *msg,
                                 size_t size)
{
        char oom[OOM_SUFFIX_MAX];

        if (h->panics > 0) {
                oom_suffix(h, oom, sizeof(oom));
                if (says_memory(h->panic) || h->oom_kills > 0) {
                        snprintf(msg, size, "the guest ran out of memory: %s%s", h->panic, oom);
                        return "GuestOOM";
                }
                snprintf(msg, size, "the guest kernel panicked: %s", h->panic);
                return "GuestPanicked";
        }
        if (threshold > 0 && probe_failures >= threshold) {
                snprintf(msg, size,
                         "the guest agent did not answer %u liveness probes in a row (%s)",
                         probe_failures, probe_error && probe_error[0] ? probe_error : "no answer");
                return "GuestUnresponsive";
        }
        return NULL;
}

static void keep_failure(struct agent_daemon *d, struct agent_session *s, const char *reason,
                         const char *msg, const struct agent_vm_health *h)
{
        struct agent_failure *f = &s->last_failure;

        f->time_ns = agent_now_real(d);
        copy_cut(f->reason, sizeof(f->reason), reason);
        copy_cut(f->message, sizeof(f->message), msg);
        /* A report without console lines (a backend without a console) keeps the earlier ones. */
        if (h && h->n_tail) {
                memcpy(f->tail, h->tail, sizeof(f->tail));
                f->n_tail = h->n_tail;
        }
}

/* The guest is dead: say so now (exec fails at once) and let the planner end its VM. */
static void mark_failing(struct agent_daemon *d, struct agent_session *s, const char *reason,
                         const char *msg, const struct agent_vm_health *h)
{
        struct agent_session_health *hs = &s->health;

        hs->failing = true;
        hs->reboots = h->console_panics > 0;
        copy_cut(hs->fail_reason, sizeof(hs->fail_reason), reason);
        copy_cut(hs->fail_msg, sizeof(hs->fail_msg), msg);
        keep_failure(d, s, reason, msg, h);
        agent_session_set_condition(s, AGENT_COND_READY, "False", reason, agent_now_real(d), "%s",
                                    msg);
        agent_metrics_guest_failure(reason);
        log_error("session %s: %s: %s; ending its VM", s->key, reason, msg);
}

static void observe_one(struct agent_daemon *d, struct agent_session *s,
                        const struct agent_vm_health *h)
{
        const char *reason;
        char msg[MSG_MAX];

        if (h->oom_kills > s->health.oom_seen) {
                agent_metrics_add_guest_oom_kills(h->oom_kills - s->health.oom_seen);
                agent_session_add_event(s, agent_now_real(d), true, "GuestOOM",
                                        "%s (%u so far; forklet-agent is exempt)", h->oom,
                                        h->oom_kills);
                log_warning("session %s: the guest ran out of memory: %s", s->key, h->oom);
                s->health.oom_seen = h->oom_kills;
        }
        agent_disk_pressure_observe(d, s, h);
        reason = agent_health_verdict(h, s->health.probe_failures,
                                      d->cfg->liveness_failure_threshold, s->health.probe_error,
                                      msg, sizeof(msg));
        if (reason)
                mark_failing(d, s, reason, msg, h);
}

void agent_health_observe_all(struct agent_daemon *d)
{
        if (!d->ops.health)
                return;
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                struct agent_vm_health h;

                if (!s->vm || s->busy || s->health.failing)
                        continue;
                memset(&h, 0, sizeof(h));
                if (d->ops.health(d->ops.userdata, s->vm->vm, &h) >= 0)
                        observe_one(d, s, &h);
        }
}

void agent_health_exited(struct agent_daemon *d, struct agent_session *s, int status,
                         const char *why, char *ret_reason, char *msg, size_t size)
{
        struct agent_vm_health h;
        const char *reason = NULL;
        char detail[MSG_MAX], oom[OOM_SUFFIX_MAX];
        bool have;

        memset(&h, 0, sizeof(h));
        have = d->ops.health && d->ops.health(d->ops.userdata, s->vm->vm, &h) >= 0;
        if (s->health.failing) {
                reason = s->health.fail_reason;
                copy_cut(detail, sizeof(detail), s->health.fail_msg);
        } else if (have &&
                   (reason = agent_health_verdict(&h, 0, 0, NULL, detail, sizeof(detail)))) {
                agent_metrics_guest_failure(reason);
        } else if (have && h.oom_kills > 0) {
                reason = "GuestOOM";
                oom_suffix(&h, oom, sizeof(oom));
                snprintf(detail, sizeof(detail), "the guest ran out of memory%s", oom);
                agent_metrics_guest_failure(reason);
        }
        if (reason) {
                snprintf(ret_reason, 32, "%s", reason);
                snprintf(msg, size, "%s; QEMU (pid %d) %s", detail, (int)s->pid, why);
        } else {
                snprintf(ret_reason, 32, "%s", "VMExited");
                /* -no-reboot: a guest that reboots (panic=-1 included) ends QEMU with 0 */
                snprintf(msg, size, "QEMU (pid %d) exited: %s (status %d)%s", (int)s->pid, why,
                         status,
                         status == 0 ? ": the guest powered off or rebooted by itself" : "");
        }
        keep_failure(d, s, ret_reason, msg, have ? &h : NULL);
}

void agent_executor_check_exits(struct agent_daemon *d)
{
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                const char *why = NULL;
                char reason[32], msg[256];
                int status = 0;

                if (!s->vm || s->busy || d->ops.poll_exit(s->vm->vm, &status, &why) != 1)
                        continue;
                /* exited by itself: the console and QMP say whether the guest died */
                agent_health_exited(d, s, status, why ? why : "exited", reason, msg, sizeof(msg));
                agent_executor_vm_gone(d, s, reason, msg);
        }
}

const char *agent_health_failed(struct agent_daemon *d, struct agent_session *s,
                                const struct agent_vm_health *h)
{
        keep_failure(d, s, s->health.fail_reason, s->health.fail_msg, h);
        return s->health.fail_reason;
}

/* ---- liveness probes ---------------------------------------------------------------------- */

struct probe {
        struct agent_vm_ref *vm; /* owned reference */
        char key[2 * 64 + 2];
        int r;
        struct fk_error err;
};

static struct agent_session *find_key(struct agent_daemon *d, const char *key)
{
        for (size_t i = 0; i < d->n_sessions; i++)
                if (strcmp(d->sessions[i]->key, key) == 0)
                        return d->sessions[i];
        return NULL;
}

/* Under the lock: the Running sessions due for a probe (their next one scheduled). */
static size_t probes_due(struct agent_daemon *d, struct probe *v, uint64_t interval_ns)
{
        uint64_t now = agent_now_mono(d);
        size_t n = 0;

        for (size_t i = 0; i < d->n_sessions && n < PROBE_BATCH; i++) {
                struct agent_session *s = d->sessions[i];

                if (!s->vm || s->busy || s->phase != SESSION_PHASE_RUNNING ||
                    s->health.io_stopped || s->health.failing || now < s->health.next_probe_ns)
                        continue;
                s->health.next_probe_ns = now + interval_ns;
                v[n].vm = agent_vm_ref_get(s->vm);
                copy_cut(v[n].key, sizeof(v[n].key), s->key);
                n++;
        }
        return n;
}

/* Under the lock: one probe's result, if s still runs the VM that was probed. */
static bool probe_record(struct agent_daemon *d, const struct probe *p)
{
        struct agent_session *s = find_key(d, p->key);
        struct agent_session_health *hs;

        if (!s || s->vm != p->vm || s->busy || s->phase != SESSION_PHASE_RUNNING)
                return false;
        hs = &s->health;
        if (p->r >= 0) {
                if (hs->probe_failures)
                        log_info("session %s: the guest agent answers again", s->key);
                hs->probe_failures = 0;
                return false;
        }
        hs->probe_failures++;
        copy_cut(hs->probe_error, sizeof(hs->probe_error), p->err.msg);
        log_warning("session %s: liveness probe %u/%u failed: %s", s->key, hs->probe_failures,
                    d->cfg->liveness_failure_threshold, p->err.msg);
        return hs->probe_failures >= d->cfg->liveness_failure_threshold;
}

void agent_health_probe_round(struct agent_daemon *d)
{
        uint64_t interval_ms = (uint64_t)d->cfg->liveness_interval_s * 1000;
        unsigned timeout_ms = (unsigned)FK_MIN(interval_ms, (uint64_t)PROBE_TIMEOUT_MAX_MS);
        struct probe *v;
        bool wake = false;
        size_t n;

        if (!interval_ms || !d->ops.ping || !(v = calloc(PROBE_BATCH, sizeof(*v))))
                return;
        pthread_mutex_lock(&d->lock);
        n = probes_due(d, v, interval_ms * 1000000);
        pthread_mutex_unlock(&d->lock);
        /* One after the other: a dead guest delays the others' probes, never fails them. */
        for (size_t i = 0; i < n; i++)
                v[i].r = d->ops.ping(d->ops.userdata, v[i].vm->vm, timeout_ms, &v[i].err);
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < n; i++)
                wake |= probe_record(d, &v[i]);
        pthread_mutex_unlock(&d->lock);
        for (size_t i = 0; i < n; i++)
                agent_vm_ref_put(v[i].vm);
        free(v);
        if (wake)
                agent_daemon_wake(d);
}

static void *health_main(void *userdata)
{
        struct agent_daemon *d = userdata;

        pthread_mutex_lock(&d->lock);
        while (!atomic_load(&d->quit)) {
                struct timespec ts;

                pthread_mutex_unlock(&d->lock);
                agent_health_probe_round(d);
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += HEALTH_TICK_MS * 1000000L;
                ts.tv_sec += ts.tv_nsec / 1000000000L;
                ts.tv_nsec %= 1000000000L;
                pthread_mutex_lock(&d->lock);
                if (!atomic_load(&d->quit))
                        pthread_cond_timedwait(&d->health_wake, &d->lock, &ts);
        }
        pthread_mutex_unlock(&d->lock);
        return NULL;
}

int agent_health_start(struct agent_daemon *d)
{
        int r;

        if (!d->cfg->liveness_interval_s || !d->ops.ping)
                return 0;
        r = -pthread_create(&d->health_thread, NULL, health_main, d);
        if (r < 0)
                return log_error_errno(r, "start the health thread: %m");
        d->health_started = true;
        return 0;
}

void agent_health_stop(struct agent_daemon *d)
{
        if (!d->health_started)
                return;
        pthread_mutex_lock(&d->lock);
        pthread_cond_broadcast(&d->health_wake);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->health_thread, NULL);
        d->health_started = false;
}
