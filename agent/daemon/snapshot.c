/* SPDX-License-Identifier: MIT */
/* Filesystem snapshots: the workspace disk only (no memory, no processes), made consistent
 * with fsfreeze, exported as a standalone qcow2 under <stateDir>/snapshots/<id>/ with the
 * session's spec; restore makes a new session that boots fresh on a copy-on-write overlay of it
 * (afterStart runs again). */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SNAP_ID_MAX 42

bool agent_snapshot_id_is_valid(const char *id)
{
        size_t n = strlen(id);

        return n > 5 && n < SNAP_ID_MAX && strncmp(id, "snap_", 5) == 0 &&
               strspn(id + 5, "0123456789abcdef") == n - 5;
}

void agent_snapshot_clean_partial(const char *state_dir)
{
        cleanup_free char *root = NULL;

        if (fk_asprintf(&root, "%s/snapshots", state_dir) >= 0)
                agent_clean_partial_in(root);
}

/* Moves the running VM onto a new overlay; *ret_layer: the frozen former overlay. */
static int freeze_layer(struct agent_daemon *d, struct agent_vm_ref *vm, const char *sd,
                        const char *key, const char *id, char **ret_layer, struct fk_error *err)
{
        cleanup_free char *active = NULL, *layer = NULL, *next = NULL, *dir = NULL;
        int r;

        r = agent_disk_active(d->store, sd, key, &active);
        if (r < 0)
                return fk_error_set(err, r == -ENOENT ? -EINVAL : r,
                                    "the session has no workspace disk to snapshot");
        if (agent_disk_dir(sd, &dir) < 0 || fk_asprintf(&layer, "%s/layer-%s.qcow2", dir, id) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (link(active, layer) < 0)
                return fk_error_set(err, -errno, "link %s: %m", layer);
        r = agent_disk_next_path(sd, "workspace", &next);
        if (r >= 0)
                r = agent_disk_create_overlay(next, layer, err);
        if (r >= 0)
                r = d->ops.snapshot_disk(d->ops.userdata, vm->vm, next, err);
        if (r < 0) {
                if (next)
                        unlink(next);
                unlink(layer);
                return r;
        }
        agent_checkpoint_record_disk(d, key, vm, next);
        unlink(active);
        *ret_layer = TAKE_PTR(layer);
        return 0;
}

static int export_snapshot(struct agent_daemon *d, const char *layer, const char *id,
                           const char *key, json_t *spec, struct fk_error *err)
{
        cleanup_free char *partial = NULL, *final = NULL, *disk = NULL, *meta = NULL, *text = NULL;
        json_t *m;
        int r;

        if (fk_asprintf(&partial, "%s/snapshots/.%s.partial", d->cfg->state_dir, id) < 0 ||
            fk_asprintf(&final, "%s/snapshots/%s", d->cfg->state_dir, id) < 0 ||
            fk_asprintf(&disk, "%s/disk.qcow2", partial) < 0 ||
            fk_asprintf(&meta, "%s/meta.json", partial) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = fk_mkdir_p(partial, 0700);
        if (r < 0)
                return fk_error_set(err, r, "create %s: %s", partial, strerror(-r));
        r = agent_disk_convert(layer, disk, err);
        m = json_pack("{s:s, s:s, s:I, s:O}", "id", id, "session", key, "createdNs",
                      (json_int_t)agent_now_real(d), "manifest", spec);
        text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
        json_decref(m);
        if (r >= 0 && (!text || fk_write_file_atomic(meta, text, strlen(text), 0600) < 0 ||
                       rename(partial, final) < 0))
                r = fk_error_set(err, -EIO, "record snapshot %s: %m", final);
        if (r < 0)
                (void)fk_rm_rf(partial);
        return r;
}

/* Before the guest's filesystem freezes: the export (qemu-img convert of the disk's chain)
 * writes at most the chain's allocated bytes into stateDir. */
static int snapshot_space(struct agent_daemon *d, const char *sd, const char *key, uint64_t *need,
                          struct fk_error *err)
{
        cleanup_free char *active = NULL;

        if (agent_disk_active(d->store, sd, key, &active) >= 0)
                *need += agent_disk_chain_allocated(active);
        return agent_space_check(d->cfg->state_dir, "stateDir", *need, "snapshot", err);
}

void agent_snapshot_new_id(char *buf)
{
        uint8_t b[8];
        char hex[17];

        (void)fk_random_bytes(b, sizeof(b));
        fk_hex(b, sizeof(b), hex);
        snprintf(buf, SNAP_ID_MAX, "snap_%s", hex);
}

int agent_snapshot_take(struct agent_daemon *d, struct agent_vm_ref *vm, const char *sd,
                        const char *key, json_t *spec, const char *id, struct fk_error *err)
{
        cleanup_free char *layer = NULL;
        uint64_t need = AGENT_SPACE_SLACK;
        int r;

        r = snapshot_space(d, sd, key, &need, err);
        if (r >= 0)
                r = freeze_layer(d, vm, sd, key, id, &layer, err);
        if (r >= 0)
                r = export_snapshot(d, layer, id, key, spec, err);
        return agent_space_explain(r, d->cfg->state_dir, "stateDir", need, "snapshot", err);
}

/* The snapshot's spec renamed to ns/new_name, without checkpoints' forks. */
static int restore_spec(struct agent_daemon *d, const char *snap, const char *ns,
                        const char *new_name, struct session_manifest **ret, struct fk_error *err)
{
        cleanup_free char *path = NULL, *buf = NULL;
        struct manifest_diag diag = {0};
        json_t *m, *meta;
        int r;

        if (!agent_snapshot_id_is_valid(snap) ||
            fk_asprintf(&path, "%s/snapshots/%s/meta.json", d->cfg->state_dir, snap) < 0 ||
            fk_read_file(path, 1024 * 1024, &buf, NULL) < 0 || !(m = json_loads(buf, 0, NULL)))
                return fk_error_set(err, -ENOENT, "snapshot %s not found", snap);
        meta = json_object_get(json_object_get(m, "manifest"), "metadata");
        json_object_set_new(meta, "name", json_string(new_name));
        json_object_set_new(meta, "namespace", json_string(ns));
        json_object_del(json_object_get(json_object_get(m, "manifest"), "spec"), "forks");
        r = session_manifest_from_json(json_object_get(m, "manifest"), d->cfg, ret, &diag);
        json_decref(m);
        if (r < 0)
                fk_error_set(err, -EINVAL, "snapshot %s: stored spec invalid: %s", snap,
                             diag.n ? diag.messages[0] : "unknown");
        manifest_diag_done(&diag);
        return r;
}

/* Under the lock: takes s, inserted last and never seen, out of the table again. */
static void restore_undo(struct agent_daemon *d, struct agent_session *s)
{
        cleanup_free char *sd = NULL;

        if (agent_session_state_dir(d->cfg->state_dir, s->key, &sd) >= 0)
                (void)rmdir(sd); /* only if empty: made by the failed store write */
        if (d->n_sessions > 0 && d->sessions[d->n_sessions - 1] == s) {
                d->n_sessions--;
                agent_session_free(s);
        } else
                agent_daemon_remove(d, s);
}

static bool snapshot_present(struct agent_daemon *d, const char *snap)
{
        cleanup_free char *dir = NULL;

        return fk_asprintf(&dir, "%s/snapshots/%s", d->cfg->state_dir, snap) >= 0 &&
               access(dir, F_OK) == 0;
}

int agent_daemon_restore(struct agent_daemon *d, const char *ns, const char *snap,
                         const char *new_name, struct fk_error *err)
{
        struct session_manifest *m = NULL;
        struct agent_session *s;
        int r;

        r = restore_spec(d, snap, ns, new_name, &m, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&d->lock);
        if (agent_daemon_find(d, ns, new_name)) {
                r = fk_error_set(err, -EEXIST, "session %s/%s already exists", ns, new_name);
                session_manifest_free(m);
        } else if (!snapshot_present(d, snap)) { /* a delete checks for restores under the lock */
                r = fk_error_set(err, -ENOENT, "snapshot %s not found", snap);
                session_manifest_free(m);
        } else if (!(s = agent_session_new(ns, new_name)) || !(s->from_snapshot = strdup(snap)) ||
                   agent_daemon_insert(d, s) < 0) {
                agent_session_free(s);
                session_manifest_free(m);
                r = -ENOMEM;
        } else {
                s->spec = m;
                s->source = AGENT_SOURCE_API;
                s->generation = 1;
                s->created_ns = agent_now_real(d);
                r = agent_store_save(d->store, s, err);
                if (r < 0) /* nothing runs that is not stored */
                        restore_undo(d, s);
                else
                        log_info("session %s: restored from snapshot %s", s->key, snap);
        }
        pthread_mutex_unlock(&d->lock);
        agent_daemon_wake(d);
        return r;
}
