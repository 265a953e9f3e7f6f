/* SPDX-License-Identifier: MIT */
/* Prometheus metrics: process-wide counters and operation latency histograms that any part of
 * forkletd feeds, and their text exposition (the daemon adds its sessions: metrics-sessions.c). */
#include "agent/obs/obs.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FORKLET_VERSION
#define FORKLET_VERSION "0.0.0"
#endif

static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                 2.5,   5,    10,    30,   60,  120,  300};
#define N_BUCKETS ARRAY_SIZE(buckets)

struct histogram {
        uint64_t counts[N_BUCKETS]; /* non-cumulative; summed when rendered */
        uint64_t count;
        double sum;
};

static struct {
        pthread_mutex_t lock;
        struct histogram ops[_AGENT_OP_MAX];
        uint64_t failed[_AGENT_OP_MAX];
        uint64_t reconcile_errors, forks, checkpoint_bytes, forks_inherited_secrets;
        uint64_t io_error_stops, guest_oom_kills;
        uint64_t guest_failures[3]; /* failure_reasons order */
        int (*stats_fn)(void *userdata, const char *key, struct agent_session_stats *ret);
        void *stats_userdata;
} m = {.lock = PTHREAD_MUTEX_INITIALIZER};

const char *agent_op_to_string(enum agent_op op)
{
        static const char *const t[_AGENT_OP_MAX] = {
                "boot", "exec", "stop", "pause", "resume", "checkpoint", "fork", "rollback",
        };

        return op < _AGENT_OP_MAX ? t[op] : NULL;
}

void agent_metrics_observe(enum agent_op op, double seconds)
{
        size_t b = 0;

        if (op >= _AGENT_OP_MAX || !(seconds >= 0))
                return;
        while (b < N_BUCKETS && seconds > buckets[b])
                b++;
        pthread_mutex_lock(&m.lock);
        if (b < N_BUCKETS)
                m.ops[op].counts[b]++;
        m.ops[op].count++;
        m.ops[op].sum += seconds;
        pthread_mutex_unlock(&m.lock);
}

static void add(uint64_t *counter, uint64_t n)
{
        pthread_mutex_lock(&m.lock);
        *counter += n;
        pthread_mutex_unlock(&m.lock);
}

void agent_metrics_failed(enum agent_op op)
{
        if (op < _AGENT_OP_MAX)
                add(&m.failed[op], 1);
}

void agent_metrics_reconcile_error(void)
{
        add(&m.reconcile_errors, 1);
}

void agent_metrics_add_forks(unsigned n)
{
        add(&m.forks, n);
}

void agent_metrics_add_forks_inherited_secrets(unsigned n)
{
        add(&m.forks_inherited_secrets, n);
}

void agent_metrics_add_checkpoint_bytes(uint64_t bytes)
{
        add(&m.checkpoint_bytes, bytes);
}

static const char *const failure_reasons[] = {"GuestPanicked", "GuestOOM", "GuestUnresponsive"};

void agent_metrics_add_io_error_stops(unsigned n)
{
        add(&m.io_error_stops, n);
}

void agent_metrics_add_guest_oom_kills(unsigned n)
{
        add(&m.guest_oom_kills, n);
}

void agent_metrics_guest_failure(const char *reason)
{
        for (size_t i = 0; i < ARRAY_SIZE(failure_reasons); i++)
                if (strcmp(reason, failure_reasons[i]) == 0)
                        add(&m.guest_failures[i], 1);
}

void agent_metrics_set_session_stats_hook(int (*fn)(void *userdata, const char *key,
                                                    struct agent_session_stats *ret),
                                          void *userdata)
{
        pthread_mutex_lock(&m.lock);
        m.stats_fn = fn;
        m.stats_userdata = userdata;
        pthread_mutex_unlock(&m.lock);
}

void agent_metrics_reset(void)
{
        pthread_mutex_lock(&m.lock);
        memset(m.ops, 0, sizeof(m.ops));
        memset(m.failed, 0, sizeof(m.failed));
        m.reconcile_errors = m.forks = m.checkpoint_bytes = m.forks_inherited_secrets = 0;
        m.io_error_stops = m.guest_oom_kills = 0;
        memset(m.guest_failures, 0, sizeof(m.guest_failures));
        pthread_mutex_unlock(&m.lock);
}

void agent_metrics_header(FILE *f, const char *name, const char *type, const char *help)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_histograms(FILE *f)
{
        const char *name = "forklet_operation_duration_seconds";

        agent_metrics_header(f, name, "histogram", "Wall time of finished operations.");
        for (int op = 0; op < _AGENT_OP_MAX; op++) {
                const struct histogram *h = &m.ops[op];
                uint64_t cum = 0;

                for (size_t b = 0; b < N_BUCKETS; b++) {
                        cum += h->counts[b];
                        fprintf(f, "%s_bucket{op=\"%s\",le=\"%g\"} %llu\n", name,
                                agent_op_to_string(op), buckets[b], (unsigned long long)cum);
                }
                fprintf(f, "%s_bucket{op=\"%s\",le=\"+Inf\"} %llu\n", name, agent_op_to_string(op),
                        (unsigned long long)h->count);
                fprintf(f, "%s_sum{op=\"%s\"} %.9g\n", name, agent_op_to_string(op), h->sum);
                fprintf(f, "%s_count{op=\"%s\"} %llu\n", name, agent_op_to_string(op),
                        (unsigned long long)h->count);
        }
        agent_metrics_header(f, "forklet_operation_failures_total", "counter",
                             "Operations that failed.");
        for (int op = 0; op < _AGENT_OP_MAX; op++)
                fprintf(f, "forklet_operation_failures_total{op=\"%s\"} %llu\n",
                        agent_op_to_string(op), (unsigned long long)m.failed[op]);
}

static void render_counters(FILE *f)
{
        agent_metrics_header(
                f, "forklet_reconcile_errors_total", "counter",
                "Reconcile actions that failed (boot failures, VM exits, executor errors).");
        fprintf(f, "forklet_reconcile_errors_total %llu\n", (unsigned long long)m.reconcile_errors);
        agent_metrics_header(f, "forklet_forks_total", "counter", "Forked sessions created.");
        fprintf(f, "forklet_forks_total %llu\n", (unsigned long long)m.forks);
        agent_metrics_header(f, "forklet_checkpoint_bytes_total", "counter",
                             "Bytes written into checkpoints.");
        fprintf(f, "forklet_checkpoint_bytes_total %llu\n", (unsigned long long)m.checkpoint_bytes);
        agent_metrics_header(f, "forklet_forks_inherited_secrets_total", "counter",
                             "Forks started with file secrets copied unchanged from their parent.");
        fprintf(f, "forklet_forks_inherited_secrets_total %llu\n",
                (unsigned long long)m.forks_inherited_secrets);
        agent_metrics_header(f, "forklet_disk_io_error_stops_total", "counter",
                             "VMs QEMU stopped on a disk write error (ENOSPC and others).");
        fprintf(f, "forklet_disk_io_error_stops_total %llu\n",
                (unsigned long long)m.io_error_stops);
        agent_metrics_header(f, "forklet_guest_oom_kills_total", "counter",
                             "Processes the guests' OOM killers killed (from their consoles).");
        fprintf(f, "forklet_guest_oom_kills_total %llu\n", (unsigned long long)m.guest_oom_kills);
        agent_metrics_header(f, "forklet_guest_failures_total", "counter",
                             "Guests that died (panic, out of memory, agent not answering).");
        for (size_t i = 0; i < ARRAY_SIZE(failure_reasons); i++)
                fprintf(f, "forklet_guest_failures_total{reason=\"%s\"} %llu\n", failure_reasons[i],
                        (unsigned long long)m.guest_failures[i]);
}

int agent_metrics_session_stats(const char *key, struct agent_session_stats *ret)
{
        int (*fn)(void *userdata, const char *key, struct agent_session_stats *ret);
        void *ud;

        pthread_mutex_lock(&m.lock);
        fn = m.stats_fn;
        ud = m.stats_userdata;
        pthread_mutex_unlock(&m.lock);
        return fn ? fn(ud, key, ret) : -ENOENT;
}

static size_t count_fds(void)
{
        DIR *dp = opendir("/proc/self/fd");
        struct dirent *de;
        size_t n = 0;

        if (!dp)
                return 0;
        while ((de = readdir(dp)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(dp);
        return n > 0 ? n - 1 : 0; /* the DIR's own fd */
}

static void render_process(FILE *f)
{
        unsigned long long size = 0, resident = 0;
        FILE *st = fopen("/proc/self/statm", "re");

        if (st) {
                if (fscanf(st, "%llu %llu", &size, &resident) != 2)
                        resident = 0;
                fclose(st);
        }
        agent_metrics_header(f, "process_open_fds", "gauge", "Open file descriptors of forkletd.");
        fprintf(f, "process_open_fds %zu\n", count_fds());
        agent_metrics_header(f, "process_resident_memory_bytes", "gauge",
                             "Resident memory of forkletd.");
        fprintf(f, "process_resident_memory_bytes %llu\n",
                resident * (unsigned long long)sysconf(_SC_PAGESIZE));
        agent_metrics_header(f, "forklet_build_info", "gauge", "forkletd version (always 1).");
        fprintf(f, "forklet_build_info{version=\"%s\"} 1\n", FORKLET_VERSION);
}

void agent_metrics_render(FILE *f)
{
        pthread_mutex_lock(&m.lock);
        render_histograms(f);
        render_counters(f);
        pthread_mutex_unlock(&m.lock);
        render_process(f);
}

void agent_metrics_op_done(enum agent_op op, int r, uint64_t t0_mono_ns)
{
        if (r < 0)
                agent_metrics_failed(op);
        else
                agent_metrics_observe(op, (double)(fk_now_mono_ns() - t0_mono_ns) / 1e9);
}
