/* SPDX-License-Identifier: MIT */
/* Memory back to the host: a booted session's RAM is its own share=on file in runDir, which
 * keeps every page the guest ever touched (and what a live checkpoint read of the guest's
 * free memory before the guest hinted it free: vmm_config.balloon_hint). A job on
 * the idle session lets the balloon take the guest's free memory and give it back, which
 * leaves those pages as holes (agent_vm_ops.give_back): after a live checkpoint was written
 * and when a periodic check finds the RAM file grown. Never for a fork or a rolled-back
 * session: their RAM is a checkpoint's file mapped copy-on-write, shared, and QEMU 7.2 would
 * punch the holes into that file. */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define GIVE_BACK_TIMEOUT_MS 30000
#define MIB                  (1024.0 * 1024.0)

enum agent_give_back_why agent_give_back_decide(const struct agent_give_back_in *in)
{
        if (!in->enabled || !in->idle || in->private_ram || in->off)
                return AGENT_GIVE_BACK_NONE;
        if (in->due)
                return AGENT_GIVE_BACK_CHECKPOINT;
        if (!in->interval_ns || in->now_ns < in->next_check_ns)
                return AGENT_GIVE_BACK_NONE;
        /* less than that in the file: nothing the guest frees can be worth it */
        if (in->ram_file_bytes < in->threshold_bytes)
                return AGENT_GIVE_BACK_NONE;
        return AGENT_GIVE_BACK_CHECK;
}

const char *agent_give_back_why_to_string(enum agent_give_back_why w)
{
        switch (w) {
        case AGENT_GIVE_BACK_CHECKPOINT:
                return "after a live checkpoint";
        case AGENT_GIVE_BACK_CHECK:
                return "periodic check";
        default:
                return "none";
        }
}

/* Under the lock: s's state, reset when s runs another VM than the one it is about; the first
 * check comes an interval after the VM was seen (a boot has its own work first). */
static struct agent_session_give_back *state_of(struct agent_daemon *d, struct agent_session *s)
{
        struct agent_session_give_back *g = &s->give_back;

        if (g->vm != s->vm)
                *g = (struct agent_session_give_back){
                        .vm = s->vm,
                        .next_check_ns = agent_now_mono(d) +
                                         (uint64_t)d->cfg->give_back_interval_s * 1000000000ull,
                };
        return g;
}

bool agent_session_idle(const struct agent_session *s)
{
        return s->vm && !s->busy && s->phase == SESSION_PHASE_RUNNING && s->spec &&
               s->spec->state == SESSION_STATE_RUNNING && !s->deleted_ns && !s->health.failing &&
               !s->health.io_stopped && !agent_intent_pending(s) &&
               s->post_start != CORE_POST_START_AFTER_START &&
               s->post_start != CORE_POST_START_CHECKPOINTS;
}

struct gb_job {
        struct agent_daemon *d;
        struct agent_session *s; /* busy while the job runs, so never freed under it */
        struct agent_vm_ref *vm; /* owned reference */
        enum agent_give_back_why why;
        struct agent_give_back_params p;
        struct agent_give_back_result res;
        struct fk_error err;
        int r;
};

/* Under the lock: what the job found, for the next check, and how it ended. */
static void gb_record(struct gb_job *j)
{
        struct agent_daemon *d = j->d;
        struct agent_session *s = j->s;
        struct agent_session_give_back *g = state_of(d, s);
        double back = j->res.before_bytes > j->res.after_bytes
                              ? (double)(j->res.before_bytes - j->res.after_bytes) / MIB
                              : 0.0;
        /* a request came after the job's last look at s->yield (which only its start clears):
         * there was nothing left to cut */
        bool late = s->yield && !j->res.yielded && !j->res.deflating;

        g->next_check_ns =
                agent_now_mono(d) + (uint64_t)d->cfg->give_back_interval_s * 1000000000ull;
        if (j->r == -ENODEV || j->r == -EPERM) {
                g->off = true;
                log_info("session %s: no memory given back: %s", s->key, j->err.msg);
                return;
        }
        if (j->r < 0) {
                log_warning("session %s: giving memory back (%s) failed: %s", s->key,
                            agent_give_back_why_to_string(j->why),
                            j->err.msg[0] ? j->err.msg : strerror(-j->r));
                return;
        }
        if (j->res.skipped && j->res.yielded) {
                log_debug("session %s: memory check (%s) stopped before the guest's stats came: "
                          "a request was waiting",
                          s->key, agent_give_back_why_to_string(j->why));
                return;
        }
        if (j->res.skipped) {
                log_debug("session %s: memory check (%s): RAM file %.1f MiB, the guest %.1f MiB "
                          "free: too little to give back%s",
                          s->key, agent_give_back_why_to_string(j->why),
                          (double)j->res.before_bytes / MIB, (double)j->res.guest_free / MIB,
                          late ? "; a request came as it ended" : "");
                return;
        }
        log_info("session %s: gave %.1f MiB of guest memory back to the host (%s: RAM file %.1f "
                 "-> %.1f MiB, the balloon held %.1f MiB, %.0f ms%s%s)",
                 s->key, back, agent_give_back_why_to_string(j->why),
                 (double)j->res.before_bytes / MIB, (double)j->res.after_bytes / MIB,
                 (double)j->res.ballooned / MIB, (double)j->res.ns / 1e6,
                 j->res.yielded || j->res.deflating ? "; cut short: a request was waiting"
                 : late                             ? "; a request came as it ended"
                                                    : "",
                 j->res.deflating ? ", the guest deflates the rest on its own" : "");
        agent_session_add_event(s, agent_now_real(d), false, "MemoryReturned",
                                "%.0f MiB of guest memory back to the host (%s): RAM file %.0f -> "
                                "%.0f MiB",
                                back, agent_give_back_why_to_string(j->why),
                                (double)j->res.before_bytes / MIB,
                                (double)j->res.after_bytes / MIB);
}

static void gb_body(void *ctx)
{
        struct gb_job *j = ctx;
        struct agent_daemon *d = j->d;

        j->r = d->ops.give_back(d->ops.userdata, j->vm->vm, &j->p, &j->res, &j->err);
        pthread_mutex_lock(&d->lock);
        gb_record(j);
        agent_runner_job_end(d, j->s);
}

static void gb_release(void *ctx)
{
        struct gb_job *j = ctx;

        agent_vm_ref_put(j->vm);
        free(j);
}

static int gb_start(struct agent_daemon *d, struct agent_session *s, enum agent_give_back_why why)
{
        struct gb_job *j = calloc(1, sizeof(*j));
        int r;

        if (!j)
                return -ENOMEM;
        log_debug("session %s: giving memory back (%s)", s->key,
                  agent_give_back_why_to_string(why));
        *j = (struct gb_job){
                .d = d,
                .s = s,
                .vm = agent_vm_ref_get(s->vm),
                .why = why,
                .p = {.margin_bytes = (uint64_t)d->cfg->give_back_margin_mib << 20,
                      .min_bytes = (uint64_t)d->cfg->give_back_threshold_mib << 20,
                      .timeout_ms = GIVE_BACK_TIMEOUT_MS,
                      .cancel = &s->cancel,
                      .yield = &s->yield},
        };
        r = agent_runner_spawn_background(d, s, gb_body, gb_release, j);
        if (r < 0)
                gb_release(j);
        return r;
}

/* Under the lock: s's inputs to the decision; its RAM file is read only when a check is due. */
static void decide_input(struct agent_daemon *d, struct agent_session *s,
                         struct agent_give_back_in *in)
{
        struct agent_session_give_back *g = state_of(d, s);

        *in = (struct agent_give_back_in){
                .enabled = d->cfg->give_back_enabled,
                .idle = agent_session_idle(s),
                .private_ram = s->res.fork,
                .off = g->off,
                .due = g->due,
                .now_ns = agent_now_mono(d),
                .next_check_ns = g->next_check_ns,
                .interval_ns = (uint64_t)d->cfg->give_back_interval_s * 1000000000ull,
                .threshold_bytes = (uint64_t)d->cfg->give_back_threshold_mib << 20,
        };
        if (in->enabled && in->idle && !in->private_ram && !in->off && !in->due &&
            in->interval_ns && in->now_ns >= in->next_check_ns)
                in->ram_file_bytes = d->ops.ram_bytes(s->vm->vm);
}

void agent_give_back_tick(struct agent_daemon *d)
{
        if (!d->ops.give_back || !d->ops.ram_bytes || !d->cfg->give_back_enabled)
                return;
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                struct agent_give_back_in in;
                enum agent_give_back_why why;
                int r;

                decide_input(d, s, &in);
                why = agent_give_back_decide(&in);
                if (why == AGENT_GIVE_BACK_NONE) {
                        /* a check that found too little: the next one an interval later */
                        if (in.ram_file_bytes)
                                s->give_back.next_check_ns = in.now_ns + in.interval_ns;
                        continue;
                }
                s->give_back.due = false;
                r = gb_start(d, s, why);
                if (r < 0)
                        log_warning_errno(r, "session %s: start giving memory back: %m", s->key);
        }
}

void agent_give_back_after_checkpoint(struct agent_daemon *d, struct agent_session *s)
{
        if (!s->res.fork)
                state_of(d, s)->due = true;
}
