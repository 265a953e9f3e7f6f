/* SPDX-License-Identifier: MIT */
/* Memory back to the host: the decision table (give-back.c) and the QEMU backend's refusals
 * where it knows the RAM mode (vm-qemu-balloon.c): a VM on private RAM (a fork's or a
 * rollback's checkpoint file) is refused before anything reaches QEMU, and so is one without a
 * balloon device. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/daemon/daemon-internal.h"
#include "agent/vm/vm-qemu.h"

#define MIB (1024ull * 1024ull)
#define SEC 1000000000ull

static struct agent_give_back_in base(void)
{
        return (struct agent_give_back_in){
                .enabled = true,
                .idle = true,
                .now_ns = 100 * SEC,
                .next_check_ns = 90 * SEC,
                .interval_ns = 30 * SEC,
                .ram_file_bytes = 200 * MIB,
                .threshold_bytes = 32 * MIB,
        };
}

static void test_decide(void **state)
{
        struct agent_give_back_in in = base();

        (void)state;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_CHECK);
        /* a fork or a rolled-back session: never, whatever else holds */
        in.private_ram = true;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        in.due = true;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        /* after a live checkpoint: at once, without waiting for the check */
        in = base();
        in.due = true;
        in.next_check_ns = in.now_ns + SEC;
        in.ram_file_bytes = 0;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_CHECKPOINT);
        in.interval_ns = 0; /* no periodic checks: still after checkpoints */
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_CHECKPOINT);
        /* not idle (a job, a request, boot work), disabled, a VM without a balloon */
        in = base();
        in.idle = false;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        in = base();
        in.enabled = false;
        in.due = true;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        in = base();
        in.off = true;
        in.due = true;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        /* the periodic check: only when due, only when the file holds the threshold at least */
        in = base();
        in.next_check_ns = in.now_ns + 1;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        in = base();
        in.interval_ns = 0;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        in = base();
        in.ram_file_bytes = in.threshold_bytes - 1;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_NONE);
        in.ram_file_bytes++;
        assert_int_equal(agent_give_back_decide(&in), AGENT_GIVE_BACK_CHECK);
        assert_string_equal(agent_give_back_why_to_string(AGENT_GIVE_BACK_CHECK), "periodic check");
}

/* No QMP client at all: a refusal must come before QEMU is asked anything. */
static void test_qemu_refuses(void **state)
{
        struct agent_give_back_params p = {.margin_bytes = 16 * MIB, .min_bytes = 32 * MIB};
        struct agent_give_back_result res = {.before_bytes = 1};
        struct qemu_vm q = {.mem_private = true,
                            .balloon = true,
                            .memory_mib = 256,
                            .mem_path = (char *)"/nonexistent/origin/ram"};
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(qemu_give_back(NULL, &q, &p, &res, &err), -EPERM);
        assert_non_null(strstr(err.msg, "copy-on-write"));
        assert_int_equal(res.before_bytes, 1); /* untouched */
        q.mem_private = false;
        q.balloon = false;
        assert_int_equal(qemu_give_back(NULL, &q, &p, &res, &err), -ENODEV);
        assert_non_null(strstr(err.msg, "no balloon device"));
        assert_int_equal(qemu_ram_bytes(&q), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decide),
                cmocka_unit_test(test_qemu_refuses),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
