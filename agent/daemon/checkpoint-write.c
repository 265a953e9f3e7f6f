/* SPDX-License-Identifier: MIT */
/* The Writing phase of a checkpoint: after a live save the guest runs again while a background
 * thread turns the stream into the files forks map (Writing -> Ready); forks, rollbacks and
 * deletes of it wait; one left Writing by a killed forkletd is removed on the next start. */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITE_TIMEOUT_MS 300000

/* Checkpoint dirs being written by this process (their threads run). */
struct ck_writer {
        struct ck_writer *next;
        char *dir;
};
static pthread_mutex_t writers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ck_writer *writers;

bool agent_checkpoint_writing(const char *dir)
{
        bool found = false;

        pthread_mutex_lock(&writers_lock);
        for (struct ck_writer *w = writers; w && !found; w = w->next)
                found = strcmp(w->dir, dir) == 0;
        pthread_mutex_unlock(&writers_lock);
        return found;
}

static int writers_add(const char *dir)
{
        struct ck_writer *w = calloc(1, sizeof(*w));

        if (!w || !(w->dir = strdup(dir))) {
                free(w);
                return -ENOMEM;
        }
        pthread_mutex_lock(&writers_lock);
        w->next = writers;
        writers = w;
        pthread_mutex_unlock(&writers_lock);
        return 0;
}

static void writers_remove(const char *dir)
{
        pthread_mutex_lock(&writers_lock);
        for (struct ck_writer **p = &writers; *p; p = &(*p)->next)
                if (strcmp((*p)->dir, dir) == 0) {
                        struct ck_writer *w = *p;

                        *p = w->next;
                        free(w->dir);
                        free(w);
                        break;
                }
        pthread_mutex_unlock(&writers_lock);
}

bool agent_checkpoint_session_writing(struct agent_daemon *d, const char *key)
{
        cleanup_free char *prefix = NULL;
        bool found = false;

        if (fk_asprintf(&prefix, "%s/sessions/%s/checkpoints/", d->cfg->state_dir, key) < 0)
                return true; /* unknown: as if writing */
        pthread_mutex_lock(&writers_lock);
        for (struct ck_writer *w = writers; w && !found; w = w->next)
                found = strncmp(w->dir, prefix, strlen(prefix)) == 0;
        pthread_mutex_unlock(&writers_lock);
        return found;
}

bool agent_checkpoint_meta_writing(const json_t *meta)
{
        const char *st = json_string_value(json_object_get(meta, "status"));

        return st && strcmp(st, "Writing") == 0;
}

/* The helper QEMU a killed forkletd left writing dir (see dir/helper.pid), if still there. */
static void kill_helper(const char *dir)
{
        cleanup_free char *path = NULL, *buf = NULL;
        struct vmm_process *proc = NULL;
        unsigned long long start = 0;
        int pid = 0;

        if (fk_asprintf(&path, "%s/helper.pid", dir) < 0 ||
            fk_read_file(path, 64, &buf, NULL) < 0 || sscanf(buf, "%d %llu", &pid, &start) != 2 ||
            pid <= 1)
                return;
        if (vmm_process_adopt((pid_t)pid, (uint64_t)start, &proc) < 0)
                return;
        (void)vmm_process_kill(proc, SIGKILL);
        (void)vmm_process_wait(proc, 5000);
        vmm_process_free(proc);
        log_info("ended helper QEMU %d of %s", pid, dir);
}

void agent_checkpoint_clean_writing(const char *root)
{
        struct dirent *de;
        DIR *dp = opendir(root);

        while (dp && (de = readdir(dp))) {
                cleanup_free char *p = NULL;
                json_t *m;

                if (strncmp(de->d_name, "ck_", 3) || fk_asprintf(&p, "%s/%s", root, de->d_name) < 0)
                        continue;
                m = agent_checkpoint_read_meta(p);
                if (agent_checkpoint_meta_writing(m) && !agent_checkpoint_writing(p)) {
                        kill_helper(p);
                        if (fk_rm_rf(p) >= 0)
                                log_info("removed %s: its write did not finish", p);
                }
                json_decref(m);
        }
        if (dp)
                closedir(dp);
}

bool agent_checkpoint_id_writing(struct agent_daemon *d, const struct agent_session *s,
                                 const char *id)
{
        cleanup_free char *dir = NULL;

        return id && id[0] && agent_checkpoint_dir(d->cfg->state_dir, s->key, id, &dir) >= 0 &&
               agent_checkpoint_writing(dir);
}

int agent_checkpoint_wait_written(struct agent_daemon *d, const struct agent_session *s,
                                  const char *dir, const char *id, struct fk_error *err)
{
        bool waited = false, alive = false;

        while (agent_checkpoint_writing(dir)) {
                waited = true;
                pthread_cond_wait(&d->changed, &d->lock);
        }
        if (!waited)
                return 0;
        for (size_t i = 0; i < d->n_sessions && !alive; i++)
                alive = d->sessions[i] == s && s->spec;
        if (!alive)
                return fk_error_set(err, -ENOENT, "session %s was deleted meanwhile", id);
        if (access(dir, F_OK) < 0)
                return fk_error_set(err, -ENOENT,
                                    "checkpoint %s failed while it was written (see the "
                                    "session's events)",
                                    id);
        return 0;
}

struct write_job {
        struct agent_daemon *d;
        struct agent_vm_ref *vm;
        char *key, *dir, *frozen;
        char id[48];
        uint64_t t0;
};

static void write_job_free(struct write_job *j)
{
        agent_vm_ref_put(j->vm);
        free(j->key);
        free(j->dir);
        free(j->frozen);
        free(j);
}

/* Ready: the sizes the write measured and how long it took. */
static int mark_ready(struct write_job *j, const struct agent_checkpoint_result *res)
{
        json_t *m = agent_checkpoint_read_meta(j->dir);
        int r;

        if (!m)
                return -ENOENT;
        json_object_set_new(m, "status", json_string("Ready"));
        json_object_set_new(m, "ramBytes", json_integer((json_int_t)res->ram_bytes));
        json_object_set_new(m, "stateBytes", json_integer((json_int_t)res->state_bytes));
        json_object_set_new(m, "materialized", json_boolean(res->materialized));
        json_object_set_new(m, "writeNs", json_integer((json_int_t)(fk_now_mono_ns() - j->t0)));
        r = agent_checkpoint_write_meta(j->dir, m);
        json_decref(m);
        return r;
}

static void write_finish(struct write_job *j, int r, const struct fk_error *err)
{
        struct agent_daemon *d = j->d;
        uint64_t now = agent_now_real(d);

        pthread_mutex_lock(&d->lock);
        writers_remove(j->dir);
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];

                if (strcmp(s->key, j->key))
                        continue;
                if (r >= 0) {
                        agent_session_add_event(s, now, false, "CheckpointReady",
                                                "checkpoint %s written in %.0f ms", j->id,
                                                (double)(fk_now_mono_ns() - j->t0) / 1e6);
                        agent_give_back_after_checkpoint(d, s);
                }
                /* compaction waited for the helper QEMU to be done with the layers */
                agent_compact_after_checkpoint(d, s);
                if (r < 0)
                        agent_session_add_event(s, now, true, "CheckpointFailed",
                                                "checkpoint %s: writing failed: %s", j->id,
                                                err->msg[0] ? err->msg : strerror(-r));
                agent_ck_cache_reload(d, s);
        }
        d->workers--;
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
        agent_daemon_wake(d);
}

static void *write_thread(void *arg)
{
        struct write_job *j = arg;
        struct agent_daemon *d = j->d;
        struct agent_checkpoint_params p = {
                .dir = j->dir, .frozen_disk = j->frozen, .timeout_ms = WRITE_TIMEOUT_MS};
        struct agent_checkpoint_result res = {0};
        struct fk_error err = {0}, terr = {0};
        int r;

        r = d->ops.checkpoint_write(d->ops.userdata, j->vm->vm, &p, &res, &err);
        /* The overlay every fork and rollback of it starts on, made now rather than by the
         * first of them (qemu-img, 25-40 ms of the first rollback). Best effort. */
        if (r >= 0 && j->frozen && agent_disk_overlay_template(j->frozen, j->dir, &terr) < 0)
                log_debug("session %s: checkpoint %s: no overlay template: %s", j->key, j->id,
                          terr.msg);
        if (r >= 0 && (r = mark_ready(j, &res)) < 0)
                fk_error_set(&err, r, "record %s: %s", j->dir, strerror(-r));
        if (r < 0) {
                /* nothing half-written stays listed */
                (void)fk_rm_rf(j->dir);
                log_warning("session %s: checkpoint %s not kept: %s", j->key, j->id, err.msg);
        } else
                log_info("session %s: checkpoint %s ready (%.1f MiB RAM, written in %.0f ms)",
                         j->key, j->id, (double)res.ram_bytes / 1048576.0,
                         (double)(fk_now_mono_ns() - j->t0) / 1e6);
        write_finish(j, r, &err);
        write_job_free(j);
        return NULL;
}

int agent_checkpoint_write_start(struct agent_daemon *d, const char *key, const char *id,
                                 const char *dir, const char *frozen, struct agent_vm_ref *vm)
{
        struct write_job *j = calloc(1, sizeof(*j));
        pthread_attr_t attr;
        pthread_t t;
        int r;

        if (!j || !(j->key = strdup(key)) || !(j->dir = strdup(dir)) ||
            (frozen && !(j->frozen = strdup(frozen)))) {
                if (j)
                        write_job_free(j);
                return -ENOMEM;
        }
        snprintf(j->id, sizeof(j->id), "%s", id);
        j->d = d;
        j->vm = agent_vm_ref_get(vm);
        j->t0 = fk_now_mono_ns();
        r = writers_add(dir);
        if (r < 0) {
                write_job_free(j);
                return r;
        }
        pthread_mutex_lock(&d->lock);
        d->workers++; /* shutdown waits for the write */
        pthread_mutex_unlock(&d->lock);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&t, &attr, write_thread, j);
        pthread_attr_destroy(&attr);
        if (r < 0)
                write_thread(j); /* no thread: write it here */
        return 0;
}
