/* SPDX-License-Identifier: MIT */
/* The balloon give-back (vmm/balloon.c): the plan's arithmetic, and the QMP conversation with a
 * fake QEMU over a socketpair: a share=off RAM backend is refused before any balloon command,
 * a VM without the device is -ENODEV, a give-back inflates by the plan and always sets the
 * target back to the whole RAM, and one asked to yield stops inflating at once, or before it
 * starts when the guest's stats have not come yet, and leaves the deflation to the guest. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/balloon/balloon.h"
#include "vmm/vmm.h"
#include "tests/lib/qmp-fake.h"

#define MIB       (1024ull * 1024ull)
#define RET_EMPTY "{\"return\": {}}\r\n"

/* ---- the plan ------------------------------------------------------------------------------ */

static void test_plan(void **state)
{
        struct vmm_give_back_opts o = {.ram_bytes = 256 * MIB,
                                       .host_bytes = 256 * MIB,
                                       .margin_bytes = 16 * MIB,
                                       .min_bytes = 32 * MIB};
        uint64_t expected = 1;

        (void)state;
        /* a live save read every page: all the guest's free memory but the margin */
        assert_int_equal(vmm_balloon_plan(&o, 150 * MIB, &expected), 134 * MIB);
        assert_int_equal(expected, 134 * MIB);
        /* the file holds 60 MiB more than the guest uses (100 - (256 - 216)) */
        o.host_bytes = 100 * MIB;
        assert_int_equal(vmm_balloon_plan(&o, 216 * MIB, &expected), 200 * MIB);
        assert_int_equal(expected, 60 * MIB);
        /* a fresh boot: the file holds about what the guest uses */
        o.host_bytes = 60 * MIB;
        assert_int_equal(vmm_balloon_plan(&o, 216 * MIB, &expected), 0);
        assert_int_equal(expected, 0);
        /* plenty in the file, but the guest has little free beyond the margin */
        o.host_bytes = 256 * MIB;
        assert_int_equal(vmm_balloon_plan(&o, 40 * MIB, &expected), 0);
        /* page-aligned; stats beyond the RAM are not believed */
        o.margin_bytes = 16 * MIB + 100;
        assert_int_equal(vmm_balloon_plan(&o, 150 * MIB, NULL), 134 * MIB - 4096);
        assert_int_equal(vmm_balloon_plan(&o, 300 * MIB, &expected), 0);
        assert_int_equal(vmm_balloon_plan(NULL, 1, NULL), 0);
}

/* ---- a fake QEMU ------------------------------------------------------------------------- */

/* The handshake, then for each step: read one command, check it holds expect, write reply.
 * After the steps every further command is recorded: none may be a balloon command. */
static struct qmp_client *fake_start(struct qmp_fake *f, const struct qmp_fake_step *steps,
                                     size_t n)
{
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        int fd = qmp_fake_start(f, steps, n, true);

        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), 0);
        return c;
}

/* Ends the client (EOF for the fake) and checks what the fake saw. */
static void fake_finish(struct qmp_fake *f, struct qmp_client *c)
{
        qmp_client_free(c);
        qmp_fake_finish(f);
        if (strstr(f->rest, "\"balloon\""))
                fail_msg("a balloon command after the script: %s", f->rest);
}

#define SHARE_ON                                                                                   \
        {                                                                                          \
                "\"property\":\"share\"", "{\"return\": true}\r\n", 0, false                       \
        }
#define POLL(n)                                                                                    \
        {                                                                                          \
                "\"guest-stats-polling-interval\",\"value\":" #n, RET_EMPTY, 0, false              \
        }
#define STATS(free)                                                                                \
        {                                                                                          \
                "\"guest-stats\"",                                                                 \
                        "{\"return\": {\"stats\": {\"stat-free-memory\": " #free                   \
                        ", \"stat-total-memory\": "                                                \
                        "215949312}, \"last-update\": 99999999999}}\r\n",                          \
                        0, false                                                                   \
        }
#define ACTUAL(bytes)                                                                              \
        {                                                                                          \
                "query-balloon", "{\"return\": {\"actual\": " #bytes "}}\r\n", 0, false            \
        }

/* The steps up to the inflation's target: 150 MiB free, 134 MiB into the balloon (6 steps). */
#define INFLATE_134_MIB                                                                            \
        QMP_FAKE_HANDSHAKE, SHARE_ON, POLL(1), STATS(157286400), POLL(0),                          \
        {                                                                                          \
                "\"balloon\",\"id\":6,\"arguments\":{\"value\":127926272}", RET_EMPTY, 0, false    \
        }

static const struct vmm_give_back_opts opts = {.ram_bytes = 256 * MIB,
                                               .host_bytes = 256 * MIB,
                                               .margin_bytes = 16 * MIB,
                                               .min_bytes = 32 * MIB,
                                               .timeout_ms = 5000};

/* A private mapping: the one query, then nothing; the error says why. */
static void test_refuses_private(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"\"path\":\"/objects/mem\",\"property\":\"share\"", "{\"return\": false}\r\n", 0,
                 false},
        };
        struct vmm_give_back_stats st = {.ballooned = 7};
        struct fk_error err = {};
        struct qmp_fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), -EPERM);
        assert_non_null(strstr(err.msg, "share=off"));
        assert_int_equal(st.ballooned, 0);
        assert_false(st.skipped);
        fake_finish(&f, c);
        assert_string_equal(f.rest, "");
}

static void test_no_device(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                SHARE_ON,
                {"qom-set",
                 "{\"error\": {\"class\": \"DeviceNotFound\", \"desc\": \"Device "
                 "'/machine/peripheral/balloon0' not found\"}}\r\n",
                 0, false},
        };
        struct fk_error err = {};
        struct qmp_fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, NULL, &err), -ENODEV);
        fake_finish(&f, c);
}

/* Before the guest's first report every stat is 2^64-1 (a reply jansson cannot decode): read
 * again. Then the balloon takes free - margin, and the target goes back to the RAM. */
static void test_give_back(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                SHARE_ON,
                POLL(1),
                {"\"guest-stats\"",
                 "{\"return\": {\"stats\": {\"stat-free-memory\": 18446744073709551615}, "
                 "\"last-update\": 0}}\r\n",
                 0, false},
                STATS(157286400), /* 150 MiB free: 134 MiB into the balloon */
                POLL(0),
                {"\"balloon\",\"id\":7,\"arguments\":{\"value\":127926272}", RET_EMPTY, 0, false},
                ACTUAL(200000000),
                ACTUAL(127926272),
                {"\"balloon\",\"id\":10,\"arguments\":{\"value\":268435456}", RET_EMPTY, 0, false},
                ACTUAL(200000000),
                ACTUAL(268435456),
        };
        struct vmm_give_back_stats st = {0};
        struct fk_error err = {};
        struct qmp_fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), 0);
        assert_int_equal(st.guest_free, 150 * MIB);
        assert_int_equal(st.expected, 134 * MIB);
        assert_int_equal(st.ballooned, 134 * MIB);
        assert_false(st.skipped);
        assert_false(st.deflating);
        fake_finish(&f, c);
}

/* Too little to win: stats only, no balloon command. */
static void test_skipped(void **state)
{
        const struct qmp_fake_step steps[] = {QMP_FAKE_HANDSHAKE, SHARE_ON, POLL(1),
                                              STATS(41943040), POLL(0)};
        struct vmm_give_back_stats st = {0};
        struct fk_error err = {};
        struct qmp_fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), 0);
        assert_true(st.skipped);
        assert_int_equal(st.guest_free, 40 * MIB);
        fake_finish(&f, c);
        assert_string_equal(f.rest, "");
}

/* The inflation fails: the target still goes back to the whole RAM. */
static void test_inflate_fails_deflates(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                SHARE_ON,
                POLL(1),
                STATS(157286400),
                POLL(0),
                {"\"balloon\"", RET_EMPTY, 0, false},
                {"query-balloon", "{\"error\": {\"class\": \"GenericError\", \"desc\": \"x\"}}\r\n",
                 0, false},
                {"\"value\":268435456", RET_EMPTY, 0, false},
                ACTUAL(268435456),
        };
        struct vmm_give_back_stats st = {0};
        struct fk_error err = {};
        struct qmp_fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), -EIO);
        assert_non_null(strstr(err.msg, "query-balloon"));
        fake_finish(&f, c);
}

/* A give-back asked to yield from the start, over steps; it says it yielded and sends nothing
 * after the script. */
static void give_back_yielding(const struct qmp_fake_step *steps, size_t n,
                               struct vmm_give_back_stats *st)
{
        volatile bool yield = true;
        struct vmm_give_back_opts o = opts;
        struct fk_error err = {};
        struct qmp_fake f;
        struct qmp_client *c = fake_start(&f, steps, n);

        o.yield = &yield;
        assert_int_equal(vmm_balloon_give_back(c, &o, st, &err), 0);
        assert_true(st->yielded);
        fake_finish(&f, c);
        assert_string_equal(f.rest, "");
}

/* A request waits for the VM (*yield set): the inflation stops at its next look, what the
 * balloon held so far is kept, and the target goes back to the whole RAM; the guest deflates
 * on its own (no query-balloon after the target: the script ends there). */
static void test_yield(void **state)
{
        const struct qmp_fake_step steps[] = {
                INFLATE_134_MIB,
                ACTUAL(200000000),
                {"\"value\":268435456", RET_EMPTY, 0, false},
        };
        struct vmm_give_back_stats st = {0};

        (void)state;
        give_back_yielding(steps, ARRAY_SIZE(steps), &st);
        assert_int_equal(st.ballooned, 256 * MIB - 200000000);
        assert_int_equal(st.expected, 134 * MIB);
        assert_true(st.deflating);
}

/* A request that comes while the guest's stats are awaited: no balloon command at all. */
static void test_yield_before_stats(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                SHARE_ON,
                POLL(1),
                {"\"guest-stats\"",
                 "{\"return\": {\"stats\": {\"stat-free-memory\": 157286400}, "
                 "\"last-update\": 0}}\r\n",
                 0, false},
                POLL(0),
        };
        struct vmm_give_back_stats st = {0};

        (void)state;
        give_back_yielding(steps, ARRAY_SIZE(steps), &st);
        assert_true(st.skipped);
        assert_int_equal(st.ballooned, 0);
        assert_int_equal(st.guest_free, 0);
        assert_false(st.deflating);
}

/* A request that comes while the guest deflates (the inflation was not cut short): the target
 * is back to the whole RAM, and the wait for the guest ends at the next look. */
static void test_yield_while_deflating(void **state)
{
        const struct qmp_fake_step steps[] = {
                INFLATE_134_MIB,
                ACTUAL(127926272),
                {"\"value\":268435456", RET_EMPTY, 0, false},
                ACTUAL(200000000), /* step 9: the request comes as it is answered */
        };
        volatile bool yield = false;
        struct vmm_give_back_stats st = {0};
        struct vmm_give_back_opts o = opts;
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        struct qmp_fake f;
        int fd = qmp_fake_start_flag(&f, steps, ARRAY_SIZE(steps), true, &yield, 9);

        (void)state;
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), 0);
        o.yield = &yield;
        assert_int_equal(vmm_balloon_give_back(c, &o, &st, &err), 0);
        assert_false(st.yielded);
        assert_true(st.deflating);
        assert_int_equal(st.ballooned, 134 * MIB);
        fake_finish(&f, c);
        assert_string_equal(f.rest, "");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plan),
                cmocka_unit_test(test_refuses_private),
                cmocka_unit_test(test_no_device),
                cmocka_unit_test(test_give_back),
                cmocka_unit_test(test_skipped),
                cmocka_unit_test(test_inflate_fails_deflates),
                cmocka_unit_test(test_yield),
                cmocka_unit_test(test_yield_before_stats),
                cmocka_unit_test(test_yield_while_deflating),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
