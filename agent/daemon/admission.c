/* SPDX-License-Identifier: MIT */
/* Admission on this node: what each session holds, the node's capacity from the session table,
 * the Pending + Insufficient<Resource> decision before a boot, and the capacity JSON. */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MIB ((uint64_t)1024 * 1024)

/* Pss of a whole process from smaps_rollup (bytes), 0 when unreadable. */
static uint64_t process_pss(pid_t pid)
{
        cleanup_free char *path = NULL, *text = NULL;
        unsigned long long kb;
        const char *p;

        if (pid <= 0 || fk_asprintf(&path, "/proc/%d/smaps_rollup", (int)pid) < 0 ||
            fk_read_file(path, 1 << 16, &text, NULL) < 0 || !(p = strstr(text, "\nPss:")) ||
            sscanf(p, "\nPss: %llu kB", &kb) != 1)
                return 0;
        return (uint64_t)kb * 1024;
}

static struct core_charge class_charge(struct agent_daemon *d, const struct size_class *sc,
                                       bool fork, pid_t pid)
{
        return core_class_charge(d->cfg, sc, fork, fork ? process_pss(pid) : 0);
}

static bool holds_capacity(const struct agent_session *s)
{
        return s->vm || s->phase == SESSION_PHASE_STARTING || s->phase == SESSION_PHASE_RUNNING ||
               s->phase == SESSION_PHASE_PAUSED;
}

struct core_charge agent_session_charge(struct agent_daemon *d, const struct agent_session *s)
{
        const struct size_class *sc;

        if (s->res.fork && s->res.vcpus) {
                struct size_class booted = {.vcpus = s->res.vcpus, .memory_mib = s->res.memory_mib};
                return class_charge(d, &booted, true, s->pid);
        }
        if (s->res.charge.memory_bytes || s->res.charge.vcpus)
                return s->res.charge;
        /* adopted from a previous forkletd: charge the class it asks for */
        sc = s->spec ? node_config_find_size_class(d->cfg, s->spec->size_class) : NULL;
        return sc ? class_charge(d, sc, s->res.fork, s->pid) : (struct core_charge){0};
}

/* exclude: a session not to count (the one being admitted); local_only: count only sessions
 * not from the control plane. */
static void capacity_of(struct agent_daemon *d, const struct agent_session *exclude,
                        bool local_only, struct core_capacity *ret)
{
        cleanup_free struct core_charge *held = calloc(d->n_sessions + 1, sizeof(*held));
        size_t n = 0;

        for (size_t i = 0; held && i < d->n_sessions; i++) {
                const struct agent_session *s = d->sessions[i];

                if (s != exclude && holds_capacity(s) &&
                    (!local_only || s->source != AGENT_SOURCE_CLUSTER))
                        held[n++] = agent_session_charge(d, s);
        }
        core_capacity_compute(&d->node, held, n, ret);
}

static void capacity_without(struct agent_daemon *d, const struct agent_session *exclude,
                             struct core_capacity *ret)
{
        capacity_of(d, exclude, false, ret);
}

void agent_daemon_capacity(struct agent_daemon *d, struct core_capacity *ret)
{
        capacity_of(d, NULL, false, ret);
}

void agent_daemon_capacity_local(struct agent_daemon *d, struct core_capacity *ret)
{
        capacity_of(d, NULL, true, ret);
}

static void describe_short(char *buf, size_t size, enum core_resource r,
                           const struct core_capacity *c, const struct core_charge *want)
{
        switch (r) {
        case CORE_RESOURCE_MEMORY:
                snprintf(buf, size,
                         "needs %" PRIu64 " MiB, %" PRIu64 " of %" PRIu64
                         " MiB allocatable are in use; waiting for room",
                         want->memory_bytes / MIB, c->used.memory_bytes / MIB,
                         c->allocatable.memory_bytes / MIB);
                break;
        case CORE_RESOURCE_CPU:
                snprintf(buf, size,
                         "needs %u vCPU, %u of %u allocatable are in use; waiting for room",
                         want->vcpus, c->used.vcpus, c->allocatable.vcpus);
                break;
        default:
                snprintf(buf, size, "all %u session slots (capacity.maxSessions) are in use",
                         c->allocatable_sessions);
        }
}

int agent_daemon_admit(struct agent_daemon *d, struct agent_session *s, const struct size_class *sc)
{
        struct core_charge want = class_charge(d, sc, s->res.fork, 0);
        enum core_resource r = CORE_RESOURCE_MEMORY;
        struct core_capacity c;
        char msg[192];

        capacity_without(d, s, &c);
        if (core_capacity_admit(&c, &want, &r) == 0) {
                s->res.charge = want;
                s->res.last_short[0] = '\0';
                return 0;
        }
        describe_short(msg, sizeof(msg), r, &c, &want);
        s->phase = SESSION_PHASE_PENDING;
        agent_session_set_condition(s, AGENT_COND_READY, "False", core_resource_reason(r),
                                    agent_now_real(d), "%s", msg);
        if (strcmp(s->res.last_short, core_resource_reason(r)) != 0)
                log_info("session %s: pending, %s: %s", s->key, core_resource_reason(r), msg);
        snprintf(s->res.last_short, sizeof(s->res.last_short), "%s", core_resource_reason(r));
        return -ENOSPC;
}

static json_t *amounts_json(const struct core_charge *c, unsigned sessions)
{
        return json_pack("{s:I, s:I, s:I}", "vcpus", (json_int_t)c->vcpus, "memoryMiB",
                         (json_int_t)(c->memory_bytes / MIB), "sessions", (json_int_t)sessions);
}

static json_t *classes_json(struct agent_daemon *d, const struct core_capacity *c)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < d->cfg->n_size_classes; i++) {
                const struct size_class *sc = &d->cfg->size_classes[i];
                struct core_charge one = class_charge(d, sc, false, 0);
                unsigned fits = core_capacity_fits(c, &one);

                json_array_append_new(
                        a, json_pack("{s:s, s:I, s:I, s:I, s:I}", "name", sc->name, "vcpus",
                                     (json_int_t)sc->vcpus, "memoryMiB", (json_int_t)sc->memory_mib,
                                     "chargeMiB", (json_int_t)(one.memory_bytes / MIB), "fits",
                                     fits == UINT_MAX ? (json_int_t)-1 : (json_int_t)fits));
        }
        return a;
}

json_t *agent_capacity_json(struct agent_daemon *d)
{
        struct core_capacity c;
        struct core_charge free_ = {0};

        agent_daemon_capacity(d, &c);
        free_.vcpus = c.allocatable.vcpus > c.used.vcpus ? c.allocatable.vcpus - c.used.vcpus : 0;
        free_.memory_bytes = c.allocatable.memory_bytes > c.used.memory_bytes
                                     ? c.allocatable.memory_bytes - c.used.memory_bytes
                                     : 0;
        return json_pack("{s:{s:I, s:I}, s:I, s:I, s:I, s:o, s:o, s:o, s:o}", "host", "cpus",
                         (json_int_t)d->node.host_cpus, "memoryMiB",
                         (json_int_t)(d->node.host_memory_bytes / MIB), "reserveMemoryMiB",
                         (json_int_t)(d->node.reserve_memory_bytes / MIB), "cpuOvercommitPercent",
                         (json_int_t)d->node.cpu_overcommit_percent, "qemuOverheadMiB",
                         (json_int_t)d->cfg->qemu_overhead_mib, "allocatable",
                         amounts_json(&c.allocatable, c.allocatable_sessions), "used",
                         amounts_json(&c.used, c.used_sessions), "free",
                         amounts_json(&free_, c.allocatable_sessions > c.used_sessions
                                                      ? c.allocatable_sessions - c.used_sessions
                                                      : 0),
                         "sizeClasses", classes_json(d, &c));
}
