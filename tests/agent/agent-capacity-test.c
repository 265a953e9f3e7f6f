/* SPDX-License-Identifier: MIT */
/* Node capacity and admission, pure and table-driven: what a session or fork is charged, the
 * allocatable amounts after the reserve and overcommit, admit/refuse with the short resource,
 * and how many more of a class fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <limits.h>

#include "core/core.h"
#include "manifest/manifest.h"

#define MIB (1024ull * 1024)
#define GIB (1024 * MIB)

static void test_charge(void **state)
{
        const struct {
                struct core_charge_input in;
                uint64_t want_mib;
        } cases[] = {
                /* a session: guest RAM + QEMU overhead, what its memory.max allows */
                {{.vcpus = 1, .memory_mib = 256, .qemu_overhead_mib = 128}, 384},
                {{.vcpus = 2, .memory_mib = 4096, .qemu_overhead_mib = 128}, 4224},
                {{.vcpus = 1, .memory_mib = 256, .qemu_overhead_mib = 0}, 256},
                /* the fork flag is ignored without a fork: percent does not matter */
                {{.vcpus = 1,
                  .memory_mib = 256,
                  .qemu_overhead_mib = 128,
                  .fork_memory_percent = 10},
                 384},
                /* a fork before its PSS is known: overhead + 25% of RAM */
                {{.vcpus = 1,
                  .memory_mib = 256,
                  .qemu_overhead_mib = 128,
                  .fork = true,
                  .fork_memory_percent = 25},
                 192},
                /* an idle fork whose PSS is below the floor still pays the floor */
                {{.vcpus = 1,
                  .memory_mib = 256,
                  .qemu_overhead_mib = 128,
                  .fork = true,
                  .fork_memory_percent = 25,
                  .pss_bytes = 100 * MIB},
                 192},
                /* a fork that wrote much of its RAM pays its PSS */
                {{.vcpus = 1,
                  .memory_mib = 256,
                  .qemu_overhead_mib = 128,
                  .fork = true,
                  .fork_memory_percent = 25,
                  .pss_bytes = 300 * MIB},
                 300},
                /* never more than its cgroup allows */
                {{.vcpus = 1,
                  .memory_mib = 256,
                  .qemu_overhead_mib = 128,
                  .fork = true,
                  .fork_memory_percent = 25,
                  .pss_bytes = 900 * MIB},
                 384},
                /* 100%: a fork is charged like a session */
                {{.vcpus = 1,
                  .memory_mib = 256,
                  .qemu_overhead_mib = 128,
                  .fork = true,
                  .fork_memory_percent = 100},
                 384},
                {{.vcpus = 1,
                  .memory_mib = 256,
                  .qemu_overhead_mib = 128,
                  .fork = true,
                  .fork_memory_percent = 0},
                 128},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct core_charge c = core_charge_for(&cases[i].in);

                assert_int_equal(c.memory_bytes, cases[i].want_mib * MIB);
                assert_int_equal(c.vcpus, cases[i].in.vcpus);
        }
}

static void test_allocatable(void **state)
{
        const struct {
                struct core_node_resources node;
                uint64_t want_mem;
                unsigned want_vcpus, want_sessions;
        } cases[] = {
                {{8 * GIB, 4, 1 * GIB, 100, 64}, 7 * GIB, 4, 64},
                {{8 * GIB, 4, 1 * GIB, 400, 64}, 7 * GIB, 16, 64},
                {{8 * GIB, 2, 0, 150, 0}, 8 * GIB, 3, 0},
                /* a reserve above the host leaves nothing, never a wrap-around */
                {{1 * GIB, 2, 2 * GIB, 100, 8}, 0, 2, 8},
                {{1 * GIB, 2, 1 * GIB, 10, 8}, 0, 0, 8},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct core_capacity c;

                core_capacity_compute(&cases[i].node, NULL, 0, &c);
                assert_int_equal(c.allocatable.memory_bytes, cases[i].want_mem);
                assert_int_equal(c.allocatable.vcpus, cases[i].want_vcpus);
                assert_int_equal(c.allocatable_sessions, cases[i].want_sessions);
                assert_int_equal(c.used.memory_bytes, 0);
                assert_int_equal(c.used_sessions, 0);
        }
}

static const struct core_charge small = {1, 384 * MIB}, big = {2, 4224 * MIB};

static void test_admit(void **state)
{
        /* 4 GiB host, 1 GiB reserve: 3 GiB allocatable, 2 CPUs at 200%: 4 vCPUs, 5 slots */
        static const struct core_node_resources node = {4 * GIB, 2, 1 * GIB, 200, 5};
        const struct {
                struct core_charge held[6];
                size_t n;
                struct core_charge want;
                int want_r;
                enum core_resource want_short;
        } cases[] = {
                {{{0}}, 0, small, 0, 0},
                {{{0}}, 0, big, -ENOSPC, CORE_RESOURCE_MEMORY}, /* 4224 MiB > 3072 */
                {{small, small, small}, 3, small, 0, 0},
                {{small, small, small, small}, 4, small, -ENOSPC, CORE_RESOURCE_CPU},
                /* exactly full memory still fits: 8 x 384 = 3072 */
                {{{0, 384 * MIB}, {0, 384 * MIB}, {0, 384 * MIB}, {0, 384 * MIB}, {0, 384 * MIB}},
                 5,
                 {0, 384 * MIB},
                 -ENOSPC,
                 CORE_RESOURCE_SESSIONS},
                {{{0, 2688 * MIB}}, 1, {0, 384 * MIB}, 0, 0},
                {{{0, 2689 * MIB}}, 1, {0, 384 * MIB}, -ENOSPC, CORE_RESOURCE_MEMORY},
                /* sessions are checked first, then memory, then CPU */
                {{{4, 3 * GIB}, small, small, small, small},
                 5,
                 small,
                 -ENOSPC,
                 CORE_RESOURCE_SESSIONS},
                {{{4, 3 * GIB}}, 1, small, -ENOSPC, CORE_RESOURCE_MEMORY},
                {{{4, 1 * GIB}}, 1, small, -ENOSPC, CORE_RESOURCE_CPU},
                /* a zero request always fits while a slot is free */
                {{{4, 3 * GIB}}, 1, {0, 0}, 0, 0},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                enum core_resource sh = _CORE_RESOURCE_MAX;
                struct core_capacity c;
                int r;

                core_capacity_compute(&node, cases[i].held, cases[i].n, &c);
                r = core_capacity_admit(&c, &cases[i].want, &sh);
                if (r != cases[i].want_r)
                        fail_msg("case %zu: admit returned %d, want %d", i, r, cases[i].want_r);
                if (r < 0 && sh != cases[i].want_short)
                        fail_msg("case %zu: short of %s, want %s", i, core_resource_reason(sh),
                                 core_resource_reason(cases[i].want_short));
        }
}

static void test_fits(void **state)
{
        const struct {
                struct core_node_resources node;
                struct core_charge held[2];
                size_t n;
                struct core_charge one;
                unsigned want;
        } cases[] = {
                {{4 * GIB, 2, 1 * GIB, 400, 64}, {{0}}, 0, small, 8}, /* memory: 3072 / 384 */
                {{4 * GIB, 2, 1 * GIB, 100, 64}, {{0}}, 0, small, 2}, /* CPU */
                {{4 * GIB, 2, 1 * GIB, 400, 3}, {{0}}, 0, small, 3},  /* slots */
                {{4 * GIB, 2, 1 * GIB, 400, 64}, {small, small}, 2, small, 6},
                {{4 * GIB, 2, 1 * GIB, 400, 64}, {{0}}, 0, big, 0},
                {{4 * GIB, 2, 1 * GIB, 400, 2}, {small, small}, 2, small, 0},
                /* over-committed already (a class change): nothing, not a wrap-around */
                {{4 * GIB, 2, 1 * GIB, 100, 64}, {big, big}, 2, small, 0},
                /* nothing bounds a zero charge without a slot limit */
                {{4 * GIB, 2, 1 * GIB, 100, 0}, {{0}}, 0, {0, 0}, UINT_MAX},
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct core_capacity c;
                unsigned got;

                core_capacity_compute(&cases[i].node, cases[i].held, cases[i].n, &c);
                got = core_capacity_fits(&c, &cases[i].one);
                if (got != cases[i].want)
                        fail_msg("case %zu: %u fit, want %u", i, got, cases[i].want);
        }
}

static void test_reasons(void **state)
{
        (void)state;
        assert_string_equal(core_resource_reason(CORE_RESOURCE_MEMORY), "InsufficientMemory");
        assert_string_equal(core_resource_reason(CORE_RESOURCE_CPU), "InsufficientCPU");
        assert_string_equal(core_resource_reason(CORE_RESOURCE_SESSIONS), "InsufficientSessions");
        assert_null(core_resource_reason(_CORE_RESOURCE_MAX));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_charge),  cmocka_unit_test(test_allocatable),
                cmocka_unit_test(test_admit),   cmocka_unit_test(test_fits),
                cmocka_unit_test(test_reasons),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
