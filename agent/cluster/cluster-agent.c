/* SPDX-License-Identifier: MIT */
/* forkletd in cluster mode: the etcd client, node registration (a leased P/nodes/NODE/lease
 * key plus the P/nodes/NODE/status document) and the thread that keeps the lease alive,
 * re-registers after it expired and rewrites the node status (heartbeat). */
#include "core/cluster/cluster.h"
#include "agent/cluster/cluster-internal.h"
#include "agent/api/api.h"
#include "etcd/etcd.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

bool cluster_sleep(struct cluster_agent *a, unsigned ms, bool wake)
{
        struct pollfd p[2] = {{.fd = a->quit_fd, .events = POLLIN},
                              {.fd = a->wake_fd, .events = POLLIN}};
        uint64_t v;

        (void)poll(p, wake ? 2 : 1, (int)ms);
        if (wake && (p[1].revents & POLLIN))
                (void)!read(a->wake_fd, &v, sizeof(v));
        return (p[0].revents & POLLIN) != 0;
}

/* Writes P/nodes/NODE/status (no lease: a NotReady node still shows what it was). */
static int publish_status(struct cluster_agent *a, struct fk_error *err)
{
        cleanup_free char *key = NULL, *text = NULL;
        struct core_cluster_node_report rep;
        json_t *j;

        agent_daemon_node_report(a->d, &rep);
        rep.api_pin = a->api_pin[0] ? a->api_pin : NULL;
        rep.host_id = a->host_id[0] ? a->host_id : NULL;
        j = core_cluster_node_status_json(a->cfg, &rep, fk_now_real_ns());
        text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text || core_cluster_node_key(a->prefix, a->node, "status", &key) < 0)
                return -ENOMEM;
        return etcd_put(a->etcd, key, text, strlen(text), 0, NULL, err);
}

/* Grants a lease and attaches P/nodes/NODE/lease to it. */
static int register_node(struct cluster_agent *a, int64_t *ret_lease, struct fk_error *err)
{
        cleanup_free char *key = NULL, *val = NULL;
        char now[64];
        int64_t lease;
        int r;

        r = etcd_lease_grant(a->etcd, a->o.lease_ttl_s, &lease, err);
        if (r < 0)
                return r;
        if (core_cluster_node_key(a->prefix, a->node, "lease", &key) < 0 ||
            fk_asprintf(&val, "{\"leaseID\":%" PRId64 ",\"since\":\"%s\"}", lease,
                        fk_format_rfc3339(fk_now_real_ns(), now, sizeof(now))) < 0)
                return -ENOMEM;
        r = etcd_put(a->etcd, key, val, strlen(val), lease, NULL, err);
        if (r < 0) {
                (void)etcd_lease_revoke(a->etcd, lease, NULL);
                return r;
        }
        *ret_lease = lease;
        return 0;
}

void *cluster_lease_thread(void *userdata)
{
        struct cluster_agent *a = userdata;
        uint64_t last_status = 0, hb_ns = (uint64_t)a->o.heartbeat_s * 1000000000ull;
        unsigned period_ms = a->o.lease_ttl_s * 1000 / 3;
        int64_t lease = 0;
        int last_err = 0;

        do {
                struct fk_error err = {0};
                int r;

                r = 0;
                if (lease != 0) {
                        r = etcd_lease_keepalive(a->etcd, lease, NULL, &err);
                        if (r == -ENOENT) {
                                log_warning("cluster: lease %" PRIx64 " expired; registering "
                                            "again",
                                            (uint64_t)lease);
                                lease = 0;
                        }
                }
                if (lease == 0) {
                        r = register_node(a, &lease, &err);
                        if (r >= 0)
                                log_info("cluster: node %s registered (lease %" PRIx64
                                         ", TTL %u s)",
                                         a->node, (uint64_t)lease, a->o.lease_ttl_s);
                }
                if (r >= 0 && (last_status == 0 || fk_now_mono_ns() - last_status >= hb_ns)) {
                        r = publish_status(a, &err);
                        if (r >= 0)
                                last_status = fk_now_mono_ns();
                }
                if (r < 0 && r != last_err)
                        log_warning_errno(r, "cluster: etcd: %s (retrying)", err.msg);
                else if (r >= 0 && last_err < 0)
                        log_info("cluster: etcd reachable again");
                last_err = r < 0 ? r : 0;
        } while (!cluster_sleep(a, last_err < 0 ? 500 : period_ms, false));
        return NULL;
}

static void agent_free(struct cluster_agent *a)
{
        if (a->quit_fd >= 0)
                close(a->quit_fd);
        if (a->wake_fd >= 0)
                close(a->wake_fd);
        etcd_watch_free(a->watch);
        cluster_entries_clear(a);
        etcd_client_free(a->etcd);
        pthread_mutex_destroy(&a->lock);
        free(a);
}

static void defaults(struct cluster_agent_options *o, const struct cluster_agent_options *in)
{
        if (in)
                *o = *in;
        if (!o->lease_ttl_s)
                o->lease_ttl_s = 10;
        if (!o->heartbeat_s)
                o->heartbeat_s = 5;
        if (!o->status_min_gap_ms)
                o->status_min_gap_ms = 1000;
}

int cluster_agent_start(struct agent_daemon *d, const struct node_config *cfg,
                        const struct cluster_agent_options *opts, struct cluster_agent **ret)
{
        const struct etcd_options eo = {.request_timeout_ms = 3000, .attempts = 2};
        struct cluster_agent *a = calloc(1, sizeof(*a));
        struct fk_error err = {0};
        int r;

        if (!a)
                return -ENOMEM;
        a->d = d;
        a->cfg = cfg;
        a->prefix = cfg->etcd_prefix;
        a->node = cfg->node_name;
        a->need_list = true;
        defaults(&a->o, opts);
        if (fk_host_id(a->host_id) < 0)
                a->host_id[0] = '\0';
        /* The pin of the certificate the TLS listener serves (read at start, as the API did). */
        if (cfg->api_url && cfg->api_tls_cert &&
            api_tls_pin_file(cfg->api_tls_cert, a->api_pin, sizeof(a->api_pin), &err) < 0)
                log_warning("cluster: api.tlsCert: %s (no pinnedPublicKey published)", err.msg);
        pthread_mutex_init(&a->lock, NULL);
        a->quit_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        a->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (a->quit_fd < 0 || a->wake_fd < 0) {
                r = -errno;
                agent_free(a);
                return log_error_errno(r, "cluster: eventfd: %m");
        }
        r = etcd_client_new((const char *const *)cfg->etcd, &eo, &a->etcd, &err);
        if (r < 0) {
                agent_free(a);
                return log_error_errno(r, "cluster: etcd client: %s", err.msg);
        }
        r = -pthread_create(&a->lease_thread, NULL, cluster_lease_thread, a);
        a->lease_started = r >= 0;
        if (r >= 0)
                r = -pthread_create(&a->sync_thread, NULL, cluster_sync_thread, a);
        a->sync_started = r >= 0;
        if (r < 0) {
                cluster_agent_stop(a);
                return log_error_errno(r, "cluster: start threads: %m");
        }
        log_info("cluster: node %s, etcd %s (+%zu more), prefix %s", a->node, cfg->etcd[0],
                 fk_strv_length(cfg->etcd) - 1, a->prefix);
        *ret = a;
        return 0;
}

struct cluster_agent *cluster_agent_stop(struct cluster_agent *a)
{
        uint64_t one = 1;

        if (!a)
                return NULL;
        (void)!write(a->quit_fd, &one, sizeof(one));
        if (a->lease_started)
                pthread_join(a->lease_thread, NULL);
        if (a->sync_started)
                pthread_join(a->sync_thread, NULL);
        agent_free(a);
        return NULL;
}
