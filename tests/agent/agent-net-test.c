/* SPDX-License-Identifier: MIT */
/* The daemon's use of session networking, through fake network ops: setup before the boot
 * (tap, kernel args, pre-exec hook reach the VM ops), status.network, a live egress update
 * without reboot, port-forward checks against spec.ports, teardown on delete, orphan cleanup
 * keeping known sessions, and the node-specific netns names. No root. */
#include "tests/lib/agent-harness.h"

static struct {
        int setups, updates, teardowns, frees, cleanups;
        size_t last_n_egress;
        char last_key[128];
        char keep[512]; /* ';'-joined keep list of the last cleanup */
} net;

static int hook(void *userdata)
{
        (void)userdata;
        return 0;
}

static int fake_net_setup(const struct node_config *cfg, const char *key,
                          const struct session_manifest *m, void **ret, struct fk_error *err)
{
        (void)cfg;
        (void)err;
        net.setups++;
        net.last_n_egress = m ? m->n_egress : 0;
        snprintf(net.last_key, sizeof(net.last_key), "%s", key);
        *ret = strdup(key);
        return *ret ? 0 : -ENOMEM;
}

static int fake_net_update(void *n, const struct session_manifest *m, struct fk_error *err)
{
        (void)n;
        (void)err;
        net.updates++;
        net.last_n_egress = m->n_egress;
        return 0;
}

static void fake_net_boot_params(void *n, struct agent_boot_params *p)
{
        (void)n;
        p->pre_exec[p->n_pre_exec++] = (struct agent_pre_exec){hook, NULL, "test hook"};
        p->tap = "tap0";
        p->mac = "52:54:00:12:34:56";
        p->append = "forklet.ip=10.0.2.15/24";
}

static json_t *fake_net_status(void *n)
{
        return json_pack("{s:s, s:s}", "netns", (const char *)n, "guestIP", "10.0.2.15");
}

static int fake_net_netns_fd(void *n)
{
        (void)n;
        return 0; /* stdin: a valid fd to dup for the port-forward check */
}

static int fake_net_teardown(void *n, struct fk_error *err)
{
        (void)err;
        net.teardowns++;
        free(n);
        return 0;
}

static void fake_net_free(void *n)
{
        net.frees++;
        free(n);
}

static int fake_net_cleanup(const struct node_config *cfg, char *const *keep, struct fk_error *err)
{
        (void)cfg;
        (void)err;
        net.cleanups++;
        net.keep[0] = '\0';
        for (size_t i = 0; keep && keep[i]; i++)
                snprintf(net.keep + strlen(net.keep), sizeof(net.keep) - strlen(net.keep), "%s;",
                         keep[i]);
        return 0;
}

static const struct agent_net_ops fake_net = {
        .setup = fake_net_setup,
        .update = fake_net_update,
        .boot_params = fake_net_boot_params,
        .status = fake_net_status,
        .netns_fd = fake_net_netns_fd,
        .teardown = fake_net_teardown,
        .free = fake_net_free,
        .cleanup = fake_net_cleanup,
};

static const char web_v1[] =
        "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\",\"metadata\":{\"name\":"
        "\"web\"},\"spec\":{\"egress\":[\"api.github.test\"],\"ports\":[8080]}}";
static const char web_v2[] =
        "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\",\"metadata\":{\"name\":"
        "\"web\"},\"spec\":{\"egress\":[\"api.github.test\",\"*.example.test\","
        "\"203.0.113.0/24\"],\"ports\":[8080]}}";

static void test_network_lifecycle(void **state)
{
        struct env *e = *state;
        json_t *s = NULL;
        int boots;

        memset(&net, 0, sizeof(net));
        agent_daemon_set_net(e->d, &fake_net);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", web_v1, NULL), 201);
        reconcile(e);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/web", NULL, &s),
                         200);
        assert_string_equal(phase_of(s), "Running");
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(s, "status"), "network"), "netns")),
                "default.web");
        json_decref(s);
        assert_int_equal(net.setups, 1);
        assert_string_equal(net.last_key, "default.web");
        assert_int_equal(net.last_n_egress, 1);
        /* the network's boot parameters reached the VM ops */
        assert_string_equal(e->fake.last_tap, "tap0");
        assert_string_equal(e->fake.last_append, "forklet.ip=10.0.2.15/24");
        assert_true(e->fake.last_n_pre_exec >= 1);

        /* a changed egress list is applied live: no second boot, no second setup */
        boots = atomic_load(&e->fake.boots);
        assert_int_equal(
                req(e, "PUT", "/api/v1alpha1/namespaces/default/sessions/web", web_v2, NULL), 200);
        reconcile(e);
        assert_int_equal(net.updates, 1);
        assert_int_equal(net.last_n_egress, 3);
        assert_int_equal(atomic_load(&e->fake.boots), boots);
        assert_int_equal(net.setups, 1);

        /* port-forward: only spec.ports */
        assert_int_equal(req(e, "GET",
                             "/api/v1alpha1/namespaces/default/sessions/web/portforward?port=9999",
                             NULL, &s),
                         403);
        assert_non_null(strstr(json_string_value(json_object_get(s, "message")), "spec.ports"));
        json_decref(s);
        assert_int_equal(req(e, "GET",
                             "/api/v1alpha1/namespaces/default/sessions/web/portforward?port=8080",
                             NULL, NULL),
                         200);
        assert_int_equal(req(e, "GET",
                             "/api/v1alpha1/namespaces/default/sessions/web/portforward?port=0",
                             NULL, NULL),
                         400);
        assert_int_equal(req(e, "POST",
                             "/api/v1alpha1/namespaces/default/sessions/web/portforward?port=8080",
                             NULL, NULL),
                         400); /* no Upgrade header */

        /* orphan cleanup keeps the sessions the daemon knows */
        agent_daemon_net_start(e->d);
        assert_int_equal(net.cleanups, 1);
        assert_string_equal(net.keep, "default.web;");

        /* delete tears the network down */
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/web", NULL, NULL), 200);
        reconcile(e);
        reconcile(e);
        assert_int_equal(net.teardowns, 1);
        assert_int_equal(net.frees, 0);
}

static void test_netns_names(void **state)
{
        struct env *e = *state;
        char a[48 + 1], b[48 + 1], p[16];
        char long_key[140];

        agent_net_prefix(e->cfg, p, sizeof(p));
        assert_int_equal(agent_net_name(e->cfg, "default.web", a, sizeof(a)), 0);
        assert_int_equal(strncmp(a, p, strlen(p)), 0);
        assert_string_equal(a + strlen(p), "default.web");
        /* 63 + 1 + 63 characters: shortened with a hash, still unique and within the limit */
        memset(long_key, 'a', 127);
        long_key[63] = '.';
        long_key[127] = '\0';
        assert_int_equal(agent_net_name(e->cfg, long_key, a, sizeof(a)), 0);
        assert_true(strlen(a) <= 48);
        long_key[126] = 'b';
        assert_int_equal(agent_net_name(e->cfg, long_key, b, sizeof(b)), 0);
        assert_string_not_equal(a, b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_network_lifecycle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_netns_names, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
