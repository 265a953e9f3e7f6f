/* SPDX-License-Identifier: MIT */
/* The lifecycle verbs over the real REST server with the fake VM backend: pause/resume/stop/
 * start (idempotent, persisted, ?wait), manifest-dir refusals, an unbuilt image (Pending,
 * ImageNotFound, then boots once built), and the files route (binary round trip). */
#include "tests/lib/agent-harness.h"

#include <pthread.h>

#define HELLO "/api/v1alpha1/namespaces/default/sessions/hello"

/* An in-memory guest filesystem of one file for the files route. */
static struct {
        char path[256];
        void *data;
        size_t size;
} guest_file;

static int fake_write_file(void *ud, void *vm, const char *path, const void *data, size_t size,
                           unsigned mode, struct fk_error *err)
{
        (void)ud, (void)vm, (void)mode, (void)err;
        free(guest_file.data);
        guest_file.data = malloc(size ? size : 1);
        if (!guest_file.data)
                return -ENOMEM;
        memcpy(guest_file.data, data, size);
        guest_file.size = size;
        snprintf(guest_file.path, sizeof(guest_file.path), "%s", path);
        return 0;
}

static int fake_read_file(void *ud, void *vm, const char *path, size_t max, void **ret,
                          size_t *ret_size, struct fk_error *err)
{
        (void)ud, (void)vm;
        if (strcmp(path, guest_file.path) != 0)
                return fk_error_set(err, -ENOENT, "%s: No such file or directory", path);
        if (guest_file.size > max)
                return fk_error_set(err, -EFBIG, "too big");
        *ret = malloc(guest_file.size ? guest_file.size : 1);
        if (!*ret)
                return -ENOMEM;
        memcpy(*ret, guest_file.data, guest_file.size);
        *ret_size = guest_file.size;
        return 0;
}

/* POST .../hello/VERB[?wait=..]; returns the status, *apply the X-Forklet-Apply value. */
static long action(struct env *e, const char *verb, char *apply, size_t size, char *msg,
                   size_t msg_size)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        char path[256];
        json_t *j;
        long status;

        snprintf(path, sizeof(path), HELLO "/%s", verb);
        assert_int_equal(cli_request(&e->cli, "POST", path, NULL, &resp, &err), 0);
        status = resp.status;
        if (apply)
                snprintf(apply, size, "%s", resp.apply ? resp.apply : "");
        j = json_loads(resp.body ? resp.body : "", 0, NULL);
        if (msg)
                snprintf(msg, msg_size, "%s",
                         json_string_value(json_object_get(j, "message")) ?: "");
        json_decref(j);
        cli_response_done(&resp);
        return status;
}

static const char *phase(struct env *e)
{
        static char buf[32];
        json_t *j = NULL;

        assert_int_equal(req(e, "GET", HELLO, NULL, &j), 200);
        snprintf(buf, sizeof(buf), "%s", phase_of(j));
        json_decref(j);
        return buf;
}

static void running_hello(struct env *e)
{
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        assert_string_equal(phase(e), "Running");
}

static void test_verbs(void **state)
{
        struct env *e = *state;
        cleanup_free char *store = NULL, *text = NULL;
        char apply[32], msg[512];

        running_hello(e);
        assert_int_equal(action(e, "pause", apply, sizeof(apply), NULL, 0), 200);
        assert_string_equal(apply, "configured");
        reconcile(e);
        assert_string_equal(phase(e), "Paused");
        /* Again, and with a wait that is already satisfied: no-ops that succeed. */
        assert_int_equal(action(e, "pause", apply, sizeof(apply), NULL, 0), 200);
        assert_string_equal(apply, "unchanged");
        assert_int_equal(action(e, "pause?wait=5", apply, sizeof(apply), NULL, 0), 200);
        assert_string_equal(apply, "unchanged");

        assert_int_equal(action(e, "resume", apply, sizeof(apply), NULL, 0), 200);
        reconcile(e);
        assert_string_equal(phase(e), "Running");
        assert_int_equal(action(e, "resume", apply, sizeof(apply), NULL, 0), 200);
        assert_string_equal(apply, "unchanged");

        assert_int_equal(action(e, "stop", apply, sizeof(apply), NULL, 0), 200);
        reconcile(e);
        assert_string_equal(phase(e), "Stopped");
        assert_int_equal(atomic_load(&e->fake.stops), 1);
        assert_int_equal(action(e, "stop", apply, sizeof(apply), NULL, 0), 200);
        assert_string_equal(apply, "unchanged");
        /* The desired state is persisted like an apply. */
        assert_true(fk_asprintf(&store, "%s/state/sessions/default.hello/state.json", e->dir) > 0);
        assert_int_equal(fk_read_file(store, 1 << 20, &text, NULL), 0);
        assert_non_null(strstr(text, "\"Stopped\""));

        assert_int_equal(action(e, "pause", NULL, 0, msg, sizeof(msg)), 409);
        assert_non_null(strstr(msg, "start it first"));
        assert_string_equal(phase(e), "Stopped");

        /* Nobody reconciles here, so a wait for Running times out and says where it is. */
        assert_int_equal(action(e, "start?wait=1", NULL, 0, msg, sizeof(msg)), 504);
        assert_non_null(strstr(msg, "still Stopped"));
        reconcile(e);
        assert_string_equal(phase(e), "Running");
        assert_int_equal(atomic_load(&e->fake.boots), 2);

        assert_int_equal(action(e, "bogus", NULL, 0, NULL, 0), 404);
        assert_int_equal(action(e, "pause?wait=x", NULL, 0, NULL, 0), 400);
        assert_int_equal(req(e, "GET", HELLO "/pause", NULL, NULL), 405);
        assert_int_equal(
                req(e, "POST", "/api/v1alpha1/namespaces/default/sessions/nope/pause", NULL, NULL),
                404);
}

static void test_manifest_dir(void **state)
{
        struct env *e = *state;
        cleanup_free char *path = NULL;
        const char *yaml = "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"
                           "metadata: {name: hello}\nspec: {sizeClass: small, image: minimal}\n";
        char apply[32], msg[512];

        assert_true(fk_asprintf(&path, "%s/manifests", e->dir) > 0);
        assert_int_equal(fk_mkdir_p(path, 0700), 0);
        free(path);
        assert_true(fk_asprintf(&path, "%s/manifests/hello.yaml", e->dir) > 0);
        assert_int_equal(fk_write_file_atomic(path, yaml, strlen(yaml), 0644), 0);
        fake_clock_advance(&e->clock, 11);
        reconcile(e);
        assert_string_equal(phase(e), "Running");
        assert_int_equal(action(e, "pause", NULL, 0, msg, sizeof(msg)), 409);
        assert_non_null(strstr(msg, "hello.yaml"));
        assert_non_null(strstr(msg, "spec.state: Paused"));
        /* Asking for what the file already says is fine. */
        assert_int_equal(action(e, "resume", apply, sizeof(apply), NULL, 0), 200);
        assert_string_equal(apply, "unchanged");
}

/* A session the control plane assigned is changed through etcd, not on the node. */
static void test_cluster_session(void **state)
{
        struct env *e = *state;
        char msg[512];

        running_hello(e);
        pthread_mutex_lock(&e->d->lock);
        agent_daemon_find(e->d, "default", "hello")->source = AGENT_SOURCE_CLUSTER;
        pthread_mutex_unlock(&e->d->lock);
        assert_int_equal(action(e, "stop", NULL, 0, msg, sizeof(msg)), 409);
        assert_non_null(strstr(msg, "control plane"));
        assert_non_null(strstr(msg, "spec.state: Stopped"));
}

static void test_image_not_found(void **state)
{
        struct env *e = *state;
        cleanup_free char *k = NULL;
        char msg[512];
        json_t *j = NULL, *cond;

        assert_true(fk_asprintf(&k, "%s/images/vmlinuz", e->dir) > 0);
        assert_int_equal(unlink(k), 0);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 0);
        assert_int_equal(req(e, "GET", HELLO, NULL, &j), 200);
        assert_string_equal(phase_of(j), "Pending");
        cond = json_array_get(json_object_get(json_object_get(j, "status"), "conditions"), 0);
        assert_string_equal(json_string_value(json_object_get(cond, "reason")), "ImageNotFound");
        assert_non_null(strstr(json_string_value(json_object_get(cond, "message")), k));
        json_decref(j);
        assert_int_equal(action(e, "start?wait=5", NULL, 0, msg, sizeof(msg)), 404);
        assert_non_null(strstr(msg, "not built"));
        /* Building the image is enough: the next pass boots it. */
        harness_touch_image(e->dir);
        reconcile(e);
        assert_string_equal(phase(e), "Running");
}

static void test_files(void **state)
{
        struct env *e = *state;
        struct cli_response resp = {0};
        struct fk_error err = {0};
        unsigned char *data = malloc(1 << 20);

        assert_non_null(data);
        for (size_t i = 0; i < (1u << 20); i++)
                data[i] = (unsigned char)(i * 7 + (i >> 9));
        env_stop(e);
        e->ops.write_file = fake_write_file;
        e->ops.read_file = fake_read_file;
        env_start(e);
        /* Not Running yet: refused. */
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        assert_int_equal(req(e, "GET", HELLO "/files?path=/tmp/x", NULL, NULL), 409);
        reconcile(e);
        assert_int_equal(cli_request_raw(&e->cli, "PUT", HELLO "/files?path=/tmp/a%20b&mode=600",
                                         data, 1 << 20, &resp, &err),
                         0);
        assert_int_equal(resp.status, 200);
        cli_response_done(&resp);
        assert_string_equal(guest_file.path, "/tmp/a b");
        assert_int_equal(
                cli_request(&e->cli, "GET", HELLO "/files?path=/tmp/a%20b", NULL, &resp, &err), 0);
        assert_int_equal(resp.status, 200);
        assert_int_equal(resp.size, 1 << 20);
        assert_memory_equal(resp.body, data, 1 << 20);
        cli_response_done(&resp);
        assert_int_equal(req(e, "GET", HELLO "/files?path=/nope", NULL, NULL), 404);
        assert_int_equal(req(e, "GET", HELLO "/files?path=relative", NULL, NULL), 400);
        assert_int_equal(req(e, "GET", HELLO "/files", NULL, NULL), 400);
        assert_int_equal(req(e, "PUT", HELLO "/files?path=/x&mode=9", "", NULL), 400);
        free(data);
        free(guest_file.data);
        memset(&guest_file, 0, sizeof(guest_file));
}

static void test_logs(void **state)
{
        struct env *e = *state;
        cleanup_free char *cur = NULL, *old = NULL;
        struct cli_response resp = {0};
        struct fk_error err = {0};

        running_hello(e);
        assert_true(fk_asprintf(&cur, "%s/state/sessions/default.hello/console.log", e->dir) > 0);
        assert_true(fk_asprintf(&old, "%s.1", cur) > 0);
        assert_int_equal(fk_write_file_atomic(cur, "this boot\n", 10, 0600), 0);
        assert_int_equal(fk_write_file_atomic(old, "last boot\n", 10, 0600), 0);
        assert_int_equal(cli_request(&e->cli, "GET", HELLO "/log", NULL, &resp, &err), 0);
        assert_string_equal(resp.body, "this boot\n");
        cli_response_done(&resp);
        assert_int_equal(cli_request(&e->cli, "GET", HELLO "/log?previous=1", NULL, &resp, &err),
                         0);
        assert_string_equal(resp.body, "last boot\n");
        cli_response_done(&resp);
}

struct waiter {
        struct env *e;
        long status;
        char msg[256];
};

static void *wait_thread(void *userdata)
{
        struct waiter *w = userdata;

        w->status = action(w->e, "start?wait=60", NULL, 0, w->msg, sizeof(w->msg));
        return NULL;
}

/* forkletd stopping ends an API call waiting for a phase instead of waiting it out. */
static void test_wait_ends_on_shutdown(void **state)
{
        struct env *e = *state;
        struct waiter w = {.e = e};
        uint64_t t0;
        pthread_t t;

        running_hello(e);
        assert_int_equal(action(e, "stop", NULL, 0, NULL, 0), 200);
        reconcile(e);
        assert_string_equal(phase(e), "Stopped");
        t0 = fk_now_mono_ns();
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
        usleep(300 * 1000);
        agent_daemon_shutdown(e->d);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_true(fk_now_mono_ns() - t0 < 10ull * 1000000000ull);
        assert_int_equal(w.status, 500);
        assert_non_null(strstr(w.msg, "shutting down"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_verbs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_manifest_dir, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cluster_session, setup, teardown),
                cmocka_unit_test_setup_teardown(test_image_not_found, setup, teardown),
                cmocka_unit_test_setup_teardown(test_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wait_ends_on_shutdown, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
