/* SPDX-License-Identifier: MIT */
/* What the fork engine's daemon tests share (fork-daemon-test, fork-rollback-daemon-test): a
 * fake checkpoint backend the tests steer, a session "hello" Running on the fake VM backend, and
 * the API calls they repeat. */
#pragma once

#include "tests/lib/agent-harness.h"

#include <dirent.h>
#include <pthread.h>

#define SESSION "/api/v1alpha1/namespaces/default/sessions/hello"
#define FORK0   "/api/v1alpha1/namespaces/default/sessions/hello-fork-0"

/* Checkpoint backend state the tests steer. */
static atomic_bool ck_fail, ck_slow, ck_release, ck_started, ck_pending, wr_release;
static atomic_int ck_calls;
static char last_restore[512];
static bool last_private;

static inline int fake_checkpoint(void *ud, void *vm, const struct agent_checkpoint_params *p,
                                  struct agent_checkpoint_result *ret, struct fk_error *err)
{
        char path[600];

        (void)ud, (void)vm;
        atomic_fetch_add(&ck_calls, 1);
        atomic_store(&ck_started, true);
        for (int i = 0; atomic_load(&ck_slow) && i < 500 && !atomic_load(&ck_release); i++)
                usleep(10000);
        if (atomic_load(&ck_fail)) {
                snprintf(path, sizeof(path), "%s/state", p->dir);
                (void)fk_write_file_atomic(path, "partial", 7, 0600);
                return fk_error_set(err, -EIO, "fake QEMU error");
        }
        snprintf(path, sizeof(path), "%s/state", p->dir);
        assert_int_equal(fk_write_file_atomic(path, "state", 5, 0600), 0);
        snprintf(path, sizeof(path), "%s/ram", p->dir);
        assert_int_equal(fk_write_file_atomic(path, "ram-bytes", 9, 0600), 0);
        *ret = (struct agent_checkpoint_result){.pause_ns = 1000000, .ram_bytes = 9};
        /* a live save: the guest runs again, the files forks map come later */
        if (atomic_load(&ck_pending)) {
                snprintf(path, sizeof(path), "%s/ram", p->dir);
                unlink(path);
                ret->write_pending = ret->live = true;
                ret->downtime_ms = 3;
        }
        return 0;
}

/* The Writing phase: waits until the test releases it, then writes ram. */
static inline int fake_write(void *ud, void *vm, const struct agent_checkpoint_params *p,
                             struct agent_checkpoint_result *ret, struct fk_error *err)
{
        char path[600];

        (void)ud, (void)vm, (void)err;
        for (int i = 0; i < 500 && !atomic_load(&wr_release); i++)
                usleep(10000);
        snprintf(path, sizeof(path), "%s/ram", p->dir);
        assert_int_equal(fk_write_file_atomic(path, "ram-bytes", 9, 0600), 0);
        ret->ram_bytes = 9;
        ret->state_bytes = 5;
        ret->materialized = true;
        return 0;
}

static atomic_int dl_calls;

static inline int counting_reset_dirty_log(void *ud, void *vm, unsigned *ret_setup_ms,
                                           struct fk_error *err)
{
        (void)ud, (void)vm, (void)err;
        atomic_fetch_add(&dl_calls, 1);
        *ret_setup_ms = 7;
        return 0;
}

static inline int recording_boot(void *ud, const struct agent_boot_params *p, void **ret_vm,
                                 struct fk_error *err)
{
        snprintf(last_restore, sizeof(last_restore), "%s", p->restore_dir ? p->restore_dir : "");
        last_private = p->mem_private;
        return fake_boot(ud, p, ret_vm, err);
}

static inline int fork_setup(void **state)
{
        struct env *e;

        setup(state);
        e = *state;
        env_stop(e);
        e->ops.checkpoint = fake_checkpoint;
        e->ops.checkpoint_write = fake_write;
        e->ops.boot = recording_boot;
        e->ops.reset_dirty_log = counting_reset_dirty_log;
        env_start(e);
        atomic_store(&dl_calls, 0);
        atomic_store(&ck_fail, false);
        atomic_store(&ck_slow, false);
        atomic_store(&ck_release, false);
        atomic_store(&ck_calls, 0);
        atomic_store(&ck_pending, false);
        atomic_store(&wr_release, false);
        agent_metrics_reset();
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        return 0;
}

static inline char *create(struct env *e, long want_status)
{
        json_t *j = NULL;
        char *id;

        assert_int_equal(req(e, "POST", SESSION "/checkpoints", "{}", &j), want_status);
        id = json_string_value(json_object_get(j, "id"))
                     ? strdup(json_string_value(json_object_get(j, "id")))
                     : NULL;
        json_decref(j);
        return id;
}

static inline size_t count_checkpoints(struct env *e, const char *path)
{
        json_t *j = NULL;
        size_t n;

        assert_int_equal(req(e, "GET", path, NULL, &j), 200);
        n = json_array_size(json_object_get(j, "items"));
        json_decref(j);
        return n;
}

static inline void metrics_has(struct env *e, const char *line)
{
        cleanup_free char *text = NULL;

        assert_int_equal(agent_daemon_metrics_text(e->d, &text), 0);
        if (!strstr(text, line))
                fail_msg("metrics lack \"%s\"", line);
}

static inline void *create_thread(void *arg)
{
        return create(arg, 201);
}
