/* SPDX-License-Identifier: MIT */
/* The daemon's /metrics: its sessions by phase and their resource usage, then the process-wide
 * metrics of agent/obs (counters, histograms, the process). */
#include "agent/daemon/daemon-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Sessions by phase; per-session usage through the hook (under d->lock). */
static void render_sessions(FILE *f, struct agent_daemon *d)
{
        size_t by_phase[_SESSION_PHASE_MAX] = {0};
        bool headers = false;

        for (size_t i = 0; i < d->n_sessions; i++)
                if (d->sessions[i]->phase >= 0 && d->sessions[i]->phase < _SESSION_PHASE_MAX)
                        by_phase[d->sessions[i]->phase]++;
        agent_metrics_header(f, "forklet_sessions", "gauge",
                             "Sessions known to this node by phase.");
        for (int p = 0; p < _SESSION_PHASE_MAX; p++)
                fprintf(f, "forklet_sessions{phase=\"%s\"} %zu\n", session_phase_to_string(p),
                        by_phase[p]);
        for (size_t i = 0; i < d->n_sessions; i++) {
                const struct agent_session *s = d->sessions[i];
                struct agent_session_stats st = {0};
                char l[160];

                if (agent_metrics_session_stats(s->key, &st) < 0)
                        continue;
                if (!headers) {
                        agent_metrics_header(f, "forklet_session_cpu_seconds_total", "counter",
                                             "CPU time used by a session.");
                        agent_metrics_header(f, "forklet_session_memory_bytes", "gauge",
                                             "Memory charged to a session.");
                        agent_metrics_header(f, "forklet_session_pids", "gauge",
                                             "Tasks in a session's cgroup.");
                        headers = true;
                }
                snprintf(l, sizeof(l), "{namespace=\"%s\",name=\"%s\"}", s->namespace, s->name);
                fprintf(f, "forklet_session_cpu_seconds_total%s %.9g\n", l,
                        (double)st.cpu_usage_ns / 1e9);
                fprintf(f, "forklet_session_memory_bytes%s %llu\n", l,
                        (unsigned long long)st.memory_bytes);
                fprintf(f, "forklet_session_pids%s %llu\n", l, (unsigned long long)st.pids);
        }
}

int agent_daemon_metrics_text(struct agent_daemon *d, char **ret)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        pthread_mutex_lock(&d->lock);
        render_sessions(f, d);
        pthread_mutex_unlock(&d->lock);
        agent_metrics_render(f);
        if (fclose(f) != 0 || !buf) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}
