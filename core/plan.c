/* SPDX-License-Identifier: MIT */
/* The pure reconcile planner: desired (manifests) + observed (node) -> ordered actions, and the
 * phase/action string tables. */
#include "core/core.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const phase_table[_SESSION_PHASE_MAX] = {
        [SESSION_PHASE_PENDING] = "Pending", [SESSION_PHASE_STARTING] = "Starting",
        [SESSION_PHASE_RUNNING] = "Running", [SESSION_PHASE_PAUSED] = "Paused",
        [SESSION_PHASE_STOPPED] = "Stopped", [SESSION_PHASE_FAILED] = "Failed",
};

static const char *const action_table[_CORE_ACTION_MAX] = {
        [CORE_ACTION_OBSERVE] = "observe",
        [CORE_ACTION_BOOT] = "boot",
        [CORE_ACTION_STOP] = "stop",
        [CORE_ACTION_PAUSE] = "pause",
        [CORE_ACTION_RESUME] = "resume",
        [CORE_ACTION_DESTROY] = "destroy",
        [CORE_ACTION_FAIL] = "fail",
        [CORE_ACTION_RESIZE] = "resize",
        [CORE_ACTION_EGRESS] = "egress",
        [CORE_ACTION_REJECT] = "reject",
        [CORE_ACTION_CHECKPOINT] = "checkpoint",
        [CORE_ACTION_ROLLBACK] = "rollback",
        [CORE_ACTION_SNAPSHOT] = "snapshot",
        [CORE_ACTION_FORK] = "fork",
        [CORE_ACTION_AFTER_START] = "afterStart",
        [CORE_ACTION_DECLARED_CHECKPOINTS] = "declared-checkpoints",
        [CORE_ACTION_FORK_SCALE] = "fork-scale",
        [CORE_ACTION_FORK_TRIM] = "fork-trim",
        [CORE_ACTION_FORKS_WAIT] = "forks-wait",
};

static const char *const intent_table[_CORE_INTENT_MAX] = {
        [CORE_INTENT_NONE] = "none",         [CORE_INTENT_CHECKPOINT] = "checkpoint",
        [CORE_INTENT_ROLLBACK] = "rollback", [CORE_INTENT_SNAPSHOT] = "snapshot",
        [CORE_INTENT_FORK] = "fork",
};

const char *session_phase_to_string(enum session_phase p)
{
        if (p < 0 || p >= _SESSION_PHASE_MAX)
                return NULL;
        return phase_table[p];
}

enum session_phase session_phase_from_string(const char *s)
{
        if (!s)
                return _SESSION_PHASE_INVALID;
        for (int i = 0; i < _SESSION_PHASE_MAX; i++)
                if (strcmp(phase_table[i], s) == 0)
                        return (enum session_phase)i;
        return _SESSION_PHASE_INVALID;
}

const char *core_action_to_string(enum core_action_kind k)
{
        if (k < 0 || k >= _CORE_ACTION_MAX)
                return NULL;
        return action_table[k];
}

const char *core_intent_to_string(enum core_intent_kind k)
{
        if (k < 0 || k >= _CORE_INTENT_MAX)
                return NULL;
        return intent_table[k];
}

bool core_action_serves_intent(enum core_action_kind k)
{
        return k == CORE_ACTION_REJECT || k == CORE_ACTION_CHECKPOINT ||
               k == CORE_ACTION_ROLLBACK || k == CORE_ACTION_SNAPSHOT || k == CORE_ACTION_FORK;
}

/* A failed session boots again only with restartPolicy OnFailure, after its back-off. */
static bool may_restart(const struct core_desired *d, const struct core_observed *o, uint64_t now)
{
        return d->restart_on_failure && !o->has_vm && now >= o->retry_at_ns;
}

/* A failed session whose VM is still there (its afterStart failed, its guest hung) is stopped
 * first when it is to restart; the stop keeps it Failed, so the back-off still applies. */
static bool must_stop_failed(const struct core_desired *d, const struct core_observed *o)
{
        return d->restart_on_failure && o->has_vm && o->phase == SESSION_PHASE_FAILED;
}

struct core_plan_ctx {
        struct core_plan *p;
        size_t *alloc;
};

/* The state machine for one present, idle session; returns the action or -1 for none. */
static int plan_state(const struct core_desired *d, const struct core_observed *o, uint64_t now)
{
        if (d->state != SESSION_STATE_STOPPED && must_stop_failed(d, o))
                return CORE_ACTION_STOP;
        switch (d->state) {
        case SESSION_STATE_RUNNING:
                if (o->phase == SESSION_PHASE_PENDING || o->phase == SESSION_PHASE_STOPPED)
                        return CORE_ACTION_BOOT;
                /* Stopped by a disk error: continuing before space is back stops it again. */
                if (o->phase == SESSION_PHASE_PAUSED && (!o->io_stopped || o->io_resume_due))
                        return CORE_ACTION_RESUME;
                if (o->phase == SESSION_PHASE_FAILED && may_restart(d, o, now))
                        return CORE_ACTION_BOOT;
                return -1;
        case SESSION_STATE_PAUSED:
                if (o->phase == SESSION_PHASE_PENDING || o->phase == SESSION_PHASE_STOPPED)
                        return CORE_ACTION_BOOT;
                if (o->phase == SESSION_PHASE_RUNNING)
                        return CORE_ACTION_PAUSE;
                if (o->phase == SESSION_PHASE_FAILED && may_restart(d, o, now))
                        return CORE_ACTION_BOOT;
                return -1;
        case SESSION_STATE_STOPPED:
                if (o->phase == SESSION_PHASE_PENDING)
                        return CORE_ACTION_STOP;
                if (o->has_vm && o->phase != SESSION_PHASE_STOPPED)
                        return CORE_ACTION_STOP;
                return -1;
        default:
                return -1;
        }
}

static int plan_push(struct core_plan *p, size_t *alloc, size_t index, int kind, int error)
{
        if (p->n == *alloc) {
                size_t n = *alloc ? *alloc * 2 : 8;
                struct core_action *a = realloc(p->actions, n * sizeof(*a));

                if (!a)
                        return -ENOMEM;
                p->actions = a;
                *alloc = n;
        }
        p->actions[p->n++] = (struct core_action){.index = index, .kind = kind, .error = error};
        return 0;
}

/* The action for the oldest intent of a present, idle session, with *error for a REJECT. An
 * intent is judged against the phase it finds: a checkpoint or a snapshot needs a Running VM;
 * a rollback boots from the checkpoint whatever the phase; a fork only reads a complete
 * checkpoint. */
static int plan_intent(const struct core_desired *d, const struct core_observed *o, int *error)
{
        bool running = o->phase == SESSION_PHASE_RUNNING && o->has_vm;

        switch (d->intent) {
        case CORE_INTENT_CHECKPOINT:
        case CORE_INTENT_SNAPSHOT:
                if (!running) {
                        *error = -EAGAIN;
                        return CORE_ACTION_REJECT;
                }
                return d->intent == CORE_INTENT_CHECKPOINT ? CORE_ACTION_CHECKPOINT
                                                           : CORE_ACTION_SNAPSHOT;
        case CORE_INTENT_ROLLBACK:
                return CORE_ACTION_ROLLBACK;
        case CORE_INTENT_FORK:
                return CORE_ACTION_FORK;
        default:
                return -1;
        }
}

/* After a cold boot, on a Running VM: afterStart, then the declared checkpoints, then
 * spec.forks (which wait, saying why, while afterStart failed or the checkpoint is missing). */
static int plan_post_start(const struct core_desired *d, const struct core_observed *o)
{
        if (o->phase != SESSION_PHASE_RUNNING || !o->has_vm)
                return -1;
        if (o->post_start == CORE_POST_START_AFTER_START)
                return CORE_ACTION_AFTER_START;
        if (o->post_start == CORE_POST_START_CHECKPOINTS)
                return CORE_ACTION_DECLARED_CHECKPOINTS;
        if (!d->has_forks || o->forks >= d->forks_count)
                return -1;
        if (o->post_start == CORE_POST_START_FAILED || !o->forks_source)
                return CORE_ACTION_FORKS_WAIT;
        return CORE_ACTION_FORK_SCALE;
}

static bool is_job(int kind)
{
        return kind == CORE_ACTION_BOOT || kind == CORE_ACTION_STOP || kind == CORE_ACTION_PAUSE ||
               kind == CORE_ACTION_RESUME || kind == CORE_ACTION_DESTROY ||
               kind == CORE_ACTION_FAIL || kind == CORE_ACTION_CHECKPOINT ||
               kind == CORE_ACTION_ROLLBACK || kind == CORE_ACTION_SNAPSHOT ||
               kind == CORE_ACTION_AFTER_START || kind == CORE_ACTION_DECLARED_CHECKPOINTS;
}

/* A session whose VM is busy (or that is deleted while busy): only what does not touch the VM.
 * A fork waits for nothing; other intents wait CORE_INTENT_BUSY_WAIT_NS, then are refused. */
static int plan_busy(const struct core_plan_ctx *c, size_t i, const struct core_desired *d,
                     uint64_t now)
{
        if (d->present && d->intent == CORE_INTENT_FORK)
                return plan_push(c->p, c->alloc, i, CORE_ACTION_FORK, 0);
        if (d->intent != CORE_INTENT_NONE && now - d->intent_since_ns >= CORE_INTENT_BUSY_WAIT_NS)
                return plan_push(c->p, c->alloc, i, CORE_ACTION_REJECT, -EBUSY);
        return 0;
}

/* One session's actions in execution order; at most one of them is a job. */
static int plan_one(const struct core_plan_ctx *c, size_t i, const struct core_desired *d,
                    const struct core_observed *o, uint64_t now)
{
        int r = 0, kind, error = 0;

        if (d->present && o->forks_beyond > 0)
                r = plan_push(c->p, c->alloc, i, CORE_ACTION_FORK_TRIM, 0);
        if (r < 0 || o->busy)
                return r < 0 ? r : plan_busy(c, i, d, now);
        if (!d->present) {
                if (d->intent != CORE_INTENT_NONE)
                        r = plan_push(c->p, c->alloc, i, CORE_ACTION_REJECT, -ENOENT);
                return r < 0 ? r : plan_push(c->p, c->alloc, i, CORE_ACTION_DESTROY, 0);
        }
        if (d->generation != o->observed_generation) {
                r = plan_push(c->p, c->alloc, i, CORE_ACTION_OBSERVE, 0);
                if (r >= 0 && o->class_changed && o->has_vm)
                        r = plan_push(c->p, c->alloc, i, CORE_ACTION_RESIZE, 0);
                if (r >= 0 && o->has_net)
                        r = plan_push(c->p, c->alloc, i, CORE_ACTION_EGRESS, 0);
        }
        /* A dead guest ends first, whatever the spec wants; restartPolicy then decides
         * whether it boots again. Requests wait for that and then find it Failed. */
        if (r >= 0 && o->unhealthy && o->has_vm)
                return plan_push(c->p, c->alloc, i, CORE_ACTION_FAIL, 0);
        kind = r >= 0 ? plan_intent(d, o, &error) : -1;
        if (kind >= 0)
                r = plan_push(c->p, c->alloc, i, kind, error);
        if (r < 0 || is_job(kind))
                return r;
        kind = plan_state(d, o, now);
        if (kind < 0)
                kind = plan_post_start(d, o);
        return kind >= 0 ? plan_push(c->p, c->alloc, i, kind, 0) : 0;
}

int core_plan(const struct core_desired *desired, const struct core_observed *observed, size_t n,
              uint64_t now_mono_ns, struct core_plan *ret)
{
        struct core_plan p = {0};
        size_t alloc = 0;
        struct core_plan_ctx c = {&p, &alloc};
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++)
                r = plan_one(&c, i, &desired[i], &observed[i], now_mono_ns);
        if (r < 0) {
                free(p.actions);
                return r;
        }
        *ret = p;
        return 0;
}

void core_plan_done(struct core_plan *p)
{
        if (!p)
                return;
        free(p->actions);
        p->actions = NULL;
        p->n = 0;
}
