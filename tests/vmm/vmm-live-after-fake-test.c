/* SPDX-License-Identifier: MIT */
/* The live checkpoint's conversation with the disk switch after the completion
 * (vmm_live_opts.switch_after, forkletd's) against a scripted QEMU: cont armed on the second
 * connection, a forced stop, a switch QEMU refuses after the completion; and vmm_cont_migrated. */
#include <errno.h>
#include <jansson.h>
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
#include "tests/vmm/live-fake.h"

/* switch_after's setup: pause-before-switchover off, events on (ids 2-5 as LIVE_SETUP_STEPS). */
#define AFTER_SETUP_STEPS                                                                          \
        {"\"query-status\"", RUNNING(2), 0, false},                                                \
                {"\"pause-before-switchover\",\"state\":false},{\"capability\":"                   \
                 "\"background-snapshot\",\"state\":false},{\"capability\":\"events\",\"state\":"  \
                 "true",                                                                           \
                 RET(3), 0, false},                                                                \
                {"\"downtime-limit\":10", RET(4), 0, false},                                       \
        {                                                                                          \
                "\"getfd\"", RET(5), 0, false                                                      \
        }
#define DISARMED(id)                                                                               \
        "{\"id\": " #id ", \"error\": {\"class\": \"GenericError\", \"desc\": \"QMP input "        \
        "member 'forklet-disarm' is unexpected\"}}\r\n"

#define NOT_FINALIZED(id)                                                                          \
        "{\"id\": " #id ", \"error\": {\"class\": \"GenericError\", \"desc\": \"Migration is "     \
        "not finalized yet\"}}\r\n"

/* switch_after with the disk freeze blockdev-snapshot(args), counted by count_switchover. */
static struct vmm_live_opts after_opts(json_t *args, unsigned converge_ms)
{
        return (struct vmm_live_opts){.converge_ms = converge_ms,
                                      .timeout_ms = 2000,
                                      .switch_command = "blockdev-snapshot",
                                      .switch_args = args,
                                      .switchover = count_switchover,
                                      .switch_after = true};
}

/* switch_after: no pause before the switch-over. The disk freeze, armed on the first
 * connection, fires at the completed event (the guest stopped since QEMU's STOP, 50 ms before);
 * cont, armed on the second, once the freeze answered, and again after QEMU's "not finalized". */
static void test_live_after(void **state)
{
        char stop_ev[200], migrate_reply[600];
        uint64_t stop_real = fk_now_real_ns() - 50000000ull;
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                AFTER_SETUP_STEPS,
                {"\"fd:fk-migrate\"", migrate_reply, 0, false},
                {"{\"execute\":\"blockdev-snapshot\",\"id\":7,\"arguments\":{\"node\":\"disk0\"",
                 RET(7), 0, false},
                {"\"query-migrate\"", DONE(8), 0, false},
                {"\"events\",\"state\":false", RET(9), 0, false},
        };
        const struct qmp_fake_step second[] = {
                QMP_FAKE_HANDSHAKE,
                {"{\"execute\":\"cont\",\"id\":2}", NOT_FINALIZED(2), 0, false},
                {"{\"execute\":\"cont\",\"id\":3}", RET(3), 0, false},
                {NULL, NULL, 300, false},
        };
        json_t *args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", "ov1");
        struct vmm_live_opts o = after_opts(args, 10000);
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};

        (void)state;
        snprintf(stop_ev, sizeof(stop_ev),
                 "{\"event\": \"STOP\", \"timestamp\": {\"seconds\": %llu, \"microseconds\": "
                 "%llu}}\r\n",
                 (unsigned long long)(stop_real / 1000000000ull),
                 (unsigned long long)(stop_real % 1000000000ull / 1000));
        snprintf(migrate_reply, sizeof(migrate_reply), "%s%s%s%s", RET(6) EV_MIG("setup"),
                 EV_MIG("active"), stop_ev, EV_MIG("completed"));
        assert_int_equal(
                run_live(steps, ARRAY_SIZE(steps), second, ARRAY_SIZE(second), &o, &st, &err), 0);
        assert_int_equal(switchovers, 1);
        assert_int_equal(st.downtime_ms, 4);
        assert_false(st.forced);
        assert_int_equal(st.polls, 1); /* the refused cont */
        assert_true(st.step_ns[VMM_LIVE_SEEN] == 0 && st.step_ns[VMM_LIVE_CONTINUE] == 0);
        assert_true(st.step_ns[VMM_LIVE_COMPLETED] >= 45000000ull);
        assert_true(st.step_ns[VMM_LIVE_POSTMIGRATE] > 0);
        assert_steps_add_up(&st);
        json_decref(args);
}

/* switch_after, no completion within converge_ms and no second connection: the armed freeze is
 * disarmed, the guest stopped, the freeze armed again and fired at the completed event; cont
 * goes after its reply. */
static void test_live_after_forced(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                AFTER_SETUP_STEPS,
                {"\"fd:fk-migrate\"", RET(6) EV_MIG("setup") EV_MIG("active"), 0, false},
                {"\"blockdev-snapshot\",\"id\":7,", DISARMED(7), 0, false},
                {"\"stop\"", RET(8) EV_MIG("completed"), 0, false},
                {"{\"execute\":\"blockdev-snapshot\",\"id\":9,\"arguments\"", RET(9), 0, false},
                {"{\"execute\":\"cont\",\"id\":10}", RET(10), 0, false},
                {"\"query-migrate\"", DONE(11), 0, false},
                {"\"events\",\"state\":false", RET(12), 0, false},
        };
        json_t *args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", "ov1");
        struct vmm_live_opts o = after_opts(args, 100);
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(run_live(steps, ARRAY_SIZE(steps), NULL, 0, &o, &st, &err), 0);
        assert_true(st.forced);
        assert_int_equal(switchovers, 1);
        assert_steps_add_up(&st);
        json_decref(args);
}

/* switch_after: QEMU refuses the disk freeze once the migration completed. The cont armed on the
 * second connection is disarmed, and the guest, stopped, continued (cont sent again after QEMU's
 * "not finalized"): the checkpoint fails, the session runs on. */
static void test_live_after_switch_refused(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                AFTER_SETUP_STEPS,
                {"\"fd:fk-migrate\"", RET(6) EV_MIG("active") EV_MIG("completed"), 0, false},
                {"{\"execute\":\"blockdev-snapshot\",\"id\":7,",
                 "{\"id\": 7, \"error\": {\"class\": \"GenericError\", \"desc\": \"Permission "
                 "conflict on node 'ov1'\"}}\r\n",
                 0, false},
                {"\"migrate_cancel\"", RET(8), 0, false},
                {"\"query-migrate\"", DONE(9), 0, false},
                {"\"query-status\"",
                 "{\"return\": {\"status\": \"finish-migrate\"}, \"id\": 10}\r\n", 0, false},
                {"{\"execute\":\"cont\",\"id\":11}", NOT_FINALIZED(11), 0, false},
                {"{\"execute\":\"cont\",\"id\":12}", RET(12), 0, false},
                {"\"events\",\"state\":false", RET(13), 0, false},
        };
        const struct qmp_fake_step second[] = {
                QMP_FAKE_HANDSHAKE,
                {"\"cont\",\"id\":2,\"forklet-disarm\":0}", DISARMED(2), 0, false},
                {NULL, NULL, 300, false},
        };
        json_t *args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", "ov1");
        struct vmm_live_opts o = after_opts(args, 10000);
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(
                run_live(steps, ARRAY_SIZE(steps), second, ARRAY_SIZE(second), &o, &st, &err),
                -EIO);
        assert_non_null(strstr(err.msg, "Permission conflict"));
        assert_int_equal(switchovers, 0);
        json_decref(args);
}

/* vmm_cont_migrated, as every cont after a save's migration is sent (the stop-and-copy path's,
 * an adopted VM's, a failed live checkpoint's): QEMU refuses cont until it has finalized the
 * completed migration, so it is sent again; another error comes back at once. */
static void test_cont_migrated(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"{\"execute\":\"cont\",\"id\":2}", NOT_FINALIZED(2), 0, false},
                {"{\"execute\":\"cont\",\"id\":3}", NOT_FINALIZED(3), 0, false},
                {"{\"execute\":\"cont\",\"id\":4}", RET(4), 0, false},
                {"{\"execute\":\"cont\",\"id\":5}",
                 "{\"id\": 5, \"error\": {\"class\": \"GenericError\", \"desc\": \"Resetting "
                 "the Virtual Machine is required\"}}\r\n",
                 0, false},
        };
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        unsigned refused = 0;
        uint64_t last = 0, t0 = fk_now_mono_ns();

        (void)state;
        assert_int_equal(vmm_cont_migrated(c, 2000, &refused, &last, &err), 0);
        assert_int_equal(refused, 2);
        assert_true(last >= t0);
        refused = 0;
        assert_int_equal(vmm_cont_migrated(c, 2000, &refused, NULL, &err), -EIO);
        assert_non_null(strstr(err.msg, "Resetting"));
        assert_int_equal(refused, 0);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_live_after),
                cmocka_unit_test(test_live_after_forced),
                cmocka_unit_test(test_live_after_switch_refused),
                cmocka_unit_test(test_cont_migrated),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
