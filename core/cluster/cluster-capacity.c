/* SPDX-License-Identifier: MIT */
/* The node status document the agent publishes and the scheduler reads: admission's own
 * capacity (core/capacity.c), per size class the charge admission makes and how many fit. */
#include "core/cluster/cluster.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>

#define MIB ((uint64_t)1024 * 1024)

static json_int_t mib_floor(uint64_t bytes)
{
        return (json_int_t)(bytes / MIB);
}

/* Used amounts in MiB are rounded up: a scheduler adding them never sees more room than there
 * is (the *Bytes fields are exact). */
static json_int_t mib_ceil(uint64_t bytes)
{
        return (json_int_t)(bytes / MIB + (bytes % MIB != 0));
}

static json_t *labels_json(const struct node_config *cfg)
{
        json_t *o = json_object();

        for (size_t i = 0; o && i < cfg->n_labels; i++)
                if (json_object_set_new(o, cfg->labels[i].key, json_string(cfg->labels[i].value)) <
                    0) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

/* {"small": {"vcpus", "memoryMiB", "chargeMiB", "forkChargeMiB", "sessions": how many more fit
 * in c by core_capacity_fits}}. */
static json_t *classes_json(const struct node_config *cfg, const struct core_capacity *c)
{
        json_t *o = json_object();

        for (size_t i = 0; o && i < cfg->n_size_classes; i++) {
                const struct size_class *sc = &cfg->size_classes[i];
                struct core_charge one = core_class_charge(cfg, sc, false, 0),
                                   fork = core_class_charge(cfg, sc, true, 0);
                unsigned fit = core_capacity_fits(c, &one);

                if (json_object_set_new(
                            o, sc->name,
                            json_pack("{s:i, s:i, s:I, s:I, s:I}", "vcpus", (int)sc->vcpus,
                                      "memoryMiB", (int)sc->memory_mib, "chargeMiB",
                                      mib_ceil(one.memory_bytes), "forkChargeMiB",
                                      mib_ceil(fork.memory_bytes), "sessions",
                                      fit == UINT_MAX ? (json_int_t)-1 : (json_int_t)fit)) < 0) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

static uint64_t room(uint64_t total, uint64_t used)
{
        return total > used ? total - used : 0;
}

static json_t *capacity_json(const struct node_config *cfg,
                             const struct core_cluster_node_report *rep)
{
        const struct core_capacity *a = &rep->all;
        struct core_capacity empty = {.allocatable = a->allocatable,
                                      .allocatable_sessions = a->allocatable_sessions};

        return json_pack(
                "{s:i, s:I, s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:o}", "sessions",
                (int)a->allocatable_sessions, "memoryMiB", mib_floor(a->allocatable.memory_bytes),
                "memoryBytes", (json_int_t)a->allocatable.memory_bytes, "cpus",
                (int)rep->node.host_cpus, "vcpus", (json_int_t)a->allocatable.vcpus,
                "reserveMemoryMiB", mib_floor(rep->node.reserve_memory_bytes),
                "cpuOvercommitPercent", (json_int_t)rep->node.cpu_overcommit_percent,
                "qemuOverheadMiB", (json_int_t)cfg->qemu_overhead_mib, "forkMemoryPercent",
                (json_int_t)cfg->fork_memory_percent, "sizeClasses", classes_json(cfg, &empty));
}

static json_t *allocatable_json(const struct node_config *cfg, const struct core_capacity *a)
{
        uint64_t mem = room(a->allocatable.memory_bytes, a->used.memory_bytes);

        return json_pack("{s:I, s:I, s:I, s:I, s:o}", "sessions",
                         (json_int_t)room(a->allocatable_sessions, a->used_sessions), "memoryMiB",
                         mib_floor(mem), "memoryBytes", (json_int_t)mem, "vcpus",
                         (json_int_t)room(a->allocatable.vcpus, a->used.vcpus), "sizeClasses",
                         classes_json(cfg, a));
}

static json_t *usage_json(const struct core_cluster_node_report *rep)
{
        const struct core_cluster_usage *u = &rep->use;

        return json_pack("{s:i, s:I, s:i, s:I, s:i, s:I, s:I, s:i, s:i, s:I, s:I, s:i}", "sessions",
                         (int)u->sessions, "memoryMiB", (json_int_t)u->memory_mib, "localSessions",
                         (int)u->local_sessions, "localMemoryMiB", (json_int_t)u->local_memory_mib,
                         "admittedSessions", (int)rep->all.used_sessions, "chargedMiB",
                         mib_ceil(rep->all.used.memory_bytes), "chargedBytes",
                         (json_int_t)rep->all.used.memory_bytes, "vcpus", (int)rep->all.used.vcpus,
                         "localAdmittedSessions", (int)rep->local.used_sessions, "localChargedMiB",
                         mib_ceil(rep->local.used.memory_bytes), "localChargedBytes",
                         (json_int_t)rep->local.used.memory_bytes, "localVcpus",
                         (int)rep->local.used.vcpus);
}

static json_t *api_json(const struct node_config *cfg, const struct core_cluster_node_report *rep)
{
        return json_pack("{s:s, s:s?, s:s*, s:s*, s:s*}", "socket", cfg->api_socket, "listen",
                         cfg->api_listen, "url", cfg->api_url, "pinnedPublicKey",
                         cfg->api_url ? rep->api_pin : NULL, "hostID", rep->host_id);
}

json_t *core_cluster_node_status_json(const struct node_config *cfg,
                                      const struct core_cluster_node_report *rep,
                                      uint64_t now_real_ns)
{
        char now[64];

        fk_format_rfc3339(now_real_ns, now, sizeof(now));
        return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:s}", "nodeName", cfg->node_name,
                         "labels", labels_json(cfg), "api", api_json(cfg, rep), "capacity",
                         capacity_json(cfg, rep), "allocatable", allocatable_json(cfg, &rep->all),
                         "usage", usage_json(rep), "heartbeatTime", now);
}
