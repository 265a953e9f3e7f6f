/* SPDX-License-Identifier: MIT */
/* status.events: a condition change records one event, a repeat records none, the ring keeps
 * the newest AGENT_EVENTS_MAX oldest-first; the type is Warning for a condition gone False for
 * a problem, Normal for True or a requested step (Booting, RollingBack, ...); events without a
 * condition (Checkpointed); the boot reasons of rollback, fork and snapshot restore. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agent/daemon/daemon-internal.h"

static json_t *events_of(const struct agent_session *s)
{
        json_t *st = agent_session_status_json(s, 0);
        json_t *ev;

        assert_non_null(st);
        ev = json_incref(json_object_get(st, "events"));
        json_decref(st);
        assert_true(json_is_array(ev));
        return ev;
}

static const char *field(json_t *events, size_t i, const char *key)
{
        return json_string_value(json_object_get(json_array_get(events, i), key));
}

static void test_changes_only(void **state)
{
        struct agent_session *s = agent_session_new("default", "ev");
        json_t *ev;

        (void)state;
        assert_non_null(s);
        agent_session_set_condition(s, AGENT_COND_READY, "False", "Booting", 1000, "boot");
        agent_session_set_condition(s, AGENT_COND_READY, "False", "Booting", 2000, "still");
        agent_session_set_condition(s, AGENT_COND_READY, "True", "Running", 3000, "up pid %d", 7);
        ev = events_of(s);
        assert_int_equal(json_array_size(ev), 2);
        assert_string_equal(field(ev, 0, "reason"), "Booting");
        assert_string_equal(field(ev, 0, "type"), "Normal");
        assert_string_equal(field(ev, 1, "reason"), "Running");
        assert_string_equal(field(ev, 1, "type"), "Normal");
        assert_string_equal(field(ev, 1, "message"), "up pid 7");
        json_decref(ev);
        agent_session_free(s);
}

static void test_ring_keeps_newest(void **state)
{
        struct agent_session *s = agent_session_new("default", "ring");
        char reason[32];
        json_t *ev;

        (void)state;
        for (int i = 0; i < AGENT_EVENTS_MAX + 5; i++) {
                snprintf(reason, sizeof(reason), "R%d", i);
                agent_session_set_condition(s, AGENT_COND_READY, i % 2 ? "True" : "False", reason,
                                            (uint64_t)(i + 1) * 1000000000ull, "n%d", i);
        }
        ev = events_of(s);
        assert_int_equal(json_array_size(ev), AGENT_EVENTS_MAX);
        assert_string_equal(field(ev, 0, "reason"), "R5");
        snprintf(reason, sizeof(reason), "R%d", AGENT_EVENTS_MAX + 4);
        assert_string_equal(field(ev, AGENT_EVENTS_MAX - 1, "reason"), reason);
        json_decref(ev);
        agent_session_free(s);
}

static void test_types(void **state)
{
        struct agent_session *s = agent_session_new("default", "types");
        json_t *ev;

        (void)state;
        assert_non_null(s);
        agent_session_set_condition(s, AGENT_COND_READY, "False", "RollingBack", 1, "to ck_1");
        agent_session_set_condition(s, AGENT_COND_READY, "False", "RollbackFailed", 2, "no RAM");
        agent_session_set_condition(s, AGENT_COND_READY, "False", "Stopped", 3, "asked");
        agent_session_set_condition(s, AGENT_COND_READY, "False", "VMExited", 4, "signal 9");
        agent_session_add_event(s, 5, false, "Checkpointed", "checkpoint %s taken", "ck_2");
        agent_session_add_event(s, 6, true, "CheckpointFailed", "checkpoint failed: %s", "EIO");
        ev = events_of(s);
        assert_int_equal(json_array_size(ev), 6);
        assert_string_equal(field(ev, 0, "type"), "Normal");
        assert_string_equal(field(ev, 1, "type"), "Warning");
        assert_string_equal(field(ev, 2, "type"), "Normal");
        assert_string_equal(field(ev, 3, "type"), "Warning");
        assert_string_equal(field(ev, 4, "reason"), "Checkpointed");
        assert_string_equal(field(ev, 4, "type"), "Normal");
        assert_string_equal(field(ev, 4, "message"), "checkpoint ck_2 taken");
        assert_string_equal(field(ev, 5, "type"), "Warning");
        json_decref(ev);
        /* an event alone leaves the conditions as they were */
        assert_string_equal(s->conditions[AGENT_COND_READY].reason, "VMExited");
        agent_session_free(s);
}

static void test_restore_reasons(void **state)
{
        struct agent_session *s = agent_session_new("default", "web-fork-0");
        char ck[] = "/state/checkpoints/ck_9", layer[] = "/state/x.qcow2", msg[192];
        struct agent_restore cold = {0},
                             rollback = {.ck_dir = ck, .private_ram = true, .rollback = true},
                             fork = {.ck_dir = ck, .private_ram = true}, snap = {.layer = layer};

        (void)state;
        assert_non_null(s);
        s->rollback_to = strdup("ck_9");
        s->fork_parent = strdup("web");
        s->fork_checkpoint = strdup("ck_9");
        s->from_snapshot = strdup("sn_1");
        assert_string_equal(agent_restore_reason(&cold, false), "Booting");
        assert_string_equal(agent_restore_reason(&cold, true), "BootFailed");
        assert_string_equal(agent_restore_reason(&rollback, false), "RollingBack");
        assert_string_equal(agent_restore_reason(&rollback, true), "RollbackFailed");
        assert_string_equal(agent_restore_reason(&fork, false), "Forking");
        assert_string_equal(agent_restore_reason(&fork, true), "ForkFailed");
        assert_string_equal(agent_restore_reason(&snap, false), "Restoring");
        assert_string_equal(agent_restore_reason(&snap, true), "RestoreFailed");
        agent_restore_describe(s, &rollback, 256, 1, msg, sizeof(msg));
        assert_string_equal(msg, "rolling back to checkpoint ck_9 (a 256 MiB, 1 vCPU microVM)");
        agent_restore_describe(s, &fork, 512, 2, msg, sizeof(msg));
        assert_string_equal(msg, "restoring checkpoint ck_9 of web into a 512 MiB, 2 vCPU microVM");
        agent_restore_describe(s, &snap, 256, 1, msg, sizeof(msg));
        assert_string_equal(msg, "booting a 256 MiB, 1 vCPU microVM on snapshot sn_1");
        agent_restore_describe(s, &cold, 256, 1, msg, sizeof(msg));
        assert_string_equal(msg, "booting a 256 MiB, 1 vCPU microVM");
        agent_session_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_changes_only),
                cmocka_unit_test(test_ring_keeps_newest),
                cmocka_unit_test(test_types),
                cmocka_unit_test(test_restore_reasons),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
