/* SPDX-License-Identifier: MIT */
/* What a status read shows without touching a file: each session's checkpoint list (loaded when
 * it changes, by the job that changed it) and its cgroup figures (sampled by the reconcile
 * thread every AGENT_SAMPLE_INTERVAL_MS and right after a boot, with their sample time). */
#include "agent/daemon/daemon-internal.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define AGENT_SAMPLE_INTERVAL_MS 5000

json_t *agent_ck_cache(struct agent_daemon *d, struct agent_session *s)
{
        cleanup_free char *sd = NULL;

        if (!s->ck_cache && agent_session_state_dir(d->cfg->state_dir, s->key, &sd) >= 0)
                s->ck_cache = agent_checkpoints_list(sd);
        return s->ck_cache;
}

void agent_ck_cache_reload(struct agent_daemon *d, struct agent_session *s)
{
        json_decref(s->ck_cache);
        s->ck_cache = NULL;
        (void)agent_ck_cache(d, s);
}

static json_t *stats_json(const struct cg_stats *st, uint64_t sampled_ns)
{
        char buf[64];

        return json_pack(
                "{s:I, s:I, s:o, s:I, s:I, s:s}", "cpuUsageNs", (json_int_t)st->cpu_usage_ns,
                "memoryCurrent", (json_int_t)st->memory_current, "memoryPeak",
                st->has_memory_peak ? json_integer((json_int_t)st->memory_peak) : json_null(),
                "oomKills", (json_int_t)st->oom_kills, "pids", (json_int_t)st->pids_current,
                "sampledAt", fk_format_rfc3339(sampled_ns, buf, sizeof(buf)));
}

/* Reads the cgroup figures of each named session without the lock, then stores them. */
static void sample_keys(struct agent_daemon *d, char **keys)
{
        size_t n = fk_strv_length(keys);
        json_t **got = calloc(n ? n : 1, sizeof(*got));

        if (!got)
                return;
        for (size_t i = 0; i < n; i++) {
                struct cg_stats st;

                if (cg_stats(d->cg, keys[i], &st, NULL) >= 0)
                        got[i] = stats_json(&st, agent_now_real(d));
        }
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < n; i++) {
                struct agent_session *s = NULL;

                for (size_t k = 0; k < d->n_sessions && !s; k++)
                        if (strcmp(d->sessions[k]->key, keys[i]) == 0)
                                s = d->sessions[k];
                if (s && s->res.has_cgroup && got[i]) {
                        json_decref(s->res.sample);
                        s->res.sample = TAKE_PTR(got[i]);
                }
                json_decref(got[i]);
        }
        pthread_mutex_unlock(&d->lock);
        free(got);
}

void agent_sampler_tick(struct agent_daemon *d, bool force)
{
        uint64_t now = agent_now_mono(d);
        char **keys = NULL;
        int r = 0;

        if (!d->cg)
                return;
        pthread_mutex_lock(&d->lock);
        if (!force && d->last_sample_ns &&
            now - d->last_sample_ns < (uint64_t)AGENT_SAMPLE_INTERVAL_MS * 1000000ull) {
                pthread_mutex_unlock(&d->lock);
                return;
        }
        d->last_sample_ns = now;
        for (size_t i = 0; r >= 0 && i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];

                if (s->res.has_cgroup)
                        r = fk_strv_push(&keys, s->key);
                else if (s->res.sample)
                        s->res.sample = (json_decref(s->res.sample), NULL);
        }
        pthread_mutex_unlock(&d->lock);
        if (r >= 0 && keys)
                sample_keys(d, keys);
        fk_strv_free(keys);
}
