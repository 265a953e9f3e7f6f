/* SPDX-License-Identifier: MIT */
/* What the API and the manifest directory do to the session table: apply, delete, merge a
 * directory scan, and read-only views (Session, SessionList, node) as JSON. */
#include "agent/daemon/daemon-internal.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *agent_apply_result_to_string(enum agent_apply_result r)
{
        static const char *const t[] = {"created", "configured", "unchanged"};

        return r <= AGENT_APPLY_UNCHANGED ? t[r] : NULL;
}

/* Sessions beyond maxSessions wait Pending (InsufficientSessions); the table itself stops
 * at four times that so a runaway client cannot grow it without bound. */
static unsigned agent_table_limit(const struct node_config *cfg)
{
        return cfg->max_sessions ? 4 * cfg->max_sessions : 4096;
}

/* Replaces the desired spec of s (takes m); returns whether anything changed. */
static bool session_set_spec(struct agent_session *s, struct session_manifest *m)
{
        if (s->spec && session_manifest_equal(s->spec, m)) {
                session_manifest_free(m);
                return false;
        }
        session_manifest_free(s->spec);
        s->spec = m;
        s->generation++;
        return true;
}

/* Undoes apply_locked's change to s after its store write failed: the spec running in memory
 * is the one on disk (a new session leaves the table and its empty state dir). */
static void apply_undo(struct agent_daemon *d, struct agent_session *s, bool created,
                       struct session_manifest *old, uint64_t old_generation)
{
        cleanup_free char *sd = NULL;

        session_manifest_free(s->spec);
        s->spec = old;
        s->generation = old_generation;
        if (!created)
                return;
        if (agent_session_state_dir(d->cfg->state_dir, s->key, &sd) >= 0)
                (void)rmdir(sd); /* only if empty: nothing but the failed write was there */
        /* inserted last under the same lock hold, so nobody saw it */
        if (d->n_sessions > 0 && d->sessions[d->n_sessions - 1] == s) {
                d->n_sessions--;
                agent_session_free(s);
        } else
                agent_daemon_remove(d, s);
}

/* Always consumes m. */
static int apply_locked(struct agent_daemon *d, struct session_manifest *m,
                        enum agent_apply_result *ret, struct fk_error *err)
{
        struct agent_session *s = agent_daemon_find(d, m->namespace, m->name);
        struct session_manifest *old;
        uint64_t old_generation;
        int r = 0;

        if (s && s->source == AGENT_SOURCE_FILE)
                r = fk_error_set(err, -EEXIST,
                                 "session %s/%s is defined by %s; edit that file instead",
                                 m->namespace, m->name, s->source_file);
        else if (s && s->source == AGENT_SOURCE_CLUSTER) /* cluster mode */
                r = fk_error_set(err, -EEXIST,
                                 "session %s/%s is assigned by the control plane; apply it "
                                 "with forklet --etcd instead",
                                 m->namespace, m->name);
        else if (s && !s->spec)
                r = fk_error_set(err, -EBUSY, "session %s/%s is being deleted; retry later",
                                 m->namespace, m->name);
        else if (!s && d->n_sessions >= agent_table_limit(d->cfg))
                r = fk_error_set(err, -EUSERS,
                                 "node is full: %zu sessions known, %u may wait for admission "
                                 "(4 x capacity.maxSessions)",
                                 d->n_sessions, agent_table_limit(d->cfg));
        else if (!s) {
                s = agent_session_new(m->namespace, m->name);
                r = s ? agent_daemon_insert(d, s) : -ENOMEM;
                if (r < 0)
                        s = agent_session_free(s);
                else
                        s->source = AGENT_SOURCE_API;
                *ret = AGENT_APPLY_CREATED;
        } else
                *ret = AGENT_APPLY_CONFIGURED;
        if (r < 0) {
                session_manifest_free(m);
                return r;
        }
        if (s->spec && session_manifest_equal(s->spec, m)) {
                session_manifest_free(m);
                *ret = AGENT_APPLY_UNCHANGED;
                return 0;
        }
        old = s->spec;
        old_generation = s->generation;
        s->spec = m;
        /* as in Kubernetes, labels and annotations alone do not make a new generation */
        if (!old || !session_manifest_spec_equal(old, m))
                s->generation++;
        r = agent_store_save(d->store, s, err);
        if (r < 0) {
                apply_undo(d, s, *ret == AGENT_APPLY_CREATED, old, old_generation);
                return r;
        }
        session_manifest_free(old);
        log_info("session %s: %s (generation %" PRIu64 ")", s->key,
                 agent_apply_result_to_string(*ret), s->generation);
        return 0;
}

int agent_daemon_apply(struct agent_daemon *d, struct session_manifest *m,
                       enum agent_apply_result *ret, struct fk_error *err)
{
        enum agent_apply_result res = AGENT_APPLY_UNCHANGED;
        int r;

        pthread_mutex_lock(&d->lock);
        r = apply_locked(d, m, &res, err);
        pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return r;
        *ret = res;
        agent_daemon_wake(d);
        return 0;
}

int agent_daemon_mark_deleted(struct agent_daemon *d, struct agent_session *s, struct fk_error *err)
{
        int r;

        /* what is stored is what runs: a delete the store did not take did not happen */
        if (s->source != AGENT_SOURCE_FILE && (r = agent_store_remove(d->store, s->key, err)) < 0)
                return r;
        s->spec = session_manifest_free(s->spec);
        s->deleted_ns = agent_now_real(d);
        s->cancel = true;
        return 0;
}

int agent_daemon_delete(struct agent_daemon *d, const char *ns, const char *name,
                        struct fk_error *err)
{
        struct agent_session *s;
        int r = 0;

        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        if (!s)
                r = fk_error_set(err, -ENOENT, "session %s/%s not found", ns, name);
        else if (s->source == AGENT_SOURCE_FILE && s->spec)
                r = fk_error_set(err, -EPERM,
                                 "session %s/%s is defined by %s; remove that file instead", ns,
                                 name, s->source_file);
        else if (s->source == AGENT_SOURCE_CLUSTER && s->spec) /* cluster mode */
                r = fk_error_set(err, -EPERM,
                                 "session %s/%s is assigned by the control plane; delete it "
                                 "with forklet --etcd instead",
                                 ns, name);
        else if (s->spec)
                r = agent_daemon_mark_deleted(d, s, err);
        pthread_mutex_unlock(&d->lock);
        if (r >= 0) {
                log_info("session %s/%s: deleted", ns, name);
                agent_daemon_wake(d);
        }
        return r;
}

/* Merges the items of one valid file into the table. */
static bool scan_has_file(const struct agent_dir_scan *scan, const char *path)
{
        for (size_t i = 0; i < scan->n; i++)
                if (strcmp(scan->files[i].path, path) == 0)
                        return true;
        return false;
}

/* A session whose file was renamed (old file gone) moves to the new file, VM untouched. */
static void take_over(struct agent_session *s, const struct agent_dir_scan *scan, const char *path)
{
        char *p;

        if (!s || s->source != AGENT_SOURCE_FILE || !strcmp(s->source_file, path) ||
            scan_has_file(scan, s->source_file) || !(p = strdup(path)))
                return;
        log_info("session %s: now defined by %s (was %s)", s->key, path, s->source_file);
        free(s->source_file);
        s->source_file = p;
}

static void sync_file_items(struct agent_daemon *d, const struct agent_dir_scan *scan,
                            struct agent_dir_file *f)
{
        for (size_t k = 0; k < f->n_items; k++) {
                struct session_manifest *m = f->items[k];
                struct agent_session *s = agent_daemon_find(d, m->namespace, m->name);

                take_over(s, scan, f->path);
                if (s && (s->source != AGENT_SOURCE_FILE || strcmp(s->source_file, f->path))) {
                        log_warning("%s: session %s/%s already defined by %s; ignored", f->path,
                                    m->namespace, m->name,
                                    s->source == AGENT_SOURCE_FILE      ? s->source_file
                                    : s->source == AGENT_SOURCE_CLUSTER ? "the control plane"
                                                                        : "the API");
                        continue;
                }
                if (!s) {
                        s = agent_session_new(m->namespace, m->name);
                        if (!s || !(s->source_file = strdup(f->path)) ||
                            agent_daemon_insert(d, s) < 0) {
                                agent_session_free(s);
                                continue;
                        }
                        s->source = AGENT_SOURCE_FILE;
                        log_info("session %s: added from %s", s->key, f->path);
                }
                if (!s->spec && s->deleted_ns)
                        continue; /* still being torn down: re-added on a later scan */
                s->seen = true;
                f->items[k] = NULL;
                if (session_set_spec(s, m))
                        log_info("session %s: generation %" PRIu64 " from %s", s->key,
                                 s->generation, f->path);
                agent_session_set_condition(s, AGENT_COND_MANIFEST_VALID, "True", "Valid",
                                            agent_now_real(d), "%s", "");
        }
}

/* Keeps the sessions of an invalid file as they were, with a condition saying why. */
static void sync_file_invalid(struct agent_daemon *d, struct agent_dir_file *f)
{
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];

                if (s->source != AGENT_SOURCE_FILE || strcmp(s->source_file, f->path) || !s->spec)
                        continue;
                s->seen = true;
                agent_session_set_condition(s, AGENT_COND_MANIFEST_VALID, "False", "Invalid",
                                            agent_now_real(d), "%s", f->errors[0]);
        }
}

static bool strv_contains(char *const *v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

/* Logs each invalid file once per distinct error, and remembers them for the node status. */
static void sync_dir_errors(struct agent_daemon *d, const struct agent_dir_scan *scan)
{
        char **errs = NULL;

        for (size_t i = 0; i < scan->n; i++)
                for (size_t k = 0; scan->files[i].errors && scan->files[i].errors[k]; k++) {
                        const char *e = scan->files[i].errors[k];

                        if (!strv_contains(d->dir_errors, e))
                                log_error("invalid manifest: %s", e);
                        (void)fk_strv_push(&errs, e);
                }
        fk_strv_free(d->dir_errors);
        d->dir_errors = errs;
}

void agent_daemon_sync_dir(struct agent_daemon *d, struct agent_dir_scan *scan)
{
        for (size_t i = 0; i < d->n_sessions; i++)
                d->sessions[i]->seen = false;
        for (size_t i = 0; i < scan->n; i++) {
                if (scan->files[i].errors)
                        sync_file_invalid(d, &scan->files[i]);
                else
                        sync_file_items(d, scan, &scan->files[i]);
        }
        sync_dir_errors(d, scan);
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];

                if (s->source != AGENT_SOURCE_FILE || s->seen || !s->spec)
                        continue;
                log_info("session %s: manifest %s removed", s->key, s->source_file);
                s->spec = session_manifest_free(s->spec);
                s->deleted_ns = agent_now_real(d);
                s->cancel = true;
        }
}

/* The Session with live resource counters (under the lock). */
static json_t *session_json(struct agent_daemon *d, struct agent_session *s)
{
        json_t *j = agent_session_to_json(s, d->accel);

        if (j) {
                agent_resources_status(d, s, json_object_get(j, "status"));
                (void)agent_fork_status_patch(d, s, j);
        }
        return j;
}

int agent_daemon_session_json(struct agent_daemon *d, const char *ns, const char *name,
                              json_t **ret)
{
        struct agent_session *s;
        json_t *j = NULL;

        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        if (s)
                j = session_json(d, s);
        pthread_mutex_unlock(&d->lock);
        if (!s)
                return -ENOENT;
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

int agent_daemon_list_json(struct agent_daemon *d, json_t **ret)
{
        json_t *items = json_array(), *j;

        if (!items)
                return -ENOMEM;
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < d->n_sessions; i++)
                json_array_append_new(items, session_json(d, d->sessions[i]));
        pthread_mutex_unlock(&d->lock);
        j = json_pack("{s:s, s:s, s:o}", "apiVersion", MANIFEST_API_VERSION, "kind", "SessionList",
                      "items", items);
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

static json_t *cgroups_json(struct agent_daemon *d)
{
        if (!d->cg)
                return json_pack("{s:b}", "enabled", 0);
        return json_pack("{s:b, s:s, s:s}", "enabled", 1, "version",
                         cg_version_to_string(cg_manager_version(d->cg)), "parent",
                         cg_manager_parent_path(d->cg));
}

int agent_daemon_node_json(struct agent_daemon *d, json_t **ret)
{
        json_t *errs = json_array(), *j;

        if (!errs)
                return -ENOMEM;
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; d->dir_errors && d->dir_errors[i]; i++)
                json_array_append_new(errs, json_string(d->dir_errors[i]));
        j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:[{s:s, s:s, s:s, s:o}]}", "nodeName",
                      d->cfg->node_name ? d->cfg->node_name : "", "accel",
                      vmm_accel_to_string((enum vmm_accel)d->accel), "manifestDir",
                      d->cfg->manifest_dir, "stateDir", d->cfg->state_dir, "sessions",
                      (json_int_t)d->n_sessions, "conditions", "type", "ManifestsValid", "status",
                      json_array_size(errs) ? "False" : "True", "reason",
                      json_array_size(errs) ? "Invalid" : "Valid", "messages", errs);
        if (j && (json_object_set_new(j, "capacity", agent_capacity_json(d)) < 0 ||
                  json_object_set_new(j, "cgroups", cgroups_json(d)) < 0))
                j = (json_decref(j), NULL);
        pthread_mutex_unlock(&d->lock);
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

int agent_daemon_console_path(struct agent_daemon *d, const char *ns, const char *name, char **ret)
{
        struct agent_session *s;
        cleanup_free char *dir = NULL;
        int r = -ENOENT;

        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        if (s)
                r = agent_session_state_dir(d->cfg->state_dir, s->key, &dir);
        pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return r;
        return fk_asprintf(ret, "%s/" AGENT_CONSOLE_LOG, dir);
}
