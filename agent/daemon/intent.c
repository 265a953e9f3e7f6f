/* SPDX-License-Identifier: MIT */
/* Intent records: what an API request asked of a session (checkpoint, rollback, snapshot,
 * fork), queued on the session until the planner decides it and the job runner ends it; the
 * request's thread waits on d->changed for the outcome, bounded. */
#include "agent/daemon/daemon-internal.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INTENT_SLICE_MS 1000

static struct agent_intent *intent_put(struct agent_intent *in)
{
        if (in && --in->refs == 0) {
                json_decref(in->names);
                free(in);
        }
        return NULL;
}

struct agent_intent *agent_intent_pending(const struct agent_session *s)
{
        for (struct agent_intent *in = s->intents; in; in = in->next)
                if (!in->running && !in->done)
                        return in;
        return NULL;
}

struct agent_intent *agent_intent_find(const struct agent_session *s, enum core_intent_kind kind)
{
        for (struct agent_intent *in = s->intents; in; in = in->next)
                if (in->kind == kind && !in->done)
                        return in;
        return NULL;
}

/* Under the lock: in leaves s's queue (the queue's reference is dropped). */
static void intent_unlink(struct agent_session *s, struct agent_intent *in)
{
        for (struct agent_intent **p = &s->intents; *p; p = &(*p)->next)
                if (*p == in) {
                        *p = in->next;
                        in->next = NULL;
                        intent_put(in);
                        return;
                }
}

void agent_intent_complete(struct agent_daemon *d, struct agent_session *s, struct agent_intent *in,
                           int r, const struct fk_error *err)
{
        double latency = (double)(fk_now_mono_ns() - in->t0_mono_ns) / 1e9;

        in->r = r;
        if (r < 0 && err && err != &in->err)
                in->err = *err;
        if (r < 0 && !in->err.msg[0])
                fk_error_set(&in->err, r, "%s: %s", core_intent_to_string(in->kind), strerror(-r));
        in->done = true;
        in->running = false;
        /* the one place an intent's outcome is recorded: metrics (rollback is timed from the
         * request, as callers see it), audit, and the waiters */
        if (in->kind == CORE_INTENT_ROLLBACK && in->ran)
                agent_metrics_op_done(AGENT_OP_ROLLBACK, r, in->t0_mono_ns);
        if (in->ran)
                agent_daemon_audit(d, s->namespace, s->name, core_intent_to_string(in->kind),
                                   r >= 0 ? "ok" : strerror(-r), latency);
        intent_unlink(s, in);
        pthread_cond_broadcast(&d->changed);
}

void agent_intent_reject(struct agent_daemon *d, struct agent_session *s, int r)
{
        struct agent_intent *in = agent_intent_pending(s);
        struct fk_error err = {0};
        const char *phase = session_phase_to_string(s->phase);

        if (!in)
                return;
        if (r == -ENOENT)
                fk_error_set(&err, r, "session %s/%s not found", s->namespace, s->name);
        else if (r == -EBUSY)
                fk_error_set(&err, r, "session %s/%s is busy (%s); retry", s->namespace, s->name,
                             phase);
        else if (s->phase == SESSION_PHASE_FAILED)
                fk_error_set(&err, r, "session %s/%s is Failed, not Running (%s: %s)", s->namespace,
                             s->name, s->conditions[AGENT_COND_READY].reason,
                             s->conditions[AGENT_COND_READY].message);
        else
                fk_error_set(&err, r, "session %s/%s is %s, not Running", s->namespace, s->name,
                             phase);
        agent_intent_complete(d, s, in, r, &err);
}

void agent_intents_drop(struct agent_session *s)
{
        while (s->intents) {
                struct agent_intent *in = s->intents;

                if (!in->done) {
                        in->done = true;
                        in->r = fk_error_set(&in->err, -ENOENT, "session %s/%s was removed",
                                             s->namespace, s->name);
                }
                s->intents = in->next;
                in->next = NULL;
                intent_put(in);
        }
}

/* Under the lock: the record a request waits on; an unnamed checkpoint joins the one queued
 * or running (a second request while one is in flight gets its id). */
static int intent_record(struct agent_daemon *d, struct agent_session *s,
                         const struct agent_intent_args *a, struct agent_intent **ret)
{
        struct agent_intent *in, **tail;

        if (a->kind == CORE_INTENT_CHECKPOINT && (in = agent_intent_find(s, a->kind))) {
                in->refs++;
                *ret = in;
                return 0;
        }
        in = calloc(1, sizeof(*in));
        if (!in)
                return -ENOMEM;
        in->kind = a->kind;
        in->refs = 2; /* the queue and the waiter */
        in->count = a->count;
        snprintf(in->arg, sizeof(in->arg), "%s", a->arg ? a->arg : "");
        snprintf(in->idem_key, sizeof(in->idem_key), "%s", a->idem_key ? a->idem_key : "");
        in->requested_ns = agent_now_real(d);
        in->since_mono_ns = agent_now_mono(d);
        in->t0_mono_ns = fk_now_mono_ns();
        for (tail = &s->intents; *tail; tail = &(*tail)->next)
                ;
        *tail = in;
        *ret = in;
        agent_runner_yield(s);
        return 0;
}

/* Under the lock: waits for in's outcome, letting the runner decide again each slice (a busy
 * session's wait runs out in the planner, not here). */
static int intent_wait(struct agent_daemon *d, const char *ns, const char *name,
                       struct agent_intent *in, unsigned timeout_ms, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000;
        struct agent_session *s;

        agent_runner_dispatch(d);
        while (!in->done) {
                struct timespec ts;

                if (atomic_load(&d->quit))
                        return fk_error_set(err, -ESHUTDOWN, "forkletd is shutting down");
                if (fk_now_mono_ns() >= deadline) {
                        s = agent_daemon_find(d, ns, name);
                        if (in->running || !s)
                                return fk_error_set(err, -ETIMEDOUT, "%s of %s/%s still running",
                                                    core_intent_to_string(in->kind), ns, name);
                        intent_unlink(s, in);
                        return fk_error_set(err, -ETIMEDOUT, "%s of %s/%s did not start in %u s",
                                            core_intent_to_string(in->kind), ns, name,
                                            timeout_ms / 1000);
                }
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += INTENT_SLICE_MS / 1000;
                pthread_cond_timedwait(&d->changed, &d->lock, &ts);
                if (!in->done)
                        agent_runner_dispatch(d);
        }
        if (in->r < 0 && err)
                *err = in->err;
        return in->r;
}

int agent_daemon_intent(struct agent_daemon *d, const char *ns, const char *name,
                        const struct agent_intent_args *a, unsigned timeout_ms,
                        struct agent_intent_outcome *ret, struct fk_error *err)
{
        struct agent_intent *in = NULL;
        struct agent_session *s;
        int r;

        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        if (!s || !s->spec)
                r = fk_error_set(err, -ENOENT, "session %s/%s not found", ns, name);
        else if ((r = intent_record(d, s, a, &in)) < 0)
                fk_error_set(err, r, "out of memory");
        if (r >= 0)
                r = intent_wait(d, ns, name, in, timeout_ms, err);
        if (r >= 0 && ret) {
                snprintf(ret->id, sizeof(ret->id), "%s", in->id);
                ret->names = json_incref(in->names);
        }
        intent_put(in);
        pthread_mutex_unlock(&d->lock);
        agent_daemon_wake(d);
        return r;
}

/* ---- the fork engine's entry points (agent.h) as intents ---------------------------------- */

#define INTENT_TIMEOUT_MS 300000

int agent_daemon_checkpoint_create(struct agent_daemon *d, const char *ns, const char *name,
                                   char *ret_id, struct fk_error *err)
{
        struct agent_intent_args a = {.kind = CORE_INTENT_CHECKPOINT};
        struct agent_intent_outcome o = {0};
        int r = agent_daemon_intent(d, ns, name, &a, INTENT_TIMEOUT_MS, &o, err);

        if (r >= 0)
                snprintf(ret_id, 41, "%.40s", o.id);
        json_decref(o.names);
        return r;
}

int agent_daemon_fork(struct agent_daemon *d, const char *ns, const char *name, const char *id,
                      unsigned count, json_t **ret, struct fk_error *err)
{
        struct agent_intent_args a = {.kind = CORE_INTENT_FORK, .arg = id, .count = count};
        struct agent_intent_outcome o = {0};
        int r = agent_daemon_intent(d, ns, name, &a, INTENT_TIMEOUT_MS, &o, err);

        if (r < 0) {
                json_decref(o.names);
                return r;
        }
        *ret = o.names ? o.names : json_array();
        return *ret ? 0 : -ENOMEM;
}

int agent_daemon_rollback(struct agent_daemon *d, const char *ns, const char *name, const char *id,
                          struct fk_error *err)
{
        struct agent_intent_args a = {.kind = CORE_INTENT_ROLLBACK, .arg = id};

        return agent_daemon_intent(d, ns, name, &a, INTENT_TIMEOUT_MS, NULL, err);
}

int agent_daemon_snapshot_create(struct agent_daemon *d, const char *ns, const char *name,
                                 char *ret_id, struct fk_error *err)
{
        struct agent_intent_args a = {.kind = CORE_INTENT_SNAPSHOT};
        struct agent_intent_outcome o = {0};
        int r = agent_daemon_intent(d, ns, name, &a, INTENT_TIMEOUT_MS, &o, err);

        if (r >= 0)
                snprintf(ret_id, 42, "%.41s", o.id);
        json_decref(o.names);
        return r;
}
