/* SPDX-License-Identifier: MIT */
/* Node capacity and admission, pure: what a session is charged, what the node can allocate,
 * whether one more fits and how many of a size class still do. */
#include "core/core.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <limits.h>

#define MIB (1024ull * 1024)

const char *core_resource_reason(enum core_resource r)
{
        static const char *const t[_CORE_RESOURCE_MAX] = {
                [CORE_RESOURCE_MEMORY] = "InsufficientMemory",
                [CORE_RESOURCE_CPU] = "InsufficientCPU",
                [CORE_RESOURCE_SESSIONS] = "InsufficientSessions",
        };

        return r >= 0 && r < _CORE_RESOURCE_MAX ? t[r] : NULL;
}

struct core_charge core_charge_for(const struct core_charge_input *in)
{
        uint64_t ram = (uint64_t)in->memory_mib * MIB,
                 overhead = (uint64_t)in->qemu_overhead_mib * MIB;
        struct core_charge c = {.vcpus = in->vcpus, .memory_bytes = ram + overhead};
        uint64_t share;

        if (!in->fork)
                return c;
        share = ram * FK_MIN(in->fork_memory_percent, 100u) / 100 + overhead;
        /* PSS counts the pages it wrote in full and the shared ones divided among sharers;
         * never more than its cgroup allows. */
        c.memory_bytes = FK_MIN(FK_MAX(share, in->pss_bytes), ram + overhead);
        return c;
}

struct core_charge core_class_charge(const struct node_config *cfg, const struct size_class *sc,
                                     bool fork, uint64_t pss_bytes)
{
        struct core_charge_input in = {
                .vcpus = sc->vcpus,
                .memory_mib = sc->memory_mib,
                .qemu_overhead_mib = cfg->qemu_overhead_mib,
                .fork = fork,
                .fork_memory_percent = cfg->fork_memory_percent,
                .pss_bytes = fork ? pss_bytes : 0,
        };

        return core_charge_for(&in);
}

void core_capacity_compute(const struct core_node_resources *node, const struct core_charge *held,
                           size_t n, struct core_capacity *ret)
{
        struct core_capacity c = {0};
        uint64_t vcpus = (uint64_t)node->host_cpus * node->cpu_overcommit_percent / 100;

        c.allocatable.memory_bytes = node->host_memory_bytes > node->reserve_memory_bytes
                                             ? node->host_memory_bytes - node->reserve_memory_bytes
                                             : 0;
        c.allocatable.vcpus = (unsigned)FK_MIN(vcpus, (uint64_t)UINT_MAX);
        c.allocatable_sessions = node->max_sessions;
        for (size_t i = 0; i < n; i++) {
                c.used.memory_bytes += held[i].memory_bytes;
                c.used.vcpus += held[i].vcpus;
        }
        c.used_sessions = (unsigned)FK_MIN(n, (size_t)UINT_MAX);
        *ret = c;
}

static uint64_t room(uint64_t total, uint64_t used)
{
        return total > used ? total - used : 0;
}

int core_capacity_admit(const struct core_capacity *c, const struct core_charge *want,
                        enum core_resource *ret_short)
{
        enum core_resource r;

        if (c->allocatable_sessions && c->used_sessions >= c->allocatable_sessions)
                r = CORE_RESOURCE_SESSIONS;
        else if (want->memory_bytes > room(c->allocatable.memory_bytes, c->used.memory_bytes))
                r = CORE_RESOURCE_MEMORY;
        else if (want->vcpus > room(c->allocatable.vcpus, c->used.vcpus))
                r = CORE_RESOURCE_CPU;
        else
                return 0;
        if (ret_short)
                *ret_short = r;
        return -ENOSPC;
}

unsigned core_capacity_fits(const struct core_capacity *c, const struct core_charge *one)
{
        uint64_t n = UINT_MAX;

        if (c->allocatable_sessions)
                n = room(c->allocatable_sessions, c->used_sessions);
        if (one->memory_bytes)
                n = FK_MIN(n, room(c->allocatable.memory_bytes, c->used.memory_bytes) /
                                      one->memory_bytes);
        if (one->vcpus)
                n = FK_MIN(n, room(c->allocatable.vcpus, c->used.vcpus) / one->vcpus);
        return (unsigned)n;
}
