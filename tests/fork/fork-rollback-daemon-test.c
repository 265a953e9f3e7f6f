/* SPDX-License-Identifier: MIT */
/* Rollback in forkletd with a fake VM backend, through the REST API: the session restarts on
 * its checkpoint's RAM mapped private (no copy, the replaced VM ended at once), and the restored
 * VM's migration dirty bitmap is cleared by a job once the session is idle (a fork's once it is
 * the only fork of its checkpoint), also after a restart; a Paused session's rollback answers once
 * it is Paused again. */
#include "tests/fork/fork-daemon.h"

#define FORKS "/api/v1alpha1/namespaces/default/sessions/"

static void test_rollback_maps_ram(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *body = NULL, *mem = NULL, *origin = NULL;
        int boots = atomic_load(&e->fake.boots), stops = atomic_load(&e->fake.stops);
        int kills = atomic_load(&e->fake.kills);

        assert_true(fk_asprintf(&body, "{\"checkpoint\": \"%s\"}", id) > 0);
        assert_int_equal(req(e, "POST", SESSION "/rollback", body, NULL), 200);
        /* the replaced VM is ended at once, not powered off: nothing of it is kept */
        assert_int_equal(atomic_load(&e->fake.kills), kills + 1);
        assert_int_equal(atomic_load(&e->fake.stops), stops);
        assert_int_equal(atomic_load(&e->fake.boots), boots + 1);
        /* the checkpoint's files through links in origin/, RAM mapped private: no copy */
        assert_true(fk_asprintf(&origin, "%s/state/sessions/default.hello/origin", e->dir) > 0);
        assert_string_equal(last_restore, origin);
        assert_true(last_private);
        assert_true(fk_asprintf(&mem, "%s/run/sessions/default.hello/mem.ram", e->dir) > 0);
        assert_int_equal(access(mem, F_OK), -1);
        assert_int_equal(access(origin, F_OK), -1); /* the links go once it runs */
        metrics_has(e, "forklet_operation_duration_seconds_count{op=\"rollback\"} 1\n");
        assert_int_equal(req(e, "POST", SESSION "/rollback", "{\"checkpoint\": \"ck_00\"}", NULL),
                         404);
}

/* A rolled-back VM's dirty bitmap is cleared by a job once the session has been idle 3 s since
 * the rollback, once; a job on the session (a checkpoint) starts the wait over; a cold boot's
 * never (the boot clears its own); a fork's once no other fork of its checkpoint is left; after
 * a restart, the restored VMs adopted. */
static void test_rollback_clears_dirty_log_when_idle(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *body = NULL, *id2 = NULL, *rb_body = NULL;
        char *ck = NULL;
        pthread_t t;

        assert_true(fk_asprintf(&body, "{\"checkpoint\": \"%s\"}", id) > 0);
        rb_body = strdup(body);
        fake_clock_advance(&e->clock, 10);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 0); /* the cold boot's own, not a job */
        assert_int_equal(req(e, "POST", SESSION "/rollback", body, NULL), 200);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 0); /* the caller goes on first */
        fake_clock_advance(&e->clock, 2);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 0);
        /* a checkpoint taken meanwhile: the session busy, the wait starts over */
        atomic_store(&ck_slow, true);
        atomic_store(&ck_started, false);
        assert_int_equal(pthread_create(&t, NULL, create_thread, e), 0);
        for (int i = 0; i < 500 && !atomic_load(&ck_started); i++)
                usleep(10000);
        assert_true(atomic_load(&ck_started));
        fake_clock_advance(&e->clock, 2);
        assert_int_equal(agent_daemon_reconcile(e->d), 0);
        assert_int_equal(atomic_load(&dl_calls), 0);
        atomic_store(&ck_release, true);
        assert_int_equal(pthread_join(t, (void **)&ck), 0);
        assert_non_null(ck);
        free(ck);
        atomic_store(&ck_slow, false);
        reconcile(e);
        fake_clock_advance(&e->clock, 2);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 0);
        fake_clock_advance(&e->clock, 2);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 1);
        fake_clock_advance(&e->clock, 10);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 1); /* once */
        /* the forks of a fan-out are left alone while two of them are there; the one left
         * when the other is deleted (the branch kept) is cleared once idle 3 s after that */
        id2 = create(e, 201);
        free(body);
        body = NULL;
        assert_true(fk_asprintf(&body, "{\"from\": \"%s\", \"count\": 2}", id2) > 0);
        assert_int_equal(req(e, "POST", SESSION "/forks", body, NULL), 201);
        reconcile(e);
        fake_clock_advance(&e->clock, 10);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 1);
        assert_int_equal(req(e, "DELETE", FORKS "hello-fork-1", NULL, NULL), 200);
        reconcile(e);
        reconcile(e);
        assert_int_equal(req(e, "GET", FORKS "hello-fork-1", NULL, NULL), 404);
        fake_clock_advance(&e->clock, 2);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 1);
        fake_clock_advance(&e->clock, 2);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 2);
        fake_clock_advance(&e->clock, 10);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 2); /* once */
        /* a forkletd restarted before the job: the one that adopts the restored VMs runs it
         * again for each (it cannot know what the killed one did): the rollback's and the fork's */
        assert_int_equal(req(e, "POST", SESSION "/rollback", rb_body, NULL), 200);
        reconcile(e);
        env_stop(e);
        env_start(e);
        reconcile(e);
        fake_clock_advance(&e->clock, 4);
        reconcile(e);
        assert_int_equal(atomic_load(&dl_calls), 4);
}

/* A Paused session comes back Paused: the rollback answers once the planner paused the restored
 * VM again (its guest ran for the restore's identity step), not while it runs. */
static void test_rollback_paused(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *body = NULL;
        json_t *j = NULL;

        assert_int_equal(req(e, "POST", SESSION "/pause", NULL, NULL), 200);
        reconcile(e);
        assert_int_equal(req(e, "GET", SESSION, NULL, &j), 200);
        assert_string_equal(phase_of(j), "Paused");
        json_decref(j);
        assert_true(fk_asprintf(&body, "{\"checkpoint\": \"%s\"}", id) > 0);
        for (int i = 0; i < 5; i++) {
                assert_int_equal(req(e, "POST", SESSION "/rollback", body, NULL), 200);
                assert_int_equal(req(e, "GET", SESSION, NULL, &j), 200);
                assert_string_equal(phase_of(j), "Paused");
                json_decref(j);
        }
        /* and a Running one Running */
        assert_int_equal(req(e, "POST", SESSION "/resume", NULL, NULL), 200);
        reconcile(e);
        assert_int_equal(req(e, "POST", SESSION "/rollback", body, NULL), 200);
        assert_int_equal(req(e, "GET", SESSION, NULL, &j), 200);
        assert_string_equal(phase_of(j), "Running");
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_rollback_maps_ram, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_rollback_clears_dirty_log_when_idle,
                                                fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_rollback_paused, fork_setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
