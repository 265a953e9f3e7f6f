/* SPDX-License-Identifier: MIT */
/* What the job runner calls for fork and rollback intents on the session table, spec.forks
 * (scale up and down, names NAME-fork-N, what the planner is told) and the fork-engine part of
 * a session's status. */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <unistd.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A copy of the parent's spec for a fork: own name, no checkpoints or forks of its own. */
static struct session_manifest *fork_spec(const struct session_manifest *parent, const char *name)
{
        struct session_manifest *m = NULL;

        if (session_manifest_copy(parent, &m) < 0)
                return NULL;
        free(m->name);
        m->name = strdup(name);
        for (size_t i = 0; i < m->n_checkpoints; i++)
                free(m->checkpoints[i].name);
        free(m->checkpoints);
        m->checkpoints = NULL;
        m->n_checkpoints = 0;
        m->has_forks = false;
        free(m->forks_from);
        m->forks_from = NULL;
        m->forks_count = 0;
        m->state = SESSION_STATE_RUNNING;
        if (!m->name)
                return session_manifest_free(m);
        return m;
}

/* Hard-links what the fork's first start needs (the checkpoint's state, RAM and meta into
 * <fork>/origin, its disk layers into <fork>/disk), so the fork outlives its parent and the
 * checkpoint; links share the pages (and the page cache) with the parent's files. */
static int fork_link_origin(struct agent_daemon *d, const struct agent_session *p, const char *key,
                            const char *id, struct fk_error *err)
{
        static const char *const files[] = {"state", "ram", "meta.json"};
        cleanup_free char *ck = NULL, *sd = NULL, *origin = NULL, *disk = NULL;
        json_t *meta;
        int r;

        if (agent_checkpoint_dir(d->cfg->state_dir, p->key, id, &ck) < 0 ||
            agent_session_state_dir(d->cfg->state_dir, key, &sd) < 0 ||
            fk_asprintf(&origin, "%s/origin", sd) < 0 || agent_disk_dir(sd, &disk) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = fk_mkdir_p(origin, 0700);
        if (r < 0)
                return fk_error_set(err, r, "create %s: %s", origin, strerror(-r));
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                cleanup_free char *src = NULL, *dst = NULL;

                if (fk_asprintf(&src, "%s/%s", ck, files[i]) < 0 ||
                    fk_asprintf(&dst, "%s/%s", origin, files[i]) < 0)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                if (link(src, dst) < 0 && errno != EEXIST)
                        return fk_error_set(err, -errno, "link %s: %m", dst);
        }
        meta = agent_checkpoint_read_meta(ck);
        r = json_string_value(json_object_get(meta, "disk"))
                    ? agent_disk_link_chain(json_string_value(json_object_get(meta, "disk")), disk,
                                            NULL, err)
                    : 0;
        json_decref(meta);
        return r;
}

/* When a fork request arrived and how long it waited for the daemon lock (mono ns). */
struct fork_request_time {
        uint64_t start_ns, lock_ns;
};

/* Under the lock: creates fork session `name` of p from checkpoint id. On failure nothing of
 * it stays: no session, no links, no stored record. */
static int fork_create(struct agent_daemon *d, struct agent_session *p, const char *name,
                       const char *id, bool by_spec, const struct fork_request_time *rt,
                       struct fk_error *err)
{
        struct agent_session *f = agent_session_new(p->namespace, name);
        cleanup_free char *sd = NULL;
        uint64_t t = fk_now_mono_ns();
        int r;

        if (!f || agent_session_state_dir(d->cfg->state_dir, f->key, &sd) < 0 ||
            !(f->spec = fork_spec(p->spec, name)) || !(f->fork_parent = strdup(p->name)) ||
            !(f->fork_checkpoint = strdup(id))) {
                agent_session_free(f);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        f->source = AGENT_SOURCE_API;
        f->fork_by_spec = by_spec;
        f->generation = 1;
        f->created_ns = agent_now_real(d);
        /* stored before it is in the table: a fork that would not survive a restart is none */
        r = fork_link_origin(d, p, f->key, id, err);
        if (r >= 0)
                r = agent_store_save(d->store, f, err);
        f->requested_ns = rt->start_ns;
        f->requested_timing.ns[AGENT_BOOT_STEP_LOCK] = rt->lock_ns;
        f->requested_timing.ns[AGENT_BOOT_STEP_LINKS] = fk_now_mono_ns() - t;
        if (r >= 0 && (r = agent_daemon_insert(d, f)) < 0)
                fk_error_set(err, r, "add session %s: %s", name, strerror(-r));
        if (r < 0) {
                (void)fk_rm_rf(sd); /* the origin links and state.json: nothing stays */
                agent_store_forget(d->store, f->key);
                agent_session_free(f);
                return agent_space_explain(r, d->cfg->state_dir, "stateDir", AGENT_SPACE_OVERLAY,
                                           "fork", err);
        }
        log_info("session %s: fork of %s from %s", f->key, p->key, id);
        return 0;
}

static unsigned count_forks(struct agent_daemon *d, const struct agent_session *p)
{
        unsigned n = 0;

        for (size_t i = 0; i < d->n_sessions; i++) {
                const struct agent_session *f = d->sessions[i];

                if (f->spec && f->fork_parent && !strcmp(f->fork_parent, p->name) &&
                    !strcmp(f->namespace, p->namespace))
                        n++;
        }
        return n;
}

int agent_fork_create_many(struct agent_daemon *d, struct agent_session *p, const char *id,
                           unsigned count, json_t **ret, struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        json_t *names = json_array();
        unsigned idx = 0, made = 0, max = d->cfg->max_forks_per_session;
        unsigned have = count_forks(d, p);
        /* the runner calls this under the lock: the intent's wait is not a lock wait here */
        struct fork_request_time rt = {.start_ns = fk_now_mono_ns()};
        int r = 0;

        if (!names)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (count == 0)
                r = fk_error_set(err, -EINVAL, "count: must be at least 1");
        else if (max && (have >= max || count > max - have))
                r = fk_error_set(err, -EINVAL,
                                 "count %u: session %s/%s has %u of at most %u forks "
                                 "(capacity.maxForksPerSession); %u more allowed",
                                 count, p->namespace, p->name, have, max,
                                 have < max ? max - have : 0);
        else
                r = agent_checkpoint_own_dir(d, p, id, &dir, err);
        /* each fork: links (no data), its state.json and, at its start, a new overlay */
        if (r >= 0)
                r = agent_space_check(d->cfg->state_dir, "stateDir", count * AGENT_SPACE_OVERLAY,
                                      "fork", err);
        while (r >= 0 && made < count && idx < 100000) {
                char fname[128];

                snprintf(fname, sizeof(fname), "%s-fork-%u", p->name, idx++);
                if (agent_daemon_find(d, p->namespace, fname))
                        continue;
                if (!manifest_name_is_valid(fname)) {
                        r = fk_error_set(err, -EINVAL, "fork name %s is not a valid name", fname);
                        break;
                }
                r = fork_create(d, p, fname, id, false, &rt, err);
                if (r >= 0) {
                        json_array_append_new(names, json_string(fname));
                        made++;
                }
        }
        if (made > 0)
                agent_metrics_add_forks(made);
        if (r < 0 && made == 0) {
                json_decref(names);
                return r;
        }
        *ret = names;
        return 0;
}

/* A new overlay goes to stateDir; the RAM is the checkpoint's, mapped copy-on-write. */
static int rollback_space(struct agent_daemon *d, const char *ck_dir, struct fk_error *err)
{
        (void)ck_dir;
        return agent_space_check(d->cfg->state_dir, "stateDir", AGENT_SPACE_OVERLAY, "rollback",
                                 err);
}

int agent_rollback_prepare(struct agent_daemon *d, struct agent_session *s, const char *id,
                           struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        int r;

        r = agent_checkpoint_own_dir(d, s, id, &dir, err);
        if (r >= 0)
                r = rollback_space(d, dir, err); /* before the VM stops */
        if (r >= 0) {
                free(s->rollback_to);
                if (!(s->rollback_to = strdup(id)))
                        r = fk_error_set(err, -ENOMEM, "out of memory");
        }
        /* stored before the VM stops: a restart meanwhile still rolls back */
        if (r >= 0 && s->source != AGENT_SOURCE_FILE &&
            (r = agent_store_save(d->store, s, err)) < 0) {
                free(s->rollback_to);
                s->rollback_to = NULL;
        }
        return r;
}

/* Index N of "<parent>-fork-N", or -1. */
static long fork_index(const char *parent, const char *name)
{
        size_t n = strlen(parent);
        char *end;
        long v;

        if (strncmp(name, parent, n) || strncmp(name + n, "-fork-", 6) || !name[n + 6])
                return -1;
        v = strtol(name + n + 6, &end, 10);
        return *end ? -1 : v;
}

void agent_forks_trim(struct agent_daemon *d, struct agent_session *p)
{
        unsigned count = p->spec && p->spec->has_forks ? p->spec->forks_count : 0;
        struct fk_error err = {0};

        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *f = d->sessions[i];
                long idx;

                if (!f->spec || !f->fork_by_spec || !f->fork_parent ||
                    strcmp(f->fork_parent, p->name) || strcmp(f->namespace, p->namespace))
                        continue;
                idx = fork_index(p->name, f->name);
                if (idx >= 0 && (unsigned long)idx < count)
                        continue;
                if (agent_daemon_mark_deleted(d, f, &err) >= 0)
                        log_info("session %s: removed (spec.forks of %s scaled down)", f->key,
                                 p->key);
                else
                        log_error("session %s: not removed (spec.forks of %s): %s", f->key, p->key,
                                  err.msg);
        }
}

/* The id of p's checkpoint named name (spec.checkpoints), or NULL (caller frees). */
static char *named_checkpoint_id(struct agent_daemon *d, struct agent_session *p, const char *name)
{
        json_t *a = agent_ck_cache(d, p), *m;
        char *id = NULL;
        size_t i;

        json_array_foreach(a, i, m)
        {
                const char *n = json_string_value(json_object_get(m, "name"));

                /* a Writing one is used once Ready (its write wakes the reconcile loop) */
                if (n && !strcmp(n, name) && !id && !agent_checkpoint_meta_writing(m))
                        id = strdup(json_string_value(json_object_get(m, "id")));
        }
        return id;
}

/* Why spec.forks of p waits for its checkpoint: the parent's own failure when it has one. */
void agent_forks_waiting(struct agent_daemon *d, struct agent_session *p)
{
        uint64_t now = agent_now_real(d);
        const struct agent_condition *after = &p->conditions[AGENT_COND_AFTER_START];
        const struct agent_condition *cks = &p->conditions[AGENT_COND_CHECKPOINTS];

        if (after->set && strcmp(after->status, "False") == 0)
                agent_session_set_condition(p, AGENT_COND_FORKS, "False", "AfterStartFailed", now,
                                            "spec.forks waits for checkpoint %s, not taken: %s",
                                            p->spec->forks_from, after->message);
        else if (cks->set && strcmp(cks->status, "False") == 0)
                agent_session_set_condition(p, AGENT_COND_FORKS, "False", "CheckpointFailed", now,
                                            "spec.forks waits for checkpoint %s: %s",
                                            p->spec->forks_from, cks->message);
        else
                agent_session_set_condition(p, AGENT_COND_FORKS, "False", "WaitingForCheckpoint",
                                            now, "spec.forks waits for checkpoint %s",
                                            p->spec->forks_from);
}

void agent_forks_scale_up(struct agent_daemon *d, struct agent_session *p)
{
        uint64_t now = agent_now_real(d);
        cleanup_free char *id = NULL;
        struct fk_error err = {0};
        /* under the lock already (a reconcile pass): no wait of its own */
        struct fork_request_time rt = {.start_ns = fk_now_mono_ns()};

        for (unsigned i = 0; i < p->spec->forks_count; i++) {
                char fname[128];

                snprintf(fname, sizeof(fname), "%s-fork-%u", p->name, i);
                if (agent_daemon_find(d, p->namespace, fname))
                        continue;
                if (!id && !(id = named_checkpoint_id(d, p, p->spec->forks_from))) {
                        agent_forks_waiting(d, p);
                        return;
                }
                if (fork_create(d, p, fname, id, true, &rt, &err) < 0) {
                        log_error("session %s: spec.forks: %s", p->key, err.msg);
                        agent_session_set_condition(p, AGENT_COND_FORKS, "False", "ForkFailed", now,
                                                    "%s", err.msg);
                        return;
                }
        }
        agent_session_set_condition(p, AGENT_COND_FORKS, "True", "Created", now,
                                    "%u forks of checkpoint %s", p->spec->forks_count,
                                    p->spec->forks_from);
}

void agent_forks_observe(struct agent_daemon *d, struct agent_session *p, unsigned *ret_have,
                         unsigned *ret_beyond, bool *ret_source)
{
        unsigned count = p->spec->has_forks ? p->spec->forks_count : 0, have = 0, beyond = 0;
        char *id;

        for (size_t i = 0; i < d->n_sessions; i++) {
                const struct agent_session *f = d->sessions[i];
                long idx;

                if (!f->spec || !f->fork_parent || strcmp(f->fork_parent, p->name) ||
                    strcmp(f->namespace, p->namespace))
                        continue;
                idx = fork_index(p->name, f->name);
                if (idx >= 0 && (unsigned long)idx < count)
                        have++;
                else if (f->fork_by_spec)
                        beyond++;
        }
        *ret_have = have;
        *ret_beyond = beyond;
        id = p->spec->has_forks ? named_checkpoint_id(d, p, p->spec->forks_from) : NULL;
        *ret_source = id != NULL;
        free(id);
}

int agent_fork_status_patch(struct agent_daemon *d, struct agent_session *s, json_t *j)
{
        json_t *st = json_object_get(j, "status"), *forks = json_array(), *cks = json_array();
        json_t *all, *m;
        size_t i;

        if (!st || !forks || !cks) {
                json_decref(forks);
                json_decref(cks);
                return -ENOMEM;
        }
        for (i = 0; i < d->n_sessions; i++) {
                const struct agent_session *f = d->sessions[i];

                if (f->fork_parent && !strcmp(f->fork_parent, s->name) &&
                    !strcmp(f->namespace, s->namespace))
                        json_array_append_new(forks, json_string(f->name));
        }
        all = agent_ck_cache(d, s);
        json_array_foreach(all, i, m)
        {
                char buf[64];
                json_t *c = json_pack("{s:O, s:O, s:s}", "id", json_object_get(m, "id"), "name",
                                      json_object_get(m, "name") ?: json_null(), "created",
                                      fk_format_rfc3339((uint64_t)json_integer_value(
                                                                json_object_get(m, "createdNs")),
                                                        buf, sizeof(buf)));

                /* the checkpoint the machine came from (its own, or the parent's for a fork's
                 * first one): what `forklet tree` hangs checkpoints under */
                if (c && json_is_string(json_object_get(m, "parent")))
                        json_object_set(c, "parent", json_object_get(m, "parent"));
                /* Writing | Ready, live | stop-copy, and what the source was paused for */
                static const char *const keep[] = {"status", "mode", "pauseNs", "downtimeMs",
                                                   "fallback"};
                for (size_t k = 0; c && k < ARRAY_SIZE(keep); k++)
                        if (json_object_get(m, keep[k]))
                                json_object_set(c, keep[k], json_object_get(m, keep[k]));
                json_array_append_new(cks, c);
        }
        json_object_set_new(st, "forks", forks);
        json_object_set_new(st, "checkpoints", cks);
        if (s->fork_parent)
                json_object_set_new(st, "forkOf",
                                    json_pack("{s:s, s:s}", "session", s->fork_parent, "checkpoint",
                                              s->fork_checkpoint));
        if (s->fork_id)
                json_object_set_new(st, "forkId", json_string(s->fork_id));
        if (s->has_boot_timing)
                json_object_set_new(st, "bootTiming", agent_boot_timing_json(&s->boot_timing));
        if (s->identity)
                json_object_set(st, "identity", s->identity);
        return 0;
}
