/* SPDX-License-Identifier: MIT */
/* The daemon side of cluster mode with the fake VM backend: assigned manifests become
 * sessions (booted, updated, deleted when unassigned), a name clash with a local session is
 * reported and never overrides it, the API refuses to touch cluster sessions, the store keeps
 * them across a restart, and the usage/status views the node publishes. */
#include "core/cluster/cluster.h"
#include "tests/lib/agent-harness.h"
#include "agent/cluster/cluster.h"
#include "scheduler/sched.h"

#define MIB (1024ull * 1024)

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

/* What the node publishes after test_sync's first step: one local and one cluster session. */
static void expect_report(struct env *e)
{
        struct core_cluster_node_report rep;

        agent_daemon_node_report(e->d, &rep);
        assert_int_equal(rep.use.sessions, 2);
        assert_int_equal(rep.use.memory_mib, 512);
        assert_int_equal(rep.use.local_sessions, 1);
        assert_int_equal(rep.use.local_memory_mib, 256);
        /* admission's view: both admitted, each charged RAM + qemuOverheadMiB */
        assert_int_equal(rep.all.used_sessions, 2);
        assert_int_equal(rep.all.used.memory_bytes, 2 * (256 + 128) * MIB);
        assert_int_equal(rep.local.used_sessions, 1);
        assert_int_equal(rep.local.used.memory_bytes, (256 + 128) * MIB);
        assert_int_equal(rep.all.allocatable_sessions, 3);
}

static void test_sync(void **state)
{
        struct env *e = *state;
        struct session_manifest *v[2];
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
        expect_report(e);

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

/* Would a scheduler place one more small session here, reading what the node publishes and
 * with the cluster sessions in placed[] on it? */
static bool scheduler_fits(struct env *e, const char *const *placed, size_t n)
{
        struct core_cluster_node_report rep;
        enum core_resource why;
        struct sched_state st;
        char *text, key[96];
        json_t *j;
        int64_t f;

        agent_daemon_node_report(e->d, &rep);
        j = core_cluster_node_status_json(e->cfg, &rep, 0);
        text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        assert_non_null(text);
        assert_int_equal(sched_state_init(&st, "/p"), 0);
        assert_int_equal(sched_state_apply(&st, "/p/nodes/test/status", text, 1), 0);
        assert_int_equal(sched_state_apply(&st, "/p/nodes/test/lease", "{}", 1), 0);
        free(text);
        for (size_t i = 0; i < n; i++) {
                snprintf(key, sizeof(key), "/p/sessions/default/%s/spec", placed[i]);
                assert_int_equal(sched_state_apply(&st, key, "{\"spec\":{}}", 2), 0);
                snprintf(key, sizeof(key), "/p/sessions/default/%s/node", placed[i]);
                assert_int_equal(sched_state_apply(&st, key, "test", 2), 0);
        }
        sched_state_account(&st);
        f = sched_node_fit(sched_state_node(&st, "test"), &st.nodes[0].classes[0], &why);
        sched_state_done(&st);
        return f >= 0;
}

/* The daemon's admission and a scheduler reading its published status agree one MiB short of
 * room and at exactly enough; the session admission keeps waiting is reported unadmitted. */
static void test_report_matches_admission(void **state)
{
        const char *const placed[] = {"web"};
        struct env *e = *state;
        struct session_manifest *v[2];
        bool conflict[2];

        pthread_mutex_lock(&e->d->lock);
        e->d->node.host_cpus = 8;
        e->d->node.host_memory_bytes = e->d->node.reserve_memory_bytes + 3 * 384 * MIB - MIB;
        pthread_mutex_unlock(&e->d->lock);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        v[0] = manifest("web", "Running");
        assert_int_equal(agent_daemon_sync_cluster(e->d, v, 1, conflict), 0);
        reconcile(e);
        assert_string_equal(status_phase(e, "default/web"), "Running");
        /* 2 x 384 MiB held, 383 left: a third small (384) fits neither */
        assert_false(scheduler_fits(e, placed, 1));
        v[0] = manifest("web", "Running");
        v[1] = manifest("web2", "Running");
        assert_int_equal(agent_daemon_sync_cluster(e->d, v, 2, conflict), 0);
        reconcile(e);
        assert_string_equal(status_phase(e, "default/web2"), "Pending");
        assert_true(agent_daemon_cluster_unadmitted(e->d, "default", "web2"));
        assert_false(agent_daemon_cluster_unadmitted(e->d, "default", "web"));
        assert_false(agent_daemon_cluster_unadmitted(e->d, "default", "hello"));
        /* one MiB more: exactly enough, for both */
        pthread_mutex_lock(&e->d->lock);
        e->d->node.host_memory_bytes += MIB;
        pthread_mutex_unlock(&e->d->lock);
        assert_true(scheduler_fits(e, placed, 1));
        reconcile(e);
        assert_string_equal(status_phase(e, "default/web2"), "Running");
        assert_false(agent_daemon_cluster_unadmitted(e->d, "default", "web2"));
        assert_int_equal(agent_daemon_sync_cluster(e->d, NULL, 0, NULL), 0);
        reconcile(e);
        reconcile(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
                cmocka_unit_test_setup_teardown(test_report_matches_admission, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
