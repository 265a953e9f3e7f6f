/* SPDX-License-Identifier: MIT */
/* The scheduler loop: list + resuming watch of the whole prefix into a sched_state, then on
 * every change place unplaced sessions (create-only CAS on P/sessions/NS/NAME/node, so two
 * schedulers never place one session twice), report Unschedulable, and mark the sessions of
 * nodes whose lease expired Lost. */
#include "core/cluster/cluster.h"
#include "etcd/etcd.h"
#include "scheduler/sched.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct run {
        const struct sched_options *o;
        struct etcd_client *etcd;
        struct etcd_watch *watch;
        pthread_mutex_t lock; /* st, need_list */
        struct sched_state st;
        bool need_list;
        int wake_fd;
        struct sched_stats stats;
};

static void watch_cb(enum etcd_event_type type, const struct etcd_kv *kv, int64_t revision,
                     void *userdata)
{
        struct run *r = userdata;
        uint64_t one = 1;

        (void)revision;
        pthread_mutex_lock(&r->lock);
        if (type == ETCD_EVENT_COMPACTED)
                r->need_list = true;
        else if (sched_state_apply(&r->st, kv->key, type == ETCD_EVENT_PUT ? kv->value : NULL,
                                   kv->create_revision) < 0)
                r->need_list = true; /* out of memory: start over */
        pthread_mutex_unlock(&r->lock);
        (void)!write(r->wake_fd, &one, sizeof(one));
}

static int relist(struct run *r, struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        struct etcd_kvs *kvs = NULL;
        int64_t rev = 0;
        int e;

        if (fk_asprintf(&dir, "%s/", r->o->prefix) < 0)
                return -ENOMEM;
        r->watch = etcd_watch_free(r->watch);
        e = etcd_range(r->etcd, dir, NULL, ETCD_PREFIX, &kvs, &rev, err);
        if (e < 0)
                return e;
        pthread_mutex_lock(&r->lock);
        sched_state_done(&r->st);
        e = sched_state_init(&r->st, r->o->prefix);
        for (size_t i = 0; e >= 0 && i < kvs->n; i++)
                e = sched_state_apply(&r->st, kvs->kvs[i].key, kvs->kvs[i].value,
                                      kvs->kvs[i].create_revision);
        r->need_list = e < 0;
        pthread_mutex_unlock(&r->lock);
        etcd_kvs_free(kvs);
        if (e < 0)
                return e;
        return etcd_watch_new(r->etcd, dir, ETCD_PREFIX, rev + 1, watch_cb, r, &r->watch, err);
}

/* Writes a status document for s unless it already says exactly that. Under lock. */
static int put_status(struct run *r, struct sched_session *s, json_t *st)
{
        cleanup_free char *text = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS), *key = NULL;
        struct fk_error err = {0};
        json_t *j;
        int e;

        json_decref(st);
        if (!text || core_cluster_session_key(r->o->prefix, s->ns, s->name, "status", &key) < 0)
                return -ENOMEM;
        if (s->status && !strcmp(s->status, text))
                return 0;
        e = etcd_put(r->etcd, key, text, strlen(text), 0, NULL, &err);
        if (e < 0)
                return log_warning_errno(e, "status of %s/%s: %s", s->ns, s->name, err.msg);
        /* Remember it now so the next pass does not write it again before the watch says. */
        j = json_loads(text, 0, NULL);
        free(s->status);
        free(s->phase);
        s->status = TAKE_PTR(text);
        s->phase = strdup(json_string_value(json_object_get(j, "phase")));
        json_decref(j);
        return 0;
}

static int cmp_rev(const void *a, const void *b)
{
        const struct sched_session *x = *(struct sched_session *const *)a;
        const struct sched_session *y = *(struct sched_session *const *)b;

        return x->spec_create_rev < y->spec_create_rev ? -1
                                                       : x->spec_create_rev > y->spec_create_rev;
}

/* Places s; under lock. <0 on an etcd error (stop this pass). */
static int place_one(struct run *r, struct sched_session *s)
{
        struct sched_request req = {s->size_class, s->selector, s->n_selector};
        cleanup_free char *key = NULL;
        struct fk_error err = {0};
        struct sched_node *n;
        char why[256];
        bool won = false;
        size_t idx;
        int e;

        e = sched_place(r->st.nodes, r->st.n_nodes, &req, r->o->policy, &idx, why, sizeof(why));
        if (e == -ENOSPC)
                return put_status(r, s,
                                  json_pack("{s:s, s:[{s:s, s:s, s:s, s:s}]}", "phase", "Pending",
                                            "conditions", "type", "Scheduled", "status", "False",
                                            "reason", "Unschedulable", "message", why));
        n = &r->st.nodes[idx];
        if (core_cluster_session_key(r->o->prefix, s->ns, s->name, "node", &key) < 0)
                return -ENOMEM;
        e = etcd_txn_cas(r->etcd, key, 0, n->name, strlen(n->name), 0, &won, NULL, &err);
        if (e < 0)
                return log_warning_errno(e, "place %s/%s: %s", s->ns, s->name, err.msg);
        if (!won) {
                struct etcd_kvs *kvs = NULL;

                r->stats.lost_races++;
                log_debug("%s/%s: already placed by another scheduler", s->ns, s->name);
                e = etcd_range(r->etcd, key, NULL, 0, &kvs, NULL, &err);
                if (e >= 0 && kvs->n == 1)
                        (void)sched_state_apply(&r->st, key, kvs->kvs[0].value, 0);
                etcd_kvs_free(kvs);
                return e < 0 ? e : 0;
        }
        r->stats.placed++;
        log_info("%s/%s: placed on %s (%s, class %s)", s->ns, s->name, n->name,
                 sched_policy_to_string(r->o->policy), s->size_class);
        return sched_state_apply(&r->st, key, n->name, 0);
}

static int mark_lost(struct run *r, struct sched_session *s)
{
        char msg[256];

        snprintf(msg, sizeof(msg),
                 "node %s lost its lease; the session's memory state cannot move to another node",
                 s->node);
        if (s->phase && !strcmp(s->phase, "Lost"))
                return 0;
        r->stats.lost++;
        log_info("%s/%s: Lost (node %s is NotReady)", s->ns, s->name, s->node);
        return put_status(r, s,
                          json_pack("{s:s, s:s, s:[{s:s, s:s, s:s, s:s}]}", "phase", "Lost",
                                    "nodeName", s->node, "conditions", "type", "Ready", "status",
                                    "False", "reason", "NodeNotReady", "message", msg));
}

/* One pass over the state; under lock. */
static int schedule_pass(struct run *r)
{
        cleanup_free struct sched_session **todo = NULL;
        size_t n = 0;
        int e = 0;

        sched_state_account(&r->st);
        for (size_t i = 0; i < r->st.n_sessions && e >= 0; i++) {
                struct sched_session *s = &r->st.sessions[i];
                struct sched_node *node = s->node ? sched_state_node(&r->st, s->node) : NULL;

                if (node && node->has_status && !node->ready && s->has_spec)
                        e = mark_lost(r, s);
        }
        todo = calloc(r->st.n_sessions + 1, sizeof(*todo));
        if (!todo)
                return -ENOMEM;
        for (size_t i = 0; i < r->st.n_sessions; i++)
                if (r->st.sessions[i].has_spec && !r->st.sessions[i].node)
                        todo[n++] = &r->st.sessions[i];
        qsort(todo, n, sizeof(*todo), cmp_rev);
        /* place_one never adds or removes sessions, so the pointers stay valid. */
        for (size_t i = 0; i < n && e >= 0; i++) {
                e = place_one(r, todo[i]);
                sched_state_account(&r->st);
        }
        return e;
}

static bool sleep_wake(struct run *r, const volatile bool *stop, unsigned ms)
{
        struct pollfd p = {.fd = r->wake_fd, .events = POLLIN};
        uint64_t v;

        for (unsigned left = ms; left > 0 && !*stop; left -= left > 250 ? 250 : left)
                if (poll(&p, 1, left > 250 ? 250 : (int)left) > 0) {
                        (void)!read(r->wake_fd, &v, sizeof(v));
                        break;
                }
        return *stop;
}

static void run_loop(struct run *r, const volatile bool *stop)
{
        int last_err = 0;

        do {
                struct fk_error err = {0};
                bool list;
                int e;

                pthread_mutex_lock(&r->lock);
                list = r->need_list;
                pthread_mutex_unlock(&r->lock);
                if (list) {
                        e = relist(r, &err);
                        if (e < 0) {
                                if (e != last_err)
                                        log_warning_errno(e, "list %s/: %s (retrying)",
                                                          r->o->prefix, err.msg);
                                pthread_mutex_lock(&r->lock);
                                r->need_list = true;
                                pthread_mutex_unlock(&r->lock);
                                last_err = e;
                                continue;
                        }
                        log_info("watching %s/ (%zu nodes, %zu sessions)", r->o->prefix,
                                 r->st.n_nodes, r->st.n_sessions);
                }
                pthread_mutex_lock(&r->lock);
                e = schedule_pass(r);
                pthread_mutex_unlock(&r->lock);
                last_err = e < 0 ? e : 0;
        } while (!sleep_wake(r, stop, 1000));
}

int sched_run(const struct sched_options *o, const volatile bool *stop, struct sched_stats *ret)
{
        const struct etcd_options eo = {.request_timeout_ms = 3000, .attempts = 2};
        struct fk_error err = {0};
        struct run r = {.o = o, .need_list = true, .wake_fd = -1};
        int e;

        e = sched_state_init(&r.st, o->prefix);
        if (e < 0)
                return e;
        pthread_mutex_init(&r.lock, NULL);
        r.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        e = r.wake_fd < 0 ? -errno : etcd_client_new(o->endpoints, &eo, &r.etcd, &err);
        if (e < 0)
                log_error_errno(e, "etcd: %s", err.msg[0] ? err.msg : "eventfd failed");
        else {
                log_info("scheduler %s: policy %s, prefix %s, etcd %s", o->id,
                         sched_policy_to_string(o->policy), o->prefix, o->endpoints[0]);
                run_loop(&r, stop);
        }
        etcd_watch_free(r.watch);
        etcd_client_free(r.etcd);
        if (r.wake_fd >= 0)
                close(r.wake_fd);
        sched_state_done(&r.st);
        pthread_mutex_destroy(&r.lock);
        if (ret)
                *ret = r.stats;
        return e;
}
