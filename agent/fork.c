/* SPDX-License-Identifier: MIT */
/* Forks and rollback: what a boot restores from (a parent's checkpoint with copy-on-write RAM,
 * or the session's own checkpoint with a RAM copy), afterStart + spec.checkpoints after a cold
 * boot, `fork` and `rollback` requests, spec.forks reconciliation and fork status. */
#include "agent/agent-internal.h"
#include "agent/jail.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AFTER_START_TIMEOUT_MS 120000
#define RESTORED_MARK          "restored"

void agent_restore_done(struct agent_restore *r)
{
        free(r->ck_dir);
        free(r->layer);
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
        json_decref(meta);
        return k;
}

static bool restored_once(const char *state_dir)
{
        cleanup_free char *p = NULL;

        return fk_asprintf(&p, "%s/" RESTORED_MARK, state_dir) >= 0 && access(p, F_OK) == 0;
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
                k = agent_checkpoint_own_dir(d, s, s->rollback_to, &dir, err);
                return k < 0 ? k : restore_from(dir, NULL, false, s->name, r, err);
        }
        if (s->fork_parent && !restored_once(sd)) {
                cleanup_free char *origin = NULL, *disk = NULL;

                /* the links made when the fork was created (see fork_link_origin) */
                if (fk_asprintf(&origin, "%s/origin", sd) < 0 || agent_disk_dir(sd, &disk) < 0)
                        return -ENOMEM;
                if (access(origin, F_OK) == 0)
                        return restore_from(origin, disk, true, s->name, r, err);
                if (fk_asprintf(&pkey, "%s.%s", s->namespace, s->fork_parent) < 0 ||
                    agent_checkpoint_dir(d->cfg->state_dir, pkey, s->fork_checkpoint, &dir) < 0)
                        return -ENOMEM;
                if (access(dir, F_OK) < 0)
                        return fk_error_set(err, -ENOENT, "checkpoint %s of session %s is gone",
                                            s->fork_checkpoint, s->fork_parent);
                return restore_from(dir, NULL, true, s->name, r, err);
        }
        if (s->from_snapshot && agent_disk_active(sd, &dir) == -ENOENT) {
                if (fk_asprintf(&r->layer, "%s/snapshots/%s/disk.qcow2", d->cfg->state_dir,
                                s->from_snapshot) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* A new overlay over r->layer becomes the active disk; *ret: its path. */
static int restore_disk(const struct agent_restore *r, const char *state_dir, char **ret,
                        struct fk_error *err)
{
        cleanup_free char *next = NULL, *old = NULL;
        int k;

        k = agent_disk_next_path(state_dir, "workspace", &next);
        if (k < 0)
                return fk_error_set(err, k, "new overlay: %s", strerror(-k));
        k = agent_disk_create_overlay(next, r->layer, err);
        if (k < 0) {
                unlink(next);
                return agent_space_explain(k, state_dir, "stateDir", AGENT_SPACE_OVERLAY, "restore",
                                           err);
        }
        (void)agent_disk_active(state_dir, &old);
        k = agent_disk_set_active(state_dir, next);
        if (k < 0) {
                unlink(next);
                fk_error_set(err, k, "record active disk: %s", strerror(-k));
                return agent_space_explain(k, state_dir, "stateDir", AGENT_SPACE_OVERLAY, "restore",
                                           err);
        }
        if (old)
                unlink(old); /* layers of checkpoints keep their own name */
        *ret = TAKE_PTR(next);
        return 0;
}

int agent_restore_prepare(const struct agent_restore *r, const char *state_dir, const char *run_dir,
                          char **ret_disk, char **ret_mem, struct fk_error *err)
{
        cleanup_free char *next = NULL, *mem = NULL, *src = NULL;
        /* Rollback owns its RAM again (a copy into runDir), so later checkpoints need no
         * materialize step; the copy costs only the checkpoint's touched RAM. */
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
        if (r->layer && (k = restore_disk(r, state_dir, &next, err)) < 0)
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
                (void)agent_disk_active(state_dir, &next);
        *ret_disk = TAKE_PTR(next);
        *ret_mem = TAKE_PTR(mem);
        return 0;
}

const char *agent_restore_reason(const struct agent_restore *r, bool failed)
{
        if (r->ck_dir && !r->private_ram)
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
        if (r->ck_dir && !r->private_ram)
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

/* Called by the boot job after a successful restore (under the lock). */
void agent_restore_finish(struct agent_daemon *d, struct agent_session *s,
                          const struct agent_restore *r)
{
        if (!r->ck_dir)
                return;
        if (!r->private_ram && s->rollback_to)
                agent_session_add_event(s, d->clock.now_real_ns(d->clock.userdata), false,
                                        "RolledBack", "rolled back to checkpoint %s, QEMU pid %d",
                                        s->rollback_to, (int)s->pid);
        free(s->fork_id);
        s->fork_id = strdup(r->fork_id);
        free(s->rollback_to);
        s->rollback_to = NULL;
}

/* Outside the lock: fsynced files, ACL rewrites and an rm -rf were the longest part of a fork's
 * time under the daemon lock, which every other fork's job waits for. */
void agent_restore_release(const char *key, const char *sd, const struct agent_restore *r)
{
        cleanup_free char *mark = NULL;

        if (!r->ck_dir)
                return;
        if (fk_asprintf(&mark, "%s/" RESTORED_MARK, sd) >= 0)
                (void)fk_write_file_atomic(mark, r->fork_id, strlen(r->fork_id), 0600);
        free(mark);
        mark = NULL;
        /* A fork's RAM links are no longer needed once it runs (QEMU keeps its mapping), nor
         * is its uid's grant on them: they are the checkpoint's files, shared by every fork. */
        if (r->private_ram && fk_asprintf(&mark, "%s/origin", sd) >= 0) {
                int k = agent_jail_revoke_under(sd, mark);

                if (k < 0)
                        log_warning_errno(k, "session %s: revoke the grants on %s: %m", key, mark);
                (void)fk_rm_rf(mark);
        }
        free(mark);
        mark = NULL;
        if (r->ck_id[0] && fk_asprintf(&mark, "%s/lineage", sd) >= 0)
                (void)fk_write_file_atomic(mark, r->ck_id, strlen(r->ck_id), 0600);
}

/* The last bytes afterStart wrote to stderr, for the condition that reports its failure. */
struct stderr_tail {
        char buf[160];
        size_t len;
};

static int keep_stderr_tail(int stream, const void *data, size_t size, void *ud)
{
        struct stderr_tail *t = ud;
        size_t cap = sizeof(t->buf) - 1;

        if (stream != 2 || size == 0)
                return 0;
        if (size >= cap) {
                memcpy(t->buf, (const char *)data + size - cap, cap);
                t->len = cap;
        } else {
                if (t->len + size > cap) {
                        size_t drop = t->len + size - cap;

                        memmove(t->buf, t->buf + drop, t->len - drop);
                        t->len -= drop;
                }
                memcpy(t->buf + t->len, data, size);
                t->len += size;
        }
        t->buf[t->len] = '\0';
        return 0;
}

/* 0, or -errno with err saying how afterStart failed (exit code or signal and its stderr tail,
 * guest text escaped). Does not log. */
static int run_after_start(struct agent_daemon *d, struct agent_vm_ref *vm, char *const *argv,
                           char *const *env, struct fk_error *err)
{
        struct vmm_exec_request req = {
                .argv = argv, .env = env, .timeout_ms = AFTER_START_TIMEOUT_MS};
        struct vmm_exec_result res = {0};
        struct stderr_tail tail = {0};
        char how[48], text[sizeof(tail.buf) * 4];
        int r;

        r = d->ops.exec(d->ops.userdata, vm->vm, &req, keep_stderr_tail, &tail, &res, err);
        if (r < 0)
                return err->msg[0] ? r : fk_error_set(err, r, "%s", strerror(-r));
        if (!res.signaled && !res.timed_out && res.exit_code == 0)
                return 0;
        if (res.timed_out)
                snprintf(how, sizeof(how), "timed out after %u s", AFTER_START_TIMEOUT_MS / 1000);
        else if (res.signaled)
                snprintf(how, sizeof(how), "killed by signal %d", res.signal);
        else
                snprintf(how, sizeof(how), "exited %d", res.exit_code);
        fk_escape_text(tail.buf, text, sizeof(text));
        return fk_error_set(err, -EIO, "afterStart %s%s%s", how, text[0] ? "; stderr: " : "", text);
}

/* Whether a checkpoint named name exists in state dir sd. */
static bool named_checkpoint_exists(const char *sd, const char *name)
{
        json_t *a = agent_checkpoints_list(sd), *m;
        bool found = false;
        size_t i;

        json_array_foreach(a, i, m)
        {
                const char *n = json_string_value(json_object_get(m, "name"));

                if (n && strcmp(n, name) == 0)
                        found = true;
        }
        json_decref(a);
        return found;
}

static uint64_t now_real(struct agent_daemon *d)
{
        return d->clock.now_real_ns(d->clock.userdata);
}

/* Under the lock: afterStart failed (err). The failure is a state: AfterStart False with the
 * exit and the stderr tail, Ready False with that reason, declared checkpoints (and so declared
 * forks) wait; with restartPolicy OnFailure the session fails and boots again after back-off. */
static void after_start_failed(struct agent_daemon *d, struct agent_session *s,
                               const struct fk_error *err)
{
        uint64_t now = now_real(d);

        log_error("session %s: %s", s->key, err->msg);
        agent_session_set_condition(s, AGENT_COND_AFTER_START, "False", "Failed", now, "%s",
                                    err->msg);
        if (s->spec && s->spec->n_checkpoints)
                agent_session_set_condition(s, AGENT_COND_CHECKPOINTS, "False", "AfterStartFailed",
                                            now, "%s",
                                            "spec.checkpoints wait for a successful afterStart");
        if (s->spec && s->spec->restart_policy == RESTART_POLICY_ON_FAILURE)
                agent_session_fail(d, s, "AfterStartFailed", err->msg);
        else
                agent_session_set_condition(s, AGENT_COND_READY, "False", "AfterStartFailed", now,
                                            "%s", err->msg);
}

/* Takes the declared checkpoints not taken yet; returns how many failed (err: the last). */
static unsigned take_declared(struct agent_daemon *d, struct agent_session *s,
                              struct agent_vm_ref *vm, const char *sd, char **names,
                              struct fk_error *err)
{
        unsigned failed = 0;

        for (size_t i = 0; names && names[i]; i++) {
                char id[48];

                if (named_checkpoint_exists(sd, names[i]))
                        continue;
                if (agent_checkpoint_take_flight(d, s, vm, names[i], id, err) < 0) {
                        log_error("session %s: checkpoint %s: %s", s->key, names[i], err->msg);
                        failed++;
                }
        }
        return failed;
}

void agent_post_start(struct agent_daemon *d, struct agent_session *s, struct agent_vm_ref *vm)
{
        cleanup_free char *sd = NULL;
        char **after = NULL, **names = NULL, **env = NULL;
        struct fk_error err = {0};
        unsigned failed = 0;
        int r = 0;

        pthread_mutex_lock(&d->lock);
        if (s->spec && s->spec->after_start)
                r = fk_strv_copy(s->spec->after_start, &after);
        for (size_t i = 0; s->spec && r >= 0 && i < s->spec->n_checkpoints; i++)
                r = fk_strv_push(&names, s->spec->checkpoints[i].name);
        for (size_t i = 0; s->spec && r >= 0 && i < s->spec->n_env; i++) {
                cleanup_free char *kv = NULL;

                r = fk_asprintf(&kv, "%s=%s", s->spec->env[i].key, s->spec->env[i].value);
                if (r >= 0)
                        r = fk_strv_push(&env, kv);
        }
        if (r >= 0)
                r = agent_session_state_dir(d->cfg->state_dir, s->key, &sd);
        if (r < 0)
                fk_error_set(&err, r, "afterStart: %s", strerror(-r));
        pthread_mutex_unlock(&d->lock);
        if (r >= 0 && after)
                r = run_after_start(d, vm, after, env, &err);
        if (r >= 0)
                failed = take_declared(d, s, vm, sd, names, &err);
        pthread_mutex_lock(&d->lock);
        if (r < 0) {
                after_start_failed(d, s, &err);
        } else {
                if (after)
                        agent_session_set_condition(s, AGENT_COND_AFTER_START, "True", "Succeeded",
                                                    now_real(d), "%s", "afterStart exited 0");
                if (names && failed)
                        agent_session_set_condition(s, AGENT_COND_CHECKPOINTS, "False",
                                                    "CheckpointFailed", now_real(d), "%s", err.msg);
                else if (names)
                        agent_session_set_condition(s, AGENT_COND_CHECKPOINTS, "True", "Taken",
                                                    now_real(d), "%s", "");
        }
        pthread_mutex_unlock(&d->lock);
        fk_strv_free(after);
        fk_strv_free(names);
        fk_strv_free(env);
}
