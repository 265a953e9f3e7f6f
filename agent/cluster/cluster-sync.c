/* SPDX-License-Identifier: MIT */
/* forkletd in cluster mode: mirrors P/sessions/ through a resuming watch, hands the manifests
 * placed on this node to the daemon (name clashes and invalid manifests become a Failed
 * status) and writes each session's status back when it changed, at most once per gap. */
#include "core/cluster/cluster.h"
#include "agent/cluster/cluster-internal.h"
#include "etcd/etcd.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void entry_done(struct cluster_entry *e)
{
        free(e->spec);
        free(e->node);
        free(e->written);
        free(e->problem);
}

void cluster_entries_clear(struct cluster_agent *a)
{
        for (size_t i = 0; i < a->n_entries; i++)
                entry_done(&a->entries[i]);
        free(a->entries);
        a->entries = NULL;
        a->n_entries = a->alloc_entries = 0;
}

static struct cluster_entry *entry_get(struct cluster_agent *a, const char *ns, const char *name,
                                       bool create)
{
        struct cluster_entry *p;

        for (size_t i = 0; i < a->n_entries; i++)
                if (!strcmp(a->entries[i].ns, ns) && !strcmp(a->entries[i].name, name))
                        return &a->entries[i];
        if (!create)
                return NULL;
        if (a->n_entries == a->alloc_entries) {
                size_t n = a->alloc_entries ? a->alloc_entries * 2 : 32;

                p = realloc(a->entries, n * sizeof(*p));
                if (!p)
                        return NULL;
                a->entries = p;
                a->alloc_entries = n;
        }
        p = &a->entries[a->n_entries++];
        *p = (struct cluster_entry){0};
        snprintf(p->ns, sizeof(p->ns), "%s", ns);
        snprintf(p->name, sizeof(p->name), "%s", name);
        return p;
}

static bool mine(const struct cluster_agent *a, const char *node)
{
        return node && strcmp(node, a->node) == 0;
}

/* Sets *field to a copy of value (NULL: clear); returns whether it changed. */
static bool set_text(char **field, const char *value)
{
        char *v;

        if ((!*field && !value) || (*field && value && !strcmp(*field, value)))
                return false;
        v = value ? strdup(value) : NULL;
        if (value && !v)
                return false;
        free(*field);
        *field = v;
        return true;
}

/* Applies one key (PUT value or DELETE: value NULL) to the cache; under lock. */
static void apply_kv(struct cluster_agent *a, const char *key, const char *value, int64_t rev)
{
        struct core_cluster_key k;
        struct cluster_entry *e;

        core_cluster_key_parse(a->prefix, key, &k);
        if (k.kind != CORE_CLUSTER_KEY_SESSION_SPEC && k.kind != CORE_CLUSTER_KEY_SESSION_NODE &&
            k.kind != CORE_CLUSTER_KEY_SESSION_STATUS)
                return;
        e = entry_get(a, k.ns, k.name, value != NULL);
        if (!e)
                return;
        if (k.kind == CORE_CLUSTER_KEY_SESSION_SPEC) {
                if (set_text(&e->spec, value) && mine(a, e->node))
                        a->dirty = true;
        } else if (k.kind == CORE_CLUSTER_KEY_SESSION_NODE) {
                bool was = mine(a, e->node);

                e->node_rev = value ? rev : 0;
                if (set_text(&e->node, value) && (was || mine(a, e->node))) {
                        a->dirty = true;
                        e->waiting_mono_ns = 0;
                }
        } else if (e->written && rev > e->written_rev &&
                   (!value || strcmp(value, e->written) != 0)) {
                /* Someone else wrote our session's status (the scheduler marked it Lost while
                 * we were away): write ours again. */
                e->written = (free(e->written), NULL);
        }
}

static void watch_cb(enum etcd_event_type type, const struct etcd_kv *kv, int64_t revision,
                     void *userdata)
{
        struct cluster_agent *a = userdata;
        uint64_t one = 1;

        pthread_mutex_lock(&a->lock);
        if (type == ETCD_EVENT_COMPACTED)
                a->need_list = true;
        else
                apply_kv(a, kv->key, type == ETCD_EVENT_PUT ? kv->value : NULL, revision);
        pthread_mutex_unlock(&a->lock);
        (void)!write(a->wake_fd, &one, sizeof(one));
}

/* Lists P/sessions/ into a fresh cache (keeping what we wrote) and restarts the watch. */
static int relist(struct cluster_agent *a, struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        struct etcd_kvs *kvs = NULL;
        struct cluster_entry *old;
        size_t n_old;
        int64_t rev = 0;
        int r;

        if (fk_asprintf(&dir, "%s/sessions/", a->prefix) < 0)
                return -ENOMEM;
        a->watch = etcd_watch_free(a->watch);
        r = etcd_range(a->etcd, dir, NULL, ETCD_PREFIX, &kvs, &rev, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&a->lock);
        old = a->entries;
        n_old = a->n_entries;
        a->entries = NULL;
        a->n_entries = a->alloc_entries = 0;
        for (size_t i = 0; i < kvs->n; i++)
                apply_kv(a, kvs->kvs[i].key, kvs->kvs[i].value, kvs->kvs[i].mod_revision);
        for (size_t i = 0; i < n_old; i++) {
                struct cluster_entry *e = entry_get(a, old[i].ns, old[i].name, false);

                if (e && !e->written)
                        e->written = TAKE_PTR(old[i].written), e->written_rev = old[i].written_rev;
                entry_done(&old[i]);
        }
        free(old);
        a->dirty = true;
        a->need_list = false;
        pthread_mutex_unlock(&a->lock);
        etcd_kvs_free(kvs);
        return etcd_watch_new(a->etcd, dir, ETCD_PREFIX, rev + 1, watch_cb, a, &a->watch, err);
}

/* Parses the entries placed here; returns manifests (NULL where invalid, problem set). */
static int desired(struct cluster_agent *a, struct session_manifest ***ret, size_t **ret_idx,
                   size_t *ret_n)
{
        struct session_manifest **v = calloc(a->n_entries + 1, sizeof(*v));
        size_t *idx = calloc(a->n_entries + 1, sizeof(*idx)), n = 0;

        if (!v || !idx) {
                free(v);
                free(idx);
                return -ENOMEM;
        }
        for (size_t i = 0; i < a->n_entries; i++) {
                struct cluster_entry *e = &a->entries[i];
                struct manifest_diag diag = {0};
                json_t *j;

                e->problem = (free(e->problem), NULL);
                if (!mine(a, e->node) || !e->spec)
                        continue;
                j = json_loads(e->spec, 0, NULL);
                if (!j || session_manifest_from_json(j, a->cfg, &v[n], &diag) < 0)
                        (void)fk_asprintf(&e->problem, "InvalidManifest: %s",
                                          diag.n ? diag.messages[0] : "not a Session JSON");
                else if (strcmp(v[n]->namespace, e->ns) || strcmp(v[n]->name, e->name)) {
                        (void)fk_asprintf(&e->problem, "InvalidManifest: key %s/%s holds %s/%s",
                                          e->ns, e->name, v[n]->namespace, v[n]->name);
                        v[n] = session_manifest_free(v[n]);
                } else
                        idx[n++] = i;
                manifest_diag_done(&diag);
                json_decref(j);
        }
        *ret = v;
        *ret_idx = idx;
        *ret_n = n;
        return 0;
}

static int sync_desired(struct cluster_agent *a)
{
        struct session_manifest **v = NULL;
        size_t *idx = NULL, n = 0;
        bool *conflict;
        int r;

        pthread_mutex_lock(&a->lock);
        a->dirty = false;
        r = desired(a, &v, &idx, &n);
        pthread_mutex_unlock(&a->lock);
        if (r < 0)
                return r;
        conflict = calloc(n + 1, sizeof(*conflict));
        r = conflict ? agent_daemon_sync_cluster(a->d, v, n, conflict) : -ENOMEM;
        pthread_mutex_lock(&a->lock);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                struct cluster_entry *e = &a->entries[idx[i]];

                if (conflict[i] && !e->problem)
                        (void)fk_asprintf(&e->problem,
                                          "NameConflict: a local session (manifest dir or API) "
                                          "on node %s already uses the name %s/%s",
                                          a->node, e->ns, e->name);
                if (v[i] && !conflict[i])
                        a->dirty = true; /* busy being torn down: try again */
        }
        pthread_mutex_unlock(&a->lock);
        for (size_t i = 0; i < n; i++)
                session_manifest_free(v[i]);
        free(v);
        free(idx);
        free(conflict);
        return r;
}

/* The status text of entry e (NULL when there is nothing to write yet). */
static char *status_text(struct cluster_agent *a, const struct cluster_entry *e, json_t *all)
{
        char key[2 * CORE_CLUSTER_NAME_MAX + 2];
        const char *colon;
        json_t *st;
        char *text;

        if (e->problem) {
                colon = strchr(e->problem, ':');
                st = json_pack("{s:s, s:[{s:s, s:s, s:s%, s:s}]}", "phase", "Failed", "conditions",
                               "type", "Ready", "status", "False", "reason", e->problem,
                               colon ? (size_t)(colon - e->problem) : (size_t)0, "message",
                               colon ? colon + 2 : e->problem);
        } else {
                snprintf(key, sizeof(key), "%s/%s", e->ns, e->name);
                st = json_incref(json_object_get(all, key)); /* all is ours to modify */
                if (!st)
                        return NULL;
        }
        if (!st || json_object_set_new(st, "nodeName", json_string(a->node)) < 0) {
                json_decref(st);
                return NULL;
        }
        text = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(st);
        return text;
}

/* Writes changed statuses of this node's sessions, each at most once per gap. */
static void write_statuses(struct cluster_agent *a)
{
        uint64_t now = fk_now_mono_ns(), gap = (uint64_t)a->o.status_min_gap_ms * 1000000;
        json_t *all = NULL;

        if (agent_daemon_cluster_status(a->d, &all) < 0)
                return;
        pthread_mutex_lock(&a->lock);
        for (size_t i = 0; i < a->n_entries; i++) {
                struct cluster_entry *e = &a->entries[i];
                cleanup_free char *text = NULL, *key = NULL;
                struct fk_error err = {0};
                int64_t rev = 0;
                int r;

                if (!mine(a, e->node) || !e->spec || (e->written && now - e->written_mono_ns < gap))
                        continue;
                text = status_text(a, e, all);
                if (!text || (e->written && !strcmp(text, e->written)) ||
                    core_cluster_session_key(a->prefix, e->ns, e->name, "status", &key) < 0)
                        continue;
                /* The lock keeps e valid; a put is one short request. */
                r = etcd_put(a->etcd, key, text, strlen(text), 0, &rev, &err);
                if (r < 0) {
                        log_debug_errno(r, "cluster: status of %s/%s: %s", e->ns, e->name, err.msg);
                        break;
                }
                free(e->written);
                e->written = TAKE_PTR(text);
                e->written_rev = rev;
                e->written_mono_ns = now;
        }
        pthread_mutex_unlock(&a->lock);
        json_decref(all);
}

struct waiting {
        char ns[CORE_CLUSTER_NAME_MAX], name[CORE_CLUSTER_NAME_MAX];
};

/* Whether e waited for room longer than the grace (updates its clock); under lock. */
static bool release_due(struct cluster_agent *a, struct cluster_entry *e, bool waiting,
                        uint64_t now)
{
        if (!waiting || !mine(a, e->node) || e->node_rev <= 0) {
                e->waiting_mono_ns = 0;
                return false;
        }
        if (!e->waiting_mono_ns)
                e->waiting_mono_ns = now;
        return now - e->waiting_mono_ns >= (uint64_t)a->cfg->release_pending_s * 1000000000ull;
}

/* Hands a session back to the scheduler: deletes its node key if it still is the placement
 * seen (a scheduler racing another, or with a stale view, placed it where admission refuses). */
static void release_one(struct cluster_agent *a, const struct waiting *w, int64_t rev)
{
        cleanup_free char *key = NULL;
        struct fk_error err = {0};
        bool done = false;
        int r;

        if (core_cluster_session_key(a->prefix, w->ns, w->name, "node", &key) < 0)
                return;
        r = etcd_txn_delete(a->etcd, key, rev, &done, &err);
        if (r < 0)
                log_warning_errno(r, "cluster: release %s/%s: %s", w->ns, w->name, err.msg);
        else if (done)
                log_info("session %s/%s: admission kept it Pending for %u s; placement released "
                         "for the scheduler to place it again",
                         w->ns, w->name, a->cfg->release_pending_s);
}

/* Sessions placed here that admission keeps Pending past controlPlane.releasePendingAfterSeconds
 * (and that never booted here) are released. */
static void release_waiting(struct cluster_agent *a)
{
        uint64_t now = fk_now_mono_ns();
        cleanup_free struct waiting *v = NULL;
        size_t n = 0;

        if (!a->cfg->release_pending_s)
                return;
        pthread_mutex_lock(&a->lock);
        v = calloc(a->n_entries + 1, sizeof(*v));
        for (size_t i = 0; v && i < a->n_entries; i++)
                if (mine(a, a->entries[i].node) && a->entries[i].spec && !a->entries[i].problem) {
                        snprintf(v[n].ns, sizeof(v[n].ns), "%s", a->entries[i].ns);
                        snprintf(v[n].name, sizeof(v[n].name), "%s", a->entries[i].name);
                        n++;
                }
        pthread_mutex_unlock(&a->lock);
        for (size_t i = 0; i < n; i++) {
                /* the daemon lock is never taken under ours */
                bool waiting = agent_daemon_cluster_unadmitted(a->d, v[i].ns, v[i].name), due;
                struct cluster_entry *e;
                int64_t rev = 0;

                pthread_mutex_lock(&a->lock);
                e = entry_get(a, v[i].ns, v[i].name, false);
                due = e && release_due(a, e, waiting, now);
                if (due)
                        rev = e->node_rev, e->waiting_mono_ns = 0;
                pthread_mutex_unlock(&a->lock);
                if (due)
                        release_one(a, &v[i], rev);
        }
}

void *cluster_sync_thread(void *userdata)
{
        struct cluster_agent *a = userdata;
        int last_err = 0;

        do {
                struct fk_error err = {0};
                bool list, dirty;
                int r = 0;

                pthread_mutex_lock(&a->lock);
                list = a->need_list;
                pthread_mutex_unlock(&a->lock);
                if (list) {
                        r = relist(a, &err);
                        if (r < 0 && r != last_err)
                                log_warning_errno(r, "cluster: list sessions: %s (retrying)",
                                                  err.msg);
                        else if (r >= 0)
                                log_info("cluster: watching %s/sessions/", a->prefix);
                        last_err = r < 0 ? r : 0;
                        if (r < 0) {
                                pthread_mutex_lock(&a->lock);
                                a->need_list = true;
                                pthread_mutex_unlock(&a->lock);
                                continue;
                        }
                }
                pthread_mutex_lock(&a->lock);
                dirty = a->dirty;
                pthread_mutex_unlock(&a->lock);
                if (dirty && sync_desired(a) < 0)
                        log_warning("cluster: out of memory syncing sessions");
                write_statuses(a);
                release_waiting(a);
        } while (!cluster_sleep(a, last_err < 0 ? 1000 : 250, true));
        return NULL;
}
