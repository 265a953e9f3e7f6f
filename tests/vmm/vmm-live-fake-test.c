/* SPDX-License-Identifier: MIT */
/* The live checkpoint's QMP conversation (checkpoint-live.c) and what it uses of the client
 * (event waits, armed commands) against a scripted QEMU on a socketpair: polled and
 * event-driven precopy, a forced stop that disarms first, a refused capability; the dirty
 * bitmap's reset (dirty-log.c). */
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
#include "tests/lib/qmp-fake.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"
#include "tests/vmm/live-fake.h"

/* Armed commands: nothing runs until fired; any other command meanwhile is refused; a disarmed
 * one is refused by QEMU with our id (as QEMU 7.2 answers an unknown member); events wait. */
static void test_arm_fire_disarm(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"{\"execute\":\"cont\",\"id\":2}", RET(2), 0, false},
                {"\"cont\",\"id\":3,\"forklet-disarm\":0}",
                 "{\"id\": 3, \"error\": {\"class\": \"GenericError\", \"desc\": \"QMP input "
                 "member 'forklet-disarm' is unexpected\"}}\r\n",
                 0, false},
                {NULL,
                 "{\"event\": \"STOP\", \"timestamp\": {\"seconds\": 1, \"microseconds\": 0}}\r\n"
                 "{\"event\": \"RESUME\", \"timestamp\": {\"seconds\": 2, \"microseconds\": "
                 "0}}\r\n",
                 0, false},
                {"\"query-status\",\"id\":4}", RUNNING(4), 0, false},
                {NULL, NULL, 300, false}, /* then hang up: the last wait runs out first */
        };
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        const char *const resume[] = {"RESUME", NULL};
        char *status = NULL;
        json_t *ev = NULL;

        (void)state;
        assert_int_equal(qmp_arm(c, "cont", NULL, &err), 0);
        assert_int_equal(qmp_arm(c, "stop", NULL, &err), -EBUSY);
        assert_int_equal(qmp_execute(c, "stop", NULL, 1000, NULL, &err), -EBUSY);
        assert_non_null(strstr(err.msg, "cont is armed"));
        assert_int_equal(qmp_fire(c, 1000, NULL, &err), 0);
        assert_int_equal(qmp_fire(c, 1000, NULL, &err), -EINVAL); /* nothing armed */
        assert_int_equal(qmp_disarm(c, 1000), 0);                 /* nothing armed: no-op */
        assert_int_equal(qmp_arm(c, "cont", NULL, &err), 0);
        assert_int_equal(qmp_disarm(c, 1000), 0);
        /* RESUME comes after STOP: the STOP stays queued for others */
        assert_int_equal(qmp_wait_event(c, resume, 1000, &ev, &err), 0);
        assert_string_equal(json_string_value(json_object_get(ev, "event")), "RESUME");
        json_decref(ev);
        assert_int_equal(qmp_query_status(c, 1000, &status, &err), 0);
        assert_string_equal(status, "running");
        free(status);
        assert_int_equal(qmp_next_event(c, &ev), 1);
        assert_string_equal(json_string_value(json_object_get(ev, "event")), "STOP");
        json_decref(ev);
        assert_int_equal(qmp_wait_event(c, resume, 50, &ev, &err), -ETIMEDOUT);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

/* The polled conversation (bench-live-pause's baseline): query-migrate until pre-switchover,
 * the switch, migrate-continue, query-migrate until completed, query-status until postmigrate,
 * cont. */
static void test_live_polled(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"\"query-status\"", RUNNING(2), 0, false},
                {"\"pause-before-switchover\",\"state\":true", RET(3), 0, false},
                {"\"downtime-limit\":10", RET(4), 0, false},
                {"\"getfd\"", RET(5), 0, false},
                {"\"fd:fk-migrate\"", RET(6), 0, false},
                {"\"query-migrate\"", MIG(7, "active"), 0, false},
                {"\"query-migrate\"", MIG(8, "pre-switchover"), 0, false},
                {"\"migrate-continue\"", RET(9), 0, false},
                {"\"query-migrate\"", MIG(10, "device"), 0, false},
                {"\"query-migrate\"", DONE(11), 0, false},
                {"\"query-status\"", "{\"return\": {\"status\": \"postmigrate\"}, \"id\": 12}\r\n",
                 0, false},
                {"\"cont\"", RET(13), 0, false},
                {"\"pause-before-switchover\",\"state\":false", RET(14), 0, false},
        };
        struct vmm_live_opts o = {.converge_ms = 10000,
                                  .timeout_ms = 2000,
                                  .switchover = count_switchover,
                                  .poll = true};
        char stream[] = "/tmp/fk-live-test-XXXXXX";
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        int sfd = mkstemp(stream);

        (void)state;
        assert_true(sfd >= 0);
        close(sfd);
        switchovers = 0;
        assert_int_equal(vmm_checkpoint_live(c, stream, &o, &st, &err), 0);
        assert_int_equal(switchovers, 1); /* the disk froze while QEMU waited */
        assert_int_equal(st.downtime_ms, 4);
        assert_false(st.forced);
        assert_true(st.pause_ns > 0 && st.pause_ns <= st.total_ns);
        assert_steps_add_up(&st);
        assert_int_equal(st.polls, 3); /* device, completed, postmigrate */
        assert_string_equal(vmm_live_step_to_string(VMM_LIVE_CONT), "cont");
        assert_string_equal(vmm_live_step_to_string(_VMM_LIVE_STEP_MAX), "?");
        qmp_client_free(c);
        qmp_fake_finish(&f);
        unlink(stream);
}

/* The event-driven conversation: the disk freeze armed before the switch-over and fired at
 * QEMU's pre-switchover event, migrate-continue, cont armed while QEMU writes the devices and
 * fired at the completed event; a cont QEMU refuses before it finalized is sent again. The
 * pause starts at QEMU's STOP event (its timestamp, 50 ms before the test's reply). */
static void test_live_events(void **state)
{
        char stop_ev[200], migrate_reply[600];
        uint64_t stop_real = fk_now_real_ns() - 50000000ull;
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                LIVE_SETUP_STEPS,
                {"\"fd:fk-migrate\"", migrate_reply, 0, false},
                {"{\"execute\":\"blockdev-snapshot\",\"id\":7,\"arguments\":{\"node\":\"disk0\"",
                 RET(7), 0, false},
                {"\"migrate-continue\"", RET(8) EV_MIG("device") EV_MIG("completed"), 0, false},
                {"{\"execute\":\"cont\",\"id\":9}",
                 "{\"id\": 9, \"error\": {\"class\": \"GenericError\", \"desc\": \"Migration is "
                 "not finalized yet\"}}\r\n",
                 0, false},
                {"{\"execute\":\"cont\",\"id\":10}", RET(10), 0, false},
                {"\"query-migrate\"", DONE(11), 0, false},
                {"\"events\",\"state\":false", RET(12), 0, false},
        };
        json_t *args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", "ov1");
        struct vmm_live_opts o = {.converge_ms = 10000,
                                  .timeout_ms = 2000,
                                  .switch_command = "blockdev-snapshot",
                                  .switch_args = args,
                                  .switchover = count_switchover};
        char stream[] = "/tmp/fk-live-test-XXXXXX";
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c;
        int sfd = mkstemp(stream);

        (void)state;
        snprintf(stop_ev, sizeof(stop_ev),
                 "{\"event\": \"STOP\", \"timestamp\": {\"seconds\": %llu, \"microseconds\": "
                 "%llu}}\r\n",
                 (unsigned long long)(stop_real / 1000000000ull),
                 (unsigned long long)(stop_real % 1000000000ull / 1000));
        snprintf(migrate_reply, sizeof(migrate_reply), "%s%s%s%s", RET(6) EV_MIG("setup"),
                 EV_MIG("active"), stop_ev, EV_MIG("pre-switchover"));
        c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        assert_true(sfd >= 0);
        close(sfd);
        switchovers = 0;
        assert_int_equal(vmm_checkpoint_live(c, stream, &o, &st, &err), 0);
        assert_int_equal(switchovers, 1);
        assert_int_equal(st.downtime_ms, 4); /* asked once the guest ran again */
        assert_false(st.forced);
        assert_int_equal(st.polls, 1); /* the refused cont */
        assert_true(st.step_ns[VMM_LIVE_POSTMIGRATE] > 0);
        assert_true(st.pause_ns >= 45000000ull && st.pause_ns < 2000000000ull);
        assert_true(st.step_ns[VMM_LIVE_SEEN] >= 45000000ull);
        assert_steps_add_up(&st);
        json_decref(args);
        qmp_client_free(c);
        qmp_fake_finish(&f);
        unlink(stream);
}

/* With a second connection, migrate-continue is armed there beside the disk freeze on the
 * first, and fired once the freeze answered. */
static void test_live_events_second_connection(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                LIVE_SETUP_STEPS,
                {"\"fd:fk-migrate\"", RET(6) EV_MIG("active") EV_MIG("pre-switchover"), 0, false},
                {"{\"execute\":\"blockdev-snapshot\",\"id\":7,", RET(7), 0, false},
                /* QEMU completes once the other monitor ran migrate-continue */
                {NULL, EV_MIG("device") EV_MIG("completed"), 100, false},
                {"{\"execute\":\"cont\",\"id\":8}", RET(8), 0, false},
                {"\"query-migrate\"", DONE(9), 0, false},
                {"\"events\",\"state\":false", RET(10), 0, false},
        };
        const struct qmp_fake_step second[] = {
                QMP_FAKE_HANDSHAKE,
                {"{\"execute\":\"migrate-continue\",\"id\":2,\"arguments\":{\"state\":"
                 "\"pre-switchover\"}}",
                 RET(2), 0, false},
                {NULL, NULL, 300, false},
        };
        json_t *args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", "ov1");
        struct vmm_live_opts o = {.converge_ms = 10000,
                                  .timeout_ms = 2000,
                                  .switch_command = "blockdev-snapshot",
                                  .switch_args = args,
                                  .switchover = count_switchover};
        char stream[] = "/tmp/fk-live-test-XXXXXX";
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};
        struct qmp_fake f, f2;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        int sfd = mkstemp(stream);

        (void)state;
        o.continue_qmp = connect_fake(&f2, second, ARRAY_SIZE(second));
        assert_true(sfd >= 0);
        close(sfd);
        switchovers = 0;
        assert_int_equal(vmm_checkpoint_live(c, stream, &o, &st, &err), 0);
        assert_int_equal(switchovers, 1);
        assert_int_equal(st.downtime_ms, 4);
        assert_steps_add_up(&st);
        json_decref(args);
        qmp_client_free(o.continue_qmp);
        qmp_client_free(c);
        qmp_fake_finish(&f2);
        qmp_fake_finish(&f);
        unlink(stream);
}

/* No switch-over within converge_ms: the armed disk freeze is disarmed (QEMU refuses it
 * unrun), the guest stopped, the freeze armed again and fired at the switch-over. */
static void test_live_events_forced(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                LIVE_SETUP_STEPS,
                {"\"fd:fk-migrate\"", RET(6) EV_MIG("setup") EV_MIG("active"), 0, false},
                {"\"blockdev-snapshot\",\"id\":7,",
                 "{\"id\": 7, \"error\": {\"class\": \"GenericError\", \"desc\": \"QMP input "
                 "member 'forklet-disarm' is unexpected\"}}\r\n",
                 0, false},
                {"\"stop\"", RET(8) EV_MIG("pre-switchover"), 0, false},
                {"{\"execute\":\"blockdev-snapshot\",\"id\":9,\"arguments\"", RET(9), 0, false},
                {"\"migrate-continue\"", RET(10) EV_MIG("completed"), 0, false},
                {"{\"execute\":\"cont\",\"id\":11}", RET(11), 0, false},
                {"\"query-migrate\"", DONE(12), 0, false},
                {"\"events\",\"state\":false", RET(13), 0, false},
        };
        json_t *args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", "ov1");
        struct vmm_live_opts o = {.converge_ms = 100,
                                  .timeout_ms = 2000,
                                  .switch_command = "blockdev-snapshot",
                                  .switch_args = args,
                                  .switchover = count_switchover};
        char stream[] = "/tmp/fk-live-test-XXXXXX";
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        int sfd = mkstemp(stream);

        (void)state;
        assert_true(sfd >= 0);
        close(sfd);
        switchovers = 0;
        assert_int_equal(vmm_checkpoint_live(c, stream, &o, &st, &err), 0);
        assert_true(st.forced);
        assert_int_equal(switchovers, 1);
        assert_int_equal(st.polls, 0);
        assert_steps_add_up(&st);
        json_decref(args);
        qmp_client_free(c);
        qmp_fake_finish(&f);
        unlink(stream);
}

/* The migration fails after the switch-over: the armed cont is disarmed, the migration
 * cancelled and the guest continued; no stream is left. */
static void test_live_events_failed(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                LIVE_SETUP_STEPS,
                {"\"fd:fk-migrate\"", RET(6) EV_MIG("active") EV_MIG("pre-switchover"), 0, false},
                {"{\"execute\":\"migrate-continue\",\"id\":7,", RET(7) EV_MIG("failed"), 0, false},
                {"\"cont\",\"id\":8,\"forklet-disarm\":0}",
                 "{\"id\": 8, \"error\": {\"class\": \"GenericError\", \"desc\": \"QMP input "
                 "member 'forklet-disarm' is unexpected\"}}\r\n",
                 0, false},
                {"\"query-migrate\"",
                 "{\"return\": {\"status\": \"failed\", \"error-desc\": \"Unable to write to "
                 "file: No space left on device\"}, \"id\": 9}\r\n",
                 0, false},
                {"\"migrate_cancel\"", RET(10), 0, false},
                {"\"query-migrate\"", MIG(11, "failed"), 0, false},
                {"\"query-status\"", "{\"return\": {\"status\": \"postmigrate\"}, \"id\": 12}\r\n",
                 0, false},
                {"\"cont\"", RET(13), 0, false},
                {"\"events\",\"state\":false", RET(14), 0, false},
        };
        struct vmm_live_opts o = {.converge_ms = 10000, .timeout_ms = 2000};
        char stream[] = "/tmp/fk-live-test-XXXXXX";
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        int sfd = mkstemp(stream);

        (void)state;
        assert_true(sfd >= 0);
        close(sfd);
        assert_int_equal(vmm_checkpoint_live(c, stream, &o, &st, &err), -EIO);
        assert_non_null(strstr(err.msg, "No space left on device"));
        qmp_client_free(c);
        qmp_fake_finish(&f);
        unlink(stream);
}

/* A QEMU that refuses the capability: -EOPNOTSUPP, nothing done to the guest, no stream. */
static void test_live_refused(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"\"query-status\"", RUNNING(2), 0, false},
                {"\"migrate-set-capabilities\"",
                 "{\"id\": 3, \"error\": {\"class\": \"GenericError\", \"desc\": \"Parameter "
                 "'capability' does not accept value 'pause-before-switchover'\"}}\r\n",
                 0, false},
                {"\"migrate-set-capabilities\"", RET(4), 0, false},
        };
        struct vmm_live_opts o = {
                .converge_ms = 1000, .timeout_ms = 2000, .switchover = count_switchover};
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        switchovers = 0;
        assert_int_equal(vmm_checkpoint_live(c, "/tmp/fk-live-test-refused", &o, &st, &err),
                         -EOPNOTSUPP);
        assert_non_null(strstr(err.msg, "QEMU refused live migration"));
        assert_non_null(strstr(err.msg, "pause-before-switchover"));
        assert_int_equal(switchovers, 0);
        assert_int_equal(access("/tmp/fk-live-test-refused", F_OK), -1);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

/* vmm_dirty_log_reset (dirty-log.c): the bandwidth it found is put back after the throttled
 * migration into /dev/null was cancelled past its setup; QEMU's setup-time comes back. */
static void test_dirty_log_reset(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"\"query-migrate-parameters\"",
                 "{\"return\": {\"max-bandwidth\": 134217728}, \"id\": 2}\r\n", 0, false},
                {"\"x-ignore-shared\",\"state\":false", RET(3), 0, false},
                {"{\"max-bandwidth\":1024}", RET(4), 0, false},
                {"\"getfd\"", RET(5), 0, false},
                {"\"fd:fk-migrate\"", RET(6), 0, false},
                {"\"query-migrate\"", MIG(7, "setup"), 0, false},
                {"\"query-migrate\"",
                 "{\"return\": {\"status\": \"active\", \"setup-time\": 241}, \"id\": 8}\r\n", 0,
                 false},
                {"\"migrate_cancel\"", RET(9), 0, false},
                {"\"query-migrate\"", MIG(10, "cancelling"), 0, false},
                {"\"query-migrate\"", MIG(11, "cancelled"), 0, false},
                {"{\"max-bandwidth\":134217728}", RET(12), 0, false},
        };
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        unsigned ms = 0;

        (void)state;
        assert_int_equal(vmm_dirty_log_reset(c, 2000, &ms, &err), 0);
        assert_int_equal(ms, 241);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

/* A migrate QEMU refuses: its reason, and still a cancel and the bandwidth put back. */
static void test_dirty_log_reset_refused(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"\"query-migrate-parameters\"",
                 "{\"return\": {\"max-bandwidth\": 33554432}, \"id\": 2}\r\n", 0, false},
                {"\"x-ignore-shared\",\"state\":false", RET(3), 0, false},
                {"{\"max-bandwidth\":1024}", RET(4), 0, false},
                {"\"getfd\"", RET(5), 0, false},
                {"\"fd:fk-migrate\"",
                 "{\"id\": 6, \"error\": {\"class\": \"GenericError\", \"desc\": \"There's "
                 "a migration process in progress\"}}\r\n",
                 0, false},
                {"\"closefd\"", RET(7), 0, false},
                {"\"migrate_cancel\"", RET(8), 0, false},
                {"\"query-migrate\"", MIG(9, "completed"), 0, false},
                {"{\"max-bandwidth\":33554432}", RET(10), 0, false},
        };
        struct fk_error err = {0};
        struct qmp_fake f;
        struct qmp_client *c = connect_fake(&f, steps, ARRAY_SIZE(steps));
        unsigned ms = 7;

        (void)state;
        assert_int_equal(vmm_dirty_log_reset(c, 2000, &ms, &err), -EIO);
        assert_non_null(strstr(err.msg, "migration process in progress"));
        assert_int_equal(ms, 7);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_arm_fire_disarm),
                cmocka_unit_test(test_live_polled),
                cmocka_unit_test(test_live_events),
                cmocka_unit_test(test_live_events_second_connection),
                cmocka_unit_test(test_live_events_forced),
                cmocka_unit_test(test_live_events_failed),
                cmocka_unit_test(test_live_refused),
                cmocka_unit_test(test_dirty_log_reset),
                cmocka_unit_test(test_dirty_log_reset_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
