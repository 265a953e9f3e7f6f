/* SPDX-License-Identifier: MIT */
/* Benchmark: cgroup setup + teardown cost per session (create with limits, destroy; with and
 * without a process joining before exec) against baselines measured in the same run; the last
 * column divides each row's mean by its baseline row's. Usage: bench-cgroups [iterations]. */
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct series {
        const char *what;
        int base; /* index of the row this one is compared with */
        double *us;
        int n;
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

static double mean(const struct series *s)
{
        double sum = 0;

        for (int i = 0; i < s->n; i++)
                sum += s->us[i];
        return sum / s->n;
}

/* Runs op n times, recording the wall time of each call in microseconds. */
static int run(struct series *s, int n, int (*op)(void *ctx, int i), void *ctx)
{
        s->us = calloc((size_t)n, sizeof(double));
        if (!s->us)
                return -ENOMEM;
        for (s->n = 0; s->n < n; s->n++) {
                uint64_t t0 = fk_now_mono_ns();
                int r = op(ctx, s->n);

                if (r < 0)
                        return r;
                s->us[s->n] = (double)(fk_now_mono_ns() - t0) / 1000.0;
        }
        qsort(s->us, (size_t)s->n, sizeof(double), cmp_double);
        return 0;
}

static int op_mkdir_rmdir(void *ctx, int i)
{
        char path[4096];

        snprintf(path, sizeof(path), "%s/d%d", (const char *)ctx, i);
        if (mkdir(path, 0755) < 0 || rmdir(path) < 0)
                return -errno;
        return 0;
}

static const struct cg_limits LIMITS = {
        .cpu_cores = 1.0, .memory_max = 256 << 20, .memory_high = 240 << 20, .pids_max = 1024};

static int op_cg(void *ctx, int i)
{
        struct cg_manager *m = ctx;
        struct fk_error err = {0};
        char name[32];
        int r;

        snprintf(name, sizeof(name), "b%d", i);
        if ((r = cg_create(m, name, &LIMITS, &err)) < 0 || (r = cg_destroy(m, name, &err)) < 0)
                fprintf(stderr, "bench-cgroups: %s\n", err.msg);
        return r;
}

/* create, a child joins before exec (/bin/true), reap, destroy: one short session. */
static int op_cg_spawn(void *ctx, int i)
{
        struct cg_manager *m = ctx;
        struct fk_error err = {0};
        struct cg_join *j = NULL;
        char name[32];
        int r, status;
        pid_t pid;

        snprintf(name, sizeof(name), "p%d", i);
        if ((r = cg_create(m, name, &LIMITS, &err)) < 0 ||
            (r = cg_prepare_join(m, name, &j, &err)) < 0) {
                fprintf(stderr, "bench-cgroups: %s\n", err.msg);
                return r;
        }
        pid = fork();
        if (pid == 0) {
                if (cg_join_self(j) < 0)
                        _exit(126);
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
        }
        cg_join_free(j);
        if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
                return -ECHILD;
        if ((r = cg_destroy(m, name, &err)) < 0)
                fprintf(stderr, "bench-cgroups: %s\n", err.msg);
        return r;
}

static int op_spawn_only(void *ctx, int i)
{
        int status;
        pid_t pid = fork();

        (void)ctx, (void)i;
        if (pid == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
        }
        if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
                return -ECHILD;
        return 0;
}

static void print_table(struct series *s, size_t n)
{
        printf("%-3s %-46s %5s %9s %9s %9s %13s\n", "row", "operation (per session)", "n",
               "mean us", "p50 us", "p90 us", "mean/base row");
        for (size_t i = 0; i < n; i++)
                printf("%-3zu %-46s %5d %9.1f %9.1f %9.1f %8.2f (%d)\n", i, s[i].what, s[i].n,
                       mean(&s[i]), pct(&s[i], 0.5), pct(&s[i], 0.9),
                       mean(&s[i]) / mean(&s[s[i].base]), s[i].base);
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? atoi(argv[1]) : 200, r = 0;
        char parent[64], tmpdir[] = "/tmp/fk-bench-XXXXXX";
        struct cg_options o = {.nest_in_self = true};
        struct series s[] = {{"baseline: mkdir+rmdir empty dir (/tmp)", 0, NULL, 0},
                             {"baseline: mkdir+rmdir bare cgroup (1st hier.)", 0, NULL, 0},
                             {"cgroup: cg_create(limits)+cg_destroy", 0, NULL, 0},
                             {"baseline: fork+exec /bin/true+wait", 3, NULL, 0},
                             {"cgroup: create+join-before-exec+destroy", 3, NULL, 0}};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};

        if (n < 1)
                n = 1;
        if (geteuid() != 0) {
                fprintf(stderr, "bench-cgroups: needs root (creates cgroups)\n");
                return 77;
        }
        snprintf(parent, sizeof(parent), "forklet-bench-%d", (int)getpid());
        o.parent = parent;
        if (!mkdtemp(tmpdir) || cg_manager_new(&o, &m, &err) < 0) {
                fprintf(stderr, "bench-cgroups: %s\n", err.msg[0] ? err.msg : strerror(errno));
                return 1;
        }
        printf("cgroup backend: %s, parent %s, %d iterations\n",
               cg_version_to_string(cg_manager_version(m)), cg_manager_parent_path(m), n);
        if ((r = run(&s[0], n, op_mkdir_rmdir, tmpdir)) < 0 ||
            (r = run(&s[1], n, op_mkdir_rmdir, (void *)cg_manager_parent_path(m))) < 0 ||
            (r = run(&s[2], n, op_cg, m)) < 0 || (r = run(&s[3], n, op_spawn_only, NULL)) < 0 ||
            (r = run(&s[4], n, op_cg_spawn, m)) < 0)
                fprintf(stderr, "bench-cgroups: failed: %s\n", strerror(-r));
        else
                print_table(s, ARRAY_SIZE(s));
        if (cg_manager_remove_parent(m, &err) < 0)
                fprintf(stderr, "bench-cgroups: %s\n", err.msg);
        cg_manager_free(m);
        rmdir(tmpdir);
        for (size_t i = 0; i < ARRAY_SIZE(s); i++)
                free(s[i].us);
        return r < 0 ? 1 : 0;
}
