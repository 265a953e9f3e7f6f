/* SPDX-License-Identifier: MIT */
/* The daemon side of cluster mode with the fake VM backend: assigned manifests become
 * sessions (booted, updated, deleted when unassigned), a name clash with a local session is
 * reported and never overrides it, the API refuses to touch cluster sessions, the store keeps
 * them across a restart, and the usage/status views the node publishes. */
#include "agent-harness.h"
#include "agent/cluster.h"

static struct session_manifest *manifest(const char *name, const char *state)
{
        struct session_manifest **v = NULL, *m;
        struct manifest_diag d = {0};
        cleanup_free char *y = NULL;
        size_t n = 0;

        assert_true(fk_asprintf(&y,
                                "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"
                                "metadata: {name: %s}\nspec: {state: %s}\n",
                                name, state) > 0);
        assert_int_equal(manifest_parse_sessions(y, strlen(y), "t", NULL, &v, &n, &d), 0);
        m = v[0];
        free(v);
        return m;
}

static const char *status_phase(struct env *e, const char *id)
{
        static char buf[32];
        json_t *all = NULL;

        assert_int_equal(agent_daemon_cluster_status(e->d, &all), 0);
        snprintf(buf, sizeof(buf), "%s",
                 json_object_get(all, id)
                         ? json_string_value(json_object_get(json_object_get(all, id), "phase"))
                         : "-");
        json_decref(all);
        return buf;
}

static void test_sync(void **state)
{
        struct env *e = *state;
        struct session_manifest *v[2];
        struct cluster_usage u;
        bool conflict[2] = {true, true};
        json_t *j = NULL;

        /* a local session first */
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        v[0] = manifest("web", "Running");
        v[1] = manifest("hello", "Running"); /* clashes with the API session */
        assert_int_equal(agent_daemon_sync_cluster(e->d, v, 2, conflict), 0);
        assert_false(conflict[0]);
        assert_null(v[0]); /* consumed */
        assert_true(conflict[1]);
        assert_non_null(v[1]); /* left to the caller */
        session_manifest_free(v[1]);
        reconcile(e);
        assert_string_equal(status_phase(e, "default/web"), "Running");
        assert_string_equal(status_phase(e, "default/hello"), "-"); /* not a cluster session */
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(j, "metadata"), "source")),
                "api");
        json_decref(j);
        agent_daemon_usage(e->d, &u);
        assert_int_equal(u.sessions, 2);
        assert_int_equal(u.memory_mib, 512);
        assert_int_equal(u.local_sessions, 1);
        assert_int_equal(u.local_memory_mib, 256);

        /* the API may neither overwrite nor delete a cluster session */
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions",
                             "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                             "\"metadata\":{\"name\":\"web\"}}",
                             NULL),
                         409);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/web", NULL, NULL), 409);

        /* an update (Paused) and the same list again */
        v[0] = manifest("web", "Paused");
        assert_int_equal(agent_daemon_sync_cluster(e->d, v, 1, conflict), 0);
        reconcile(e);
        assert_string_equal(status_phase(e, "default/web"), "Paused");
        v[0] = manifest("web", "Paused");
        assert_int_equal(agent_daemon_sync_cluster(e->d, v, 1, conflict), 0);
        assert_null(v[0]);
        assert_int_equal(atomic_load(&e->fake.boots), 2);

        /* the store keeps it as a cluster session across a forkletd restart (VM adopted) */
        env_stop(e);
        env_start(e);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/web", NULL, &j),
                         200);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(j, "metadata"), "source")),
                "cluster");
        json_decref(j);

        /* unassigned: deleted; the local session stays */
        assert_int_equal(agent_daemon_sync_cluster(e->d, NULL, 0, NULL), 0);
        reconcile(e);
        reconcile(e);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/web", NULL, NULL),
                         404);
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, NULL), 200);
        assert_string_equal(status_phase(e, "default/web"), "-");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
