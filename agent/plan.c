/* SPDX-License-Identifier: MIT */
/* The pure reconcile planner: desired (manifests) + observed (node) -> ordered actions, and the
 * phase/action string tables. */
#include "agent/agent.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const phase_table[_SESSION_PHASE_MAX] = {
        [SESSION_PHASE_PENDING] = "Pending", [SESSION_PHASE_STARTING] = "Starting",
        [SESSION_PHASE_RUNNING] = "Running", [SESSION_PHASE_PAUSED] = "Paused",
        [SESSION_PHASE_STOPPED] = "Stopped", [SESSION_PHASE_FAILED] = "Failed",
};

static const char *const action_table[_AGENT_ACTION_MAX] = {
        [AGENT_ACTION_OBSERVE] = "observe", [AGENT_ACTION_BOOT] = "boot",
        [AGENT_ACTION_STOP] = "stop",       [AGENT_ACTION_PAUSE] = "pause",
        [AGENT_ACTION_RESUME] = "resume",   [AGENT_ACTION_DESTROY] = "destroy",
        [AGENT_ACTION_FAIL] = "fail",
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

const char *agent_action_to_string(enum agent_action_kind k)
{
        if (k < 0 || k >= _AGENT_ACTION_MAX)
                return NULL;
        return action_table[k];
}

/* A failed session boots again only with restartPolicy OnFailure, after its back-off. */
static bool may_restart(const struct agent_desired *d, const struct agent_observed *o, uint64_t now)
{
        return d->restart_on_failure && !o->has_vm && now >= o->retry_at_ns;
}

/* The state machine for one present, idle session; returns the action or -1 for none. */
static int plan_state(const struct agent_desired *d, const struct agent_observed *o, uint64_t now)
{
        switch (d->state) {
        case SESSION_STATE_RUNNING:
                if (o->phase == SESSION_PHASE_PENDING || o->phase == SESSION_PHASE_STOPPED)
                        return AGENT_ACTION_BOOT;
                /* Stopped by a disk error: continuing before space is back stops it again. */
                if (o->phase == SESSION_PHASE_PAUSED && (!o->io_stopped || o->io_resume_due))
                        return AGENT_ACTION_RESUME;
                if (o->phase == SESSION_PHASE_FAILED && may_restart(d, o, now))
                        return AGENT_ACTION_BOOT;
                return -1;
        case SESSION_STATE_PAUSED:
                if (o->phase == SESSION_PHASE_PENDING || o->phase == SESSION_PHASE_STOPPED)
                        return AGENT_ACTION_BOOT;
                if (o->phase == SESSION_PHASE_RUNNING)
                        return AGENT_ACTION_PAUSE;
                if (o->phase == SESSION_PHASE_FAILED && may_restart(d, o, now))
                        return AGENT_ACTION_BOOT;
                return -1;
        case SESSION_STATE_STOPPED:
                if (o->phase == SESSION_PHASE_PENDING)
                        return AGENT_ACTION_STOP;
                if (o->has_vm && o->phase != SESSION_PHASE_STOPPED)
                        return AGENT_ACTION_STOP;
                return -1;
        default:
                return -1;
        }
}

static int plan_push(struct agent_plan *p, size_t *alloc, size_t index, int kind)
{
        if (p->n == *alloc) {
                size_t n = *alloc ? *alloc * 2 : 8;
                struct agent_action *a = realloc(p->actions, n * sizeof(*a));

                if (!a)
                        return -ENOMEM;
                p->actions = a;
                *alloc = n;
        }
        p->actions[p->n++] = (struct agent_action){.index = index, .kind = kind};
        return 0;
}

int agent_plan(const struct agent_desired *desired, const struct agent_observed *observed, size_t n,
               uint64_t now_mono_ns, struct agent_plan *ret)
{
        struct agent_plan p = {0};
        size_t alloc = 0;
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++) {
                const struct agent_desired *d = &desired[i];
                const struct agent_observed *o = &observed[i];
                int kind;

                if (o->busy)
                        continue;
                if (!d->present) {
                        r = plan_push(&p, &alloc, i, AGENT_ACTION_DESTROY);
                        continue;
                }
                if (d->generation != o->observed_generation)
                        r = plan_push(&p, &alloc, i, AGENT_ACTION_OBSERVE);
                /* A dead guest ends first, whatever the spec wants; restartPolicy then decides
                 * whether it boots again. */
                kind = o->unhealthy && o->has_vm ? AGENT_ACTION_FAIL
                                                 : plan_state(d, o, now_mono_ns);
                if (r >= 0 && kind >= 0)
                        r = plan_push(&p, &alloc, i, kind);
        }
        if (r < 0) {
                free(p.actions);
                return r;
        }
        *ret = p;
        return 0;
}

void agent_plan_done(struct agent_plan *p)
{
        if (!p)
                return;
        free(p->actions);
        p->actions = NULL;
        p->n = 0;
}
