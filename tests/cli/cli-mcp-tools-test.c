/* SPDX-License-Identifier: MIT */
/* forklet mcp's tools end to end without root: JSON-RPC tools/call messages into the server,
 * whose handlers call forkletd's REST API on a real unix socket, served by the daemon with the
 * fake VM backend (tests/lib/agent-harness.h) plus fake checkpoint and guest-file ops. */
#include "tests/lib/agent-harness.h"

#include <pthread.h>
#include <unistd.h>

#include "cli/mcp-internal.h"

#define HELLO_YAML                                                                                 \
        "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: hello}\n"               \
        "spec: {sizeClass: small, image: minimal}\n"

/* ---- fake backend parts the harness lacks: checkpoints and one guest file ------------------ */

static char file_path[256];
static char *file_data;
static size_t file_size;
static unsigned file_mode;

static int fake_checkpoint(void *ud, void *vm, const struct agent_checkpoint_params *p,
                           struct agent_checkpoint_result *ret, struct fk_error *err)
{
        char path[600];

        (void)ud, (void)vm, (void)err;
        snprintf(path, sizeof(path), "%s/state", p->dir);
        assert_int_equal(fk_write_file_atomic(path, "state", 5, 0600), 0);
        snprintf(path, sizeof(path), "%s/ram", p->dir);
        assert_int_equal(fk_write_file_atomic(path, "ram-bytes", 9, 0600), 0);
        *ret = (struct agent_checkpoint_result){.pause_ns = 1000000, .ram_bytes = 9};
        return 0;
}

static int fake_write_file(void *ud, void *vm, const char *path, const void *data, size_t size,
                           unsigned mode, struct fk_error *err)
{
        (void)ud, (void)vm, (void)err;
        snprintf(file_path, sizeof(file_path), "%s", path);
        free(file_data);
        file_data = malloc(size + 1);
        assert_non_null(file_data);
        memcpy(file_data, data, size);
        file_size = size;
        file_mode = mode;
        return 0;
}

static int fake_read_file(void *ud, void *vm, const char *path, size_t max, void **ret,
                          size_t *ret_size, struct fk_error *err)
{
        (void)ud, (void)vm, (void)max;
        if (!file_data || strcmp(path, file_path) != 0)
                return fk_error_set(err, -ENOENT, "%s: No such file or directory", path);
        *ret = malloc(file_size + 1);
        assert_non_null(*ret);
        memcpy(*ret, file_data, file_size);
        *ret_size = file_size;
        return 0;
}

static int mcp_setup(void **state)
{
        struct env *e;

        setup(state);
        e = *state;
        env_stop(e);
        e->ops.checkpoint = fake_checkpoint;
        e->ops.write_file = fake_write_file;
        e->ops.read_file = fake_read_file;
        env_start(e);
        file_path[0] = '\0';
        return 0;
}

static int mcp_teardown(void **state)
{
        free(file_data);
        file_data = NULL;
        return teardown(state);
}

/* ---- calling tools through the JSON-RPC layer ---------------------------------------------- */

/* tools/call name with args (stolen); the CallToolResult (caller frees). */
static json_t *call(struct env *e, const char *name, json_t *args)
{
        static int id;
        cleanup_free char *text = NULL, *reply = NULL;
        struct mcp_server s;
        json_t *msg, *r, *res;

        mcp_server_init(&s, &e->cli);
        msg = json_pack("{s:s, s:i, s:s, s:{s:s, s:o}}", "jsonrpc", "2.0", "id", ++id, "method",
                        "tools/call", "params", "name", name, "arguments", args);
        text = json_dumps(msg, JSON_COMPACT);
        json_decref(msg);
        assert_int_equal(mcp_server_handle(&s, text, strlen(text), &reply), 0);
        assert_non_null(reply);
        r = json_loads(reply, 0, NULL);
        assert_non_null(r);
        assert_int_equal(json_integer_value(json_object_get(r, "id")), id);
        res = json_incref(json_object_get(r, "result"));
        if (!res)
                fail_msg("%s: JSON-RPC error %s", name, reply);
        json_decref(r);
        /* the text content is the structured content's JSON, or the error */
        assert_string_equal(json_string_value(json_object_get(
                                    json_array_get(json_object_get(res, "content"), 0), "type")),
                            "text");
        return res;
}

/* The structuredContent of a successful call (borrowed from res). */
static json_t *ok(json_t *res)
{
        cleanup_decref json_t *again = NULL;
        const char *text;

        if (!json_is_false(json_object_get(res, "isError")))
                fail_msg("tool error: %s",
                         json_string_value(json_object_get(
                                 json_array_get(json_object_get(res, "content"), 0), "text")));
        text = json_string_value(
                json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
        again = json_loads(text, 0, NULL);
        assert_true(json_equal(again, json_object_get(res, "structuredContent")));
        return json_object_get(res, "structuredContent");
}

/* The message of a tool error (borrowed from res). */
static const char *tool_error(json_t *res)
{
        assert_true(json_is_true(json_object_get(res, "isError")));
        assert_null(json_object_get(res, "structuredContent"));
        return json_string_value(
                json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
}

static void error_says(json_t *res, const char *want)
{
        const char *msg = tool_error(res);

        if (!strstr(msg, want))
                fail_msg("\"%s\" lacks \"%s\"", msg, want);
        json_decref(res);
}

static const char *str(json_t *j, const char *key)
{
        return json_string_value(json_object_get(j, key));
}

static void create_hello(struct env *e)
{
        json_t *res = call(e, "create_session", json_pack("{s:s}", "manifest", HELLO_YAML));
        json_t *s = ok(res);

        assert_string_equal(str(s, "name"), "hello");
        assert_string_equal(str(s, "namespace"), "default");
        assert_string_equal(str(s, "result"), "created");
        json_decref(res);
        reconcile(e);
}

static void test_sessions(void **state)
{
        struct env *e = *state;
        json_t *res, *s;

        create_hello(e);
        res = call(e, "create_session", json_pack("{s:s}", "manifest", HELLO_YAML));
        assert_string_equal(str(ok(res), "result"), "unchanged");
        json_decref(res);

        res = call(e, "list_sessions", json_object());
        s = json_array_get(json_object_get(ok(res), "sessions"), 0);
        assert_int_equal(json_array_size(json_object_get(ok(res), "sessions")), 1);
        assert_string_equal(str(s, "name"), "hello");
        assert_string_equal(str(s, "phase"), "Running");
        assert_string_equal(str(s, "image"), "minimal");
        assert_string_equal(str(s, "created"), "2026-11-29T00:00:00Z");
        json_decref(res);
        res = call(e, "list_sessions", json_pack("{s:s}", "namespace", "other"));
        assert_int_equal(json_array_size(json_object_get(ok(res), "sessions")), 0);
        json_decref(res);

        res = call(e, "describe_session", json_pack("{s:s}", "session", "hello"));
        s = ok(res);
        assert_string_equal(str(json_object_get(s, "metadata"), "name"), "hello");
        assert_string_equal(str(json_object_get(s, "status"), "phase"), "Running");
        assert_string_equal(str(json_object_get(s, "spec"), "sizeClass"), "small");
        json_decref(res);
        error_says(call(e, "describe_session", json_pack("{s:s}", "session", "nope")),
                   "not found (HTTP 404)");

        /* pause and resume (nobody reconciles here: no wait, then reconcile) */
        res = call(e, "pause", json_pack("{s:s, s:i}", "session", "hello", "wait_seconds", 0));
        assert_true(json_is_true(json_object_get(ok(res), "changed")));
        json_decref(res);
        reconcile(e);
        res = call(e, "pause", json_pack("{s:s, s:i}", "session", "hello", "wait_seconds", 5));
        assert_string_equal(str(ok(res), "phase"), "Paused");
        assert_true(json_is_false(json_object_get(ok(res), "changed")));
        json_decref(res);
        error_says(call(e, "exec", json_pack("{s:s, s:[s]}", "session", "hello", "argv", "both")),
                   "exec: session default/hello is Paused, not Running (HTTP 409)");
        res = call(e, "resume", json_pack("{s:s, s:i}", "session", "hello", "wait_seconds", 0));
        ok(res);
        json_decref(res);
        reconcile(e);

        res = call(e, "delete_session", json_pack("{s:s}", "session", "hello"));
        assert_string_equal(str(ok(res), "result"), "deleted");
        json_decref(res);
        reconcile(e);
        reconcile(e);
        res = call(e, "delete_session", json_pack("{s:s}", "session", "hello"));
        assert_string_equal(str(ok(res), "result"), "already gone");
        json_decref(res);
}

static void test_create_errors(void **state)
{
        struct env *e = *state;

        error_says(call(e, "create_session",
                        json_pack("{s:s}", "manifest",
                                  "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: "
                                  "{name: Bad_Name}\nspec: {sizeClass: small, image: minimal, "
                                  "bogus: 1}\n")),
                   "the manifest is not valid:\nmanifest:");
        error_says(call(e, "create_session",
                        json_pack("{s:s}", "manifest", HELLO_YAML "---\n" HELLO_YAML)),
                   "2 Session documents");
        /* valid YAML the node refuses (an unknown size class): the API's 422 message */
        error_says(call(e, "create_session",
                        json_pack("{s:s}", "manifest",
                                  "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: "
                                  "{name: big}\nspec: {sizeClass: huge, image: minimal}\n")),
                   "(HTTP 422)");
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/big", NULL, NULL),
                         404);
}

static void *reconciler(void *ud)
{
        struct env *e = ud;

        usleep(300000);
        assert_int_equal(agent_daemon_reconcile(e->d), 0);
        return NULL;
}

/* wait_seconds: a wait nobody satisfies reports the phase; one a reconcile satisfies returns
 * Running. */
static void test_create_wait(void **state)
{
        struct env *e = *state;
        pthread_t t;
        json_t *res, *s;

        res = call(e, "create_session",
                   json_pack("{s:s, s:i}", "manifest", HELLO_YAML, "wait_seconds", 1));
        s = ok(res);
        assert_true(json_is_false(json_object_get(s, "running")));
        assert_string_equal(str(json_object_get(s, "phases"), "hello"), "Pending");
        json_decref(res);
        assert_int_equal(pthread_create(&t, NULL, reconciler, e), 0);
        res = call(e, "create_session",
                   json_pack("{s:s, s:i}", "manifest", HELLO_YAML, "wait_seconds", 20));
        pthread_join(t, NULL);
        s = ok(res);
        assert_true(json_is_true(json_object_get(s, "running")));
        assert_string_equal(str(json_object_get(s, "phases"), "hello"), "Running");
        json_decref(res);
}

static void test_exec(void **state)
{
        struct env *e = *state;
        json_t *res, *s;

        error_says(call(e, "exec", json_pack("{s:s, s:[s]}", "session", "nope", "argv", "both")),
                   "exec: session default/nope not found (HTTP 404)");
        create_hello(e);
        res = call(e, "exec", json_pack("{s:s, s:[s]}", "session", "hello", "argv", "both"));
        s = ok(res);
        assert_string_equal(str(s, "stdout"), "out\n");
        assert_string_equal(str(s, "stderr"), "err\n");
        assert_int_equal(json_integer_value(json_object_get(s, "exit_code")), 3);
        assert_true(json_is_false(json_object_get(s, "timed_out")));
        assert_true(json_is_false(json_object_get(s, "output_capped")));
        json_decref(res);
        res = call(e, "exec",
                   json_pack("{s:s, s:[s], s:s}", "session", "hello", "argv", "cat", "stdin",
                             "hello \xc3\xa9\n"));
        assert_string_equal(str(ok(res), "stdout"), "hello \xc3\xa9\n");
        json_decref(res);
        /* output past output_cap_bytes is dropped (here by the host side: the fake ignores it) */
        res = call(e, "exec",
                   json_pack("{s:s, s:[s], s:s, s:i}", "session", "hello", "argv", "cat", "stdin",
                             "0123456789", "output_cap_bytes", 4));
        assert_string_equal(str(ok(res), "stdout"), "0123");
        assert_true(json_is_true(json_object_get(ok(res), "output_capped")));
        json_decref(res);
        res = call(e, "exec", json_pack("{s:s, s:[s]}", "session", "hello", "argv", "kill"));
        assert_int_equal(json_integer_value(json_object_get(ok(res), "exit_code")), 137);
        assert_int_equal(json_integer_value(json_object_get(ok(res), "signal")), 9);
        json_decref(res);
        error_says(call(e, "exec", json_pack("{s:s, s:[s]}", "session", "hello", "argv", "nosuch")),
                   "exec: nosuch: not found in the guest PATH");
        error_says(call(e, "exec",
                        json_pack("{s:s, s:s, s:[s]}", "session", "hello", "namespace", "other",
                                  "argv", "both")),
                   "not found");
}

static void test_files(void **state)
{
        struct env *e = *state;
        json_t *res, *s;

        create_hello(e);
        res = call(e, "write_file",
                   json_pack("{s:s, s:s, s:s, s:s}", "session", "hello", "path",
                             "/workspace/a b.txt", "content", "line one\n", "mode", "0600"));
        assert_int_equal(json_integer_value(json_object_get(ok(res), "size")), 9);
        json_decref(res);
        assert_string_equal(file_path, "/workspace/a b.txt");
        assert_int_equal(file_mode, 0600);
        res = call(e, "read_file",
                   json_pack("{s:s, s:s}", "session", "hello", "path", "/workspace/a b.txt"));
        s = ok(res);
        assert_string_equal(str(s, "content"), "line one\n");
        assert_string_equal(str(s, "encoding"), "utf-8");
        json_decref(res);

        /* bytes that are not text: base64 both ways; as utf-8 they are refused */
        res = call(e, "write_file",
                   json_pack("{s:s, s:s, s:s, s:s}", "session", "hello", "path", "/bin.dat",
                             "content", "AP8Kgg==", "encoding", "base64"));
        assert_int_equal(json_integer_value(json_object_get(ok(res), "size")), 4);
        json_decref(res);
        assert_int_equal(file_size, 4);
        assert_memory_equal(file_data, "\x00\xff\n\x82", 4);
        assert_int_equal(file_mode, 0644);
        error_says(call(e, "read_file",
                        json_pack("{s:s, s:s}", "session", "hello", "path", "/bin.dat")),
                   "is not UTF-8 text: read it with encoding \"base64\"");
        res = call(e, "read_file",
                   json_pack("{s:s, s:s, s:s}", "session", "hello", "path", "/bin.dat", "encoding",
                             "base64"));
        assert_string_equal(str(ok(res), "content"), "AP8Kgg==");
        json_decref(res);

        error_says(call(e, "read_file",
                        json_pack("{s:s, s:s}", "session", "hello", "path", "/missing")),
                   "/missing: No such file or directory");
        error_says(call(e, "read_file",
                        json_pack("{s:s, s:s}", "session", "hello", "path", "relative")),
                   "absolute guest path");
        error_says(call(e, "write_file",
                        json_pack("{s:s, s:s, s:s, s:s}", "session", "hello", "path", "/x",
                                  "content", "", "mode", "rwx")),
                   "mode: \"rwx\" is not octal");
        error_says(call(e, "write_file",
                        json_pack("{s:s, s:s, s:s, s:s}", "session", "hello", "path", "/x",
                                  "content", "!!", "encoding", "base64")),
                   "not valid base64");
}

static void test_checkpoint_fork(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = NULL;
        json_t *res, *s;

        create_hello(e);
        res = call(e, "checkpoint_create", json_pack("{s:s}", "session", "hello"));
        s = ok(res);
        assert_non_null(str(s, "id"));
        assert_int_equal(strncmp(str(s, "id"), "ck_", 3), 0);
        id = strdup(str(s, "id"));
        json_decref(res);
        res = call(e, "checkpoint_list", json_pack("{s:s}", "session", "hello"));
        s = json_array_get(json_object_get(ok(res), "checkpoints"), 0);
        assert_string_equal(str(s, "id"), id);
        assert_string_equal(str(s, "created"), "2026-11-29T00:00:00Z");
        json_decref(res);

        res = call(e, "fork",
                   json_pack("{s:s, s:s, s:i}", "session", "hello", "checkpoint", id, "count", 1));
        s = ok(res);
        assert_int_equal(json_array_size(json_object_get(s, "names")), 1);
        assert_string_equal(json_string_value(json_array_get(json_object_get(s, "names"), 0)),
                            "hello-fork-0");
        json_decref(res);
        reconcile(e);
        res = call(e, "describe_session", json_pack("{s:s}", "session", "hello-fork-0"));
        assert_string_equal(str(json_object_get(ok(res), "status"), "phase"), "Running");
        json_decref(res);
        error_says(call(e, "fork",
                        json_pack("{s:s, s:s, s:i}", "session", "hello", "checkpoint", "ck_0bad",
                                  "count", 1)),
                   "fork: checkpoint ck_0bad not found in session default/hello (HTTP 404)");

        res = call(e, "rollback", json_pack("{s:s, s:s}", "session", "hello", "checkpoint", id));
        assert_string_equal(str(ok(res), "result"), "rolled back");
        json_decref(res);
        error_says(call(e, "rollback",
                        json_pack("{s:s, s:s}", "session", "hello-fork-0", "checkpoint", id)),
                   "belongs to session default/hello");

        /* delete: refused while its fork is there, then with it (cascade), then already gone */
        error_says(call(e, "checkpoint_delete",
                        json_pack("{s:s, s:s}", "session", "hello", "checkpoint", id)),
                   "hello-fork-0");
        error_says(call(e, "checkpoint_delete",
                        json_pack("{s:s, s:s}", "session", "hello-fork-0", "checkpoint", id)),
                   "belongs to session default/hello");
        error_says(call(e, "checkpoint_delete",
                        json_pack("{s:s, s:s}", "session", "hello", "checkpoint",
                                  "ck_1?cascade=true")),
                   "not a checkpoint id");
        res = call(
                e, "checkpoint_delete",
                json_pack("{s:s, s:s, s:b}", "session", "hello", "checkpoint", id, "cascade", 1));
        assert_string_equal(str(ok(res), "result"), "deleted");
        json_decref(res);
        /* the fork's VM runs until the next reconcile ends it: no exec into it meanwhile */
        error_says(call(e, "exec",
                        json_pack("{s:s, s:[s]}", "session", "hello-fork-0", "argv", "true")),
                   "session default/hello-fork-0 is being deleted");
        res = call(e, "checkpoint_list", json_pack("{s:s}", "session", "hello"));
        assert_int_equal(json_array_size(json_object_get(ok(res), "checkpoints")), 0);
        json_decref(res);
        res = call(e, "checkpoint_delete",
                   json_pack("{s:s, s:s}", "session", "hello", "checkpoint", id));
        assert_string_equal(str(ok(res), "result"), "already gone");
        json_decref(res);
        error_says(call(e, "checkpoint_delete",
                        json_pack("{s:s, s:s}", "session", "nope", "checkpoint", id)),
                   "session default/nope not found");
}

/* Snapshots: one planted in stateDir (a meta.json and a disk file that only has to exist), then
 * list, restore (no boot: the fake backend has no disks), a delete refused while the restored
 * session is there, done once it is gone, then already gone. */
static void test_snapshots(void **state)
{
        static const char meta[] =
                "{\"id\": \"snap_00aa\", \"session\": \"default.hello\", \"createdNs\": 0, "
                "\"manifest\": {\"apiVersion\": \"forklet.dev/v1alpha1\", \"kind\": \"Session\", "
                "\"metadata\": {\"name\": \"hello\", \"namespace\": \"default\"}, "
                "\"spec\": {\"sizeClass\": \"small\", \"image\": \"minimal\"}}}";
        struct env *e = *state;
        cleanup_free char *dir = NULL, *path = NULL;
        json_t *res, *s, *it;

        assert_true(fk_asprintf(&dir, "%s/state/snapshots/snap_00aa", e->dir) > 0);
        assert_int_equal(fk_mkdir_p(dir, 0700), 0);
        assert_true(fk_asprintf(&path, "%s/meta.json", dir) > 0);
        assert_int_equal(fk_write_file_atomic(path, meta, strlen(meta), 0600), 0);
        free(path);
        assert_true(fk_asprintf(&path, "%s/disk.qcow2", dir) > 0);
        assert_int_equal(fk_write_file_atomic(path, "disk", 4, 0600), 0);

        res = call(e, "snapshot_list", json_object());
        s = ok(res);
        assert_int_equal(json_array_size(json_object_get(s, "snapshots")), 1);
        it = json_array_get(json_object_get(s, "snapshots"), 0);
        assert_string_equal(str(it, "id"), "snap_00aa");
        assert_string_equal(str(it, "session"), "hello");
        json_decref(res);
        res = call(e, "restore", json_pack("{s:s, s:s}", "snapshot", "snap_00aa", "name", "web2"));
        s = ok(res);
        assert_string_equal(str(s, "name"), "web2");
        assert_string_equal(str(s, "snapshot"), "snap_00aa");
        json_decref(res);
        error_says(call(e, "snapshot_delete", json_pack("{s:s}", "snapshot", "snap_00aa")),
                   "under the disks of default/web2");
        error_says(call(e, "snapshot_delete", json_pack("{s:s}", "snapshot", "snap_1?x=1")),
                   "not a snapshot id");
        error_says(call(e, "restore",
                        json_pack("{s:s, s:s}", "snapshot", "snap_0bad", "name", "web3")),
                   "snapshot snap_0bad not found");
        res = call(e, "delete_session", json_pack("{s:s}", "session", "web2"));
        assert_string_equal(str(ok(res), "result"), "deleted");
        json_decref(res);
        reconcile(e);
        res = call(e, "snapshot_delete", json_pack("{s:s}", "snapshot", "snap_00aa"));
        assert_string_equal(str(ok(res), "result"), "deleted");
        json_decref(res);
        assert_int_equal(access(dir, F_OK), -1);
        res = call(e, "snapshot_delete", json_pack("{s:s}", "snapshot", "snap_00aa"));
        assert_string_equal(str(ok(res), "result"), "already gone");
        json_decref(res);
        res = call(e, "snapshot_list", json_object());
        assert_int_equal(json_array_size(json_object_get(ok(res), "snapshots")), 0);
        json_decref(res);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_sessions, mcp_setup, mcp_teardown),
                cmocka_unit_test_setup_teardown(test_create_errors, mcp_setup, mcp_teardown),
                cmocka_unit_test_setup_teardown(test_create_wait, mcp_setup, mcp_teardown),
                cmocka_unit_test_setup_teardown(test_exec, mcp_setup, mcp_teardown),
                cmocka_unit_test_setup_teardown(test_files, mcp_setup, mcp_teardown),
                cmocka_unit_test_setup_teardown(test_checkpoint_fork, mcp_setup, mcp_teardown),
                cmocka_unit_test_setup_teardown(test_snapshots, mcp_setup, mcp_teardown),
        };

        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
