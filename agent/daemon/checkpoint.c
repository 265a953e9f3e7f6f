/* SPDX-License-Identifier: MIT */
/* Checkpoints of a session: take one (the job runner's run step; nothing partial left
 * listed), the on-disk record <state>/checkpoints/<id>/{state,ram,meta.json} with the disk layer
 * in <state>/disk, list, delete (refused while forks depend on it, unless cascading). */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CK_TIMEOUT_MS 120000
#define CK_ID_MAX     41

int agent_checkpoint_dir(const char *state_dir, const char *key, const char *id, char **ret)
{
        return fk_asprintf(ret, "%s/sessions/%s/checkpoints/%s", state_dir, key, id);
}

static bool id_is_valid(const char *id)
{
        size_t n = strlen(id);

        if (n < 4 || n >= CK_ID_MAX || strncmp(id, "ck_", 3) != 0)
                return false;
        return strspn(id + 3, "0123456789abcdef") == n - 3;
}

void agent_clean_partial_in(const char *root)
{
        struct dirent *de;
        DIR *dp = opendir(root);

        while (dp && (de = readdir(dp))) {
                cleanup_free char *p = NULL;
                size_t n = strlen(de->d_name);

                if (de->d_name[0] != '.' || n < 9 || strcmp(de->d_name + n - 8, ".partial"))
                        continue;
                if (fk_asprintf(&p, "%s/%s", root, de->d_name) >= 0 && fk_rm_rf(p) >= 0)
                        log_info("removed the partial %s", p);
        }
        if (dp)
                closedir(dp);
}

void agent_checkpoint_clean_partial(const char *state_dir)
{
        cleanup_free char *root = NULL;

        if (fk_asprintf(&root, "%s/checkpoints", state_dir) < 0)
                return;
        agent_clean_partial_in(root);
        agent_checkpoint_clean_writing(root);
}

int agent_checkpoint_write_meta(const char *dir, json_t *meta)
{
        cleanup_free char *path = NULL, *text = json_dumps(meta, JSON_INDENT(2) | JSON_SORT_KEYS);

        if (!text || fk_asprintf(&path, "%s/meta.json", dir) < 0)
                return -ENOMEM;
        return fk_write_file_atomic(path, text, strlen(text), 0600);
}

/* Reads <dir>/meta.json (new reference) or NULL. */
static json_t *read_meta(const char *dir)
{
        cleanup_free char *path = NULL, *buf = NULL;

        if (fk_asprintf(&path, "%s/meta.json", dir) < 0 ||
            fk_read_file(path, 64 * 1024, &buf, NULL) < 0)
                return NULL;
        return json_loads(buf, 0, NULL);
}

/* The disk half before the VM pauses: the active overlay gets a second name (the layer) and a
 * new overlay over it is made for the VM to continue on. */
static int disk_prepare(struct agent_store *st, const char *sd, const char *key, const char *id,
                        char **active, char **layer, char **next, struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        int r;

        r = agent_disk_active(st, sd, key, active);
        if (r == -ENOENT)
                return 0; /* the image has no workspace disk */
        if (r < 0)
                return fk_error_set(err, r, "active disk of %s: %s", sd, strerror(-r));
        if (agent_disk_dir(sd, &dir) < 0 || fk_asprintf(layer, "%s/layer-%s.qcow2", dir, id) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (link(*active, *layer) < 0)
                return fk_error_set(err, -errno, "link %s: %m", *layer);
        r = agent_disk_next_path(sd, "workspace", next);
        if (r < 0)
                return fk_error_set(err, r, "new overlay in %s: %s", dir, strerror(-r));
        return agent_disk_create_overlay(*next, *layer, err);
}

void agent_checkpoint_record_disk(struct agent_daemon *d, const char *key, struct agent_vm_ref *vm,
                                  const char *disk)
{
        const char *base = strrchr(disk, '/') ? strrchr(disk, '/') + 1 : disk;
        struct agent_store_change c[2] = {{AGENT_STORE_DISK, json_string(base)}};
        struct fk_error err = {0};
        size_t n = 1;

        if (d->ops.record)
                c[n++] = (struct agent_store_change){AGENT_STORE_VM, d->ops.record(vm->vm)};
        if (agent_store_update(d->store, key, c, n, &err) < 0)
                log_error("session %s: the VM writes %s now, but that is not stored: %s", key, disk,
                          err.msg);
}

static json_t *meta_new(const char *id, const char *key, const char *name, const char *parent,
                        const char *layer, uint64_t created,
                        const struct agent_checkpoint_result *res)
{
        json_t *m = json_pack(
                "{s:s, s:s, s:s?, s:s?, s:s?, s:I, s:I, s:I, s:I, s:b, s:s, s:s}", "id", id,
                "session", key, "name", name, "parent", parent, "disk", layer, "createdNs",
                (json_int_t)created, "ramBytes", (json_int_t)res->ram_bytes, "stateBytes",
                (json_int_t)res->state_bytes, "pauseNs", (json_int_t)res->pause_ns, "materialized",
                res->materialized, "status", res->write_pending ? "Writing" : "Ready", "mode",
                res->live ? "live" : "stop-copy");

        /* what QEMU said it stopped the guest for, and why the live path was not taken */
        if (m && res->live) {
                json_object_set_new(m, "downtimeMs", json_integer((json_int_t)res->downtime_ms));
                json_object_set_new(m, "diskSwitchNs", json_integer((json_int_t)res->switch_ns));
                if (res->pause_steps[0])
                        json_object_set_new(m, "pauseSteps", json_string(res->pause_steps));
                json_object_set_new(
                        m, "method",
                        json_string(res->background ? "background-snapshot" : "precopy"));
        }
        if (m && res->forced)
                json_object_set_new(m, "forcedStop", json_true());
        if (m && res->fallback[0])
                json_object_set_new(m, "fallback", json_string(res->fallback));
        /* forks and rollbacks start with the same devices (absent: an older checkpoint, none) */
        if (m) {
                json_object_set_new(m, "balloon", json_boolean(res->balloon));
                json_object_set_new(m, "balloonHint", json_boolean(res->balloon_hint));
        }
        json_object_set_new(m, "ramTail", json_boolean(res->ram_tail));
        /* absent: an older checkpoint, whose source offered it */
        json_object_set_new(m, "guestAnnounce", json_boolean(res->guest_announce));
        return m;
}

/* The checkpoint in dir final is listed: log it and, when the guest ran on before its RAM file
 * was complete, start its Writing phase. */
static int taken(struct agent_daemon *d, const char *key, const char *id, const char *final,
                 const char *layer, struct agent_vm_ref *vm,
                 const struct agent_checkpoint_result *res, struct fk_error *err)
{
        int r;

        agent_metrics_add_checkpoint_bytes(res->ram_bytes + res->state_bytes);
        log_info("session %s: checkpoint %s (%s, paused %.1f ms, QEMU downtime %llu ms, %.1f MiB "
                 "RAM%s)",
                 key, id, res->live ? "live" : "stop-and-copy", (double)res->pause_ns / 1e6,
                 (unsigned long long)res->downtime_ms, (double)res->ram_bytes / 1048576.0,
                 res->write_pending ? ", writing" : "");
        if (res->fallback[0])
                log_info("session %s: checkpoint %s: stop-and-copy: %s", key, id, res->fallback);
        /* the guest runs again: the files forks map are written beside it (Writing) */
        if (res->write_pending && d->ops.checkpoint_write &&
            (r = agent_checkpoint_write_start(d, key, id, final, layer, vm)) < 0) {
                (void)fk_rm_rf(final);
                return fk_error_set(err, r, "start writing checkpoint %s: %s", id, strerror(-r));
        }
        return 0;
}

static int take_unlocked(struct agent_daemon *d, const char *sd, const char *key,
                         struct agent_vm_ref *vm, const char *name, const char *id,
                         struct fk_error *err)
{
        cleanup_free char *partial = NULL, *final = NULL, *active = NULL, *layer = NULL,
                          *next = NULL,
                          *parent = agent_store_get_string(d->store, key, AGENT_STORE_LINEAGE);
        struct agent_checkpoint_result res = {0};
        struct fk_error lerr = {0};
        uint64_t need = AGENT_SPACE_SLACK;
        json_t *meta;
        int r, k;

        if (fk_asprintf(&partial, "%s/checkpoints/.%s.partial", sd, id) < 0 ||
            fk_asprintf(&final, "%s/checkpoints/%s", sd, id) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        /* before anything is made or the guest pauses */
        if (d->ops.checkpoint_bytes)
                need += d->ops.checkpoint_bytes(vm->vm);
        r = agent_space_check(d->cfg->state_dir, "stateDir", need, "checkpoint", err);
        if (r >= 0 && (r = fk_mkdir_p(partial, 0700)) < 0)
                fk_error_set(err, r, "create %s: %s", partial, strerror(-r));
        if (r >= 0)
                r = disk_prepare(d->store, sd, key, id, &active, &layer, &next, err);
        if (r >= 0) {
                struct agent_checkpoint_params p = {.dir = partial,
                                                    .new_disk = next,
                                                    .frozen_disk = layer,
                                                    .timeout_ms = CK_TIMEOUT_MS};
                r = d->ops.checkpoint(d->ops.userdata, vm->vm, &p, &res, err);
        }
        if (res.disk_switched) {
                agent_checkpoint_record_disk(d, key, vm, next);
                unlink(active); /* still reachable as the layer */
        } else {
                if (next)
                        unlink(next);
                if (layer)
                        unlink(layer);
        }
        meta = r >= 0 ? meta_new(id, key, name, parent, layer, agent_now_real(d), &res) : NULL;
        if (r >= 0 && !meta)
                r = fk_error_set(err, -ENOMEM, "out of memory");
        if (r >= 0 && ((k = agent_checkpoint_write_meta(partial, meta)) < 0 ||
                       (k = rename(partial, final) < 0 ? -errno : 0) < 0))
                r = fk_error_set(err, k, "record checkpoint %s: %s", final, strerror(-k));
        json_decref(meta);
        if (r < 0) {
                (void)fk_rm_rf(partial);
                return agent_space_explain(r, d->cfg->state_dir, "stateDir", need, "checkpoint",
                                           err);
        }
        if (agent_store_set_string(d->store, key, AGENT_STORE_LINEAGE, id, &lerr) < 0)
                log_warning("session %s: checkpoint %s taken, its lineage not stored: %s", key, id,
                            lerr.msg);
        return taken(d, key, id, final, layer, vm, &res, err);
}

int agent_checkpoint_take(struct agent_daemon *d, struct agent_session *s, struct agent_vm_ref *vm,
                          const char *name, char *ret_id, struct fk_error *err)
{
        cleanup_free char *sd = NULL;
        char key[160];
        uint8_t b[8];
        char hex[17];

        if (!d->ops.checkpoint)
                return fk_error_set(err, -EOPNOTSUPP, "this VM backend has no checkpoints");
        if (fk_random_bytes(b, sizeof(b)) < 0)
                return fk_error_set(err, -EIO, "getrandom failed");
        fk_hex(b, sizeof(b), hex);
        snprintf(ret_id, CK_ID_MAX, "ck_%s", hex);
        pthread_mutex_lock(&d->lock);
        snprintf(key, sizeof(key), "%s", s->key);
        pthread_mutex_unlock(&d->lock);
        if (agent_session_state_dir(d->cfg->state_dir, key, &sd) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        return take_unlocked(d, sd, key, vm, name, ret_id, err);
}

/* ---- list, status, delete -------------------------------------------------------------------- */

static uint64_t disk_usage(const char *path)
{
        struct stat st;
        struct dirent *de;
        uint64_t sum = 0;
        DIR *dp;

        if (lstat(path, &st) < 0)
                return 0;
        if (!S_ISDIR(st.st_mode))
                return (uint64_t)st.st_blocks * 512;
        if (!(dp = opendir(path)))
                return 0;
        while ((de = readdir(dp))) {
                cleanup_free char *p = NULL;

                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                    fk_asprintf(&p, "%s/%s", path, de->d_name) >= 0)
                        sum += disk_usage(p);
        }
        closedir(dp);
        return sum;
}

/* Every complete checkpoint of the session in state dir sd, oldest first, as meta objects with
 * sizeBytes added (new reference). */
json_t *agent_checkpoints_list(const char *sd)
{
        cleanup_free char *root = NULL;
        json_t *a = json_array();
        struct dirent *de;
        DIR *dp;

        if (!a || fk_asprintf(&root, "%s/checkpoints", sd) < 0 || !(dp = opendir(root)))
                return a;
        while ((de = readdir(dp))) {
                cleanup_free char *dir = NULL;
                json_t *m;
                const char *layer;

                if (!id_is_valid(de->d_name) || fk_asprintf(&dir, "%s/%s", root, de->d_name) < 0 ||
                    !(m = read_meta(dir)))
                        continue;
                layer = json_string_value(json_object_get(m, "disk"));
                json_object_set_new(m, "sizeBytes",
                                    json_integer((json_int_t)(disk_usage(dir) +
                                                              (layer ? disk_usage(layer) : 0))));
                json_array_append_new(a, m);
        }
        closedir(dp);
        for (size_t i = 1; i < json_array_size(a); i++) /* insertion sort by createdNs */
                for (size_t k = i; k > 0; k--) {
                        json_t *x = json_array_get(a, k - 1), *y = json_array_get(a, k);

                        if (json_integer_value(json_object_get(x, "createdNs")) <=
                            json_integer_value(json_object_get(y, "createdNs")))
                                break;
                        json_incref(x);
                        json_array_set(a, k - 1, y);
                        json_array_set_new(a, k, x);
                }
        return a;
}

/* Under the lock: "not found" naming the session that owns id, if any. */
int agent_checkpoint_not_found(struct agent_daemon *d, const struct agent_session *s,
                               const char *id, struct fk_error *err)
{
        for (size_t i = 0; id_is_valid(id) && i < d->n_sessions; i++) {
                cleanup_free char *dir = NULL;
                const struct agent_session *o = d->sessions[i];

                if (o == s || agent_checkpoint_dir(d->cfg->state_dir, o->key, id, &dir) < 0 ||
                    access(dir, F_OK) < 0)
                        continue;
                return fk_error_set(err, -ENOENT,
                                    "checkpoint %s not found in session %s/%s: it belongs to "
                                    "session %s/%s",
                                    id, s->namespace, s->name, o->namespace, o->name);
        }
        return fk_error_set(err, -ENOENT, "checkpoint %s not found in session %s/%s", id,
                            s->namespace, s->name);
}

/* Under the lock: the checkpoint dir of s's own checkpoint id, or -ENOENT with err. */
int agent_checkpoint_own_dir(struct agent_daemon *d, const struct agent_session *s, const char *id,
                             char **ret, struct fk_error *err)
{
        cleanup_free char *dir = NULL;

        int r;

        if (!id_is_valid(id) || agent_checkpoint_dir(d->cfg->state_dir, s->key, id, &dir) < 0 ||
            access(dir, F_OK) < 0)
                return agent_checkpoint_not_found(d, s, id, err);
        /* a Writing checkpoint: its RAM file is not complete yet */
        r = agent_checkpoint_wait_written(d, s, dir, id, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(dir);
        return 0;
}

json_t *agent_checkpoint_read_meta(const char *dir)
{
        return read_meta(dir);
}

int agent_daemon_checkpoint_list(struct agent_daemon *d, const char *ns, const char *name,
                                 json_t **ret, struct fk_error *err)
{
        struct agent_session *s;
        json_t *items = NULL;
        int r = 0;

        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        if (!s)
                r = fk_error_set(err, -ENOENT, "session %s/%s not found", ns, name);
        else if (!(items = json_deep_copy(agent_ck_cache(d, s))))
                r = -ENOMEM;
        pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return r;
        *ret = json_pack("{s:s, s:o}", "kind", "CheckpointList", "items", items);
        return *ret ? 0 : -ENOMEM;
}

/* Under the lock, s not busy: the layers of its deleted checkpoints that no chain needs. */
static void free_layers(struct agent_daemon *d, const struct agent_session *s)
{
        cleanup_free char *sd = NULL, *active = NULL;

        if (agent_session_state_dir(d->cfg->state_dir, s->key, &sd) < 0)
                return;
        (void)agent_disk_active(d->store, sd, s->key, &active);
        (void)agent_checkpoint_free_layers(sd, active);
}

/* Under the lock: marks s and every fork descending from it deleted (cascade). */
static void delete_tree(struct agent_daemon *d, struct agent_session *s)
{
        struct fk_error err = {0};

        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *f = d->sessions[i];

                if (f->fork_parent && !strcmp(f->fork_parent, s->name) &&
                    !strcmp(f->namespace, s->namespace) && f->spec)
                        delete_tree(d, f);
        }
        if (s->spec && agent_daemon_mark_deleted(d, s, &err) >= 0)
                log_info("session %s: deleted (cascade)", s->key);
        else if (s->spec)
                log_error("session %s: not deleted (cascade): %s", s->key, err.msg);
}

static int delete_locked(struct agent_daemon *d, struct agent_session *s, const char *id,
                         bool cascade, struct fk_error *err)
{
        cleanup_free char *dir = NULL, *deps = NULL;
        size_t n = 0;
        int r;

        r = agent_checkpoint_own_dir(d, s, id, &dir, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *f = d->sessions[i];

                if (!f->spec || !f->fork_checkpoint || strcmp(f->fork_checkpoint, id))
                        continue;
                if (cascade) {
                        delete_tree(d, f);
                        continue;
                }
                if (fk_list_append(&deps, ", ", f->name) < 0)
                        return -ENOMEM;
                n++;
        }
        if (n > 0)
                return fk_error_set(err, -EBUSY,
                                    "checkpoint %s has dependents: %s; delete them first or "
                                    "use --cascade",
                                    id, deps);
        r = fk_rm_rf(dir);
        agent_ck_cache_reload(d, s);
        if (r < 0)
                return fk_error_set(err, r, "remove %s: %s", dir, strerror(-r));
        log_info("session %s: checkpoint %s deleted", s->key, id);
        /* its disk layer goes unless a chain still needs it; a job of the session may be
         * changing the chain (a stream, a checkpoint): then the compaction job's end does it */
        if (!s->busy)
                free_layers(d, s);
        else
                agent_compact_after_checkpoint(d, s);
        return 0;
}

int agent_daemon_checkpoint_delete(struct agent_daemon *d, const char *ns, const char *name,
                                   const char *id, bool cascade, struct fk_error *err)
{
        struct agent_session *s;
        int r;

        pthread_mutex_lock(&d->lock);
        s = agent_daemon_find(d, ns, name);
        if (!s)
                r = fk_error_set(err, -ENOENT, "session %s/%s not found", ns, name);
        else if (agent_intent_find(s, CORE_INTENT_CHECKPOINT) ||
                 (s->busy && s->post_start == CORE_POST_START_CHECKPOINTS))
                r = fk_error_set(err, -EBUSY, "a checkpoint of %s/%s is being taken; retry", ns,
                                 name);
        else
                r = delete_locked(d, s, id, cascade, err);
        pthread_mutex_unlock(&d->lock);
        agent_daemon_wake(d);
        return r;
}
