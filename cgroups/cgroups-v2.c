/* SPDX-License-Identifier: MIT */
/* cgroup v2 backend: one unified directory; cpu.max/cpu.weight, memory.max/high, pids.max,
 * io.weight, cgroup.freeze + cgroup.events, cgroup.kill. */
#include "cgroups/cgroups-internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void fmt_max(char *buf, size_t size, uint64_t v)
{
        if (v == 0 || v == UINT64_MAX)
                snprintf(buf, size, "max");
        else
                snprintf(buf, size, "%" PRIu64, v);
}

/* A limit for a controller the parent does not enable is an error, never a silent pass (a
 * zero, unset, limit needs no file). */
static int missing(const struct cg_hier *h, const char *name, const char *ctrl, const char *file,
                   struct fk_error *err)
{
        return fk_error_set(err, -EOPNOTSUPP,
                            "%s/%s/%s: the %s controller is not enabled in %s/"
                            "cgroup.subtree_control: cannot apply a %s limit (enable %s for the "
                            "cgroup parent or unset the limit)",
                            h->parent_path, name, file, ctrl, h->parent_path, ctrl, ctrl);
}

static int v2_cpu(const struct cg_hier *h, const char *name, const struct cg_limits *l,
                  struct fk_error *err)
{
        uint64_t period = l->cpu_period_us ? l->cpu_period_us : 100000;
        char buf[64];
        int r;

        if (!(h->controllers & CG_CTRL_CPU)) {
                if (l->cpu_cores > 0)
                        return missing(h, name, "cpu", "cpu.max", err);
                return l->cpu_weight ? missing(h, name, "cpu", "cpu.weight", err) : 0;
        }
        if (l->cpu_cores > 0) {
                long long q = llround(l->cpu_cores * (double)period);
                snprintf(buf, sizeof(buf), "%lld %" PRIu64, q < 1000 ? 1000 : q, period);
        } else
                snprintf(buf, sizeof(buf), "max %" PRIu64, period);
        if ((r = cg_write(h, name, "cpu.max", buf, err)) < 0)
                return r;
        snprintf(buf, sizeof(buf), "%" PRIu64,
                 l->cpu_weight ? FK_MIN(FK_MAX(l->cpu_weight, 1), 10000) : 100);
        return cg_write(h, name, "cpu.weight", buf, err);
}

static int v2_memory_pids(const struct cg_hier *h, const char *name, const struct cg_limits *l,
                          struct fk_error *err)
{
        char buf[64];
        int r;

        if (h->controllers & CG_CTRL_MEMORY) {
                fmt_max(buf, sizeof(buf), l->memory_max);
                if ((r = cg_write(h, name, "memory.max", buf, err)) < 0)
                        return r;
                fmt_max(buf, sizeof(buf), l->memory_high);
                if ((r = cg_write(h, name, "memory.high", buf, err)) < 0)
                        return r;
        } else if (l->memory_max || l->memory_high)
                return missing(h, name, "memory", l->memory_max ? "memory.max" : "memory.high",
                               err);
        if (!(h->controllers & CG_CTRL_PIDS))
                return l->pids_max ? missing(h, name, "pids", "pids.max", err) : 0;
        fmt_max(buf, sizeof(buf), l->pids_max);
        return cg_write(h, name, "pids.max", buf, err);
}

static int v2_apply_limits(struct cg_manager *m, const char *name, const struct cg_limits *l,
                           struct fk_error *err)
{
        const struct cg_hier *h = &m->hier[0];
        char buf[64];
        int r;

        if ((r = v2_cpu(h, name, l, err)) < 0 || (r = v2_memory_pids(h, name, l, err)) < 0)
                return r;
        if (!l->io_weight)
                return 0;
        if (!(h->controllers & CG_CTRL_BLKIO) || !cg_file_exists(h, name, "io.weight"))
                return fk_error_set(err, -EOPNOTSUPP,
                                    "%s/%s/io.weight: missing (the io controller is not enabled "
                                    "or no weight-based scheduler): unset ioWeight",
                                    h->parent_path, name);
        snprintf(buf, sizeof(buf), "default %" PRIu64, FK_MIN(FK_MAX(l->io_weight, 1), 10000));
        return cg_write(h, name, "io.weight", buf, err);
}

static int v2_set_frozen(struct cg_manager *m, const char *name, bool frozen, struct fk_error *err)
{
        const struct cg_hier *h = &m->hier[0];
        uint64_t deadline = fk_now_mono_ns() + m->timeout_ns, state;
        unsigned step = 0;
        int r = cg_write(h, name, "cgroup.freeze", frozen ? "1" : "0", err);

        if (r < 0)
                return r;
        for (;;) {
                /* cgroup.freeze is the wish; cgroup.events "frozen" is the fact */
                r = cg_read_keyed(h, name, "cgroup.events", "frozen", &state, err);
                if (r < 0)
                        return r;
                if ((state == 1) == frozen)
                        return 0;
                if (cg_backoff(deadline, &step) < 0)
                        return fk_error_set(err, -ETIMEDOUT,
                                            "%s/%s/cgroup.events: still \"frozen %" PRIu64
                                            "\" after %" PRIu64 " ms",
                                            h->parent_path, name, state, m->timeout_ns / 1000000);
        }
}

static int v2_kill(struct cg_manager *m, const char *name, struct fk_error *err)
{
        const struct cg_hier *h = &m->hier[0];
        int r;

        if (!cg_file_exists(h, name, "cgroup.kill"))
                return 0; /* before Linux 5.14 */
        r = cg_write(h, name, "cgroup.kill", "1", err);
        return r < 0 ? r : 1;
}

static int v2_stats(struct cg_manager *m, const char *name, struct cg_stats *s,
                    struct fk_error *err)
{
        const struct cg_hier *h = &m->hier[0];
        uint64_t usec;
        int r;

        /* cpu.stat usage_usec is core (rstat): present without the cpu controller */
        if ((r = cg_read_keyed(h, name, "cpu.stat", "usage_usec", &usec, err)) < 0)
                return r;
        s->cpu_usage_ns = usec * 1000;
        s->has_memory = h->controllers & CG_CTRL_MEMORY;
        if (s->has_memory) {
                if ((r = cg_read_u64(h, name, "memory.current", &s->memory_current, err)) < 0)
                        return r;
                s->has_memory_peak = cg_file_exists(h, name, "memory.peak");
                if (s->has_memory_peak &&
                    (r = cg_read_u64(h, name, "memory.peak", &s->memory_peak, err)) < 0)
                        return r;
                r = cg_read_keyed(h, name, "memory.events", "oom_kill", &s->oom_kills, err);
                if (r < 0)
                        return r;
        }
        s->has_pids = h->controllers & CG_CTRL_PIDS;
        return s->has_pids ? cg_read_u64(h, name, "pids.current", &s->pids_current, err) : 0;
}

const struct cg_ops cg_ops_v2 = {
        .version = CG_VERSION_2,
        .apply_limits = v2_apply_limits,
        .set_frozen = v2_set_frozen,
        .kill = v2_kill,
        .stats = v2_stats,
};
