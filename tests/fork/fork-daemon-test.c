/* SPDX-License-Identifier: MIT */
/* The fork engine in forkletd with a fake VM backend, through the REST API: checkpoint create,
 * list and status; concurrent creates coalesce; a failed checkpoint lists nothing; fork N
 * (restored from the parent's checkpoint with private RAM); a checkpoint belongs to its session;
 * delete refused while forks depend on it, then cascade (rollback: fork-rollback-daemon-test);
 * events name each step (Checkpointed, CheckpointFailed, RollingBack, RolledBack, RollbackFailed,
 * Forking), Normal unless something went wrong; requests are intents the runner serializes
 * per session (a rollback waits for a checkpoint, a fork does not) and audits. */
#include "tests/fork/fork-daemon.h"

static void test_create_list_status(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *path = NULL;
        json_t *j = NULL, *cks;

        assert_non_null(id);
        assert_int_equal(strncmp(id, "ck_", 3), 0);
        assert_int_equal(count_checkpoints(e, SESSION "/checkpoints"), 1);
        assert_true(fk_asprintf(&path, SESSION "/checkpoints/%s", id) > 0);
        assert_int_equal(req(e, "GET", path, NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "id")), id);
        assert_int_equal(json_integer_value(json_object_get(j, "ramBytes")), 9);
        assert_true(json_integer_value(json_object_get(j, "sizeBytes")) > 0);
        json_decref(j);
        assert_int_equal(req(e, "GET", SESSION "/checkpoints/ck_0123", NULL, NULL), 404);
        assert_int_equal(req(e, "GET", SESSION, NULL, &j), 200);
        cks = json_object_get(json_object_get(j, "status"), "checkpoints");
        assert_int_equal(json_array_size(cks), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(cks, 0), "id")), id);
        json_decref(j);
}

static void test_concurrent_creates_coalesce(void **state)
{
        struct env *e = *state;
        pthread_t t1, t2;
        char *a, *b;

        atomic_store(&ck_slow, true);
        atomic_store(&ck_started, false);
        assert_int_equal(pthread_create(&t1, NULL, create_thread, e), 0);
        for (int i = 0; i < 500 && !atomic_load(&ck_started); i++)
                usleep(10000);
        assert_int_equal(pthread_create(&t2, NULL, create_thread, e), 0);
        usleep(200000); /* the second request is waiting on the first */
        atomic_store(&ck_release, true);
        pthread_join(t1, (void **)&a);
        pthread_join(t2, (void **)&b);
        assert_non_null(a);
        assert_non_null(b);
        assert_string_equal(a, b);
        assert_int_equal(atomic_load(&ck_calls), 1);
        assert_int_equal(count_checkpoints(e, SESSION "/checkpoints"), 1);
        free(a);
        free(b);
}

static void test_failed_checkpoint_lists_nothing(void **state)
{
        struct env *e = *state;
        cleanup_free char *dir = NULL, *id = NULL;
        json_t *j = NULL;

        atomic_store(&ck_fail, true);
        id = create(e, 500);
        assert_null(id);
        assert_int_equal(count_checkpoints(e, SESSION "/checkpoints"), 0);
        assert_true(fk_asprintf(&dir, "%s/state/sessions/default.hello/checkpoints", e->dir) > 0);
        assert_int_equal(count_checkpoints(e, SESSION "/checkpoints"), 0);
        assert_int_equal(req(e, "GET", SESSION, NULL, &j), 200);
        assert_string_equal(phase_of(j), "Running");
        json_decref(j);
        /* nothing partial left behind in the checkpoints dir either */
        DIR *dp = opendir(dir);
        struct dirent *de;
        int entries = 0;

        while (dp && (de = readdir(dp)))
                entries += de->d_name[0] != '.' || strstr(de->d_name, "partial") != NULL;
        if (dp)
                closedir(dp);
        assert_int_equal(entries, 0);
}

static void test_fork_ownership_cascade(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *body = NULL;
        json_t *j = NULL;
        const char *msg;

        assert_true(fk_asprintf(&body, "{\"from\": \"%s\", \"count\": 2}", id) > 0);
        assert_int_equal(req(e, "POST", SESSION "/forks", body, &j), 201);
        assert_int_equal(json_array_size(json_object_get(j, "names")), 2);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "names"), 1)),
                            "hello-fork-1");
        json_decref(j);
        reconcile(e);
        /* restored from links to the parent's checkpoint in the fork's own dir, removed once
         * the fork runs */
        assert_non_null(strstr(last_restore, "/default.hello-fork-"));
        assert_non_null(strstr(last_restore, "/origin"));
        assert_int_equal(access(last_restore, F_OK), -1);
        assert_true(last_private);
        metrics_has(e, "forklet_forks_total 2\n");
        metrics_has(e, "forklet_operation_duration_seconds_count{op=\"fork\"} 2\n");
        metrics_has(e, "forklet_operation_duration_seconds_count{op=\"checkpoint\"} 1\n");
        assert_int_equal(req(e, "GET", FORK0, NULL, &j), 200);
        assert_string_equal(phase_of(j), "Running");
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(j, "status"), "forkOf"), "checkpoint")),
                id);
        json_decref(j);
        assert_int_equal(count_checkpoints(e, FORK0 "/checkpoints"), 0);

        free(body);
        assert_true(fk_asprintf(&body, "{\"checkpoint\": \"%s\"}", id) > 0);
        assert_int_equal(req(e, "POST", FORK0 "/rollback", body, &j), 404);
        msg = json_string_value(json_object_get(j, "message"));
        assert_non_null(strstr(msg, "belongs to session default/hello"));
        json_decref(j);

        free(body);
        assert_true(fk_asprintf(&body, SESSION "/checkpoints/%s", id) > 0);
        assert_int_equal(req(e, "DELETE", body, NULL, &j), 409);
        msg = json_string_value(json_object_get(j, "message"));
        assert_non_null(strstr(msg, "hello-fork-0"));
        assert_non_null(strstr(msg, "hello-fork-1"));
        json_decref(j);
        free(body);
        assert_true(fk_asprintf(&body, SESSION "/checkpoints/%s?cascade=true", id) > 0);
        assert_int_equal(req(e, "DELETE", body, NULL, NULL), 200);
        reconcile(e);
        reconcile(e);
        assert_int_equal(req(e, "GET", FORK0, NULL, NULL), 404);
        assert_int_equal(count_checkpoints(e, SESSION "/checkpoints"), 0);
}

/* The per-session fork budget: the message says how many exist and how many more fit. */
static void test_fork_budget(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *body = NULL;
        json_t *j = NULL;
        const char *msg;

        assert_true(fk_asprintf(&body, "{\"from\": \"%s\", \"count\": 2}", id) > 0);
        assert_int_equal(req(e, "POST", SESSION "/forks", body, NULL), 201);
        free(body);
        assert_true(fk_asprintf(&body, "{\"from\": \"%s\", \"count\": 31}", id) > 0);
        assert_int_equal(req(e, "POST", SESSION "/forks", body, &j), 400);
        msg = json_string_value(json_object_get(j, "message"));
        assert_non_null(msg);
        if (!strstr(msg, "has 2 of at most 32 forks") || !strstr(msg, "30 more allowed"))
                fail_msg("message: %s", msg);
        json_decref(j);
        assert_int_equal(req(e, "GET", SESSION "-fork-2", NULL, NULL), 404);
}

static void *release_later(void *arg)
{
        (void)arg;
        usleep(300000);
        atomic_store(&wr_release, true);
        return NULL;
}

/* status of checkpoint id of the session, "" when it is not listed */
static void ck_status(struct env *e, const char *id, char *buf, size_t size)
{
        cleanup_free char *path = NULL;
        json_t *j = NULL;

        buf[0] = '\0';
        assert_true(fk_asprintf(&path, SESSION "/checkpoints/%s", id) > 0);
        if (req(e, "GET", path, NULL, &j) == 200)
                snprintf(buf, size, "%s", json_string_value(json_object_get(j, "status")) ?: "?");
        json_decref(j);
}

static void test_writing_then_ready(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = NULL, *body = NULL;
        char st[32];
        pthread_t t;
        uint64_t t0;

        atomic_store(&ck_pending, true);
        id = create(e, 201);
        assert_non_null(id);
        ck_status(e, id, st, sizeof(st));
        assert_string_equal(st, "Writing");
        assert_int_equal(count_checkpoints(e, SESSION "/checkpoints"), 1);
        /* a fork of it waits for Ready */
        assert_int_equal(pthread_create(&t, NULL, release_later, NULL), 0);
        t0 = fk_now_mono_ns();
        assert_true(fk_asprintf(&body, "{\"from\": \"%s\", \"count\": 1}", id) > 0);
        assert_int_equal(req(e, "POST", SESSION "/forks", body, NULL), 201);
        assert_true(fk_now_mono_ns() - t0 >= 250000000ull);
        pthread_join(t, NULL);
        ck_status(e, id, st, sizeof(st));
        assert_string_equal(st, "Ready");
}

/* The newest event with reason in session path: its type, and its message in msg. */
static const char *event(struct env *e, const char *path, const char *reason, char *msg,
                         size_t size)
{
        static char type[16];
        json_t *j = NULL, *ev, *v;
        size_t i;

        type[0] = '\0';
        assert_int_equal(req(e, "GET", path, NULL, &j), 200);
        ev = json_object_get(json_object_get(j, "status"), "events");
        json_array_foreach(ev, i, v)
        {
                if (strcmp(json_string_value(json_object_get(v, "reason")), reason) != 0)
                        continue;
                snprintf(type, sizeof(type), "%s", json_string_value(json_object_get(v, "type")));
                snprintf(msg, size, "%s", json_string_value(json_object_get(v, "message")));
        }
        json_decref(j);
        return type;
}

static void test_events_name_each_step(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *body = NULL;
        json_t *j = NULL, *ev, *v;
        char msg[256], seq[512] = "";
        size_t i;

        assert_string_equal(event(e, SESSION, "Booting", msg, sizeof(msg)), "Normal");
        assert_string_equal(event(e, SESSION, "Checkpointed", msg, sizeof(msg)), "Normal");
        assert_non_null(strstr(msg, id));
        atomic_store(&ck_fail, true);
        free(create(e, 500));
        atomic_store(&ck_fail, false);
        assert_string_equal(event(e, SESSION, "CheckpointFailed", msg, sizeof(msg)), "Warning");
        assert_non_null(strstr(msg, "fake QEMU error"));

        assert_true(fk_asprintf(&body, "{\"checkpoint\": \"%s\"}", id) > 0);
        assert_int_equal(req(e, "POST", SESSION "/rollback", body, NULL), 200);
        assert_string_equal(event(e, SESSION, "RollingBack", msg, sizeof(msg)), "Normal");
        assert_non_null(strstr(msg, id));
        assert_string_equal(event(e, SESSION, "RolledBack", msg, sizeof(msg)), "Normal");
        assert_non_null(strstr(msg, id));
        /* one event per step; only the first boot is a Booting one */
        assert_int_equal(req(e, "GET", SESSION, NULL, &j), 200);
        ev = json_object_get(json_object_get(j, "status"), "events");
        json_array_foreach(ev, i, v)
        {
                strcat(seq, json_string_value(json_object_get(v, "reason")));
                strcat(seq, " ");
        }
        json_decref(j);
        assert_string_equal(seq, "Booting Running Checkpointed CheckpointFailed RollingBack "
                                 "Running RolledBack ");

        atomic_store(&e->fake.fail_boot, true);
        assert_int_not_equal(req(e, "POST", SESSION "/rollback", body, NULL), 200);
        atomic_store(&e->fake.fail_boot, false);
        assert_string_equal(event(e, SESSION, "RollbackFailed", msg, sizeof(msg)), "Warning");
        assert_non_null(strstr(msg, "fake boot failure"));
}

static void test_fork_events(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *body = NULL;
        char msg[256];

        assert_true(fk_asprintf(&body, "{\"from\": \"%s\", \"count\": 1}", id) > 0);
        assert_int_equal(req(e, "POST", SESSION "/forks", body, NULL), 201);
        reconcile(e);
        assert_string_equal(event(e, FORK0, "Forking", msg, sizeof(msg)), "Normal");
        assert_non_null(strstr(msg, id));
        assert_non_null(strstr(msg, "of hello"));
        assert_string_equal(event(e, FORK0, "Booting", msg, sizeof(msg)), "");
}

struct post {
        struct env *e;
        const char *path;
        char body[128];
        long status;
};

static void *post_thread(void *arg)
{
        struct post *p = arg;

        p->status = req(p->e, "POST", p->path, p->body, NULL);
        return NULL;
}

/* Requests are intents the job runner serializes per session: a rollback asked during a
 * checkpoint waits for it and then runs (no 409), a fork is served at once (it reads a complete
 * checkpoint), and each served intent is audited by forkletd. */
static void test_requests_serialize(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = create(e, 201), *path = NULL, *log = NULL;
        struct post ck = {e, SESSION "/checkpoints", "{}", 0};
        struct post rb = {e, SESSION "/rollback", "", 0};
        int kills = atomic_load(&e->fake.kills);
        char body[128];
        pthread_t t1, t2;

        atomic_store(&ck_slow, true);
        atomic_store(&ck_started, false);
        assert_int_equal(pthread_create(&t1, NULL, post_thread, &ck), 0);
        for (int i = 0; i < 500 && !atomic_load(&ck_started); i++)
                usleep(10000);
        assert_true(atomic_load(&ck_started));
        snprintf(body, sizeof(body), "{\"from\": \"%s\", \"count\": 1}", id);
        assert_int_equal(req(e, "POST", SESSION "/forks", body, NULL), 201);
        snprintf(rb.body, sizeof(rb.body), "{\"checkpoint\": \"%s\"}", id);
        assert_int_equal(pthread_create(&t2, NULL, post_thread, &rb), 0);
        usleep(300000);
        assert_int_equal(atomic_load(&e->fake.kills),
                         kills); /* the rollback waits for the checkpoint */
        assert_int_equal(rb.status, 0);
        atomic_store(&ck_release, true);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        assert_int_equal(ck.status, 201);
        assert_int_equal(rb.status, 200);
        assert_int_equal(atomic_load(&e->fake.kills), kills + 1);
        assert_int_equal(atomic_load(&ck_calls), 2);
        assert_int_equal(req(e, "GET", FORK0, NULL, NULL), 200);
        assert_true(fk_asprintf(&path, "%s/state/audit.log", e->dir) > 0);
        assert_int_equal(fk_read_file(path, 1024 * 1024, &log, NULL), 0);
        assert_non_null(strstr(log, "\"caller\":\"forkletd\",\"session\":\"default/hello\","
                                    "\"action\":\"checkpoint\",\"result\":\"ok\""));
        assert_non_null(strstr(log, "\"action\":\"rollback\",\"result\":\"ok\""));
        assert_non_null(strstr(log, "\"action\":\"fork\",\"result\":\"ok\""));
}

/* A checkpoint asked of a session that is not Running is refused by the planner with the phase
 * (409), and the session is not touched. */
static void test_checkpoint_refused_when_stopped(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;
        const char *msg;

        assert_int_equal(req(e, "POST", SESSION "/stop", NULL, NULL), 200);
        reconcile(e);
        assert_int_equal(req(e, "POST", SESSION "/checkpoints", "{}", &j), 409);
        msg = json_string_value(json_object_get(j, "message"));
        assert_non_null(msg);
        assert_non_null(strstr(msg, "is Stopped, not Running"));
        json_decref(j);
        assert_int_equal(count_checkpoints(e, SESSION "/checkpoints"), 0);
        assert_int_equal(req(e, "POST", SESSION "-nope/checkpoints", "{}", NULL), 404);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_list_status, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_creates_coalesce, fork_setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_failed_checkpoint_lists_nothing, fork_setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_fork_budget, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_fork_ownership_cascade, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_writing_then_ready, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_events_name_each_step, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_fork_events, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_requests_serialize, fork_setup, teardown),
                cmocka_unit_test_setup_teardown(test_checkpoint_refused_when_stopped, fork_setup,
                                                teardown),
        };

        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
