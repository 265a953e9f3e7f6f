/* SPDX-License-Identifier: MIT */
/* Inside forkletd's cluster mode only: the agent state shared by the lease thread
 * (cluster-agent.c) and the session sync thread (cluster-sync.c). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "core/cluster/cluster.h"
#include "agent/cluster/cluster.h"
#include "agent/daemon/daemon.h"
#include "common/util.h"

struct etcd_client;
struct etcd_watch;

/* One session under P/sessions/NS/NAME/ as last seen through the watch. */
struct cluster_entry {
        char ns[CORE_CLUSTER_NAME_MAX];
        char name[CORE_CLUSTER_NAME_MAX];
        char *spec;          /* owned JSON text or NULL */
        char *node;          /* owned node name or NULL (unplaced) */
        char *written;       /* owned: the status text we last wrote, NULL: write again */
        int64_t written_rev; /* revision of that write */
        uint64_t written_mono_ns;
        char *problem;            /* owned: why the assigned manifest is not run here, or NULL */
        int64_t node_rev;         /* mod_revision of the node key, 0: none */
        uint64_t waiting_mono_ns; /* since when admission keeps it Pending here, 0: not */
};

struct cluster_agent {
        struct agent_daemon *d;        /* borrowed */
        const struct node_config *cfg; /* borrowed */
        struct cluster_agent_options o;
        struct etcd_client *etcd;
        const char *prefix;            /* borrowed from cfg */
        const char *node;              /* borrowed from cfg */
        char api_pin[64];              /* api.tlsCert's public-key pin, "" without TLS */
        char host_id[FK_HOST_ID_SIZE]; /* "" when unknown */
        int quit_fd;                   /* eventfd, readable once stopping (never drained) */
        int wake_fd;                   /* eventfd, wakes the sync thread */
        pthread_t lease_thread, sync_thread;
        bool lease_started, sync_started;
        /* sync state, under lock */
        pthread_mutex_t lock;
        struct cluster_entry *entries; /* owned array */
        size_t n_entries, alloc_entries;
        bool dirty;               /* desired state may have changed */
        bool need_list;           /* (re)list and (re)start the watch */
        struct etcd_watch *watch; /* owned by the sync thread */
};

/* Lease thread body (cluster-agent.c). */
void *cluster_lease_thread(void *userdata);
/* Sync thread body (cluster-sync.c). */
void *cluster_sync_thread(void *userdata);
/* Sleeps up to ms or until stopping (or, with wake, woken); returns true when stopping. */
bool cluster_sleep(struct cluster_agent *a, unsigned ms, bool wake);
/* Frees every entry (under lock or single-threaded). */
void cluster_entries_clear(struct cluster_agent *a);
