/* SPDX-License-Identifier: MIT */
/* The scheduler's fit check against the node's own admission on boundary cases (exactly fits,
 * one MiB short; QEMU overhead, fork shares, vCPUs, slots): the node's numbers go through the
 * published status JSON into the scheduler's state, as in a cluster. */
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

#include "core/cluster/cluster.h"
#include "core/core.h"
#include "scheduler/sched.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#define MIB (1024ull * 1024)

struct node_case {
        struct node_config *cfg;
        struct core_node_resources node;
        struct core_charge local[8]; /* admitted sessions not from the cluster */
        size_t n_local;
        unsigned n_cluster; /* cluster sessions of class small placed (and admitted) there */
};

static void case_init(struct node_case *c, const char *capacity, unsigned cpus)
{
        cleanup_free char *y = NULL;
        struct manifest_diag d = {0};

        assert_true(fk_asprintf(&y,
                                "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\n"
                                "nodeName: n1\nimages: [{name: minimal, dir: /i}]\n"
                                "sizeClasses: [{name: small, vcpus: 1, memoryMiB: 256, cpu: 1, "
                                "pids: 64}]\ncapacity: %s\n",
                                capacity) > 0);
        *c = (struct node_case){0};
        if (node_config_parse(y, strlen(y), "n.yaml", &c->cfg, &d) < 0)
                fail_msg("node config: %s", d.n ? d.messages[0] : "?");
        c->node = (struct core_node_resources){
                .host_cpus = cpus,
                .reserve_memory_bytes = (uint64_t)c->cfg->reserve_memory_mib * MIB,
                .cpu_overcommit_percent = c->cfg->cpu_overcommit_percent,
                .max_sessions = c->cfg->max_sessions,
        };
}

static struct core_charge small(const struct node_case *c, bool fork, uint64_t pss)
{
        return core_class_charge(c->cfg, &c->cfg->size_classes[0], fork, pss);
}

/* What every admitted session holds: the locals, then the cluster sessions. */
static size_t held(const struct node_case *c, struct core_charge *v)
{
        size_t n = 0;

        for (size_t i = 0; i < c->n_local; i++)
                v[n++] = c->local[i];
        for (unsigned i = 0; i < c->n_cluster; i++)
                v[n++] = small(c, false, 0);
        return n;
}

/* The node: would its admission take one more small session? */
static bool node_admits(const struct node_case *c, enum core_resource *why)
{
        struct core_charge v[32], want = small(c, false, 0);
        struct core_capacity cap;

        core_capacity_compute(&c->node, v, held(c, v), &cap);
        return core_capacity_admit(&cap, &want, why) == 0;
}

/* The scheduler: its fit check on the node's published status plus its placements. */
static bool sched_admits(const struct node_case *c, enum core_resource *why)
{
        struct core_cluster_node_report rep = {.node = c->node};
        struct core_charge v[32];
        struct sched_state st;
        struct sched_node *n;
        char *text, key[96];
        json_t *j;
        int64_t f;

        core_capacity_compute(&c->node, v, held(c, v), &rep.all);
        core_capacity_compute(&c->node, c->local, c->n_local, &rep.local);
        j = core_cluster_node_status_json(c->cfg, &rep, 0);
        text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        assert_non_null(text);
        assert_int_equal(sched_state_init(&st, "/p"), 0);
        assert_int_equal(sched_state_apply(&st, "/p/nodes/n1/status", text, 1), 0);
        assert_int_equal(sched_state_apply(&st, "/p/nodes/n1/lease", "{}", 1), 0);
        free(text);
        for (unsigned i = 0; i < c->n_cluster; i++) {
                snprintf(key, sizeof(key), "/p/sessions/default/c%u/spec", i);
                assert_int_equal(sched_state_apply(&st, key, "{\"spec\":{}}", 2 + i), 0);
                snprintf(key, sizeof(key), "/p/sessions/default/c%u/node", i);
                assert_int_equal(sched_state_apply(&st, key, "n1", 2 + i), 0);
        }
        sched_state_account(&st);
        n = sched_state_node(&st, "n1");
        assert_non_null(n);
        assert_int_equal(n->n_classes, 1);
        f = sched_node_fit(n, &n->classes[0], why);
        sched_state_done(&st);
        return f >= 0;
}

/* Both sides give the same answer and, when they refuse, the same reason. */
static bool agree(const struct node_case *c)
{
        enum core_resource wn = _CORE_RESOURCE_MAX, ws = _CORE_RESOURCE_MAX;
        bool node = node_admits(c, &wn), sched = sched_admits(c, &ws);

        if (node != sched)
                fail_msg("host %llu B: node %s, scheduler %s",
                         (unsigned long long)c->node.host_memory_bytes, node ? "admits" : "refuses",
                         sched ? "places" : "refuses");
        if (!node)
                assert_int_equal(wn, ws);
        return node;
}

/* QEMU overhead: 2 cluster + 1 local small hold 3 x (256 + 128) MiB. */
static void test_overhead(void **state)
{
        struct node_case c;
        enum core_resource why = _CORE_RESOURCE_MAX;

        (void)state;
        case_init(&c, "{reserveMemoryMiB: 1024, maxSessions: 10, qemuOverheadMiB: 128}", 8);
        c.local[c.n_local++] = small(&c, false, 0);
        c.n_cluster = 2;
        c.node.host_memory_bytes = (1024 + 4 * 384) * MIB; /* exactly a fourth */
        assert_true(agree(&c));
        c.node.host_memory_bytes -= MIB; /* one MiB short */
        assert_false(agree(&c));
        assert_false(node_admits(&c, &why));
        assert_int_equal(why, CORE_RESOURCE_MEMORY);
        /* RAM alone (what the scheduler counted before) would have placed it: 4 x 256 fit. */
        assert_true(4 * 256 * MIB <= c.node.host_memory_bytes - 1024 * MIB);
        node_config_free(c.cfg);
}

/* Forks: two charged their share at admission (128 + 25% of 256), one by a PSS that is not a
 * whole MiB (the node publishes exact bytes next to the MiB figures). */
static void test_fork_shares(void **state)
{
        const uint64_t pss = 200 * MIB + 512 * 1024;
        struct node_case c;

        (void)state;
        case_init(&c,
                  "{reserveMemoryMiB: 512, maxSessions: 10, qemuOverheadMiB: 128, "
                  "forkMemoryPercent: 25}",
                  8);
        c.local[c.n_local++] = small(&c, true, 0);
        c.local[c.n_local++] = small(&c, true, 0);
        c.local[c.n_local++] = small(&c, true, pss);
        assert_int_equal(c.local[0].memory_bytes, 192 * MIB);
        assert_int_equal(c.local[2].memory_bytes, pss);
        c.n_cluster = 1;
        /* exactly: reserve + forks + one cluster small + the new one, with the PSS's half MiB */
        c.node.host_memory_bytes = 512 * MIB + 2 * 192 * MIB + pss + 2 * 384 * MIB;
        assert_true(agree(&c));
        c.node.host_memory_bytes -= MIB;
        assert_false(agree(&c));
        /* 512 KiB short: both refuse; exactly again: both place */
        c.node.host_memory_bytes += 512 * 1024;
        assert_false(agree(&c));
        c.node.host_memory_bytes += 512 * 1024;
        assert_true(agree(&c));
        node_config_free(c.cfg);
}

/* On the node of cfg_text (host_cpus CPUs, plenty of RAM) with one local session, a cluster
 * session placed next to one other fits; next to two, both sides refuse it, the node for
 * reason why_expected. */
static void check_limit(const char *cfg_text, unsigned host_cpus, enum core_resource why_expected)
{
        struct node_case c;
        enum core_resource why = _CORE_RESOURCE_MAX;

        case_init(&c, cfg_text, host_cpus);
        c.node.host_memory_bytes = 100000 * MIB;
        c.local[c.n_local++] = small(&c, false, 0);
        c.n_cluster = 1;
        assert_true(agree(&c));
        c.n_cluster = 2;
        assert_false(agree(&c));
        assert_false(node_admits(&c, &why));
        assert_int_equal(why, why_expected);
        node_config_free(c.cfg);
}

/* vCPUs: 3 host CPUs at 100% overcommit hold three 1-vCPU sessions. */
static void test_vcpus(void **state)
{
        (void)state;
        check_limit("{reserveMemoryMiB: 0, maxSessions: 10, cpuOvercommitPercent: 100}", 3,
                    CORE_RESOURCE_CPU);
}

/* Slots: maxSessions counts local and cluster sessions alike. */
static void test_slots(void **state)
{
        (void)state;
        check_limit("{reserveMemoryMiB: 0, maxSessions: 3}", 8, CORE_RESOURCE_SESSIONS);
}

/* Every host size in a range, whole MiB and with fractions, with forks charged by a PSS that
 * is not a whole MiB and 0..4 cluster sessions: the scheduler places exactly when the node
 * admits. */
static void test_sweep(void **state)
{
        unsigned admitted = 0, refused = 0;
        struct node_case c;

        (void)state;
        case_init(&c, "{reserveMemoryMiB: 1000, maxSessions: 12, qemuOverheadMiB: 100}", 64);
        c.local[c.n_local++] = small(&c, true, 0);
        c.local[c.n_local++] = small(&c, true, 300 * MIB + 4096);
        for (unsigned cl = 0; cl <= 4; cl++)
                for (uint64_t mib = 1000; mib < 3500; mib++)
                        for (uint64_t frac = 0; frac < MIB; frac += MIB / 4 - 1) {
                                c.n_cluster = cl;
                                c.node.host_memory_bytes = mib * MIB + frac;
                                agree(&c) ? admitted++ : refused++;
                        }
        assert_true(admitted > 1000 && refused > 1000);
        node_config_free(c.cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_overhead), cmocka_unit_test(test_fork_shares),
                cmocka_unit_test(test_vcpus),    cmocka_unit_test(test_slots),
                cmocka_unit_test(test_sweep),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
