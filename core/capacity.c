/* SPDX-License-Identifier: MIT */
/* Node capacity and admission, pure: what a session is charged, what the node can allocate,
 * whether one more fits and how many of a size class still do. */
#include "agent/agent.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <limits.h>

#define MIB (1024ull * 1024)

const char *agent_resource_reason(enum agent_resource r)
{
        static const char *const t[_AGENT_RESOURCE_MAX] = {
                [AGENT_RESOURCE_MEMORY] = "InsufficientMemory",
                [AGENT_RESOURCE_CPU] = "InsufficientCPU",
                [AGENT_RESOURCE_SESSIONS] = "InsufficientSessions",
        };

        return r >= 0 && r < _AGENT_RESOURCE_MAX ? t[r] : NULL;
}

struct agent_charge agent_charge_for(const struct agent_charge_input *in)
{
        uint64_t ram = (uint64_t)in->memory_mib * MIB,
                 overhead = (uint64_t)in->qemu_overhead_mib * MIB;
        struct agent_charge c = {.vcpus = in->vcpus, .memory_bytes = ram + overhead};
        uint64_t share;

        if (!in->fork)
                return c;
        share = ram * FK_MIN(in->fork_memory_percent, 100u) / 100 + overhead;
        /* PSS counts the pages it wrote in full and the shared ones divided among sharers;
         * never more than its cgroup allows. */
        c.memory_bytes = FK_MIN(FK_MAX(share, in->pss_bytes), ram + overhead);
        return c;
}

struct agent_charge agent_class_charge(const struct node_config *cfg, const struct size_class *sc,
                                       bool fork, uint64_t pss_bytes)
{
        struct agent_charge_input in = {
                .vcpus = sc->vcpus,
                .memory_mib = sc->memory_mib,
                .qemu_overhead_mib = cfg->qemu_overhead_mib,
                .fork = fork,
                .fork_memory_percent = cfg->fork_memory_percent,
                .pss_bytes = fork ? pss_bytes : 0,
        };

        return agent_charge_for(&in);
}

void agent_capacity_compute(const struct agent_node_resources *node,
                            const struct agent_charge *held, size_t n, struct agent_capacity *ret)
{
        struct agent_capacity c = {0};
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

int agent_capacity_admit(const struct agent_capacity *c, const struct agent_charge *want,
                         enum agent_resource *ret_short)
{
        enum agent_resource r;

        if (c->allocatable_sessions && c->used_sessions >= c->allocatable_sessions)
                r = AGENT_RESOURCE_SESSIONS;
        else if (want->memory_bytes > room(c->allocatable.memory_bytes, c->used.memory_bytes))
                r = AGENT_RESOURCE_MEMORY;
        else if (want->vcpus > room(c->allocatable.vcpus, c->used.vcpus))
                r = AGENT_RESOURCE_CPU;
        else
                return 0;
        if (ret_short)
                *ret_short = r;
        return -ENOSPC;
}

unsigned agent_capacity_fits(const struct agent_capacity *c, const struct agent_charge *one)
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
