/* SPDX-License-Identifier: MIT */
/* cgroup v1 backend: one directory per controller hierarchy (cpu, cpuacct, memory, pids,
 * freezer, optionally blkio; cpu,cpuacct may share one), CFS quota files, freezer.state. */
#include "cgroups/cgroups-internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int hier_of(struct cg_manager *m, unsigned ctrl, const char *what, struct cg_hier **ret,
                   struct fk_error *err)
{
        int i = cg_hier_find(m, ctrl);

        if (i < 0)
                return fk_error_set(err, -EOPNOTSUPP, "cgroup v1: the %s controller is not mounted",
                                    what);
        *ret = &m->hier[i];
        return 0;
}

static void fmt_u64_or(char *buf, size_t size, uint64_t v, const char *unlimited)
{
        if (v == 0 || v == UINT64_MAX)
                snprintf(buf, size, "%s", unlimited);
        else
                snprintf(buf, size, "%" PRIu64, v);
}

static int v1_cpu(struct cg_manager *m, const char *name, const struct cg_limits *l,
                  struct fk_error *err)
{
        uint64_t period = l->cpu_period_us ? l->cpu_period_us : 100000, shares = 1024;
        struct cg_hier *h = NULL;
        char buf[32];
        int r = hier_of(m, CG_CTRL_CPU, "cpu", &h, err);

        if (r < 0)
                return r;
        /* the period first: the kernel checks the quota against the current period */
        snprintf(buf, sizeof(buf), "%" PRIu64, period);
        if ((r = cg_write(h, name, "cpu.cfs_period_us", buf, err)) < 0)
                return r;
        if (l->cpu_cores > 0) {
                long long q = llround(l->cpu_cores * (double)period);
                snprintf(buf, sizeof(buf), "%lld", q < 1000 ? 1000 : q);
        } else
                snprintf(buf, sizeof(buf), "-1");
        if ((r = cg_write(h, name, "cpu.cfs_quota_us", buf, err)) < 0)
                return r;
        if (l->cpu_weight)
                shares = FK_MIN(FK_MAX(l->cpu_weight * 1024 / 100, 2), 262144);
        snprintf(buf, sizeof(buf), "%" PRIu64, shares);
        return cg_write(h, name, "cpu.shares", buf, err);
}

static int v1_io(struct cg_manager *m, const char *name, uint64_t weight, struct fk_error *err)
{
        struct cg_hier *h = NULL;
        const char *file;
        char buf[32];
        int r = hier_of(m, CG_CTRL_BLKIO, "blkio", &h, err);

        if (r < 0)
                return r;
        if (cg_file_exists(h, name, "blkio.weight"))
                file = "blkio.weight";
        else if (cg_file_exists(h, name, "blkio.bfq.weight"))
                file = "blkio.bfq.weight";
        else
                return fk_error_set(err, -EOPNOTSUPP,
                                    "%s/%s: neither blkio.weight nor blkio.bfq.weight exists "
                                    "(no CFQ/BFQ scheduler): unset ioWeight",
                                    h->parent_path, name);
        /* v1 weights are 10..1000; scale from the v2 range 1..10000 */
        snprintf(buf, sizeof(buf), "%" PRIu64, FK_MIN(FK_MAX(weight / 10, 10), 1000));
        return cg_write(h, name, file, buf, err);
}

static int v1_apply_limits(struct cg_manager *m, const char *name, const struct cg_limits *l,
                           struct fk_error *err)
{
        struct cg_hier *h = NULL;
        char buf[32];
        int r;

        if ((r = v1_cpu(m, name, l, err)) < 0)
                return r;
        if ((r = hier_of(m, CG_CTRL_MEMORY, "memory", &h, err)) < 0)
                return r;
        fmt_u64_or(buf, sizeof(buf), l->memory_max, "-1");
        if ((r = cg_write(h, name, "memory.limit_in_bytes", buf, err)) < 0)
                return r;
        fmt_u64_or(buf, sizeof(buf), l->memory_high, "-1");
        if ((r = cg_write(h, name, "memory.soft_limit_in_bytes", buf, err)) < 0)
                return r;
        if ((r = hier_of(m, CG_CTRL_PIDS, "pids", &h, err)) < 0)
                return r;
        fmt_u64_or(buf, sizeof(buf), l->pids_max, "max");
        if ((r = cg_write(h, name, "pids.max", buf, err)) < 0)
                return r;
        return l->io_weight ? v1_io(m, name, l->io_weight, err) : 0;
}

static int v1_set_frozen(struct cg_manager *m, const char *name, bool frozen, struct fk_error *err)
{
        const char *want = frozen ? "FROZEN" : "THAWED";
        uint64_t deadline = fk_now_mono_ns() + m->timeout_ns;
        unsigned step = 0;
        struct cg_hier *h = NULL;
        int r = hier_of(m, CG_CTRL_FREEZER, "freezer", &h, err);

        if (r < 0)
                return r;
        if ((r = cg_write(h, name, "freezer.state", want, err)) < 0)
                return r;
        for (;;) {
                cleanup_free char *state = NULL;

                /* FREEZING until every task reached the refrigerator */
                if ((r = cg_read(h, name, "freezer.state", &state, err)) < 0)
                        return r;
                if (strncmp(state, want, strlen(want)) == 0)
                        return 0;
                if (cg_backoff(deadline, &step) < 0)
                        return fk_error_set(err, -ETIMEDOUT,
                                            "%s/%s/freezer.state is \"%.*s\", not %s after %" PRIu64
                                            " ms",
                                            h->parent_path, name, (int)strcspn(state, "\n"), state,
                                            want, m->timeout_ns / 1000000);
        }
}

static int v1_kill(struct cg_manager *m, const char *name, struct fk_error *err)
{
        (void)m, (void)name, (void)err;
        return 0; /* no cgroup.kill on v1: the caller kills pid by pid */
}

static int v1_stats(struct cg_manager *m, const char *name, struct cg_stats *s,
                    struct fk_error *err)
{
        struct cg_hier *h = NULL;
        int r;

        if ((r = hier_of(m, CG_CTRL_CPUACCT, "cpuacct", &h, err)) < 0 ||
            (r = cg_read_u64(h, name, "cpuacct.usage", &s->cpu_usage_ns, err)) < 0)
                return r;
        if ((r = hier_of(m, CG_CTRL_MEMORY, "memory", &h, err)) < 0 ||
            (r = cg_read_u64(h, name, "memory.usage_in_bytes", &s->memory_current, err)) < 0 ||
            (r = cg_read_u64(h, name, "memory.max_usage_in_bytes", &s->memory_peak, err)) < 0)
                return r;
        s->has_memory_peak = true;
        s->has_memory = s->has_pids = true;
        r = cg_read_keyed(h, name, "memory.oom_control", "oom_kill", &s->oom_kills, err);
        if (r == -ENOENT && cg_file_exists(h, name, "memory.oom_control"))
                s->oom_kills = 0; /* kernels before 4.13 do not count kills */
        else if (r < 0)
                return r;
        if ((r = hier_of(m, CG_CTRL_PIDS, "pids", &h, err)) < 0)
                return r;
        return cg_read_u64(h, name, "pids.current", &s->pids_current, err);
}

const struct cg_ops cg_ops_v1 = {
        .version = CG_VERSION_1,
        .apply_limits = v1_apply_limits,
        .set_frozen = v1_set_frozen,
        .kill = v1_kill,
        .stats = v1_stats,
};
