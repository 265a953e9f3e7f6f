/* SPDX-License-Identifier: MIT */
/* Live compaction of a running session's disk chain: every checkpoint freezes the top overlay
 * and adds a layer, and a precopy's cont reopens every layer, so after a checkpoint (once its
 * Writing phase is over) a job on the idle session streams the layers above the anchor or the
 * bottom into the top (agent_disk_stream_base, agent_vm_ops.compact_disk); then checkpoint
 * layers that nothing needs any more (their checkpoint deleted) are removed. */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a stream may run before it is cancelled: a checkpoint asked for meanwhile waits
 * for the job. Streaming copies at disk speed (163 ms for 3 MiB over 20 layers on a loaded
 * host, docs/benchmarks.md); a bound for a layer stack of a few GiB. */
#define COMPACT_TIMEOUT_MS 60000
/* A request (a pause, a checkpoint, a rollback) waits for a stream that, at the pace it has
 * had, ends within this; a longer one is cancelled and the request goes first. Most streams (a
 * few MiB) end within it, so checkpoints asked for in a loop still keep the chain bounded. The
 * pace is QEMU's offset over the whole virtual disk, uneven over holes and data: at 250 ms,
 * 2 of 5 streams of 256 MiB that were 0.1 s from their end were cut, which cost the pause
 * more than the wait (docs/benchmarks.md). */
#define COMPACT_YIELD_WAIT_MS 1000
/* ... unless the chain has this many files: a deeper chain (requests that kept cutting streams
 * short) is streamed to the end first, so that no pattern of requests grows it without bound. */
#define COMPACT_YIELD_MAX_FILES 10
#define MIB                     (1024.0 * 1024.0)

/* FORKLET_LIVE_COMPACT=off in forkletd's environment leaves chains to the next start (tests
 * of the start-time compaction). */
static unsigned max_layers(void)
{
        const char *v = getenv("FORKLET_LIVE_COMPACT");

        return v && strcmp(v, "off") == 0 ? 0 : AGENT_DISK_LIVE_MAX_LAYERS;
}

/* FORKLET_LIVE_COMPACT_SPEED=BYTES a second slows the stream down (tests that kill forkletd
 * while it runs); 0 or unset: no limit. */
static uint64_t stream_speed(void)
{
        const char *v = getenv("FORKLET_LIVE_COMPACT_SPEED");

        return v ? strtoull(v, NULL, 10) : 0;
}

static bool layer_wanted(const char *sd, const char *name)
{
        cleanup_free char *id = strndup(name + 6, strlen(name) - 6 - 6); /* layer-ID.qcow2 */
        cleanup_free char *ck = NULL, *partial = NULL;

        if (!id || fk_asprintf(&ck, "%s/checkpoints/%s", sd, id) < 0 ||
            fk_asprintf(&partial, "%s/checkpoints/.%s.partial", sd, id) < 0)
                return true;
        return access(ck, F_OK) == 0 || access(partial, F_OK) == 0;
}

unsigned agent_checkpoint_free_layers(const char *sd, const char *active)
{
        cleanup_free char *dir = NULL;
        char **roots = NULL, **unused = NULL;
        json_t *cks = agent_checkpoints_list(sd), *m;
        unsigned freed = 0;
        size_t i;

        /* no live chain known: nothing is sure to be unused */
        if (!active || agent_disk_dir(sd, &dir) < 0 || !cks)
                goto out;
        /* the live chain and every remaining checkpoint's */
        if (fk_strv_push(&roots, active) < 0)
                goto out;
        json_array_foreach(cks, i, m)
        {
                const char *layer = json_string_value(json_object_get(m, "disk"));

                if (layer && fk_strv_push(&roots, layer) < 0)
                        goto out;
        }
        if (agent_disk_unused_layers(dir, (const char *const *)roots, fk_strv_length(roots),
                                     &unused) < 0)
                goto out;
        for (i = 0; unused[i]; i++) {
                if (layer_wanted(sd, strrchr(unused[i], '/') + 1))
                        continue;
                if (unlink(unused[i]) < 0) {
                        log_warning("remove the unused disk layer %s: %m", unused[i]);
                        continue;
                }
                log_info("removed the disk layer %s: its checkpoint is gone and no chain uses it",
                         unused[i]);
                freed++;
        }
out:
        json_decref(cks);
        fk_strv_free(roots);
        fk_strv_free(unused);
        return freed;
}

/* Under the lock: s's state, due again when s runs another VM than the one it is about (a
 * boot, a rollback, or one adopted from a killed forkletd, whose stream QEMU ran on). */
static struct agent_session_compact *state_of(struct agent_session *s)
{
        struct agent_session_compact *c = &s->compact;

        if (c->vm != s->vm)
                *c = (struct agent_session_compact){.vm = s->vm, .due = s->vm != NULL};
        return c;
}

struct compact_job {
        struct agent_daemon *d;
        struct agent_session *s; /* busy while the job runs, so never freed under it */
        struct agent_vm_ref *vm; /* owned reference */
        char *key, *sd;
        struct agent_compact_params p;
        struct agent_compact_result res;
        struct fk_error err;
        unsigned freed;
        int r;
};

/* Under the lock: what the job did, in the log and the session's events. */
static void compact_record(struct compact_job *j)
{
        const struct agent_compact_result *res = &j->res;
        uint64_t now = agent_now_real(j->d);

        if (res->yielded)
                log_info("session %s: live disk compaction cut short after %.0f ms: a request "
                         "was waiting; the chain (%u files) is kept and compacted when the session "
                         "is next idle",
                         j->key, (double)res->ns / 1e6, res->depth_before);
        if (j->r < 0) {
                log_warning("session %s: live disk compaction failed, the chain (%u files) is "
                            "kept: %s",
                            j->key, res->depth_before,
                            j->err.msg[0] ? j->err.msg : strerror(-j->r));
                agent_session_add_event(j->s, now, true, "DiskCompactionFailed",
                                        "the disk chain (%u files) was kept: %s", res->depth_before,
                                        j->err.msg[0] ? j->err.msg : strerror(-j->r));
        } else if (res->streamed) {
                log_info("session %s: disk chain compacted live: %u -> %u files, the top %.1f -> "
                         "%.1f MiB, streamed in %.0f ms%s",
                         j->key, res->depth_before, res->depth_after, (double)res->top_before / MIB,
                         (double)res->top_after / MIB, (double)res->ns / 1e6,
                         res->adopted ? " (a stream left running)" : "");
                agent_session_add_event(j->s, now, false, "DiskCompacted",
                                        "disk chain %u -> %u files, %.1f MiB copied into the top",
                                        res->depth_before, res->depth_after,
                                        res->top_after > res->top_before
                                                ? (double)(res->top_after - res->top_before) / MIB
                                                : 0.0);
        }
        if (res->adopted)
                log_info("session %s: a disk stream a previous forkletd started has ended: the "
                         "chain has %u files, the top %.1f MiB",
                         j->key, res->depth_before, (double)res->top_before / MIB);
        if (j->freed)
                log_info("session %s: %u unused checkpoint disk layer(s) removed", j->key,
                         j->freed);
}

static void compact_body(void *ctx)
{
        struct compact_job *j = ctx;
        struct agent_daemon *d = j->d;
        cleanup_free char *active = NULL;

        j->r = d->ops.compact_disk(d->ops.userdata, j->vm->vm, &j->p, &j->res, &j->err);
        /* the session is busy: no checkpoint or snapshot changes the chain meanwhile */
        (void)agent_disk_active(d->store, j->sd, j->key, &active);
        j->freed = agent_checkpoint_free_layers(j->sd, active);
        pthread_mutex_lock(&d->lock);
        if (j->res.yielded) {
                struct agent_session_compact *c = state_of(j->s);

                c->due = true;
                c->checkpointed |= j->p.checkpointed;
        }
        compact_record(j);
        agent_runner_job_end(d, j->s);
}

static void compact_release(void *ctx)
{
        struct compact_job *j = ctx;

        agent_vm_ref_put(j->vm);
        free(j->key);
        free(j->sd);
        free(j);
}

static int compact_start(struct agent_daemon *d, struct agent_session *s, bool checkpointed)
{
        struct compact_job *j = calloc(1, sizeof(*j));
        int r;

        if (!j)
                return -ENOMEM;
        *j = (struct compact_job){
                .d = d,
                .s = s,
                .vm = agent_vm_ref_get(s->vm),
                .key = strdup(s->key),
                .p = {.max_layers = max_layers(),
                      .checkpointed = checkpointed,
                      .timeout_ms = COMPACT_TIMEOUT_MS,
                      .cancel = &s->cancel,
                      .yield = &s->yield,
                      .yield_wait_ms = COMPACT_YIELD_WAIT_MS,
                      .yield_max_files = COMPACT_YIELD_MAX_FILES,
                      .speed = stream_speed()},
        };
        if (!j->key || agent_session_state_dir(d->cfg->state_dir, s->key, &j->sd) < 0) {
                compact_release(j);
                return -ENOMEM;
        }
        r = agent_runner_spawn_background(d, s, compact_body, compact_release, j);
        if (r < 0)
                compact_release(j);
        return r;
}

void agent_compact_tick(struct agent_daemon *d)
{
        if (!d->ops.compact_disk)
                return;
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                struct agent_session_compact *c = state_of(s);
                int r;

                if (!c->due || !agent_session_idle(s) ||
                    agent_checkpoint_session_writing(d, s->key))
                        continue;
                r = compact_start(d, s, c->checkpointed);
                c->due = c->checkpointed = false;
                if (r < 0)
                        log_warning_errno(r, "session %s: start the live disk compaction: %m",
                                          s->key);
        }
}

void agent_compact_after_checkpoint(struct agent_daemon *d, struct agent_session *s)
{
        struct agent_session_compact *c = state_of(s);

        (void)d;
        c->due = c->checkpointed = true;
}
