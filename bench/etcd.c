/* SPDX-License-Identifier: MIT */
/* Benchmark: watch-event latency (put issued -> watch callback) against a plain range round trip
 * and a put round trip measured in the same run, p50/p99 with ratios to the range baseline.
 * Usage: bench-etcd [iterations] [endpoint]; without an endpoint it starts a private etcd. */
#include "etcd/etcd.h"
#include "common/error.h"
#include "common/util.h"
#include "tests/etcd/etcd-server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct series {
        const char *what;
        double *us;
        int n;
};

struct watch_probe {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        uint64_t seen_ns; /* arrival time of the last event */
        int64_t seen_rev;
};

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static double pct(const struct series *s, double p)
{
        return s->us[(int)(p * (s->n - 1) + 0.5)];
}

static void on_event(enum etcd_event_type type, const struct etcd_kv *kv, int64_t rev, void *ud)
{
        struct watch_probe *p = ud;

        (void)type, (void)kv;
        pthread_mutex_lock(&p->lock);
        p->seen_ns = fk_now_mono_ns();
        p->seen_rev = rev;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
}

static int bench_range(struct etcd_client *c, struct series *s, int n)
{
        for (s->n = 0; s->n < n; s->n++) {
                struct etcd_kvs *kvs = NULL;
                uint64_t t0 = fk_now_mono_ns();
                int r = etcd_range(c, "/bench/key", NULL, 0, &kvs, NULL, NULL);

                if (r < 0)
                        return r;
                s->us[s->n] = (double)(fk_now_mono_ns() - t0) / 1000.0;
                etcd_kvs_free(kvs);
        }
        return 0;
}

static int bench_put(struct etcd_client *c, struct series *s, int n)
{
        for (s->n = 0; s->n < n; s->n++) {
                uint64_t t0 = fk_now_mono_ns();
                int r = etcd_put(c, "/bench/other", "v", 1, 0, NULL, NULL);

                if (r < 0)
                        return r;
                s->us[s->n] = (double)(fk_now_mono_ns() - t0) / 1000.0;
        }
        return 0;
}

/* One put at a time; waits (bounded, 5 s) for its event before the next. */
static int bench_watch(struct etcd_client *c, struct watch_probe *p, struct series *s, int n)
{
        for (s->n = 0; s->n < n; s->n++) {
                uint64_t t0 = fk_now_mono_ns();
                struct timespec deadline;
                int64_t rev = 0;
                int r = etcd_put(c, "/bench/key", "v", 1, 0, &rev, NULL);

                if (r < 0)
                        return r;
                clock_gettime(CLOCK_REALTIME, &deadline);
                deadline.tv_sec += 5;
                pthread_mutex_lock(&p->lock);
                while (p->seen_rev < rev && r == 0)
                        r = -pthread_cond_timedwait(&p->cond, &p->lock, &deadline);
                s->us[s->n] = (double)(p->seen_ns - t0) / 1000.0;
                pthread_mutex_unlock(&p->lock);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void print_table(struct series *s, size_t n)
{
        printf("%-3s %-38s %5s %9s %9s %11s %11s\n", "row", "operation", "n", "p50 us", "p99 us",
               "p50/row 0", "p99/row 0");
        for (size_t i = 0; i < n; i++) {
                qsort(s[i].us, (size_t)s[i].n, sizeof(double), cmp_double);
                printf("%-3zu %-38s %5d %9.0f %9.0f %10.2fx %10.2fx\n", i, s[i].what, s[i].n,
                       pct(&s[i], 0.50), pct(&s[i], 0.99), pct(&s[i], 0.50) / pct(&s[0], 0.50),
                       pct(&s[i], 0.99) / pct(&s[0], 0.99));
        }
}

static int run(const char *endpoint, int n)
{
        const char *eps[] = {endpoint, NULL};
        struct watch_probe probe = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
        struct series s[] = {{"range 1 key (baseline)", NULL, 0},
                             {"put 1 key", NULL, 0},
                             {"watch: put issued -> callback", NULL, 0}};
        struct etcd_client *c = NULL;
        struct etcd_watch *w = NULL;
        struct fk_error err = {};
        int r;

        for (size_t i = 0; i < 3; i++)
                if (!(s[i].us = calloc((size_t)n, sizeof(double))))
                        return -ENOMEM;
        r = etcd_client_new(eps, NULL, &c, &err);
        if (r >= 0)
                r = etcd_put(c, "/bench/key", "v", 1, 0, NULL, &err);
        if (r >= 0)
                r = etcd_watch_new(c, "/bench/key", 0, 0, on_event, &probe, &w, &err);
        if (r >= 0)
                r = etcd_watch_wait_ready(w, 5000);
        /* Warm up connections, then interleave nothing: each series runs alone. */
        if (r >= 0)
                r = bench_range(c, &s[0], n / 10 + 1);
        if (r >= 0)
                r = bench_range(c, &s[0], n);
        if (r >= 0)
                r = bench_put(c, &s[1], n);
        if (r >= 0)
                r = bench_watch(c, &probe, &s[2], n);
        if (r >= 0)
                print_table(s, 3);
        else
                fprintf(stderr, "bench-etcd: %s (%s)\n", err.msg, strerror(-r));
        etcd_watch_free(w);
        etcd_delete(c, "/bench/", ETCD_PREFIX, NULL, NULL);
        etcd_client_free(c);
        for (size_t i = 0; i < 3; i++)
                free(s[i].us);
        return r;
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? atoi(argv[1]) : 1000;
        struct etcd_server srv = {};
        int r;

        if (n < 10)
                n = 10;
        if (argc > 2)
                return run(argv[2], n) < 0 ? 1 : 0;
        if (!etcd_server_binary()) {
                fprintf(stderr, "bench-etcd: no etcd binary and no endpoint given\n");
                return 77;
        }
        r = etcd_server_init(&srv);
        if (r >= 0)
                r = etcd_server_start(&srv);
        if (r >= 0) {
                printf("etcd %s (private, data dir %s), %d iterations per row\n", srv.url, srv.dir,
                       n);
                r = run(srv.url, n);
        }
        etcd_server_cleanup(&srv);
        return r < 0 ? 1 : 0;
}
