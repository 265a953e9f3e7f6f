/* SPDX-License-Identifier: MIT */
/* The fork timing breakdown's renderings: the event text (steps that ran, in order, whole ms,
 * at least 1) and status.bootTiming (ms with 0.1 precision, absent steps left out). */
#include "agent/obs/obs.h"
#include "agent/daemon/daemon-internal.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MS(x) ((uint64_t)((x)*1000000.0))

static void test_names(void **state)
{
        (void)state;
        for (unsigned i = 0; i < _AGENT_BOOT_STEP_MAX; i++)
                assert_non_null(agent_boot_step_to_string((enum agent_boot_step)i));
        assert_string_equal(agent_boot_step_to_string(AGENT_BOOT_STEP_PRE_EXEC), "preExec");
        assert_string_equal(agent_boot_step_to_string(AGENT_BOOT_STEP_TOTAL), "total");
        assert_null(agent_boot_step_to_string(_AGENT_BOOT_STEP_MAX));
}

static void test_format(void **state)
{
        struct agent_boot_timing t = {0};
        char buf[192], small[16];

        (void)state;
        agent_boot_timing_format(&t, buf, sizeof(buf));
        assert_string_equal(buf, "");
        t.ns[AGENT_BOOT_STEP_TOTAL] = MS(480.4);
        t.ns[AGENT_BOOT_STEP_LINKS] = MS(2.6);
        t.ns[AGENT_BOOT_STEP_LOCK] = 1000; /* 1 us: ran, so shown as 1 ms */
        t.ns[AGENT_BOOT_STEP_RESTORE] = MS(30);
        agent_boot_timing_format(&t, buf, sizeof(buf));
        assert_string_equal(buf, "lock 1 ms, links 3 ms, restore 30 ms, total 480 ms");
        agent_boot_timing_format(&t, small, sizeof(small));
        assert_string_equal(small, "lock 1 ms, link");
        t.retries = 2;
        agent_boot_timing_format(&t, buf, sizeof(buf));
        assert_string_equal(buf, "lock 1 ms, links 3 ms, restore 30 ms, total 480 ms, 2 retries");
}

static void test_json(void **state)
{
        struct agent_boot_timing t = {0};
        json_t *j;

        (void)state;
        t.ns[AGENT_BOOT_STEP_SPAWN] = MS(12.34);
        t.ns[AGENT_BOOT_STEP_PRE_EXEC] = MS(7.06);
        t.ns[AGENT_BOOT_STEP_TOTAL] = MS(1500);
        j = agent_boot_timing_json(&t);
        assert_non_null(j);
        assert_int_equal(json_object_size(j), 3);
        assert_float_equal(json_real_value(json_object_get(j, "spawnMs")), 12.3, 1e-9);
        assert_float_equal(json_real_value(json_object_get(j, "preExecMs")), 7.0, 1e-9);
        assert_float_equal(json_real_value(json_object_get(j, "totalMs")), 1500.0, 1e-9);
        assert_null(json_object_get(j, "queueMs"));
        json_decref(j);
        t.retries = 1;
        j = agent_boot_timing_json(&t);
        assert_int_equal(json_integer_value(json_object_get(j, "retries")), 1);
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_format),
                cmocka_unit_test(test_json),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
