/* SPDX-License-Identifier: MIT */
/* The job runner's front: what the planner is told about each session (desired, observed),
 * the pass that runs its actions (all of them from the reconcile thread, only the intent ones
 * from a request's thread), the actions that take no job, and the worker threads every job
 * runs in (the session busy, d->workers counted, a job's end). */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* A rollback restored s and waits for the planner to pause or stop it as its spec asks. */
static bool rollback_settling(const struct agent_session *s)
{
        const struct agent_intent *in = agent_intent_find(s, CORE_INTENT_ROLLBACK);

        return in && in->settling;
}

static struct core_desired session_desired(struct agent_session *s)
{
        struct agent_intent *in = agent_intent_pending(s);
        const struct session_manifest *m = s->spec;

        return (struct core_desired){
                .present = m != NULL,
                .state = m ? (int)m->state : 0,
                .generation = s->generation,
                .restart_on_failure = m && m->restart_policy == RESTART_POLICY_ON_FAILURE,
                .intent = in ? in->kind : CORE_INTENT_NONE,
                .intent_since_ns = in ? in->since_mono_ns : 0,
                .has_forks = m && m->has_forks,
                .forks_count = m && m->has_forks ? m->forks_count : 0,
        };
}

static struct core_observed session_observed(struct agent_daemon *d, struct agent_session *s)
{
        struct core_observed o = {
                .phase = s->phase,
                .busy = s->busy,
                .has_vm = s->vm != NULL,
                .observed_generation = s->observed_generation,
                .retry_at_ns = s->retry_at_ns,
                .unhealthy = s->health.failing,
                .io_stopped = s->health.io_stopped,
                .io_resume_due = s->health.io_resume_due,
                .class_changed =
                        s->vm && s->spec && strcmp(s->spec->size_class, s->res.class_name) != 0,
                .has_net = d->net_ops && s->net,
                .post_start = s->post_start,
        };

        if (s->spec)
                agent_forks_observe(d, s, &o.forks, &o.forks_beyond, &o.forks_source);
        return o;
}

int agent_runner_plan(struct agent_daemon *d, bool all)
{
        size_t n = d->n_sessions;
        cleanup_free struct core_desired *want = calloc(n + 1, sizeof(*want));
        cleanup_free struct core_observed *have = calloc(n + 1, sizeof(*have));
        cleanup_free struct agent_session **snap = calloc(n + 1, sizeof(*snap));
        struct core_plan plan = {0};
        int r;

        if (!want || !have || !snap)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                agent_runner_rollback_settled(d, d->sessions[i]);
                snap[i] = d->sessions[i];
                want[i] = session_desired(snap[i]);
                have[i] = session_observed(d, snap[i]);
                /* a spec change waits for the session's job; a give-back (it only saves
                 * memory, the next check takes the rest) lets it go first, as it does requests */
                if (have[i].busy && want[i].present &&
                    want[i].generation != have[i].observed_generation)
                        agent_runner_yield(snap[i]);
        }
        r = core_plan(want, have, n, agent_now_mono(d), &plan);
        if (r < 0)
                return r;
        /* Actions may remove sessions (DESTROY without a VM); snap keeps indexes stable and
         * a removed session has no later action in the same plan. */
        for (size_t i = 0; i < plan.n; i++) {
                const struct core_action *a = &plan.actions[i];

                if (!all && !core_action_serves_intent(a->kind) &&
                    !rollback_settling(snap[a->index]))
                        continue;
                /* deleted by an earlier action of this pass (fork-trim, a cascade): the next
                 * pass plans it again */
                if (want[a->index].present && !snap[a->index]->spec)
                        continue;
                r = agent_runner_execute(d, snap[a->index], a);
                if (r < 0) {
                        agent_metrics_reconcile_error();
                        log_warning_errno(r, "%s %s: %m", core_action_to_string(a->kind),
                                          snap[a->index]->key);
                }
        }
        core_plan_done(&plan);
        return 0;
}

void agent_runner_dispatch(struct agent_daemon *d)
{
        int r = agent_runner_plan(d, false);

        if (r < 0)
                log_warning_errno(r, "dispatch requests: %m");
}

/* POST forks, inline under the lock: links and a stored record per fork, no VM touched. */
static int run_fork(struct agent_daemon *d, struct agent_session *s)
{
        struct agent_intent *in = agent_intent_pending(s);
        struct fk_error err = {0};
        json_t *names = NULL;
        int r;

        /* a Writing checkpoint: served once it is Ready (its writer wakes the reconcile loop),
         * not waited for here, where the lock must stay held for the whole pass */
        if (!in || agent_checkpoint_id_writing(d, s, in->arg))
                return 0;
        in->running = true;
        in->ran = true;
        r = agent_fork_create_many(d, s, in->arg, in->count, &names, &err);
        if (r >= 0)
                in->names = names;
        agent_intent_complete(d, s, in, r, &err);
        return 0;
}

int agent_runner_execute(struct agent_daemon *d, struct agent_session *s,
                         const struct core_action *a)
{
        switch (a->kind) {
        case CORE_ACTION_REJECT:
                agent_intent_reject(d, s, a->error);
                return 0;
        case CORE_ACTION_FORK:
                return run_fork(d, s);
        case CORE_ACTION_RESIZE:
                agent_resources_resize(d, s);
                snprintf(s->res.class_name, sizeof(s->res.class_name), "%s", s->spec->size_class);
                return 0;
        case CORE_ACTION_EGRESS:
                agent_daemon_net_observe(d, s);
                return 0;
        case CORE_ACTION_FORK_SCALE:
                agent_forks_scale_up(d, s);
                return 0;
        case CORE_ACTION_FORK_TRIM:
                agent_forks_trim(d, s);
                return 0;
        case CORE_ACTION_FORKS_WAIT:
                agent_forks_waiting(d, s);
                return 0;
        case CORE_ACTION_CHECKPOINT:
        case CORE_ACTION_SNAPSHOT:
        case CORE_ACTION_ROLLBACK:
        case CORE_ACTION_AFTER_START:
        case CORE_ACTION_DECLARED_CHECKPOINTS:
                return agent_runner_op(d, s, a->kind);
        default:
                return agent_executor_run(d, s, a->kind);
        }
}

void agent_runner_yield(struct agent_session *s)
{
        s->yield = true;
}

void agent_runner_job_end(struct agent_daemon *d, struct agent_session *s)
{
        if (s) {
                s->busy = false;
                s->background = false;
        }
        pthread_cond_broadcast(&d->changed);
        /* requests waiting on s need no reconcile tick to go on */
        if (s && (agent_intent_pending(s) || rollback_settling(s)))
                agent_runner_dispatch(d);
}

/* s is in the state its spec asks for (Running without a spec). */
static bool in_spec_state(const struct agent_session *s)
{
        int want = s->spec ? (int)s->spec->state : SESSION_STATE_RUNNING;

        return (want == SESSION_STATE_RUNNING && s->phase == SESSION_PHASE_RUNNING) ||
               (want == SESSION_STATE_PAUSED && s->phase == SESSION_PHASE_PAUSED) ||
               (want == SESSION_STATE_STOPPED && s->phase == SESSION_PHASE_STOPPED);
}

void agent_runner_boot_done(struct agent_daemon *d, struct agent_session *s)
{
        struct agent_intent *in = agent_intent_find(s, CORE_INTENT_ROLLBACK);
        struct fk_error err = {0};

        if (!in || !in->running || s->busy)
                return;
        /* a Paused (or Stopped) session comes back so: the planner pauses the restored VM next
         * (its guest ran for the restore's identity step), and the rollback ends then */
        if (s->phase == SESSION_PHASE_RUNNING && !in_spec_state(s) && s->vm && !in->settling) {
                in->settling = true;
                return;
        }
        if (s->phase == SESSION_PHASE_RUNNING || s->phase == SESSION_PHASE_PAUSED ||
            s->phase == SESSION_PHASE_STOPPED) {
                agent_intent_complete(d, s, in, 0, NULL);
                return;
        }
        fk_error_set(&err, -EIO, "rollback of %s/%s failed: %s", s->namespace, s->name,
                     s->conditions[AGENT_COND_READY].message);
        agent_intent_complete(d, s, in, -EIO, &err);
}

void agent_runner_rollback_settled(struct agent_daemon *d, struct agent_session *s)
{
        struct agent_intent *in = agent_intent_find(s, CORE_INTENT_ROLLBACK);

        /* the planner's pause, or a spec changed meanwhile to what the session is */
        if (in && in->settling && !s->busy && in_spec_state(s))
                agent_intent_complete(d, s, in, 0, NULL);
}

struct spawn {
        struct agent_daemon *d;
        void (*body)(void *ctx);
        void (*release)(void *ctx);
        void *ctx;
};

static void *spawn_thread(void *userdata)
{
        struct spawn *sp = userdata;
        struct agent_daemon *d = sp->d;

        sp->body(sp->ctx); /* returns holding d->lock, the session's job ended */
        pthread_mutex_unlock(&d->lock);
        sp->release(sp->ctx);
        free(sp);
        /* wake before the count drops: once it is 0 the daemon may be freed */
        agent_daemon_wake(d);
        pthread_mutex_lock(&d->lock);
        d->workers--;
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
        return NULL;
}

int agent_runner_spawn(struct agent_daemon *d, struct agent_session *s, void (*body)(void *ctx),
                       void (*release)(void *ctx), void *ctx)
{
        struct spawn *sp = calloc(1, sizeof(*sp));
        pthread_attr_t attr;
        pthread_t t;
        int r;

        if (!sp)
                return -ENOMEM;
        *sp = (struct spawn){d, body, release, ctx};
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        s->busy = true;
        d->workers++;
        r = -pthread_create(&t, &attr, spawn_thread, sp);
        pthread_attr_destroy(&attr);
        if (r < 0) {
                s->busy = false;
                d->workers--;
                free(sp);
        }
        return r;
}

int agent_runner_spawn_background(struct agent_daemon *d, struct agent_session *s,
                                  void (*body)(void *ctx), void (*release)(void *ctx), void *ctx)
{
        int r;

        s->yield = false;
        r = agent_runner_spawn(d, s, body, release, ctx);
        /* the job's end takes the lock held here, so it cannot clear this first */
        s->background = r >= 0;
        return r;
}
