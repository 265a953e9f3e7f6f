/* SPDX-License-Identifier: MIT */
/* The daemon behind its real REST server (libmicrohttpd on a unix socket in a temp dir) with a
 * fake VM backend and clock, driven through the CLI's HTTP client: routing, apply/get/delete,
 * status JSON, exec streaming, QEMU exit, restart persistence and the manifest directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>

#include "agent-fake.h"
#include "agent/agent-internal.h"
#include "agent/cli/cli.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#define T0_NS (1795910400ull * 1000000000ull) /* 2026-11-29T00:00:00Z */

struct env {
        char dir[64];
        char sock[128];
        struct node_config *cfg;
        struct fake_backend fake;
        struct fake_clock clock;
        struct agent_clock aclock;
        struct agent_vm_ops ops;
        struct agent_daemon *d;
        struct api_server *api;
        struct cli cli;
};

static const char hello_json[] =
        "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\",\"metadata\":{\"name\":"
        "\"hello\"},\"spec\":{\"sizeClass\":\"small\",\"image\":\"minimal\",\"env\":{"
        "\"GREETING\":\"hi\"}}}";

static void env_start(struct env *e)
{
        struct fk_error err = {0};

        assert_int_equal(agent_daemon_new(e->cfg, VMM_ACCEL_TCG, &e->ops, &e->aclock, &e->d), 0);
        assert_int_equal(api_server_start(e->d, e->cfg, e->sock, &e->api, &err), 0);
}

static void env_stop(struct env *e)
{
        e->api = api_server_stop(e->api);
        e->d = agent_daemon_free(e->d);
}

static int setup(void **state)
{
        struct env *e = calloc(1, sizeof(*e));
        struct manifest_diag diag = {0};
        cleanup_free char *yaml = NULL;

        assert_non_null(e);
        strcpy(e->dir, "/tmp/fk-agent-api-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->sock, sizeof(e->sock), "%s/api.sock", e->dir);
        assert_true(fk_asprintf(&yaml,
                                "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\n"
                                "nodeName: test\nstateDir: %s/state\nrunDir: %s/run\n"
                                "manifestDir: %s/manifests\naccel: tcg\n"
                                "sizeClasses: [{name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, "
                                "pids: 512}]\n"
                                "images: [{name: minimal, dir: %s/images}]\n"
                                "capacity: {maxSessions: 3}\n",
                                e->dir, e->dir, e->dir, e->dir) > 0);
        if (node_config_parse(yaml, strlen(yaml), "node.yaml", &e->cfg, &diag) < 0)
                fail_msg("node config: %s", diag.n ? diag.messages[0] : "?");
        atomic_store(&e->fake.next_pid, 1000);
        atomic_store(&e->clock.real_ns, T0_NS);
        atomic_store(&e->clock.mono_ns, 1000000000ull);
        e->aclock = (struct agent_clock){fake_real, fake_mono, &e->clock};
        e->ops = fake_ops(&e->fake);
        e->cli = (struct cli){.socket = e->sock, .namespace = "default"};
        env_start(e);
        *state = e;
        return 0;
}

static int teardown(void **state)
{
        struct env *e = *state;

        env_stop(e);
        node_config_free(e->cfg);
        fk_rm_rf(e->dir);
        free(e);
        return 0;
}

static long req(struct env *e, const char *method, const char *path, const char *body, json_t **ret)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        long status;

        if (cli_request(&e->cli, method, path, body, &resp, &err) < 0)
                fail_msg("%s %s: %s", method, path, err.msg);
        status = resp.status;
        if (ret)
                *ret = json_loads(resp.body ? resp.body : "", 0, NULL);
        cli_response_done(&resp);
        return status;
}

static void reconcile(struct env *e)
{
        assert_int_equal(agent_daemon_reconcile(e->d), 0);
        assert_int_equal(agent_daemon_wait_idle(e->d, 5000), 1);
}

static const char *phase_of(json_t *s)
{
        return json_string_value(json_object_get(json_object_get(s, "status"), "phase"));
}

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

static void test_route_parse(void **state)
{
        struct api_route r;

        (void)state;
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/exec", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_EXEC);
        assert_string_equal(r.ns, "default");
        assert_string_equal(r.name, "hello");
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/hello/checkpoints", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_SUBRES);
        assert_string_equal(r.subresource, "checkpoints");
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

        for (int i = 0; i < 4; i++) {
                snprintf(body, sizeof(body),
                         "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                         "\"metadata\":{\"name\":\"s%d\"}}",
                         i);
                assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", body, &j),
                                 i < 3 ? 201 : 429);
                json_decref(j);
        }
        /* Re-applying an existing one is still fine at capacity. */
        body[strlen(body) - 4] = '0';
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
        big = malloc(API_MAX_BODY + 2);
        memset(big, ' ', API_MAX_BODY + 1);
        big[API_MAX_BODY + 1] = '\0';
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
                assert_int_equal(api_base64_decode(json_string_value(d), &data, &n), 0);
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

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_route_parse),
                cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_lifecycle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reapply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_capacity, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_concurrent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_and_exit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_running, setup, teardown),
                cmocka_unit_test_setup_teardown(test_boot_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_while_starting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_on_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart, setup, teardown),
                cmocka_unit_test_setup_teardown(test_manifest_dir, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
