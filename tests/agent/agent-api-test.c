/* SPDX-License-Identifier: MIT */
/* The REST API over a real unix socket (libmicrohttpd) with a fake VM backend, driven through
 * the CLI's HTTP client: routing, apply/get/list, errors, capacity, status JSON, exec streaming
 * and that a long exec does not block other calls. */
#include "tests/lib/agent-harness.h"

static void test_routes(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;

        struct stat st;

        assert_int_equal(stat(e->sock, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(req(e, "GET", "/healthz", NULL, NULL), 200);
        assert_int_equal(req(e, "GET", "/version", NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "apiVersion")),
                            "forklet.dev/v1alpha1");
        json_decref(j);
        assert_int_equal(req(e, "GET", "/nope", NULL, &j), 404);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "NotFound");
        json_decref(j);
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/a..b", NULL, NULL), 400);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/a..b/sessions/x", NULL, NULL),
                         400);
        assert_int_equal(req(e, "DELETE", "/healthz", NULL, NULL), 405);
        assert_int_equal(req(e, "PUT", "/api/v1alpha1/sessions", "{}", NULL), 405);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/node", NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "accel")), "tcg");
        json_decref(j);
}

/* The images API on a node that lists no registries (the pulls themselves: image-oci). */
static void test_images(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;

        assert_int_equal(req(e, "GET", "/api/v1alpha1/images", NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "ImageList");
        assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
        json_decref(j);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/images",
                             "{\"reference\": \"127.0.0.1:5000/a:1\"}", &j),
                         403);
        assert_string_equal(json_string_value(json_object_get(j, "message")),
                            "registry 127.0.0.1:5000 is not allowed on node test (allowed: none; "
                            "list it under registries in the node config)");
        json_decref(j);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/images", "{}", NULL), 400);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/images", "{\"reference\": \"nope\"}", &j),
                         400);
        json_decref(j);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/images/0123456789ab", NULL, NULL), 404);
        assert_int_equal(req(e, "DELETE", "/api/v1alpha1/images/0123456789ab", NULL, NULL), 404);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/images/0123", NULL, NULL), 404);
        assert_int_equal(req(e, "PUT", "/api/v1alpha1/images", "{}", NULL), 405);
        /* an unlisted registry in a session is refused at apply */
        assert_int_equal(req(e, "POST", "/api/v1alpha1/namespaces/default/sessions",
                             "{\"apiVersion\": \"forklet.dev/v1alpha1\", \"kind\": \"Session\", "
                             "\"metadata\": {\"name\": \"o\"}, \"spec\": {\"image\": "
                             "\"ghcr.io/a/b:1\"}}",
                             &j),
                         422);
        json_decref(j);
}

static void test_route_parse(void **state)
{
        struct api_route r;

        (void)state;
        api_route_parse("/api/v1alpha1/images", &r);
        assert_int_equal(r.kind, API_ROUTE_IMAGES);
        assert_string_equal(r.item, "");
        api_route_parse("/api/v1alpha1/images/0123456789ab", &r);
        assert_int_equal(r.kind, API_ROUTE_IMAGES);
        assert_string_equal(r.item, "0123456789ab");
        /* a whole digest is one segment too */
        api_route_parse("/api/v1alpha1/images/sha256:"
                        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                        &r);
        assert_int_equal(r.kind, API_ROUTE_IMAGES);
        assert_int_equal(strlen(r.item), 71);
        api_route_parse("/api/v1alpha1/images/a/b", &r);
        assert_int_equal(r.kind, API_ROUTE_NOT_FOUND);
        /* a name over a DNS label's 63 characters is a bad name, not an unknown resource */
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/"
                        "a123456789012345678901234567890123456789012345678901234567890123",
                        &r);
        assert_int_equal(r.kind, API_ROUTE_BAD_NAME);
        api_route_parse("/api/v1alpha1/namespaces/team-a/snapshots", &r);
        assert_int_equal(r.kind, API_ROUTE_SNAPSHOTS);
        assert_string_equal(r.ns, "team-a");
        assert_string_equal(r.item, "");
        api_route_parse("/api/v1alpha1/namespaces/team-a/snapshots/snap_0a1b", &r);
        assert_int_equal(r.kind, API_ROUTE_SNAPSHOTS);
        assert_string_equal(r.item, "snap_0a1b");
        api_route_parse("/api/v1alpha1/namespaces/Team_A/snapshots", &r);
        assert_int_equal(r.kind, API_ROUTE_BAD_NAME);
        api_route_parse("/api/v1alpha1/namespaces/team-a/snapshots/snap_0a1b/x", &r);
        assert_int_equal(r.kind, API_ROUTE_NOT_FOUND);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/exec", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_EXEC);
        assert_string_equal(r.ns, "default");
        assert_string_equal(r.name, "hello");
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/checkpoints", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_FORK);
        assert_string_equal(r.subresource, "checkpoints");
        assert_string_equal(r.item, "");
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/checkpoints/ck_12ab", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_FORK);
        assert_string_equal(r.item, "ck_12ab");
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/forks/x", &r);
        assert_int_equal(r.kind, API_ROUTE_NOT_FOUND);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/frobs", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_SUBRES);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions", &r);
        assert_int_equal(r.kind, API_ROUTE_NS_SESSIONS);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/a/b/c", &r);
        assert_int_equal(r.kind, API_ROUTE_NOT_FOUND);
        api_route_parse("/api/v1alpha1//sessions", &r);
        assert_int_equal(r.kind, API_ROUTE_NOT_FOUND);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/Hello", &r);
        assert_int_equal(r.kind, API_ROUTE_BAD_NAME);
        api_route_parse("/api/v1alpha1/namespaces/%2e%2e/sessions/x", &r);
        assert_int_equal(r.kind, API_ROUTE_BAD_NAME);
        api_route_parse("relative", &r);
        assert_int_equal(r.kind, API_ROUTE_NOT_FOUND);
}

static void test_apply_lifecycle(void **state)
{
        struct env *e = *state;
        const char *path = "/api/v1alpha1/namespaces/default/sessions/hello";
        json_t *j = NULL, *st, *cond;
        struct cli_response resp = {0};
        struct fk_error err = {0};

        assert_int_equal(
                cli_request(&e->cli, "POST", "/api/v1alpha1/sessions", hello_json, &resp, &err), 0);
        assert_int_equal(resp.status, 201);
        assert_string_equal(resp.apply, "created");
        cli_response_done(&resp);
        assert_int_equal(req(e, "GET", path, NULL, &j), 200);
        assert_string_equal(phase_of(j), "Pending");
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "metadata"), "generation")),
                1);
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "metadata"),
                                                              "creationTimestamp")),
                            "2026-11-29T00:00:00Z");
        json_decref(j);

        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);
        assert_int_equal(e->fake.last_memory_mib, 256);
        assert_non_null(strstr(e->fake.last_kernel, "/images/vmlinuz"));
        assert_int_equal(req(e, "GET", path, NULL, &j), 200);
        st = json_object_get(j, "status");
        assert_string_equal(phase_of(j), "Running");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "vm"), "pid")),
                         1000);
        assert_string_equal(json_string_value(json_object_get(json_object_get(st, "vm"), "accel")),
                            "tcg");
        assert_true(json_is_null(json_object_get(json_object_get(st, "network"), "netns")));
        assert_true(json_is_null(json_object_get(st, "cgroup")));
        assert_int_equal(json_array_size(json_object_get(st, "checkpoints")), 0);
        assert_int_equal(json_array_size(json_object_get(st, "forks")), 0);
        assert_int_equal(json_integer_value(json_object_get(st, "observedGeneration")), 1);
        assert_string_equal(json_string_value(json_object_get(st, "startedAt")),
                            "2026-11-29T00:00:00Z");
        cond = json_array_get(json_object_get(st, "conditions"), 0);
        assert_string_equal(json_string_value(json_object_get(cond, "type")), "Ready");
        assert_string_equal(json_string_value(json_object_get(cond, "status")), "True");
        assert_non_null(json_object_get(cond, "lastTransitionTime"));
        json_decref(j);
}

static void test_reapply(void **state)
{
        struct env *e = *state;
        const char *path = "/api/v1alpha1/namespaces/default/sessions/hello";
        struct cli_response resp = {0};
        struct fk_error err = {0};
        json_t *j = NULL;
        char *changed;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);
        /* Unchanged re-apply: no new VM, no new generation. */
        assert_int_equal(cli_request(&e->cli, "PUT", path, hello_json, &resp, &err), 0);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.apply, "unchanged");
        cli_response_done(&resp);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);

        /* A changed spec bumps the generation; the running VM is kept. */
        changed = strdup(hello_json);
        memcpy(strstr(changed, "\"hi\""), "\"ho\"", 4);
        assert_int_equal(
                cli_request(&e->cli, "POST", "/api/v1alpha1/sessions", changed, &resp, &err), 0);
        free(changed);
        assert_string_equal(resp.apply, "configured");
        cli_response_done(&resp);
        reconcile(e);
        assert_int_equal(req(e, "GET", path, NULL, &j), 200);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "metadata"), "generation")),
                2);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "status"),
                                                            "observedGeneration")),
                         2);
        json_decref(j);
        assert_int_equal(atomic_load(&e->fake.boots), 1);

        assert_int_equal(req(e, "GET", "/api/v1alpha1/sessions", NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "SessionList");
        assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
        json_decref(j);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/other/sessions", NULL, &j), 200);
        assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
        json_decref(j);
}

static void test_capacity(void **state)
{
        struct env *e = *state;
        char body[256];
        json_t *j = NULL;

        /* maxSessions 3: beyond it sessions wait Pending (agent-admission-test); the table
         * itself takes four times that. */
        for (int i = 0; i < 13; i++) {
                snprintf(body, sizeof(body),
                         "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                         "\"metadata\":{\"name\":\"s%d\"}}",
                         i);
                assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", body, &j),
                                 i < 12 ? 201 : 429);
                json_decref(j);
        }
        /* Re-applying an existing one is still fine at capacity. */
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                 "\"metadata\":{\"name\":\"s0\"}}");
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", body, NULL), 200);
}

static void test_apply_errors(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;
        cleanup_free char *big = NULL;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", "{not json", &j), 400);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "BadRequest");
        assert_int_equal(json_integer_value(json_object_get(j, "code")), 400);
        json_decref(j);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions",
                             "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                             "\"metadata\":{\"name\":\"x\"},\"spec\":{\"sizeClass\":\"huge\"}}",
                             &j),
                         422);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "Invalid");
        assert_true(json_array_size(json_object_get(j, "details")) >= 1);
        assert_non_null(strstr(json_string_value(json_object_get(j, "message")), "huge"));
        json_decref(j);
        assert_int_equal(
                req(e, "PUT", "/api/v1alpha1/namespaces/default/sessions/other", hello_json, &j),
                400);
        assert_non_null(strstr(json_string_value(json_object_get(j, "message")), "name"));
        json_decref(j);
        big = malloc(CORE_API_MAX_BODY + 2);
        memset(big, ' ', CORE_API_MAX_BODY + 1);
        big[CORE_API_MAX_BODY + 1] = '\0';
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", big, NULL), 413);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/nope", NULL, &j),
                         404);
        json_decref(j);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/nope", NULL, NULL),
                404);
}

struct lines {
        char out[256], err[256];
        json_t *last;
};

static int on_line(const char *line, void *ud)
{
        struct lines *l = ud;
        json_t *j = json_loads(line, 0, NULL), *d;
        void *data;
        size_t n;

        assert_non_null(j);
        d = json_object_get(j, "data");
        if (d) {
                assert_int_equal(
                        fk_base64_decode(json_string_value(d), json_string_length(d), &data, &n),
                        0);
                strncat(strcmp(json_string_value(json_object_get(j, "stream")), "stderr") ? l->out
                                                                                          : l->err,
                        data, n);
                free(data);
                json_decref(j);
                return 0;
        }
        json_decref(l->last);
        l->last = j;
        return 0;
}

static long exec_req(struct env *e, const char *name, const char *body, struct lines *l)
{
        cleanup_free char *path = NULL;
        struct cli_response resp = {0};
        struct fk_error err = {0};
        long status;

        memset(l, 0, sizeof(*l));
        assert_true(cli_session_path(&e->cli, name, "/exec", &path) > 0);
        assert_int_equal(cli_request_lines(&e->cli, "POST", path, body, on_line, l, &resp, &err),
                         0);
        status = resp.status;
        cli_response_done(&resp);
        return status;
}

static void test_exec(void **state)
{
        struct env *e = *state;
        struct lines l;

        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"both\"]}", &l), 404);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"both\"]}", &l), 409);
        reconcile(e);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"both\"],\"env\":{\"A\":\"b\"}}", &l),
                         200);
        assert_string_equal(l.out, "out\n");
        assert_string_equal(l.err, "err\n");
        assert_int_equal(json_integer_value(json_object_get(l.last, "exit_code")), 3);
        assert_string_equal(e->fake.last_env, "GREETING=hi;A=b;");
        json_decref(l.last);
        /* "aGVsbG8=" is base64 for "hello" */
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"cat\"],\"stdin\":\"aGVsbG8=\"}", &l),
                         200);
        assert_string_equal(l.out, "hello");
        assert_int_equal(json_integer_value(json_object_get(l.last, "exit_code")), 0);
        json_decref(l.last);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"kill\"]}", &l), 200);
        assert_int_equal(json_integer_value(json_object_get(l.last, "signal")), 9);
        json_decref(l.last);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"daemon\"],\"detach\":true}", &l), 200);
        assert_int_equal(json_integer_value(json_object_get(l.last, "pid")), 77);
        json_decref(l.last);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"nosuch\"]}", &l), 200);
        assert_int_equal(json_integer_value(json_object_get(l.last, "errno")), ENOENT);
        assert_non_null(strstr(json_string_value(json_object_get(l.last, "error")), "nosuch"));
        json_decref(l.last);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[]}", &l), 400);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[1]}", &l), 400);
        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"cat\"],\"stdin\":\"!!\"}", &l), 400);
}

static void *exec_block_thread(void *userdata)
{
        struct env *e = userdata;
        struct lines l;

        assert_int_equal(exec_req(e, "hello", "{\"argv\":[\"block\"]}", &l), 200);
        assert_string_equal(l.out, "done");
        json_decref(l.last);
        return NULL;
}

/* A long exec must not hold up other API calls. */
static void test_exec_concurrent(void **state)
{
        struct env *e = *state;
        uint64_t t0;
        pthread_t t;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        assert_int_equal(pthread_create(&t, NULL, exec_block_thread, e), 0);
        for (int i = 0; i < 500 && !atomic_load(&e->fake.blocked); i++)
                usleep(10000);
        assert_true(atomic_load(&e->fake.blocked));
        t0 = fk_now_mono_ns();
        assert_int_equal(req(e, "GET", "/healthz", NULL, NULL), 200);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/sessions", NULL, NULL), 200);
        reconcile(e);
        assert_true(fk_now_mono_ns() - t0 < 2000000000ull);
        assert_false(atomic_load(&e->fake.release));
        atomic_store(&e->fake.release, true);
        assert_int_equal(pthread_join(t, NULL), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_route_parse),
                cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_images, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_lifecycle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reapply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_capacity, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_concurrent, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
