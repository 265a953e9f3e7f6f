/* SPDX-License-Identifier: MIT */
/* Cluster mode without etcd: key layout, node capacity and status document, the scheduler's
 * state mirror and the placement decision (fit, selector, spread/pack, why not). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cluster/cluster.h"
#include "core/core.h"
#include "scheduler/sched.h"
#include "common/util.h"
#include "manifest/manifest.h"

static void test_keys(void **state)
{
        struct core_cluster_key k;
        char *s = NULL;

        (void)state;
        core_cluster_key_parse("/fk", "/fk/nodes/n-1/status", &k);
        assert_int_equal(k.kind, CORE_CLUSTER_KEY_NODE_STATUS);
        assert_string_equal(k.name, "n-1");
        core_cluster_key_parse("/fk", "/fk/nodes/n-1/lease", &k);
        assert_int_equal(k.kind, CORE_CLUSTER_KEY_NODE_LEASE);
        core_cluster_key_parse("/fk", "/fk/sessions/default/web/spec", &k);
        assert_int_equal(k.kind, CORE_CLUSTER_KEY_SESSION_SPEC);
        assert_string_equal(k.ns, "default");
        assert_string_equal(k.name, "web");
        core_cluster_key_parse("/fk", "/fk/sessions/default/web/node", &k);
        assert_int_equal(k.kind, CORE_CLUSTER_KEY_SESSION_NODE);
        core_cluster_key_parse("/fk", "/fk/sessions/default/web/status", &k);
        assert_int_equal(k.kind, CORE_CLUSTER_KEY_SESSION_STATUS);
        /* Not ours: other prefix, a prefix that only starts the same, extra depth, bad leaf. */
        const char *const other[] = {"/fkx/nodes/a/status",      "/f/nodes/a/status",
                                     "/fk/nodes/a/status/x",     "/fk/sessions/a/b/c/spec",
                                     "/fk/sessions/a/b/owner",   "/fk/nodes//status",
                                     "/fk/sessions/default/web", "/fk"};
        for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++) {
                core_cluster_key_parse("/fk", other[i], &k);
                assert_int_equal(k.kind, CORE_CLUSTER_KEY_OTHER);
                assert_string_equal(k.name, "");
        }
        assert_true(core_cluster_session_key("/fk", "ns", "a", "node", &s) >= 0);
        assert_string_equal(s, "/fk/sessions/ns/a/node");
        free(s);
        assert_true(core_cluster_session_key("/fk", "ns", "a", "", &s) >= 0);
        assert_string_equal(s, "/fk/sessions/ns/a/");
        free(s);
        assert_true(core_cluster_node_key("/fk", "n", "lease", &s) >= 0);
        assert_string_equal(s, "/fk/nodes/n/lease");
        free(s);
}

static json_int_t jint(json_t *o, const char *a, const char *b, const char *c)
{
        json_t *x = json_object_get(o, a);

        x = b ? json_object_get(x, b) : x;
        x = c ? json_object_get(x, c) : x;
        assert_true(json_is_integer(x));
        return json_integer_value(x);
}

/* The allocatable and usage parts of test_node_status's document. */
static void expect_allocatable_usage(json_t *j)
{
        /* allocatable: 8 slots, 8192 - 4608 = 3584 MiB -> no big, 9 small by memory, 8 by slots */
        assert_int_equal(jint(j, "allocatable", "sessions", NULL), 8);
        assert_int_equal(jint(j, "allocatable", "memoryMiB", NULL), 3584);
        assert_int_equal(jint(j, "allocatable", "vcpus", NULL), 13);
        assert_int_equal(jint(json_object_get(j, "allocatable"), "sizeClasses", "big", "sessions"),
                         0);
        assert_int_equal(
                jint(json_object_get(j, "allocatable"), "sizeClasses", "small", "sessions"), 8);
        /* usage: the legacy counts as given, then admission's charges */
        assert_int_equal(jint(j, "usage", "localMemoryMiB", NULL), 256);
        assert_int_equal(jint(j, "usage", "admittedSessions", NULL), 2);
        assert_int_equal(jint(j, "usage", "chargedMiB", NULL), 4608);
        assert_int_equal(jint(j, "usage", "localAdmittedSessions", NULL), 1);
        assert_int_equal(jint(j, "usage", "localChargedMiB", NULL), 4224);
        assert_int_equal(jint(j, "usage", "localVcpus", NULL), 2);
}

/* The document carries admission's numbers: charges with qemuOverheadMiB, vCPUs with the
 * overcommit, allocatable after what admitted sessions hold. */
static void test_node_status(void **state)
{
        const char *text = "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\nnodeName: n1\n"
                           "images: [{name: minimal, dir: /i}]\nlabels: {zone: a}\n"
                           "sizeClasses:\n  - {name: small, vcpus: 1, memoryMiB: 256, cpu: 1, "
                           "pids: 64}\n  - {name: big, vcpus: 2, memoryMiB: 4096, cpu: 2, "
                           "pids: 64}\ncapacity: {reserveMemoryMiB: 1024, maxSessions: 10}\n";
        struct node_config *cfg = NULL;
        struct manifest_diag d = {0};
        struct core_cluster_node_report rep = {
                .node = {.host_memory_bytes = 9216ull << 20, /* 9216 MiB */
                         .host_cpus = 4,
                         .reserve_memory_bytes = 1024ull << 20,
                         .cpu_overcommit_percent = 400,
                         .max_sessions = 10},
                .use = {.sessions = 3,
                        .memory_mib = 768,
                        .local_sessions = 1,
                        .local_memory_mib = 256},
        };
        struct core_charge held[2];
        json_t *j;

        (void)state;
        assert_int_equal(node_config_parse(text, strlen(text), "n.yaml", &cfg, &d), 0);
        /* one cluster small (384 MiB charged) and one local big (4224) admitted */
        held[0] = core_class_charge(cfg, &cfg->size_classes[1], false, 0);
        held[1] = core_class_charge(cfg, &cfg->size_classes[0], false, 0);
        core_capacity_compute(&rep.node, held, 2, &rep.all);
        core_capacity_compute(&rep.node, held, 1, &rep.local);
        j = core_cluster_node_status_json(cfg, &rep, 0);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "nodeName")), "n1");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(j, "labels"), "zone")), "a");
        assert_int_equal(jint(j, "capacity", "sessions", NULL), 10);
        assert_int_equal(jint(j, "capacity", "memoryMiB", NULL), 9216 - 1024);
        assert_int_equal(jint(j, "capacity", "cpus", NULL), 4);
        assert_int_equal(jint(j, "capacity", "vcpus", NULL), 16);
        assert_int_equal(jint(j, "capacity", "qemuOverheadMiB", NULL), 128);
        assert_int_equal(jint(j, "capacity", "forkMemoryPercent", NULL), 25);
        /* small: min(10 sessions, 8192/384 = 21) = 10; big: 8192/(4096+128) = 1 */
        json_t *cls = json_object_get(json_object_get(j, "capacity"), "sizeClasses");
        assert_int_equal(jint(cls, "small", "sessions", NULL), 10);
        assert_int_equal(jint(cls, "small", "memoryMiB", NULL), 256);
        assert_int_equal(jint(cls, "small", "chargeMiB", NULL), 384);
        assert_int_equal(jint(cls, "small", "forkChargeMiB", NULL), 128 + 64);
        assert_int_equal(jint(cls, "big", "sessions", NULL), 1);
        assert_int_equal(jint(cls, "big", "chargeMiB", NULL), 4224);
        expect_allocatable_usage(j);
        json_decref(j);
        node_config_free(cfg);
}

/* A node status document as the agent writes it. */
static void put_node(struct sched_state *st, const char *name, const char *zone, int max, int mem,
                     bool ready)
{
        char key[128], val[512];

        snprintf(key, sizeof(key), "/p/nodes/%s/status", name);
        snprintf(val, sizeof(val),
                 "{\"labels\":{\"zone\":\"%s\"},\"capacity\":{\"sessions\":%d,\"memoryMiB\":%d,"
                 "\"sizeClasses\":{\"small\":{\"memoryMiB\":256},\"big\":{\"memoryMiB\":2048}}},"
                 "\"usage\":{\"localSessions\":0,\"localMemoryMiB\":0}}",
                 zone, max, mem);
        assert_int_equal(sched_state_apply(st, key, val, 1), 0);
        snprintf(key, sizeof(key), "/p/nodes/%s/lease", name);
        assert_int_equal(sched_state_apply(st, key, ready ? "{}" : NULL, 1), 0);
}

static void put_session(struct sched_state *st, const char *name, const char *spec,
                        const char *node, int64_t rev)
{
        char key[128];

        snprintf(key, sizeof(key), "/p/sessions/default/%s/spec", name);
        assert_int_equal(sched_state_apply(st, key, spec, rev), 0);
        snprintf(key, sizeof(key), "/p/sessions/default/%s/node", name);
        assert_int_equal(sched_state_apply(st, key, node, rev), 0);
}

static size_t place(struct sched_state *st, const char *cls, const char *zone, enum sched_policy p,
                    char *why)
{
        struct kv sel = {(char *)"zone", (char *)zone};
        struct sched_request req = {cls, zone ? &sel : NULL, zone ? 1 : 0};
        size_t idx = 999;
        int r;

        sched_state_account(st);
        r = sched_place(st->nodes, st->n_nodes, &req, p, &idx, why, 256);
        return r == 0 ? idx : (r == -ENOSPC ? 1000 : 999);
}

static void test_place(void **state)
{
        struct sched_state st;
        char why[256] = "";

        (void)state;
        assert_int_equal(sched_state_init(&st, "/p"), 0);
        put_node(&st, "a", "z1", 4, 8192, true);
        put_node(&st, "b", "z1", 4, 8192, true);
        put_node(&st, "c", "z2", 4, 2048, true);
        put_node(&st, "d", "z1", 100, 100000, false); /* NotReady: never chosen */
        assert_int_equal(st.n_nodes, 4);
        /* spread: most free memory first (a and b tie, name wins) */
        assert_int_equal(place(&st, "small", NULL, SCHED_POLICY_SPREAD, why), 0);
        put_session(&st, "s1", "{\"spec\":{}}", "a", 2);
        assert_int_equal(place(&st, "small", NULL, SCHED_POLICY_SPREAD, why), 1);
        /* pack: the fullest node that fits (c has 2048 MiB only) */
        assert_int_equal(place(&st, "small", NULL, SCHED_POLICY_PACK, why), 2);
        /* selector */
        assert_int_equal(place(&st, "small", "z2", SCHED_POLICY_SPREAD, why), 2);
        assert_int_equal(place(&st, "small", "mars", SCHED_POLICY_SPREAD, why), 1000);
        assert_non_null(strstr(why, "3 selector mismatch"));
        assert_non_null(strstr(why, "1 not ready"));
        /* unknown class */
        assert_int_equal(place(&st, "huge", NULL, SCHED_POLICY_SPREAD, why), 1000);
        assert_non_null(strstr(why, "3 no size class"));
        /* memory: big (2048) fits c exactly once */
        put_session(&st, "b1", "{\"spec\":{\"sizeClass\":\"big\"}}", "c", 3);
        assert_int_equal(place(&st, "big", "z2", SCHED_POLICY_SPREAD, why), 1000);
        assert_non_null(strstr(why, "not enough memory"));
        /* session count: fill a to its 4 sessions */
        put_session(&st, "s2", "{\"spec\":{}}", "a", 4);
        put_session(&st, "s3", "{\"spec\":{}}", "a", 5);
        put_session(&st, "s4", "{\"spec\":{}}", "a", 6);
        assert_int_equal(place(&st, "small", NULL, SCHED_POLICY_PACK, why), 1);
        sched_state_account(&st);
        assert_int_equal(st.nodes[0].used_sessions, 4);
        assert_int_equal(st.nodes[0].used_memory_mib, 1024);
        /* deleting every key of a session forgets it */
        assert_int_equal(st.n_sessions, 5);
        assert_int_equal(sched_state_apply(&st, "/p/sessions/default/s4/spec", NULL, 0), 0);
        assert_int_equal(st.n_sessions, 5); /* node key still there */
        assert_int_equal(sched_state_apply(&st, "/p/sessions/default/s4/node", NULL, 0), 0);
        assert_int_equal(st.n_sessions, 4);
        /* nodeSelector and status phase parsed from the documents */
        put_session(&st, "sel", "{\"spec\":{\"nodeSelector\":{\"zone\":\"z2\"}}}", NULL, 7);
        assert_int_equal(
                sched_state_apply(&st, "/p/sessions/default/sel/status", "{\"phase\":\"Lost\"}", 8),
                0);
        struct sched_session *s = &st.sessions[st.n_sessions - 1];
        assert_string_equal(s->name, "sel");
        assert_int_equal(s->n_selector, 1);
        assert_string_equal(s->selector[0].value, "z2");
        assert_string_equal(s->size_class, "small");
        assert_string_equal(s->phase, "Lost");
        assert_null(s->node);
        sched_state_done(&st);
        assert_int_equal(sched_policy_from_string("pack"), SCHED_POLICY_PACK);
        assert_int_equal(sched_policy_from_string("random"), _SCHED_POLICY_INVALID);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_keys),
                cmocka_unit_test(test_node_status),
                cmocka_unit_test(test_place),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
