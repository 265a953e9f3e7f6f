/* SPDX-License-Identifier: MIT */
/* A restored VM's migration dirty bitmap (a rollback's, a fork's once it is the only copy of
 * its checkpoint), cleared by a job once the session has been idle a while, instead of inside
 * its next live checkpoint's first sync. */
#include "agent/daemon/daemon-internal.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* QEMU starts every VM with all its pages dirty. A cold boot clears the bitmap before the
 * session is Running (vm-qemu.c); a restore does not, as that would add QEMU's sync (about 1.5 us
 * a page with the RAM tail: 60-100 ms for 256 MiB, 250-500 ms for 1 GiB) to every fork and
 * rollback. The first live checkpoint after it then paid the sync in its setup, with QEMU's main
 * loop (the guest's network and disk) held as long. A session that goes on from a checkpoint is
 * likely to be checkpointed again (try, roll back, try again; or fork, keep the branch that
 * worked, go on from it), so its bitmap is cleared once it has been idle this long (no job, no
 * exec or file request in flight, as seen at each reconcile pass): the caller usually goes on at
 * once, and the stall then falls while nobody asks anything of the session (a request that comes
 * during the job waits for it). That is a rolled-back session, and a fork once no other session
 * is a fork of the same checkpoint: the forks of a fan-out are left alone while two or more of
 * them are there (most are never checkpointed, and each would pay the sync's CPU), and the one
 * left of it when the others are deleted is cleared. A checkpoint taken before the job leaves
 * few pages dirty, so the job then costs little. */
#define DIRTY_LOG_IDLE_MS 3000

struct dirty_log_job {
        struct agent_daemon *d;
        struct agent_session *s; /* busy while the job runs, so never freed under it */
        struct agent_vm_ref *vm; /* owned reference */
        const char *what;        /* static: "rollback" or "fork" */
        unsigned setup_ms;
        struct fk_error err;
        int r;
};

/* Under the lock: s's state, reset when s runs another VM than the one it is about. */
static struct agent_session_dirty_log *state_of(struct agent_session *s)
{
        struct agent_session_dirty_log *l = &s->dirty_log;

        if (l->vm != s->vm)
                *l = (struct agent_session_dirty_log){.vm = s->vm};
        return l;
}

static void dirty_log_body(void *ctx)
{
        struct dirty_log_job *j = ctx;
        struct agent_daemon *d = j->d;

        j->r = d->ops.reset_dirty_log(d->ops.userdata, j->vm->vm, &j->setup_ms, &j->err);
        pthread_mutex_lock(&d->lock);
        if (j->r == 0)
                log_info("session %s: migration dirty bitmap cleared after the %s (QEMU's sync "
                         "%u ms)",
                         j->s->key, j->what, j->setup_ms);
        else if (j->r < 0)
                log_warning("session %s: migration dirty bitmap not cleared after the %s (%s): "
                            "its next live checkpoint will stop its network longer",
                            j->s->key, j->what, j->err.msg[0] ? j->err.msg : strerror(-j->r));
        agent_runner_job_end(d, j->s);
}

static void dirty_log_release(void *ctx)
{
        struct dirty_log_job *j = ctx;

        agent_vm_ref_put(j->vm);
        free(j);
}

static int dirty_log_start(struct agent_daemon *d, struct agent_session *s)
{
        struct dirty_log_job *j = calloc(1, sizeof(*j));
        int r;

        if (!j)
                return -ENOMEM;
        *j = (struct dirty_log_job){.d = d,
                                    .s = s,
                                    .vm = agent_vm_ref_get(s->vm),
                                    .what = s->dirty_log.fork ? "fork" : "rollback"};
        r = agent_runner_spawn_background(d, s, dirty_log_body, dirty_log_release, j);
        if (r < 0)
                dirty_log_release(j);
        return r;
}

/* Under the lock: another session is a fork of the checkpoint s is a fork of (checkpoint ids
 * are unique on a node, as checkpoint delete's dependents check takes them). */
static bool fork_has_sibling(const struct agent_daemon *d, const struct agent_session *s)
{
        for (size_t i = 0; s->fork_checkpoint && i < d->n_sessions; i++) {
                const struct agent_session *t = d->sessions[i];

                if (t != s && t->fork_checkpoint &&
                    strcmp(t->fork_checkpoint, s->fork_checkpoint) == 0)
                        return true;
        }
        return false;
}

void agent_dirty_log_tick(struct agent_daemon *d)
{
        uint64_t now = agent_now_mono(d);

        if (!d->ops.reset_dirty_log)
                return;
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                struct agent_session_dirty_log *l = state_of(s);
                int r;

                if (!l->due)
                        continue;
                /* anything asked of it (a job, an exec or file request holding the VM) starts
                 * the wait over, and so does a fork's sibling */
                if (!agent_session_idle(s) || atomic_load(&s->vm->refs) > 1 ||
                    agent_checkpoint_session_writing(d, s->key) ||
                    (l->fork && fork_has_sibling(d, s))) {
                        l->not_before_ns = now + (uint64_t)DIRTY_LOG_IDLE_MS * 1000000ull;
                        continue;
                }
                if (now < l->not_before_ns)
                        continue;
                l->due = false;
                r = dirty_log_start(d, s);
                if (r < 0)
                        log_warning_errno(r, "session %s: start clearing the dirty bitmap: %m",
                                          s->key);
        }
}

void agent_dirty_log_after_restore(struct agent_daemon *d, struct agent_session *s, bool fork)
{
        struct agent_session_dirty_log *l = state_of(s);

        l->due = s->vm != NULL;
        l->fork = fork;
        l->not_before_ns = agent_now_mono(d) + (uint64_t)DIRTY_LOG_IDLE_MS * 1000000ull;
}
