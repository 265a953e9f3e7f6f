/* SPDX-License-Identifier: MIT */
/* Using a session's VM from outside the reconcile loop: exec (holding a VM reference so a
 * concurrent stop cannot free it) and re-adopting the VMs the state records name after a
 * restart. */
#include "agent/daemon/daemon-internal.h"
#include "agent/image/image.h"
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

/* spec.env as "K=V" followed by the request's entries (later ones win in the guest). */
static int merged_env(const struct session_manifest *m, char *const *extra, char ***ret)
{
        char **v = NULL;
        int r = 0;

        for (size_t i = 0; m && i < m->n_env && r >= 0; i++) {
                cleanup_free char *kv = NULL;

                r = fk_asprintf(&kv, "%s=%s", m->env[i].key, m->env[i].value);
                if (r >= 0)
                        r = fk_strv_push(&v, kv);
        }
        for (size_t i = 0; extra && extra[i] && r >= 0; i++)
                r = fk_strv_push(&v, extra[i]);
        if (r < 0) {
                fk_strv_free(v);
                return r;
        }
        *ret = v;
        return 0;
}

int agent_daemon_exec(struct agent_daemon *d, const char *ns, const char *name,
                      const struct vmm_exec_request *req,
                      int (*out_fn)(int stream, const void *data, size_t size, void *ud),
                      void *out_userdata, struct vmm_exec_result *ret, struct fk_error *err)
{
        struct vmm_exec_request copy = *req;
        struct agent_image_exec ix = {0};
        struct agent_vm_ref *vm = NULL;
        struct agent_session *s = NULL;
        char **env = NULL, key[2 * 64 + 2] = "";
        int r;

        pthread_mutex_lock(&d->lock);
        r = agent_daemon_find_running(d, ns, name, &s, err);
        if (r >= 0)
                r = merged_env(s->spec, req->env, &env);
        if (r >= 0 && s->fork_id) {
                cleanup_free char *kv = NULL;

                /* Before the request's own entries would be nicer, but later ones win anyway. */
                r = fk_asprintf(&kv, "FORKLET_FORK_ID=%s", s->fork_id);
                if (r >= 0)
                        r = fk_strv_push(&env, kv);
        }
        if (r >= 0)
                vm = agent_vm_ref_get(s->vm);
        if (r >= 0 && manifest_image_is_ref(s->spec->image))
                snprintf(key, sizeof(key), "%s", s->key);
        pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return r;
        copy.env = env;
        /* an OCI image's Env (under spec.env), WorkingDir and User (unless the request names
         * them) */
        if (key[0] && agent_image_exec_prepare(d, key, env, false, &ix) >= 0) {
                copy.env = ix.env;
                copy.cwd = req->cwd ? req->cwd : ix.cwd;
                copy.user = req->user ? req->user : ix.user;
        }
        uint64_t t0 = fk_now_mono_ns();
        r = d->ops.exec(d->ops.userdata, vm->vm, &copy, out_fn, out_userdata, ret, err);
        agent_metrics_op_done(AGENT_OP_EXEC, r, t0);
        agent_vm_ref_put(vm);
        fk_strv_free(env);
        agent_image_exec_done(&ix);
        return r;
}

int agent_daemon_exec_check(struct agent_daemon *d, const char *ns, const char *name,
                            struct fk_error *err)
{
        struct agent_session *s;
        int r;

        pthread_mutex_lock(&d->lock);
        r = agent_daemon_find_running(d, ns, name, &s, err);
        pthread_mutex_unlock(&d->lock);
        return r;
}

/* Splits "<namespace>.<name>" (both DNS labels, so the first dot separates them). */
static bool split_key(const char *key, char *ns, size_t ns_size, const char **name)
{
        const char *dot = strchr(key, '.');

        if (!dot || (size_t)(dot - key) >= ns_size)
                return false;
        memcpy(ns, key, (size_t)(dot - key));
        ns[dot - key] = '\0';
        *name = dot + 1;
        return manifest_name_is_valid(ns) && manifest_name_is_valid(*name);
}

/* The adopted VM writes another overlay than the store names (the backend asked QEMU): a
 * checkpoint whose disk switch the killed forkletd made but did not record. The store follows
 * the VM, so a later start or checkpoint builds on the file it wrote. */
static void adopt_disk_record(struct agent_daemon *d, const char *key, struct agent_vm_ref *vm)
{
        json_t *rec = d->ops.record ? d->ops.record(vm->vm) : NULL;
        const char *disk = json_string_value(json_object_get(rec, "disk"));
        const char *base = disk && strrchr(disk, '/') ? strrchr(disk, '/') + 1 : disk;
        cleanup_free char *stored = agent_store_get_string(d->store, key, AGENT_STORE_DISK);

        if (base && stored && strcmp(base, stored) != 0) {
                log_warning("session %s: the adopted VM writes %s, not %s: stored", key, base,
                            stored);
                agent_checkpoint_record_disk(d, key, vm, disk);
        }
        json_decref(rec);
}

static void adopt_one(struct agent_daemon *d, const char *key, const json_t *record)
{
        cleanup_free char *run_dir = NULL;
        struct fk_error err = {0};
        struct agent_session *s;
        const char *name;
        char ns[64];
        void *vm = NULL;
        int r;

        if (!split_key(key, ns, sizeof(ns), &name) ||
            agent_session_run_dir(d->cfg->run_dir, key, &run_dir) < 0)
                return;
        r = d->ops.adopt(d->ops.userdata, run_dir, record, d->accel, &vm, &err);
        if (r < 0) {
                log_info("session %s: no VM to adopt (%s); cleaning %s", key,
                         err.msg[0] ? err.msg : strerror(-r), run_dir);
                (void)fk_rm_rf(run_dir);
                agent_vm_record_clear(d, key);
                return;
        }
        s = agent_daemon_find(d, ns, name);
        if (!s) {
                s = agent_session_new(ns, name);
                if (!s || agent_daemon_insert(d, s) < 0) {
                        agent_session_free(s);
                        d->ops.free(d->ops.userdata, vm);
                        return;
                }
                s->deleted_ns = agent_now_real(d); /* orphan: destroy */
        }
        s->vm = agent_vm_ref_new(vm, &d->ops);
        if (!s->vm) {
                d->ops.free(d->ops.userdata, vm);
                return;
        }
        s->pid = d->ops.pid(vm);
        adopt_disk_record(d, key, s->vm);
        s->phase = SESSION_PHASE_RUNNING;
        s->observed_generation = s->generation;
        agent_health_reset(s);
        /* status.identity of the machine that keeps running (stored at its boot) */
        json_decref(s->identity);
        s->identity = agent_store_get(d->store, key, AGENT_STORE_IDENTITY);
        if (!s->fork_id)
                s->fork_id = agent_store_get_string(d->store, key, AGENT_STORE_RESTORED);
        s->started_ns = agent_now_real(d);
        agent_session_set_condition(s, AGENT_COND_READY, "True", "Adopted", s->started_ns,
                                    "re-attached to QEMU pid %d", (int)s->pid);
        log_info("session %s: adopted running VM (pid %d)%s", key, (int)s->pid,
                 s->spec ? "" : ", no manifest: will be deleted");
        /* A restored VM (a rollback's or a fork's): the killed forkletd's mark that its dirty
         * bitmap was still to be cleared is gone with it, so the job runs again once the
         * session is idle (on a bitmap already clean it costs QEMU one pass, a few ms). Which
         * restore it was is not kept: a fork's waits for its siblings to go, rolled back or not. */
        if (s->fork_id)
                agent_dirty_log_after_restore(d, s, s->fork_parent != NULL);
        /* A rollback whose forkletd was killed after its boot started: the boot made room in
         * the limits for the replaced VM's RAM file, which goes now, and the room with it once
         * the cgroups are known (agent_daemon_set_cgroups). */
        if (agent_rollback_drop_ram(d, key))
                s->res.reset_limits_mib =
                        (unsigned)json_integer_value(json_object_get(record, "memoryMiB"));
}

void agent_executor_adopt_all(struct agent_daemon *d)
{
        char **keys = NULL;

        if (agent_store_keys(d->store, &keys) < 0)
                return;
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; keys[i]; i++) {
                json_t *rec = agent_store_get(d->store, keys[i], AGENT_STORE_VM);

                if (rec)
                        adopt_one(d, keys[i], rec);
                json_decref(rec);
        }
        pthread_mutex_unlock(&d->lock);
        fk_strv_free(keys);
        agent_rollback_drop_all_ram(d); /* of the VMs no one adopted */
}
