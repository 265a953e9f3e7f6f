/* SPDX-License-Identifier: MIT */
/* What cluster mode does to the session table: replace the set of control-plane sessions
 * (name clashes with local sessions reported, never overridden), and read their status and the
 * node's usage. The etcd side lives in cluster-*.c. */
#include "core/cluster/cluster.h"
#include "agent/daemon/daemon-internal.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Creates or updates the cluster session for m (taken on success). */
static int sync_one(struct agent_daemon *d, struct session_manifest *m, bool *ret_conflict)
{
        struct agent_session *s = agent_daemon_find(d, m->namespace, m->name);
        struct session_manifest *old;
        struct fk_error err = {0};
        bool created = false;
        int r;

        *ret_conflict = false;
        if (s && !s->spec && s->busy)
                return -EBUSY; /* being torn down: picked up again on a later pass */
        if (s && s->source != AGENT_SOURCE_CLUSTER && s->spec) {
                *ret_conflict = true; /* a local session owns the name */
                return 0;
        }
        /* Left: our own session, or an adopted VM without a manifest (re-claimed). */
        if (s && !s->spec && !s->vm)
                return -EBUSY;
        if (!s) {
                s = agent_session_new(m->namespace, m->name);
                r = s ? agent_daemon_insert(d, s) : -ENOMEM;
                if (r < 0) {
                        agent_session_free(s);
                        return r;
                }
                created = true;
        }
        s->source = AGENT_SOURCE_CLUSTER;
        s->deleted_ns = 0;
        s->cancel = false;
        if (s->spec && session_manifest_equal(s->spec, m)) {
                session_manifest_free(m);
                return 0;
        }
        old = s->spec;
        s->spec = m;
        s->generation++;
        r = agent_store_save(d->store, s, &err);
        if (r < 0) { /* nothing runs that is not stored: tried again on the next sync */
                log_error("session %s: %s", s->key, err.msg);
                s->spec = old;
                s->generation--;
                if (created)
                        agent_daemon_remove(d, s);
                return -EBUSY; /* logged: tried again on the next sync */
        }
        session_manifest_free(old);
        log_info("session %s: %s by the control plane (generation %" PRIu64 ")", s->key,
                 created ? "assigned" : "updated", s->generation);
        return 0;
}

static bool wanted(struct session_manifest **v, size_t n, const struct agent_session *s)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] && !strcmp(v[i]->namespace, s->namespace) && !strcmp(v[i]->name, s->name))
                        return true;
        return false;
}

int agent_daemon_sync_cluster(struct agent_daemon *d, struct session_manifest **v, size_t n,
                              bool *ret_conflict)
{
        pthread_mutex_lock(&d->lock);
        /* Deletions first, judged on the full list (v entries become NULL once consumed). */
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];

                if (s->source != AGENT_SOURCE_CLUSTER || !s->spec || wanted(v, n, s))
                        continue;
                struct fk_error err = {0};

                if (agent_daemon_mark_deleted(d, s, &err) >= 0)
                        log_info("session %s: no longer assigned to this node; deleting", s->key);
                else
                        log_error("session %s: not deleted: %s", s->key, err.msg);
        }
        for (size_t i = 0; i < n; i++) {
                int r = sync_one(d, v[i], &ret_conflict[i]);

                if (r >= 0 && !ret_conflict[i])
                        v[i] = NULL; /* consumed */
                else if (r < 0 && r != -EBUSY)
                        log_warning_errno(r, "session %s/%s: %m", v[i]->namespace, v[i]->name);
        }
        pthread_mutex_unlock(&d->lock);
        agent_daemon_wake(d);
        return 0;
}

int agent_daemon_cluster_status(struct agent_daemon *d, json_t **ret)
{
        json_t *o = json_object();
        int r = 0;

        if (!o)
                return -ENOMEM;
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < d->n_sessions && r >= 0; i++) {
                struct agent_session *s = d->sessions[i];
                char key[2 * CORE_CLUSTER_NAME_MAX + 2];

                if (s->source != AGENT_SOURCE_CLUSTER || !s->spec)
                        continue;
                snprintf(key, sizeof(key), "%s/%s", s->namespace, s->name);
                if (json_object_set_new(o, key, agent_session_status_json(s, d->accel)) < 0)
                        r = -ENOMEM;
        }
        pthread_mutex_unlock(&d->lock);
        if (r < 0) {
                json_decref(o);
                return r;
        }
        *ret = o;
        return 0;
}

static void usage_of(struct agent_daemon *d, struct core_cluster_usage *ret)
{
        struct core_cluster_usage u = {0};

        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                const struct size_class *c;

                if (!s->spec && !s->vm)
                        continue;
                c = s->spec ? node_config_find_size_class(d->cfg, s->spec->size_class) : NULL;
                u.sessions++;
                u.memory_mib += c ? c->memory_mib : 0;
                if (s->source != AGENT_SOURCE_CLUSTER) {
                        u.local_sessions++;
                        u.local_memory_mib += c ? c->memory_mib : 0;
                }
        }
        *ret = u;
}

void agent_daemon_node_report(struct agent_daemon *d, struct core_cluster_node_report *ret)
{
        *ret = (struct core_cluster_node_report){0}; /* api_pin, host_id: the cluster agent's */
        pthread_mutex_lock(&d->lock);
        ret->node = d->node;
        agent_daemon_capacity(d, &ret->all);
        agent_daemon_capacity_local(d, &ret->local);
        usage_of(d, &ret->use);
        pthread_mutex_unlock(&d->lock);
}

bool agent_daemon_cluster_unadmitted(struct agent_daemon *d, const char *ns, const char *name)
{
        struct agent_session *s;
        bool r;

        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        /* last_short: admission's reason while it refuses; res.vcpus: set by a boot; a
         * rollback or snapshot restore needs this node's state */
        r = s && s->source == AGENT_SOURCE_CLUSTER && s->spec && !s->vm && !s->busy &&
            s->phase == SESSION_PHASE_PENDING && s->res.last_short[0] && !s->res.vcpus &&
            !s->rollback_to && !s->from_snapshot;
        pthread_mutex_unlock(&d->lock);
        return r;
}
