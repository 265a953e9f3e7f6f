/* SPDX-License-Identifier: MIT */
/* status.events: a condition change records one event, a repeat records none, the ring keeps
 * the newest AGENT_EVENTS_MAX oldest-first, and the type follows the condition's status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent-internal.h"

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
        assert_string_equal(field(ev, 0, "type"), "Warning");
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

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_changes_only),
                cmocka_unit_test(test_ring_keeps_newest),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
