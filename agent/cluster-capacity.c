/* SPDX-License-Identifier: MIT */
/* Node capacity for cluster mode (node config + host memory and CPUs) and the node status
 * document the agent publishes and the scheduler reads. */
#include "agent/cluster.h"
#include "cgroups/cgroups.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>

int cluster_node_capacity(const struct node_config *cfg, const char *meminfo_path,
                          struct cluster_capacity *ret)
{
        struct cg_capacity cg = {0};
        struct fk_error err = {0};
        uint64_t total_mib;
        int r;

        r = cg_node_capacity(meminfo_path, &cg, &err);
        if (r < 0)
                return r;
        total_mib = cg.memory_bytes >> 20;
        *ret = (struct cluster_capacity){
                .sessions = cfg->max_sessions,
                .memory_mib = total_mib > cfg->reserve_memory_mib
                                      ? total_mib - cfg->reserve_memory_mib
                                      : 0,
                .cpus = cg.cpus,
        };
        return 0;
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

/* {"small": {"vcpus", "memoryMiB", "sessions": how many fit in (sessions, memory)}}. */
static json_t *classes_json(const struct node_config *cfg, unsigned sessions, uint64_t memory_mib)
{
        json_t *o = json_object();

        for (size_t i = 0; o && i < cfg->n_size_classes; i++) {
                const struct size_class *c = &cfg->size_classes[i];
                uint64_t fit = c->memory_mib ? memory_mib / c->memory_mib : 0;

                if (fit > sessions)
                        fit = sessions;
                if (json_object_set_new(o, c->name,
                                        json_pack("{s:i, s:i, s:I}", "vcpus", (int)c->vcpus,
                                                  "memoryMiB", (int)c->memory_mib, "sessions",
                                                  (json_int_t)fit)) < 0) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

json_t *cluster_node_status_json(const struct node_config *cfg, const struct cluster_capacity *cap,
                                 const struct cluster_usage *use, uint64_t now_real_ns)
{
        unsigned free_sessions = cap->sessions > use->sessions ? cap->sessions - use->sessions : 0;
        uint64_t free_mem =
                cap->memory_mib > use->memory_mib ? cap->memory_mib - use->memory_mib : 0;
        char now[64];

        fk_format_rfc3339(now_real_ns, now, sizeof(now));
        return json_pack("{s:s, s:o, s:{s:s, s:s?}, s:{s:i, s:I, s:i, s:o}, s:{s:i, s:I, s:o},"
                         " s:{s:i, s:I, s:i, s:I}, s:s}",
                         "nodeName", cfg->node_name, "labels", labels_json(cfg), "api", "socket",
                         cfg->api_socket, "listen", cfg->api_listen, "capacity", "sessions",
                         (int)cap->sessions, "memoryMiB", (json_int_t)cap->memory_mib, "cpus",
                         (int)cap->cpus, "sizeClasses",
                         classes_json(cfg, cap->sessions, cap->memory_mib), "allocatable",
                         "sessions", (int)free_sessions, "memoryMiB", (json_int_t)free_mem,
                         "sizeClasses", classes_json(cfg, free_sessions, free_mem), "usage",
                         "sessions", (int)use->sessions, "memoryMiB", (json_int_t)use->memory_mib,
                         "localSessions", (int)use->local_sessions, "localMemoryMiB",
                         (json_int_t)use->local_memory_mib, "heartbeatTime", now);
}
