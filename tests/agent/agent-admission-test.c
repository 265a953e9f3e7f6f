/* SPDX-License-Identifier: MIT */
/* Admission in the daemon with the fake VM backend: sessions beyond the slots or the memory
 * wait Pending with an Insufficient<Resource> reason and start once room frees; forks are
 * charged their share; the node JSON reports allocatable/used/free and per-class fits; the
 * cgroup limits derived from a size class. */
#include "tests/lib/agent-harness.h"
#include "cgroups/cgroups.h"

#define MIB (1024ull * 1024)

static void apply_named(struct env *e, const char *name)
{
        char body[256];

        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                 "\"metadata\":{\"name\":\"%s\"}}",
                 name);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", body, NULL), 201);
}

static void delete_named(struct env *e, const char *name)
{
        char path[128];

        snprintf(path, sizeof(path), "/api/v1alpha1/namespaces/default/sessions/%s", name);
        assert_int_equal(req(e, "DELETE", path, NULL, NULL), 200);
}

/* Phase and Ready reason of a session. */
static void expect(struct env *e, const char *name, const char *phase, const char *reason)
{
        char path[128];
        json_t *j = NULL, *c;
        size_t i;

        snprintf(path, sizeof(path), "/api/v1alpha1/namespaces/default/sessions/%s", name);
        assert_int_equal(req(e, "GET", path, NULL, &j), 200);
        if (strcmp(phase_of(j), phase) != 0)
                fail_msg("%s: phase %s, want %s", name, phase_of(j), phase);
        json_array_foreach(json_object_get(json_object_get(j, "status"), "conditions"), i, c)
        {
                if (strcmp(json_string_value(json_object_get(c, "type")), "Ready") == 0 && reason)
                        assert_string_equal(json_string_value(json_object_get(c, "reason")),
                                            reason);
        }
        json_decref(j);
}

/* maxSessions 3 (the harness config): the fourth waits for a slot. */
static void test_insufficient_sessions(void **state)
{
        struct env *e = *state;

        apply_named(e, "s0");
        apply_named(e, "s1");
        apply_named(e, "s2");
        apply_named(e, "s3");
        reconcile(e);
        expect(e, "s2", "Running", "Running");
        expect(e, "s3", "Pending", "InsufficientSessions");
        assert_int_equal(atomic_load(&e->fake.boots), 3);
        reconcile(e); /* still no room: no boot, no flapping */
        assert_int_equal(atomic_load(&e->fake.boots), 3);
        expect(e, "s3", "Pending", "InsufficientSessions");

        delete_named(e, "s1");
        reconcile(e);
        reconcile(e);
        expect(e, "s3", "Running", "Running");
        assert_int_equal(atomic_load(&e->fake.boots), 4);
}

/* Memory for one small session (256 MiB + 128 MiB overhead) and a bit. */
static void test_insufficient_memory(void **state)
{
        struct env *e = *state;
        json_t *j = NULL, *cap;

        pthread_mutex_lock(&e->d->lock);
        e->d->node.host_memory_bytes = e->d->node.reserve_memory_bytes + 500 * MIB;
        pthread_mutex_unlock(&e->d->lock);
        apply_named(e, "first");
        reconcile(e);
        apply_named(e, "second");
        reconcile(e);
        expect(e, "first", "Running", NULL);
        expect(e, "second", "Pending", "InsufficientMemory");

        assert_int_equal(req(e, "GET", "/api/v1alpha1/node", NULL, &j), 200);
        cap = json_object_get(j, "capacity");
        assert_int_equal(json_integer_value(
                                 json_object_get(json_object_get(cap, "allocatable"), "memoryMiB")),
                         500);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(cap, "used"), "memoryMiB")),
                384);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(cap, "free"), "memoryMiB")),
                116);
        assert_int_equal(json_integer_value(json_object_get(
                                 json_array_get(json_object_get(cap, "sizeClasses"), 0), "fits")),
                         0);
        assert_false(json_is_true(json_object_get(json_object_get(j, "cgroups"), "enabled")));
        json_decref(j);

        /* a Stopped session gives its memory back */
        delete_named(e, "first");
        reconcile(e);
        reconcile(e);
        expect(e, "second", "Running", "Running");
}

/* Makes name a fork of checkpoint ck1 of session "parent" (as spec.forks or the fork API do),
 * with the checkpoint on disk, so its first boot maps that RAM copy-on-write. */
static void make_fork(struct env *e, const char *name)
{
        cleanup_free char *dir = NULL, *meta = NULL;
        struct agent_session *s;

        assert_true(agent_checkpoint_dir(e->cfg->state_dir, "default.parent", "ck1", &dir) >= 0);
        assert_int_equal(fk_mkdir_p(dir, 0700), 0);
        assert_true(fk_asprintf(&meta, "%s/meta.json", dir) > 0);
        assert_int_equal(fk_write_file_atomic(meta, "{}\n", 3, 0600), 0);
        pthread_mutex_lock(&e->d->lock);
        s = agent_daemon_find(e->d, "default", name);
        assert_non_null(s);
        s->fork_parent = strdup("parent");
        s->fork_checkpoint = strdup("ck1");
        pthread_mutex_unlock(&e->d->lock);
}

/* A fork is charged overhead + 25% of its RAM: two fit where one session does. */
static void test_fork_charge(void **state)
{
        struct env *e = *state;
        struct agent_session *s;

        pthread_mutex_lock(&e->d->lock);
        e->d->node.host_memory_bytes = e->d->node.reserve_memory_bytes + 400 * MIB;
        pthread_mutex_unlock(&e->d->lock);
        apply_named(e, "fork-a");
        apply_named(e, "fork-b");
        make_fork(e, "fork-a");
        make_fork(e, "fork-b");
        reconcile(e);
        expect(e, "fork-a", "Running", NULL);
        expect(e, "fork-b", "Running", NULL);
        pthread_mutex_lock(&e->d->lock);
        s = agent_daemon_find(e->d, "default", "fork-b");
        assert_true(s->res.fork);
        assert_int_equal(agent_session_charge(e->d, s).memory_bytes, (128 + 64) * MIB);
        pthread_mutex_unlock(&e->d->lock);
        /* a plain session needs its full 384 MiB: only 16 are left */
        apply_named(e, "full");
        reconcile(e);
        expect(e, "full", "Pending", "InsufficientMemory");
}

static void test_limits(void **state)
{
        struct env *e = *state;
        struct size_class half = {.name = (char *)"half",
                                  .vcpus = 1,
                                  .memory_mib = 256,
                                  .cpu = 0.5,
                                  .pids = 100,
                                  .io_weight = 300};
        struct size_class open_ = {.name = (char *)"open", .vcpus = 2, .memory_mib = 1024};
        struct cg_limits l;

        agent_resources_limits(e->cfg, &half, false, &l);
        assert_true(l.cpu_cores == 0.5);
        assert_int_equal(l.cpu_weight, 50);
        assert_int_equal(l.memory_max, (256 + 128) * MIB);
        assert_int_equal(l.memory_high, (256 + 96) * MIB);
        assert_int_equal(l.pids_max, 100);
        assert_int_equal(l.io_weight, 300);
        agent_resources_limits(e->cfg, &open_, false, &l);
        assert_true(l.cpu_cores == 0);
        assert_int_equal(l.cpu_weight, 200); /* no quota: weighted by vCPUs */
        assert_int_equal(l.memory_max, (1024 + 128) * MIB);
        assert_int_equal(l.pids_max, 0);
        assert_int_equal(l.io_weight, 0);
        /* under TCG QEMU also holds up to 64 MiB of translated code */
        agent_resources_limits(e->cfg, &half, true, &l);
        assert_int_equal(l.memory_max, (256 + 128 + 64) * MIB);
        assert_int_equal(l.memory_high, (256 + 144) * MIB);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_insufficient_sessions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_insufficient_memory, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fork_charge, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
