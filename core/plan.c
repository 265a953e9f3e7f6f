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
        [CORE_ACTION_OBSERVE] = "observe", [CORE_ACTION_BOOT] = "boot",
        [CORE_ACTION_STOP] = "stop",       [CORE_ACTION_PAUSE] = "pause",
        [CORE_ACTION_RESUME] = "resume",   [CORE_ACTION_DESTROY] = "destroy",
        [CORE_ACTION_FAIL] = "fail",
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

static int plan_push(struct core_plan *p, size_t *alloc, size_t index, int kind)
{
        if (p->n == *alloc) {
                size_t n = *alloc ? *alloc * 2 : 8;
                struct core_action *a = realloc(p->actions, n * sizeof(*a));

                if (!a)
                        return -ENOMEM;
                p->actions = a;
                *alloc = n;
        }
        p->actions[p->n++] = (struct core_action){.index = index, .kind = kind};
        return 0;
}

int core_plan(const struct core_desired *desired, const struct core_observed *observed, size_t n,
              uint64_t now_mono_ns, struct core_plan *ret)
{
        struct core_plan p = {0};
        size_t alloc = 0;
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++) {
                const struct core_desired *d = &desired[i];
                const struct core_observed *o = &observed[i];
                int kind;

                if (o->busy)
                        continue;
                if (!d->present) {
                        r = plan_push(&p, &alloc, i, CORE_ACTION_DESTROY);
                        continue;
                }
                if (d->generation != o->observed_generation)
                        r = plan_push(&p, &alloc, i, CORE_ACTION_OBSERVE);
                /* A dead guest ends first, whatever the spec wants; restartPolicy then decides
                 * whether it boots again. */
                kind = o->unhealthy && o->has_vm ? CORE_ACTION_FAIL : plan_state(d, o, now_mono_ns);
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

void core_plan_done(struct core_plan *p)
{
        if (!p)
                return;
        free(p->actions);
        p->actions = NULL;
        p->n = 0;
}
