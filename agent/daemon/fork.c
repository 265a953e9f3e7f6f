/* SPDX-License-Identifier: MIT */
/* Forks and rollback: what a boot restores from (a parent's checkpoint or the session's own,
 * both with copy-on-write RAM, or a snapshot's disk), the files it prepares and what it records
 * once the restored VM runs. */
#include "agent/daemon/daemon-internal.h"
#include "agent/jail/jail.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void agent_restore_done(struct agent_restore *r)
{
        free(r->ck_dir);
        free(r->layer);
        free(r->template_dir);
        *r = (struct agent_restore){0};
}

static int fork_id_new(const char *name, char *out, size_t size)
{
        uint8_t b[4];
        char hex[9];
        int r = fk_random_bytes(b, sizeof(b));

        if (r < 0)
                return r;
        fk_hex(b, sizeof(b), hex);
        snprintf(out, size, "%s.%s", name, hex);
        return 0;
}

/* Fills r from the checkpoint in dir (its disk layer from meta.json; when layer_dir is set, the
 * layer of that name there: a fork's links). */
static int restore_from(const char *dir, const char *layer_dir, bool private_ram, const char *name,
                        struct agent_restore *r, struct fk_error *err)
{
        json_t *meta = agent_checkpoint_read_meta(dir);
        const char *layer = json_string_value(json_object_get(meta, "disk"));
        int k = 0;

        if (!meta)
                return fk_error_set(err, -ENOENT, "checkpoint %s has no usable meta.json", dir);
        snprintf(r->ck_id, sizeof(r->ck_id), "%s",
                 json_string_value(json_object_get(meta, "id")) ?: "");
        if (!(r->ck_dir = strdup(dir)))
                k = fk_error_set(err, -ENOMEM, "out of memory");
        else if (layer && layer_dir && strrchr(layer, '/'))
                k = fk_asprintf(&r->layer, "%s/%s", layer_dir, strrchr(layer, '/') + 1);
        else if (layer && !(r->layer = strdup(layer)))
                k = fk_error_set(err, -ENOMEM, "out of memory");
        if (k >= 0 && fork_id_new(name, r->fork_id, sizeof(r->fork_id)) < 0)
                k = fk_error_set(err, -EIO, "getrandom failed");
        r->private_ram = private_ram;
        /* the device list must be the source's: checkpoints before the balloon have none */
        r->balloon = json_is_true(json_object_get(meta, "balloon"));
        r->balloon_hint = json_is_true(json_object_get(meta, "balloonHint"));
        /* and the RAM size: checkpoints before the tail have none */
        r->ram_tail = json_is_true(json_object_get(meta, "ramTail"));
        /* and the NIC's features */
        r->guest_announce = agent_vm_guest_announce_of(meta);
        json_decref(meta);
        return k;
}

/* A rollback maps the checkpoint's RAM copy-on-write, as a fork does, through links in
 * <state>/origin: the checkpoint may be deleted while the session runs on them, and the
 * jailed QEMU's grant on them goes once it runs (agent_restore_finish). */
static int rollback_link_origin(const char *ck, const char *sd, char **ret, struct fk_error *err)
{
        static const char *const files[] = {"state", "ram", "meta.json"};
        cleanup_free char *origin = NULL;
        int k;

        if (fk_asprintf(&origin, "%s/origin", sd) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        (void)fk_rm_rf(origin);
        k = fk_mkdir_p(origin, 0700);
        if (k < 0)
                return fk_error_set(err, k, "create %s: %s", origin, strerror(-k));
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                cleanup_free char *src = NULL, *dst = NULL;

                if (fk_asprintf(&src, "%s/%s", ck, files[i]) < 0 ||
                    fk_asprintf(&dst, "%s/%s", origin, files[i]) < 0)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                if (link(src, dst) < 0)
                        return fk_error_set(err, -errno, "link %s: %m", dst);
        }
        *ret = TAKE_PTR(origin);
        return 0;
}

static bool restored_once(struct agent_daemon *d, const char *key)
{
        json_t *v = agent_store_get(d->store, key, AGENT_STORE_RESTORED);

        json_decref(v);
        return v != NULL;
}

int agent_restore_plan(struct agent_daemon *d, struct agent_session *s, struct agent_restore *r,
                       struct fk_error *err)
{
        cleanup_free char *sd = NULL, *dir = NULL, *pkey = NULL;
        int k;

        *r = (struct agent_restore){0};
        if (agent_session_state_dir(d->cfg->state_dir, s->key, &sd) < 0)
                return -ENOMEM;
        if (s->rollback_to) {
                cleanup_free char *origin = NULL;

                k = agent_checkpoint_own_dir(d, s, s->rollback_to, &dir, err);
                if (k >= 0)
                        k = rollback_link_origin(dir, sd, &origin, err);
                if (k >= 0)
                        k = restore_from(origin, NULL, true, s->name, r, err);
                r->rollback = true;
                if (k >= 0 && !(r->template_dir = strdup(dir)))
                        k = -ENOMEM;
                return k;
        }
        if (s->fork_parent && !restored_once(d, s->key)) {
                cleanup_free char *origin = NULL, *disk = NULL;

                /* the links made when the fork was created (see fork_link_origin) */
                if (fk_asprintf(&origin, "%s/origin", sd) < 0 || agent_disk_dir(sd, &disk) < 0 ||
                    fk_asprintf(&pkey, "%s.%s", s->namespace, s->fork_parent) < 0 ||
                    agent_checkpoint_dir(d->cfg->state_dir, pkey, s->fork_checkpoint, &dir) < 0)
                        return -ENOMEM;
                /* its parent's checkpoint, if still there, keeps the overlay's template */
                if (access(dir, F_OK) == 0 && !(r->template_dir = strdup(dir)))
                        return -ENOMEM;
                if (access(origin, F_OK) == 0)
                        return restore_from(origin, disk, true, s->name, r, err);
                if (access(dir, F_OK) < 0)
                        return fk_error_set(err, -ENOENT, "checkpoint %s of session %s is gone",
                                            s->fork_checkpoint, s->fork_parent);
                return restore_from(dir, NULL, true, s->name, r, err);
        }
        if (s->from_snapshot && agent_disk_active(d->store, sd, s->key, &dir) == -ENOENT) {
                if (fk_asprintf(&r->layer, "%s/snapshots/%s/disk.qcow2", d->cfg->state_dir,
                                s->from_snapshot) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* A new overlay over r->layer becomes the active disk; *ret: its path. */
static int restore_disk(const struct agent_restore *r, struct agent_store *st, const char *key,
                        const char *state_dir, char **ret, struct fk_error *err)
{
        cleanup_free char *next = NULL, *old = NULL;
        int k;

        k = agent_disk_next_path(state_dir, "workspace", &next);
        if (k < 0)
                return fk_error_set(err, k, "new overlay: %s", strerror(-k));
        /* every fork and rollback of a checkpoint makes the same overlay: its dir keeps one */
        k = agent_disk_create_overlay_from(next, r->layer, r->template_dir, err);
        if (k < 0) {
                unlink(next);
                return agent_space_explain(k, state_dir, "stateDir", AGENT_SPACE_OVERLAY, "restore",
                                           err);
        }
        (void)agent_disk_active(st, state_dir, key, &old);
        k = agent_disk_set_active(st, key, next, err);
        if (k < 0) {
                unlink(next);
                return agent_space_explain(k, state_dir, "stateDir", AGENT_SPACE_OVERLAY, "restore",
                                           err);
        }
        if (old)
                unlink(old); /* layers of checkpoints keep their own name */
        *ret = TAKE_PTR(next);
        return 0;
}

int agent_restore_prepare(const struct agent_restore *r, struct agent_store *st, const char *key,
                          const char *state_dir, const char *run_dir, char **ret_disk,
                          char **ret_mem, struct fk_error *err)
{
        cleanup_free char *next = NULL, *mem = NULL, *src = NULL;
        /* A snapshot restore or cold boot owns its RAM; forks and rollbacks map the
         * checkpoint's copy-on-write (no copy: later checkpoints take the live path). */
        bool copy = r->ck_dir && !r->private_ram;
        uint64_t need = 0;
        int k;

        if (r->ck_dir && fk_asprintf(&src, "%s/ram", r->ck_dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        /* both checks before the disk changes */
        if (copy && (need = agent_space_allocated(src)) &&
            (k = agent_space_check(run_dir, "runDir", need, "rollback", err)) < 0)
                return k;
        if (r->layer &&
            (k = agent_space_check(state_dir, "stateDir", AGENT_SPACE_OVERLAY, "restore", err)) < 0)
                return k;
        if (r->layer && (k = restore_disk(r, st, key, state_dir, &next, err)) < 0)
                return k;
        if (copy) {
                if (fk_asprintf(&mem, "%s/mem.ram", run_dir) < 0)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                k = vmm_sparse_copy(src, mem, 0, NULL);
                if (k < 0) {
                        fk_error_set(err, k, "copy %s: %s", src, strerror(-k));
                        return agent_space_explain(k, run_dir, "runDir", need, "rollback", err);
                }
        } else if (src)
                mem = TAKE_PTR(src);
        if (!next)
                (void)agent_disk_active(st, state_dir, key, &next);
        *ret_disk = TAKE_PTR(next);
        *ret_mem = TAKE_PTR(mem);
        return 0;
}

const char *agent_restore_reason(const struct agent_restore *r, bool failed)
{
        if (r->ck_dir && r->rollback)
                return failed ? "RollbackFailed" : "RollingBack";
        if (r->ck_dir)
                return failed ? "ForkFailed" : "Forking";
        if (r->layer)
                return failed ? "RestoreFailed" : "Restoring";
        return failed ? "BootFailed" : "Booting";
}

void agent_restore_describe(const struct agent_session *s, const struct agent_restore *r,
                            unsigned mib, unsigned vcpus, char *buf, size_t size)
{
        if (r->ck_dir && r->rollback)
                snprintf(buf, size, "rolling back to checkpoint %s (a %u MiB, %u vCPU microVM)",
                         s->rollback_to ? s->rollback_to : r->ck_id, mib, vcpus);
        else if (r->ck_dir)
                snprintf(buf, size, "restoring checkpoint %s of %s into a %u MiB, %u vCPU microVM",
                         s->fork_checkpoint ? s->fork_checkpoint : r->ck_id,
                         s->fork_parent ? s->fork_parent : "?", mib, vcpus);
        else if (r->layer)
                snprintf(buf, size, "booting a %u MiB, %u vCPU microVM on snapshot %s", mib, vcpus,
                         s->from_snapshot ? s->from_snapshot : "?");
        else
                snprintf(buf, size, "booting a %u MiB, %u vCPU microVM", mib, vcpus);
}

/* The restore in the state record: the guest's new identity, the checkpoint it came from, and
 * the rollback done. Logged on failure (the VM runs already). */
static int restore_record(struct agent_daemon *d, struct agent_session *s,
                          const struct agent_restore *r)
{
        struct agent_store_change c[3] = {{AGENT_STORE_RESTORED, json_string(r->fork_id)}};
        struct fk_error err = {0};
        size_t n = 1;
        int k;

        if (r->ck_id[0])
                c[n++] = (struct agent_store_change){AGENT_STORE_LINEAGE, json_string(r->ck_id)};
        if (s->source != AGENT_SOURCE_FILE && s->spec)
                c[n++] = (struct agent_store_change){AGENT_STORE_SESSION,
                                                     agent_store_session_json(s)};
        k = agent_store_update(d->store, s->key, c, n, &err);
        if (k < 0)
                log_error("session %s: restored, but that is not stored: %s", s->key, err.msg);
        return k;
}

/* Called by the boot job after a successful restore (under the lock). */
void agent_restore_finish(struct agent_daemon *d, struct agent_session *s,
                          const struct agent_restore *r)
{
        if (!r->ck_dir)
                return;
        if (r->rollback && s->rollback_to)
                agent_session_add_event(s, agent_now_real(d), false, "RolledBack",
                                        "rolled back to checkpoint %s, QEMU pid %d", s->rollback_to,
                                        (int)s->pid);
        if (r->rollback || s->fork_parent)
                agent_dirty_log_after_restore(d, s, !r->rollback);
        free(s->fork_id);
        s->fork_id = strdup(r->fork_id);
        free(s->rollback_to);
        s->rollback_to = NULL;
        (void)restore_record(d, s, r);
}

/* Outside the lock: ACL rewrites and an rm -rf were the longest part of a fork's time under the
 * daemon lock, which every other fork's job waits for. */
void agent_restore_release(const char *key, const char *sd, const struct agent_restore *r)
{
        cleanup_free char *mark = NULL;

        if (!r->ck_dir)
                return;
        /* A fork's RAM links are no longer needed once it runs (QEMU keeps its mapping), nor
         * is its uid's grant on them: they are the checkpoint's files, shared by every fork. */
        if (r->private_ram && fk_asprintf(&mark, "%s/origin", sd) >= 0) {
                int k = agent_jail_revoke_under(sd, mark);

                if (k < 0)
                        log_warning_errno(k, "session %s: revoke the grants on %s: %m", key, mark);
                (void)fk_rm_rf(mark);
        }
}

/* <runDir>/sessions/.replaced, and in it KEY.ram */
static int replaced_ram_path(struct agent_daemon *d, const char *key, char **ret_dir,
                             char **ret_file)
{
        if (fk_asprintf(ret_dir, "%s/" AGENT_REPLACED_RAM_DIR, d->cfg->run_dir) < 0 ||
            fk_asprintf(ret_file, "%s/%s.ram", *ret_dir, key) < 0)
                return -ENOMEM;
        return 0;
}

void agent_rollback_set_aside_ram(struct agent_daemon *d, const char *key)
{
        cleanup_free char *run_dir = NULL, *mem = NULL, *dir = NULL, *dst = NULL;
        int k;

        if (agent_session_run_dir(d->cfg->run_dir, key, &run_dir) < 0 ||
            fk_asprintf(&mem, "%s/mem.ram", run_dir) < 0 ||
            replaced_ram_path(d, key, &dir, &dst) < 0)
                return;
        if (access(mem, F_OK) < 0) /* a restored VM's RAM is its checkpoint's */
                return;
        k = fk_mkdir_p(dir, 0700);
        if (k >= 0 && rename(mem, dst) < 0)
                k = -errno;
        if (k < 0)
                log_warning_errno(k, "session %s: set the replaced VM's RAM file aside: %m", key);
}

uint64_t agent_rollback_ram_aside(struct agent_daemon *d, const char *key)
{
        cleanup_free char *dir = NULL, *path = NULL;

        return replaced_ram_path(d, key, &dir, &path) < 0 ? 0 : agent_space_allocated(path);
}

void agent_rollback_drop_all_ram(struct agent_daemon *d)
{
        cleanup_free char *dir = NULL;

        if (fk_asprintf(&dir, "%s/" AGENT_REPLACED_RAM_DIR, d->cfg->run_dir) >= 0)
                (void)fk_rm_rf(dir);
}

bool agent_rollback_drop_ram(struct agent_daemon *d, const char *key)
{
        cleanup_free char *dir = NULL, *path = NULL;

        if (replaced_ram_path(d, key, &dir, &path) < 0)
                return false;
        if (unlink(path) >= 0)
                return true;
        if (errno != ENOENT)
                log_warning_errno(-errno, "session %s: remove %s: %m", key, path);
        return false;
}
