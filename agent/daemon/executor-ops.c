/* SPDX-License-Identifier: MIT */
/* The job runner's jobs beyond the VM lifecycle: each is {prepare (locked), run (unlocked),
 * finish (locked)} on a busy session in a worker thread of its own: checkpoint, snapshot and
 * rollback (intents), afterStart and the declared checkpoints (after a cold boot). */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct run_job;

struct run_ops {
        enum agent_op op; /* timed around run; _AGENT_OP_MAX: not */
        int (*prepare)(struct run_job *j);
        int (*run)(struct run_job *j);
        void (*finish)(struct run_job *j, int r);
        /* without the lock, once the job ended (the session may run its next job): NULL */
        void (*release)(struct run_job *j);
};

struct run_job {
        struct agent_daemon *d;
        struct agent_session *s; /* busy while the job runs, so never freed under it */
        const struct run_ops *ops;
        enum core_action_kind kind;
        struct agent_intent *in; /* the intent served (a reference), NULL: spec work */
        struct agent_vm_ref *vm; /* owned */
        char key[160];
        char *sd;        /* owned: the session's state dir */
        char id[64];     /* the new checkpoint or snapshot */
        json_t *spec;    /* owned: snapshot */
        char **names;    /* owned: declared checkpoints to take */
        int *results;    /* owned: per name */
        char (*ids)[48]; /* owned: per name */
        struct fk_error err;
        bool chained; /* finish handed the intent to another job */
};

static void job_free(struct run_job *j)
{
        agent_vm_ref_put(j->vm);
        free(j->sd);
        json_decref(j->spec);
        fk_strv_free(j->names);
        free(j->results);
        free(j->ids);
        if (j->in && --j->in->refs == 0) {
                json_decref(j->in->names);
                free(j->in);
        }
        free(j);
}

/* ---- checkpoint (intent) -------------------------------------------------------------------- */

static int ck_run(struct run_job *j)
{
        return agent_checkpoint_take(j->d, j->s, j->vm, NULL, j->id, &j->err);
}

static void ck_event(struct run_job *j, const char *name, const char *id, int r,
                     const struct fk_error *err)
{
        if (r >= 0)
                agent_session_add_event(j->s, agent_now_real(j->d), false, "Checkpointed",
                                        "checkpoint %s taken%s%s%s", id, name ? " (" : "",
                                        name ? name : "", name ? ")" : "");
        else
                agent_session_add_event(j->s, agent_now_real(j->d), true, "CheckpointFailed",
                                        "checkpoint failed: %s",
                                        err->msg[0] ? err->msg : strerror(-r));
}

static void ck_finish(struct run_job *j, int r)
{
        ck_event(j, NULL, j->id, r, &j->err);
        if (r >= 0)
                agent_compact_after_checkpoint(j->d, j->s);
        if (r >= 0 && j->in) {
                agent_ck_cache_reload(j->d, j->s);
                snprintf(j->in->id, sizeof(j->in->id), "%s", j->id);
        } else
                log_warning("session %s: checkpoint failed, session left running: %s", j->key,
                            j->err.msg[0] ? j->err.msg : strerror(-r));
}

static const struct run_ops ck_ops = {
        .op = AGENT_OP_CHECKPOINT, .run = ck_run, .finish = ck_finish};

/* ---- snapshot (intent) ---------------------------------------------------------------------- */

static int snap_prepare(struct run_job *j)
{
        if (!j->d->ops.snapshot_disk)
                return fk_error_set(&j->err, -EAGAIN, "session %s is %s, not Running", j->key,
                                    session_phase_to_string(j->s->phase));
        if (!(j->spec = session_manifest_to_json(j->s->spec)))
                return fk_error_set(&j->err, -ENOMEM, "out of memory");
        agent_snapshot_new_id(j->id);
        return 0;
}

static int snap_run(struct run_job *j)
{
        return agent_snapshot_take(j->d, j->vm, j->sd, j->key, j->spec, j->id, &j->err);
}

static void snap_finish(struct run_job *j, int r)
{
        if (r >= 0)
                agent_compact_after_checkpoint(j->d, j->s);
        if (r >= 0 && j->in) {
                snprintf(j->in->id, sizeof(j->in->id), "%s", j->id);
                log_info("session %s: filesystem snapshot %s", j->key, j->id);
        }
}

static const struct run_ops snap_ops = {
        .op = _AGENT_OP_MAX, .prepare = snap_prepare, .run = snap_run, .finish = snap_finish};

/* ---- rollback (intent): stop the VM, then the boot job restores the checkpoint ------------ */

static int rb_prepare(struct run_job *j)
{
        int r = agent_rollback_prepare(j->d, j->s, j->in->arg, &j->err);

        if (r < 0)
                return r;
        /* the job owns the old VM: it is stopped, the boot makes the new one */
        agent_vm_ref_put(j->vm);
        j->vm = TAKE_PTR(j->s->vm);
        j->s->pid = 0;
        return 0;
}

static int rb_run(struct run_job *j)
{
        /* As a stop does: relays to the old VM go; the netns and cgroup stay for the new one.
         * A Paused session's QEMU is frozen: thawed, it answers QMP and dies of SIGKILL (frozen,
         * every step of its end timed out: 11.5 s). The planner pauses the new one again while
         * spec.state says Paused. */
        agent_fwd_close_key(j->d, j->key);
        (void)agent_resources_freeze(j->d, j->key, false, NULL);
        /* Nothing of the old machine is kept (RAM and disk go back to the checkpoint's), so
         * it is ended at once instead of powered off through the guest, and the new one starts
         * as soon as the tap is free: the kernel frees the old one's memory (all the RAM the
         * guest wrote since its restore) meanwhile, and rb_release reaps it. */
        if (j->vm && j->d->ops.discard)
                (void)j->d->ops.discard(j->d->ops.userdata, j->vm->vm, 500);
        else if (j->vm && j->d->ops.kill)
                (void)j->d->ops.kill(j->d->ops.userdata, j->vm->vm, 500);
        else if (j->vm)
                (void)j->d->ops.stop(j->d->ops.userdata, j->vm->vm, 500);
        agent_rollback_set_aside_ram(j->d, j->key);
        return 0;
}

static void rb_release(struct run_job *j)
{
        /* SIGKILLed by rb_run: gone once the kernel has freed its memory */
        if (j->vm && j->d->ops.discard && j->d->ops.kill &&
            j->d->ops.kill(j->d->ops.userdata, j->vm->vm, 10000) < 0)
                log_warning("session %s: the replaced QEMU did not end", j->key);
}

static void rb_finish(struct run_job *j, int r)
{
        struct agent_session *s = j->s;

        (void)r;
        s->res.frozen = false; /* thawed by rb_run */
        log_info("session %s: rolling back to %s", s->key, s->rollback_to);
        s->busy = false; /* the boot marks it again */
        r = agent_executor_run(j->d, s, CORE_ACTION_BOOT);
        if (r < 0) {
                agent_rollback_drop_ram(j->d, j->key);
                fk_error_set(&j->err, r, "rollback: %s", strerror(-r));
                return;
        }
        /* the boot job ends the intent (agent_runner_boot_done) and drops the replaced VM's
         * RAM; a boot that did not start (image gone, admission) does both now */
        j->chained = true;
        if (!s->busy) {
                agent_rollback_drop_ram(j->d, j->key);
                agent_runner_boot_done(j->d, s);
        }
}

static const struct run_ops rb_ops = {.op = _AGENT_OP_MAX,
                                      .prepare = rb_prepare,
                                      .run = rb_run,
                                      .finish = rb_finish,
                                      .release = rb_release};

/* ---- afterStart and the declared checkpoints (after a cold boot) ---------------------------- */

static int as_run(struct run_job *j)
{
        return agent_after_start_run(j->d, j->s, j->vm, &j->err);
}

static void as_finish(struct run_job *j, int r)
{
        agent_after_start_done(j->d, j->s, r, &j->err);
}

static const struct run_ops as_ops = {.op = _AGENT_OP_MAX, .run = as_run, .finish = as_finish};

static int dc_prepare(struct run_job *j)
{
        size_t n;
        int r = agent_checkpoints_missing(j->d, j->s, &j->names);

        if (r < 0)
                return fk_error_set(&j->err, r, "spec.checkpoints: %s", strerror(-r));
        n = fk_strv_length(j->names);
        j->results = calloc(n + 1, sizeof(*j->results));
        j->ids = calloc(n + 1, sizeof(*j->ids));
        if (!j->results || !j->ids)
                return fk_error_set(&j->err, -ENOMEM, "out of memory");
        return 0;
}

static int dc_run(struct run_job *j)
{
        int failed = 0;

        for (size_t i = 0; j->names && j->names[i]; i++) {
                struct fk_error err = {0};
                uint64_t t0 = fk_now_mono_ns();

                j->results[i] =
                        agent_checkpoint_take(j->d, j->s, j->vm, j->names[i], j->ids[i], &err);
                agent_metrics_op_done(AGENT_OP_CHECKPOINT, j->results[i], t0);
                if (j->results[i] < 0) {
                        log_error("session %s: checkpoint %s: %s", j->key, j->names[i], err.msg);
                        j->err = err;
                        failed++;
                }
        }
        return failed ? -EIO : 0;
}

static void dc_finish(struct run_job *j, int r)
{
        struct agent_session *s = j->s;

        for (size_t i = 0; j->names && j->names[i]; i++)
                ck_event(j, j->names[i], j->ids[i], j->results[i], &j->err);
        agent_ck_cache_reload(j->d, s);
        agent_compact_after_checkpoint(j->d, s);
        s->post_start = CORE_POST_START_NONE;
        if (r < 0)
                agent_session_set_condition(s, AGENT_COND_CHECKPOINTS, "False", "CheckpointFailed",
                                            agent_now_real(j->d), "%s", j->err.msg);
        else
                agent_session_set_condition(s, AGENT_COND_CHECKPOINTS, "True", "Taken",
                                            agent_now_real(j->d), "%s", "");
}

static const struct run_ops dc_ops = {
        .op = _AGENT_OP_MAX, .prepare = dc_prepare, .run = dc_run, .finish = dc_finish};

/* ---- the runner ------------------------------------------------------------------------------ */

/* Under the lock, at a job's end: the served intent ends unless finish passed it on; spec work
 * is audited here as intents are in agent_intent_complete. */
static void job_done(struct run_job *j, int r)
{
        struct agent_daemon *d = j->d;

        if (j->in && !j->chained && !j->in->done)
                agent_intent_complete(d, j->s, j->in, r, &j->err);
        else if (!j->in)
                agent_daemon_audit(d, j->s->namespace, j->s->name, core_action_to_string(j->kind),
                                   r >= 0 ? "ok" : strerror(-r), 0);
}

static void run_body(void *userdata)
{
        struct run_job *j = userdata;
        struct agent_daemon *d = j->d;
        uint64_t t0 = fk_now_mono_ns();
        int r;

        r = j->ops->run(j);
        if (j->ops->op < _AGENT_OP_MAX)
                agent_metrics_op_done(j->ops->op, r, t0);
        pthread_mutex_lock(&d->lock);
        j->ops->finish(j, r);
        job_done(j, r);
        /* a chained job (rollback's boot) keeps the session busy and ends it itself */
        if (!j->chained || !j->s->busy)
                agent_runner_job_end(d, j->s);
}

static void run_release(void *userdata)
{
        struct run_job *j = userdata;

        if (j->ops->release)
                j->ops->release(j);
        job_free(j);
}

static const struct run_ops *ops_for(enum core_action_kind k)
{
        switch (k) {
        case CORE_ACTION_CHECKPOINT:
                return &ck_ops;
        case CORE_ACTION_SNAPSHOT:
                return &snap_ops;
        case CORE_ACTION_ROLLBACK:
                return &rb_ops;
        case CORE_ACTION_AFTER_START:
                return &as_ops;
        case CORE_ACTION_DECLARED_CHECKPOINTS:
                return &dc_ops;
        default:
                return NULL;
        }
}

static int job_new(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k,
                   struct run_job **ret)
{
        struct run_job *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        j->d = d;
        j->s = s;
        j->ops = ops_for(k);
        j->kind = k;
        snprintf(j->key, sizeof(j->key), "%s", s->key);
        j->vm = agent_vm_ref_get(s->vm);
        if (!j->ops || agent_session_state_dir(d->cfg->state_dir, s->key, &j->sd) < 0) {
                int r = j->ops ? -ENOMEM : -EINVAL;

                job_free(j);
                return r;
        }
        if (core_action_serves_intent(k) && (j->in = agent_intent_pending(s)))
                j->in->refs++;
        *ret = j;
        return 0;
}

int agent_runner_op(struct agent_daemon *d, struct agent_session *s, enum core_action_kind k)
{
        struct run_job *j = NULL;
        struct agent_intent *in = agent_intent_pending(s);
        int r;

        /* a rollback to a Writing checkpoint starts once it is Ready (see run_fork) */
        if (k == CORE_ACTION_ROLLBACK && in && agent_checkpoint_id_writing(d, s, in->arg))
                return 0;
        r = job_new(d, s, k, &j);
        if (r < 0)
                return r;
        if (j->in) {
                j->in->running = true;
                j->in->ran = true;
        }
        r = j->ops->prepare ? j->ops->prepare(j) : 0;
        if (r >= 0 && (r = agent_runner_spawn(d, s, run_body, run_release, j)) >= 0)
                return 0;
        if (!j->err.msg[0])
                fk_error_set(&j->err, r, "start a worker: %s", strerror(-r));
        job_done(j, r);
        if (k == CORE_ACTION_DECLARED_CHECKPOINTS)
                s->post_start = CORE_POST_START_NONE; /* not again on this VM */
        job_free(j);
        return 0;
}
