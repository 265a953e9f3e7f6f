/* SPDX-License-Identifier: MIT */
/* The harness of the agent's API/daemon unit tests: a temp node (state/run/manifest dirs), the
 * daemon with the fake VM backend and clock, its REST server on a unix socket, and helpers
 * that talk to it through the CLI's HTTP client. Header-only: included by each test file. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>

#include "tests/lib/agent-fake.h"
#include "agent/api/api.h"
#include "agent/daemon/daemon-internal.h"
#include "cli/cli.h"
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

static inline void env_start(struct env *e)
{
        struct fk_error err = {0};

        assert_int_equal(agent_daemon_new(e->cfg, VMM_ACCEL_TCG, &e->ops, &e->aclock, &e->d), 0);
        assert_int_equal(api_server_start(e->d, e->cfg, e->sock, &e->api, &err), 0);
}

static inline void env_stop(struct env *e)
{
        e->api = api_server_stop(e->api);
        e->d = agent_daemon_free(e->d);
}

static inline void harness_touch_image(const char *dir)
{
        cleanup_free char *img = NULL, *k = NULL, *i = NULL;

        assert_true(fk_asprintf(&img, "%s/images", dir) > 0);
        assert_true(fk_asprintf(&k, "%s/vmlinuz", img) > 0);
        assert_true(fk_asprintf(&i, "%s/initrd.img", img) > 0);
        assert_int_equal(fk_mkdir_p(img, 0700), 0);
        assert_int_equal(fk_write_file_atomic(k, "", 0, 0600), 0);
        assert_int_equal(fk_write_file_atomic(i, "", 0, 0600), 0);
}

static inline int setup(void **state)
{
        struct env *e = calloc(1, sizeof(*e));
        struct manifest_diag diag = {0};
        cleanup_free char *yaml = NULL;

        assert_non_null(e);
        strcpy(e->dir, "/tmp/fk-agent-api-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->sock, sizeof(e->sock), "%s/api.sock", e->dir);
        /* The image only has to exist: the fake VM ops never read it. */
        harness_touch_image(e->dir);
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

static inline int teardown(void **state)
{
        struct env *e = *state;

        env_stop(e);
        node_config_free(e->cfg);
        fk_rm_rf(e->dir);
        free(e);
        return 0;
}

static inline long req(struct env *e, const char *method, const char *path, const char *body,
                       json_t **ret)
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

static inline void reconcile(struct env *e)
{
        assert_int_equal(agent_daemon_reconcile(e->d), 0);
        assert_int_equal(agent_daemon_wait_idle(e->d, 5000), 1);
}

static inline const char *phase_of(json_t *s)
{
        return json_string_value(json_object_get(json_object_get(s, "status"), "phase"));
}
