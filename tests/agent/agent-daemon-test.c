/* SPDX-License-Identifier: MIT */
/* The daemon's reconcile behaviour with a fake VM backend and clock: QEMU exit, delete (also
 * while booting), restartPolicy back-off, boot failure, restart persistence and adoption, and
 * the manifest directory (multi-document files, rename, invalid files, removal), and a failed
 * store write that changes nothing in memory. */
#include "tests/lib/agent-harness.h"

static void test_delete_and_exit(void **state)
{
        struct env *e = *state;
        cleanup_free char *run = NULL, *st = NULL;
        json_t *j = NULL, *cond;
        struct stat sb;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        assert_true(fk_asprintf(&run, "%s/run/sessions/default.hello", e->dir) > 0);
        assert_true(fk_asprintf(&st, "%s/state/sessions/default.hello", e->dir) > 0);
        assert_int_equal(stat(run, &sb), 0);
        assert_int_equal(stat(st, &sb), 0);

        /* QEMU dies: Failed with the reason; restartPolicy Never keeps it there. */
        pthread_mutex_lock(&e->d->lock);
        fake_vm_crash(e->d->sessions[0]->vm->vm);
        pthread_mutex_unlock(&e->d->lock);
        reconcile(e);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Failed");
        cond = json_array_get(json_object_get(json_object_get(j, "status"), "conditions"), 0);
        assert_string_equal(json_string_value(json_object_get(cond, "reason")), "VMExited");
        assert_non_null(strstr(json_string_value(json_object_get(cond, "message")), "SIGKILL"));
        assert_true(json_is_null(json_object_get(json_object_get(j, "status"), "vm")));
        json_decref(j);
        assert_int_equal(atomic_load(&e->fake.frees), 1);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);

        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j), 200);
        assert_non_null(json_object_get(json_object_get(j, "metadata"), "deletionTimestamp"));
        json_decref(j);
        reconcile(e);
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, NULL), 404);
        assert_int_equal(stat(run, &sb), -1);
        assert_int_equal(stat(st, &sb), -1);
}

static void test_delete_running(void **state)
{
        struct env *e = *state;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, NULL),
                200);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.stops), 1);
        assert_int_equal(atomic_load(&e->fake.frees), 1);
        assert_int_equal(e->d->n_sessions, 0);
}

/* restartPolicy OnFailure: a crashed VM boots again once its back-off (by the fake clock) ends. */
static void test_restart_on_failure(void **state)
{
        struct env *e = *state;
        cleanup_free char *m = NULL;
        json_t *j = NULL;

        assert_true(fk_asprintf(&m, "%.*s\"restartPolicy\":\"OnFailure\",%s",
                                (int)(strstr(hello_json, "\"image\"") - hello_json), hello_json,
                                strstr(hello_json, "\"image\"")) > 0);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", m, NULL), 201);
        reconcile(e);
        pthread_mutex_lock(&e->d->lock);
        fake_vm_crash(e->d->sessions[0]->vm->vm);
        pthread_mutex_unlock(&e->d->lock);
        reconcile(e);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Failed");
        json_decref(j);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1); /* back-off not over */
        fake_clock_advance(&e->clock, 2);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 2);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Running");
        json_decref(j);
}

/* Deleting a session while it boots cancels the boot and removes it. */
static void test_delete_while_starting(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;
        uint64_t t0;

        atomic_store(&e->fake.slow_boot, true);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        assert_int_equal(agent_daemon_reconcile(e->d), 0);
        for (int i = 0; i < 200; i++) {
                assert_int_equal(
                        req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                        200);
                if (json_is_object(json_object_get(json_object_get(j, "status"), "vm")))
                        break;
                json_decref(j);
                j = NULL;
                usleep(10000);
        }
        assert_non_null(j);
        assert_string_equal(phase_of(j), "Starting");
        assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(json_object_get(j, "status"), "vm"), "pid")),
                         4242);
        json_decref(j);
        t0 = fk_now_mono_ns();
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, NULL),
                200);
        reconcile(e);
        reconcile(e);
        assert_true(fk_now_mono_ns() - t0 < 2000000000ull);
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, NULL), 404);
}

static void test_boot_failure(void **state)
{
        struct env *e = *state;
        json_t *j = NULL, *cond;

        atomic_store(&e->fake.fail_boot, true);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Failed");
        cond = json_array_get(json_object_get(json_object_get(j, "status"), "conditions"), 0);
        assert_string_equal(json_string_value(json_object_get(cond, "reason")), "BootFailed");
        assert_non_null(strstr(json_string_value(json_object_get(cond, "message")), "fake boot"));
        json_decref(j);
}

static void test_restart(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        env_stop(e); /* VMs keep running */
        assert_int_equal(atomic_load(&e->fake.stops), 0);
        env_start(e);
        assert_int_equal(atomic_load(&e->fake.adopts), 1);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Running");
        assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(json_object_get(j, "status"), "vm"), "pid")),
                         1000);
        json_decref(j);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);
}

static void write_manifest(struct env *e, const char *file, const char *text)
{
        cleanup_free char *path = NULL;

        assert_true(fk_asprintf(&path, "%s/manifests/%s", e->dir, file) > 0);
        assert_int_equal(fk_write_file_atomic(path, text, strlen(text), 0644), 0);
}

static void rescan(struct env *e)
{
        fake_clock_advance(&e->clock, 11);
        reconcile(e);
}

/* Renaming a manifest file keeps its sessions (and their VMs). */
static void check_rename_keeps_vms(struct env *e)
{
        cleanup_free char *from = NULL, *to = NULL;

        assert_true(fk_asprintf(&from, "%s/manifests/two.yaml", e->dir) > 0);
        assert_true(fk_asprintf(&to, "%s/manifests/moved.yaml", e->dir) > 0);
        assert_int_equal(rename(from, to), 0);
        rescan(e);
        assert_int_equal(e->d->n_sessions, 2);
        assert_int_equal(atomic_load(&e->fake.stops), 0);
        assert_int_equal(rename(to, from), 0);
        rescan(e);
        assert_int_equal(atomic_load(&e->fake.stops), 0);
        assert_int_equal(atomic_load(&e->fake.boots), 2);
}

static void test_manifest_dir(void **state)
{
        struct env *e = *state;
        cleanup_free char *dir = NULL, *path = NULL;
        json_t *j = NULL;

        assert_true(fk_asprintf(&dir, "%s/manifests", e->dir) > 0);
        assert_int_equal(fk_mkdir_p(dir, 0755), 0);
        write_manifest(e, "two.yaml",
                       "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: a}\n"
                       "---\napiVersion: forklet.dev/v1alpha1\nkind: Session\n"
                       "metadata: {name: b}\n");
        write_manifest(e, "ignored.txt", "not a manifest");
        rescan(e);
        assert_int_equal(e->d->n_sessions, 2);
        assert_int_equal(atomic_load(&e->fake.boots), 2);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/b", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Running");
        assert_non_null(
                strstr(json_string_value(json_object_get(json_object_get(j, "metadata"), "source")),
                       "two.yaml"));
        json_decref(j);
        assert_int_equal(req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/a", NULL, &j),
                         409);
        json_decref(j);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions",
                             "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                             "\"metadata\":{\"name\":\"a\"}}",
                             NULL),
                         409);

        check_rename_keeps_vms(e);

        /* A broken file: reported, never fatal; its sessions keep running. */
        write_manifest(e, "bad.yml",
                       "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"
                       "metadata: {name: Bad_Name}\n");
        write_manifest(e, "two.yaml", "kind: [\n");
        rescan(e);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/node", NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(
                                    json_array_get(json_object_get(j, "conditions"), 0), "status")),
                            "False");
        json_decref(j);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/a", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Running");
        json_decref(j);
        assert_int_equal(atomic_load(&e->fake.stops), 0);

        /* The file goes: both VMs go. */
        assert_true(fk_asprintf(&path, "%s/manifests/two.yaml", e->dir) > 0);
        assert_int_equal(unlink(path), 0);
        rescan(e);
        assert_int_equal(atomic_load(&e->fake.stops), 2);
        assert_int_equal(e->d->n_sessions, 0);
}

/* Polls GET until the session's HTTP status is want (and Running when 200), up to 5 s. */
static bool session_becomes(struct env *e, const char *name, long want)
{
        cleanup_free char *path = NULL;

        assert_true(fk_asprintf(&path, "/api/v1alpha1/namespaces/default/sessions/%s", name) > 0);
        for (int i = 0; i < 500; i++) {
                json_t *j = NULL;
                long st = req(e, "GET", path, NULL, &j);
                bool ok = st == want && (want != 200 || strcmp(phase_of(j) ?: "", "Running") == 0);

                json_decref(j);
                if (ok)
                        return true;
                usleep(10000);
        }
        return false;
}

/* With the reconcile thread running, inotify alone (the fake clock never triggers a periodic
 * rescan) picks up new files, a removed directory, and the directory coming back. */
static void test_manifest_dir_watch(void **state)
{
        struct env *e = *state;
        cleanup_free char *dir = NULL;

        assert_true(fk_asprintf(&dir, "%s/manifests", e->dir) > 0);
        assert_int_equal(agent_daemon_start(e->d), 0);
        write_manifest(e, "w.yaml",
                       "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: w}\n");
        assert_true(session_becomes(e, "w", 200));
        assert_int_equal(fk_rm_rf(dir), 0);
        assert_true(session_becomes(e, "w", 404));
        assert_int_equal(atomic_load(&e->fake.stops), 1);
        assert_int_equal(fk_mkdir_p(dir, 0755), 0);
        usleep(1200 * 1000); /* let a tick notice the directory and watch it again */
        write_manifest(e, "w2.yaml",
                       "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: w2}\n");
        assert_true(session_becomes(e, "w2", 200));
}

static json_int_t generation_of(struct env *e)
{
        json_t *j = NULL;
        json_int_t g;

        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        g = json_integer_value(json_object_get(json_object_get(j, "metadata"), "generation"));
        json_decref(j);
        return g;
}

/* A store write that fails (here: state.json cannot be written) leaves memory as the disk
 * says: no new session, no changed spec, no changed spec.state. */
static void test_store_failure_undoes(void **state)
{
        struct env *e = *state;
        cleanup_free char *sd = NULL, *store = NULL, *changed = NULL;
        const char *at = strstr(hello_json, "\"hi\"");

        assert_true(fk_asprintf(&sd, "%s/state/sessions/default.hello", e->dir) > 0);
        assert_true(fk_asprintf(&store, "%s/" AGENT_STORE_FILE, sd) > 0);
        assert_true(fk_asprintf(&changed, "%.*s\"changed\"%s", (int)(at - hello_json), hello_json,
                                at + 4) > 0);
        assert_int_equal(fk_write_file_atomic(sd, "x", 1, 0600), 0); /* the dir is a file */
        assert_true(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL) >= 400);
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, NULL), 404);
        assert_int_equal(e->d->n_sessions, 0);
        assert_int_equal(unlink(sd), 0);

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        assert_int_equal(generation_of(e), 1);
        assert_int_equal(unlink(store), 0);
        assert_int_equal(mkdir(store, 0700), 0); /* rename onto it fails */
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", changed, NULL), 500);
        assert_int_equal(
                req(e, "POST", "/api/v1alpha1/namespaces/default/sessions/hello/stop", NULL, NULL),
                500);
        assert_int_equal(generation_of(e), 1);
        pthread_mutex_lock(&e->d->lock);
        assert_string_equal(e->d->sessions[0]->spec->env[0].value, "hi");
        assert_int_equal(e->d->sessions[0]->spec->state, SESSION_STATE_RUNNING);
        pthread_mutex_unlock(&e->d->lock);
        assert_int_equal(rmdir(store), 0);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", changed, NULL), 200);
        assert_int_equal(generation_of(e), 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_delete_and_exit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_running, setup, teardown),
                cmocka_unit_test_setup_teardown(test_boot_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_while_starting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_on_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart, setup, teardown),
                cmocka_unit_test_setup_teardown(test_manifest_dir, setup, teardown),
                cmocka_unit_test_setup_teardown(test_manifest_dir_watch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_store_failure_undoes, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
