/* SPDX-License-Identifier: MIT */
/* core_plan(): a table of (desired, observed) -> expected actions (the VM lifecycle, guest
 * health, intents, afterStart and declared checkpoints, spec.forks, resize and egress), plus
 * multi-session order, restart back-off, the busy wait of intents and the string tables. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/core.h"
#include "manifest/manifest.h"

#define NONE (-1)

struct plan_case {
        const char *what;
        struct core_desired d;
        struct core_observed o;
        int first, second; /* expected action kinds, NONE when absent */
};

#define RUN   SESSION_STATE_RUNNING
#define STOP  SESSION_STATE_STOPPED
#define PAUSE SESSION_STATE_PAUSED
#define P(x)  SESSION_PHASE_##x
#define WANT(s)                                                                                    \
        {                                                                                          \
                .present = true, .state = (s), .generation = 1                                     \
        }
#define GONE                                                                                       \
        {                                                                                          \
                .present = false, .generation = 1                                                  \
        }

static const struct plan_case cases[] = {
        {"new session boots",
         WANT(RUN),
         {.phase = P(PENDING)},
         CORE_ACTION_OBSERVE,
         CORE_ACTION_BOOT},
        {"pending, observed gen current",
         WANT(RUN),
         {.phase = P(PENDING), .observed_generation = 1},
         CORE_ACTION_BOOT,
         NONE},
        {"running stays (re-apply unchanged)",
         WANT(RUN),
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         NONE,
         NONE},
        {"starting is left alone",
         WANT(RUN),
         {.phase = P(STARTING), .observed_generation = 1},
         NONE,
         NONE},
        {"busy is left alone even when deleted",
         GONE,
         {.phase = P(STARTING), .busy = true, .observed_generation = 1},
         NONE,
         NONE},
        {"busy: no observe either", WANT(RUN), {.phase = P(RUNNING), .busy = true}, NONE, NONE},
        {"deleted running session destroyed",
         GONE,
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_DESTROY,
         NONE},
        {"deleted pending session destroyed",
         GONE,
         {.phase = P(PENDING)},
         CORE_ACTION_DESTROY,
         NONE},
        {"deleted failed session destroyed", GONE, {.phase = P(FAILED)}, CORE_ACTION_DESTROY, NONE},
        {"spec change observed, VM kept",
         {.present = true, .state = RUN, .generation = 2},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_OBSERVE,
         NONE},
        {"stop a running VM",
         WANT(STOP),
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_STOP,
         NONE},
        {"stop a paused VM",
         WANT(STOP),
         {.phase = P(PAUSED), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_STOP,
         NONE},
        {"pending and Stopped: mark stopped",
         WANT(STOP),
         {.phase = P(PENDING), .observed_generation = 1},
         CORE_ACTION_STOP,
         NONE},
        {"stopped stays stopped",
         WANT(STOP),
         {.phase = P(STOPPED), .observed_generation = 1},
         NONE,
         NONE},
        {"failed without VM and Stopped: nothing",
         WANT(STOP),
         {.phase = P(FAILED), .observed_generation = 1},
         NONE,
         NONE},
        {"stopped -> Running boots",
         WANT(RUN),
         {.phase = P(STOPPED), .observed_generation = 1},
         CORE_ACTION_BOOT,
         NONE},
        {"pause a running VM",
         WANT(PAUSE),
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_PAUSE,
         NONE},
        {"paused -> Running resumes",
         WANT(RUN),
         {.phase = P(PAUSED), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_RESUME,
         NONE},
        {"Paused from pending boots first",
         WANT(PAUSE),
         {.phase = P(PENDING), .observed_generation = 1},
         CORE_ACTION_BOOT,
         NONE},
        {"failed, restart Never: stays failed",
         WANT(RUN),
         {.phase = P(FAILED), .observed_generation = 1},
         NONE,
         NONE},
        {"failed, OnFailure, back-off over: boots",
         {.present = true, .state = RUN, .generation = 1, .restart_on_failure = true},
         {.phase = P(FAILED), .observed_generation = 1, .retry_at_ns = 1000},
         CORE_ACTION_BOOT,
         NONE},
        {"failed, OnFailure, back-off pending: waits",
         {.present = true, .state = RUN, .generation = 1, .restart_on_failure = true},
         {.phase = P(FAILED), .observed_generation = 1, .retry_at_ns = 99999},
         NONE,
         NONE},
        {"failed with its VM up (afterStart failed), OnFailure: stopped first",
         {.present = true, .state = RUN, .generation = 1, .restart_on_failure = true},
         {.phase = P(FAILED), .has_vm = true, .observed_generation = 1, .retry_at_ns = 99999},
         CORE_ACTION_STOP,
         NONE},
        {"failed with its VM up, paused wanted, OnFailure: stopped first",
         {.present = true, .state = PAUSE, .generation = 1, .restart_on_failure = true},
         {.phase = P(FAILED), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_STOP,
         NONE},
        {"failed with its VM up, restart Never: kept for debugging",
         WANT(RUN),
         {.phase = P(FAILED), .has_vm = true, .observed_generation = 1},
         NONE,
         NONE},
        /* guest health: a dead guest's VM ends first; a disk-error stop waits for space */
        {"dead guest: its VM is ended",
         WANT(RUN),
         {.phase = P(RUNNING), .has_vm = true, .unhealthy = true, .observed_generation = 1},
         CORE_ACTION_FAIL,
         NONE},
        {"dead guest of a paused session: ended too",
         WANT(PAUSE),
         {.phase = P(PAUSED), .has_vm = true, .unhealthy = true, .observed_generation = 1},
         CORE_ACTION_FAIL,
         NONE},
        {"dead guest, spec changed: observed, then ended",
         WANT(RUN),
         {.phase = P(RUNNING), .has_vm = true, .unhealthy = true},
         CORE_ACTION_OBSERVE,
         CORE_ACTION_FAIL},
        {"dead guest deleted: destroyed",
         GONE,
         {.phase = P(RUNNING), .has_vm = true, .unhealthy = true, .observed_generation = 1},
         CORE_ACTION_DESTROY,
         NONE},
        {"failed after a death, VM gone: restart policy decides",
         {.present = true, .state = RUN, .generation = 1, .restart_on_failure = true},
         {.phase = P(FAILED), .unhealthy = true, .observed_generation = 1},
         CORE_ACTION_BOOT,
         NONE},
        {"disk-error stop: no resume before space is back",
         WANT(RUN),
         {.phase = P(PAUSED), .has_vm = true, .io_stopped = true, .observed_generation = 1},
         NONE,
         NONE},
        {"disk-error stop, space back: resumed",
         WANT(RUN),
         {.phase = P(PAUSED),
          .has_vm = true,
          .io_stopped = true,
          .io_resume_due = true,
          .observed_generation = 1},
         CORE_ACTION_RESUME,
         NONE},
        {"disk-error stop, spec Paused: stays even with space back",
         WANT(PAUSE),
         {.phase = P(PAUSED),
          .has_vm = true,
          .io_stopped = true,
          .io_resume_due = true,
          .observed_generation = 1},
         NONE,
         NONE},
        {"disk-error stop, spec Stopped: stopped",
         WANT(STOP),
         {.phase = P(PAUSED), .has_vm = true, .io_stopped = true, .observed_generation = 1},
         CORE_ACTION_STOP,
         NONE},
        /* intents: requests recorded on the session, judged against the phase they find */
        {"checkpoint requested on a running VM",
         {.present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_CHECKPOINT},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_CHECKPOINT,
         NONE},
        {"checkpoint requested on a paused VM: refused",
         {.present = true, .state = PAUSE, .generation = 1, .intent = CORE_INTENT_CHECKPOINT},
         {.phase = P(PAUSED), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_REJECT,
         NONE},
        {"checkpoint requested before the boot: refused, then the boot",
         {.present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_CHECKPOINT},
         {.phase = P(PENDING), .observed_generation = 1},
         CORE_ACTION_REJECT,
         CORE_ACTION_BOOT},
        {"checkpoint goes before a pause asked meanwhile (one job per pass)",
         {.present = true, .state = PAUSE, .generation = 2, .intent = CORE_INTENT_CHECKPOINT},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_OBSERVE,
         CORE_ACTION_CHECKPOINT},
        {"checkpoint on a busy session waits",
         {.present = true,
          .state = RUN,
          .generation = 1,
          .intent = CORE_INTENT_CHECKPOINT,
          .intent_since_ns = 4000},
         {.phase = P(RUNNING), .has_vm = true, .busy = true, .observed_generation = 1},
         NONE,
         NONE},
        {"checkpoint while the guest is dead: the VM ends first",
         {.present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_CHECKPOINT},
         {.phase = P(RUNNING), .has_vm = true, .unhealthy = true, .observed_generation = 1},
         CORE_ACTION_FAIL,
         NONE},
        {"checkpoint of a deleted session: refused, destroyed",
         {.present = false, .generation = 1, .intent = CORE_INTENT_CHECKPOINT},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_REJECT,
         CORE_ACTION_DESTROY},
        {"rollback requested: boots from the checkpoint whatever the phase",
         {.present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_ROLLBACK},
         {.phase = P(STOPPED), .observed_generation = 1},
         CORE_ACTION_ROLLBACK,
         NONE},
        {"rollback while forks exist: the forks are left alone",
         {.present = true,
          .state = RUN,
          .generation = 1,
          .intent = CORE_INTENT_ROLLBACK,
          .has_forks = true,
          .forks_count = 2},
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .forks = 2,
          .forks_source = true},
         CORE_ACTION_ROLLBACK,
         NONE},
        {"snapshot requested on a running VM",
         {.present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_SNAPSHOT},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_SNAPSHOT,
         NONE},
        {"fork requested: made at once, the state machine goes on",
         {.present = true, .state = PAUSE, .generation = 1, .intent = CORE_INTENT_FORK},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_FORK,
         CORE_ACTION_PAUSE},
        {"fork requested during a checkpoint: made (it reads a complete checkpoint)",
         {.present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_FORK},
         {.phase = P(RUNNING), .has_vm = true, .busy = true, .observed_generation = 1},
         CORE_ACTION_FORK,
         NONE},
        {"delete during a fork: the fork request is refused, the session destroyed",
         {.present = false, .generation = 1, .intent = CORE_INTENT_FORK},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_REJECT,
         CORE_ACTION_DESTROY},
        {"delete while its job runs: nothing until it ends",
         {.present = false, .generation = 1, .intent = CORE_INTENT_FORK},
         {.phase = P(RUNNING), .has_vm = true, .busy = true, .observed_generation = 1},
         NONE,
         NONE},
        /* after a cold boot: afterStart, the declared checkpoints, then spec.forks */
        {"new VM: afterStart",
         WANT(RUN),
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .post_start = CORE_POST_START_AFTER_START},
         CORE_ACTION_AFTER_START,
         NONE},
        {"afterStart done: the declared checkpoints",
         WANT(RUN),
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .post_start = CORE_POST_START_CHECKPOINTS},
         CORE_ACTION_DECLARED_CHECKPOINTS,
         NONE},
        {"afterStart waits for a requested checkpoint",
         {.present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_CHECKPOINT},
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .post_start = CORE_POST_START_AFTER_START},
         CORE_ACTION_CHECKPOINT,
         NONE},
        {"afterStart of a paused session waits for the resume",
         WANT(PAUSE),
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .post_start = CORE_POST_START_AFTER_START},
         CORE_ACTION_PAUSE,
         NONE},
        {"spec.forks after the declared checkpoint: scaled up",
         {.present = true, .state = RUN, .generation = 1, .has_forks = true, .forks_count = 3},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1, .forks_source = true},
         CORE_ACTION_FORK_SCALE,
         NONE},
        {"spec.forks complete: nothing",
         {.present = true, .state = RUN, .generation = 1, .has_forks = true, .forks_count = 3},
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .forks = 3,
          .forks_source = true},
         NONE,
         NONE},
        {"fork scale during a checkpoint: waits for it",
         {.present = true, .state = RUN, .generation = 1, .has_forks = true, .forks_count = 3},
         {.phase = P(RUNNING),
          .has_vm = true,
          .busy = true,
          .observed_generation = 1,
          .forks_source = true},
         NONE,
         NONE},
        {"fork scale while the declared checkpoints are due: they go first",
         {.present = true, .state = RUN, .generation = 1, .has_forks = true, .forks_count = 3},
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .post_start = CORE_POST_START_CHECKPOINTS},
         CORE_ACTION_DECLARED_CHECKPOINTS,
         NONE},
        {"afterStart failed with declared forks: no fork, the wait is said",
         {.present = true, .state = RUN, .generation = 1, .has_forks = true, .forks_count = 3},
         {.phase = P(RUNNING),
          .has_vm = true,
          .observed_generation = 1,
          .post_start = CORE_POST_START_FAILED,
          .forks_source = true},
         CORE_ACTION_FORKS_WAIT,
         NONE},
        {"afterStart failed, OnFailure (phase Failed): stopped, no fork",
         {.present = true,
          .state = RUN,
          .generation = 1,
          .restart_on_failure = true,
          .has_forks = true,
          .forks_count = 3},
         {.phase = P(FAILED),
          .has_vm = true,
          .observed_generation = 1,
          .post_start = CORE_POST_START_FAILED,
          .retry_at_ns = 99999},
         CORE_ACTION_STOP,
         NONE},
        {"spec.forks without its checkpoint: the wait is said",
         {.present = true, .state = RUN, .generation = 1, .has_forks = true, .forks_count = 1},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
         CORE_ACTION_FORKS_WAIT,
         NONE},
        {"spec.forks scaled down: trimmed, even while busy",
         {.present = true, .state = RUN, .generation = 1, .has_forks = true, .forks_count = 1},
         {.phase = P(RUNNING),
          .has_vm = true,
          .busy = true,
          .observed_generation = 1,
          .forks = 1,
          .forks_beyond = 2},
         CORE_ACTION_FORK_TRIM,
         NONE},
        {"deleted parent: its forks outlive it (no trim)",
         {.present = false, .generation = 1},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1, .forks_beyond = 2},
         CORE_ACTION_DESTROY,
         NONE},
        /* a spec change on a running VM: size class and egress applied live */
        {"size class changed: resized",
         {.present = true, .state = RUN, .generation = 2},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1, .class_changed = true},
         CORE_ACTION_OBSERVE,
         CORE_ACTION_RESIZE},
        {"spec change with a network: egress applied",
         {.present = true, .state = RUN, .generation = 2},
         {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1, .has_net = true},
         CORE_ACTION_OBSERVE,
         CORE_ACTION_EGRESS},
        {"size class changed without a VM: nothing to resize",
         {.present = true, .state = RUN, .generation = 2},
         {.phase = P(STOPPED), .observed_generation = 1, .class_changed = true},
         CORE_ACTION_OBSERVE,
         CORE_ACTION_BOOT},
};

static void test_table(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct plan_case *c = &cases[i];
                struct core_plan p = {0};
                size_t want = (c->first != NONE) + (c->second != NONE);

                assert_int_equal(core_plan(&c->d, &c->o, 1, 5000, &p), 0);
                if (p.n != want)
                        fail_msg("case \"%s\": %zu actions, expected %zu", c->what, p.n, want);
                if (want > 0 && (int)p.actions[0].kind != c->first)
                        fail_msg("case \"%s\": first action %s", c->what,
                                 core_action_to_string(p.actions[0].kind));
                if (want > 1 && (int)p.actions[1].kind != c->second)
                        fail_msg("case \"%s\": second action %s", c->what,
                                 core_action_to_string(p.actions[1].kind));
                for (size_t k = 0; k < p.n; k++)
                        assert_int_equal(p.actions[k].index, 0);
                core_plan_done(&p);
        }
}

static void test_many_sessions(void **state)
{
        struct core_desired d[3] = {WANT(RUN), GONE, WANT(RUN)};
        struct core_observed o[3] = {
                {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
                {.phase = P(RUNNING), .has_vm = true, .observed_generation = 1},
                {.phase = P(PENDING), .observed_generation = 1},
        };
        struct core_plan p = {0};

        (void)state;
        assert_int_equal(core_plan(d, o, 3, 0, &p), 0);
        assert_int_equal(p.n, 2);
        assert_int_equal(p.actions[0].index, 1);
        assert_int_equal(p.actions[0].kind, CORE_ACTION_DESTROY);
        assert_int_equal(p.actions[1].index, 2);
        assert_int_equal(p.actions[1].kind, CORE_ACTION_BOOT);
        core_plan_done(&p);
        assert_int_equal(core_plan(d, o, 0, 0, &p), 0);
        assert_int_equal(p.n, 0);
        core_plan_done(&p);
}

/* A request on a busy session waits CORE_INTENT_BUSY_WAIT_NS for it, then is refused -EBUSY;
 * a fork does not wait (it reads a complete checkpoint, not the VM). */
static void test_busy_wait(void **state)
{
        struct core_desired d = {.present = true,
                                 .state = RUN,
                                 .generation = 1,
                                 .intent = CORE_INTENT_ROLLBACK,
                                 .intent_since_ns = 1000};
        struct core_observed o = {.phase = P(STARTING), .busy = true, .observed_generation = 1};
        struct core_plan p = {0};

        (void)state;
        assert_int_equal(core_plan(&d, &o, 1, 1000 + CORE_INTENT_BUSY_WAIT_NS - 1, &p), 0);
        assert_int_equal(p.n, 0);
        core_plan_done(&p);
        assert_int_equal(core_plan(&d, &o, 1, 1000 + CORE_INTENT_BUSY_WAIT_NS, &p), 0);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.actions[0].kind, CORE_ACTION_REJECT);
        assert_int_equal(p.actions[0].error, -EBUSY);
        core_plan_done(&p);
        d.intent = CORE_INTENT_FORK;
        assert_int_equal(core_plan(&d, &o, 1, 1000, &p), 0);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.actions[0].kind, CORE_ACTION_FORK);
        core_plan_done(&p);
}

/* REJECT carries the errno the intent ends with. */
static void test_reject_errors(void **state)
{
        struct core_desired d = {
                .present = true, .state = RUN, .generation = 1, .intent = CORE_INTENT_SNAPSHOT};
        struct core_observed o = {.phase = P(STOPPED), .observed_generation = 1};
        struct core_plan p = {0};

        (void)state;
        assert_int_equal(core_plan(&d, &o, 1, 0, &p), 0);
        assert_int_equal(p.n, 2);
        assert_int_equal(p.actions[0].kind, CORE_ACTION_REJECT);
        assert_int_equal(p.actions[0].error, -EAGAIN);
        assert_int_equal(p.actions[1].kind, CORE_ACTION_BOOT);
        core_plan_done(&p);
        d.present = false;
        assert_int_equal(core_plan(&d, &o, 1, 0, &p), 0);
        assert_int_equal(p.n, 2);
        assert_int_equal(p.actions[0].error, -ENOENT);
        assert_true(core_action_serves_intent(p.actions[0].kind));
        assert_false(core_action_serves_intent(p.actions[1].kind));
        core_plan_done(&p);
}

static void test_strings(void **state)
{
        (void)state;
        for (int i = 0; i < _SESSION_PHASE_MAX; i++)
                assert_int_equal(session_phase_from_string(session_phase_to_string(i)), i);
        assert_string_equal(session_phase_to_string(SESSION_PHASE_RUNNING), "Running");
        assert_int_equal(session_phase_from_string("running"), _SESSION_PHASE_INVALID);
        assert_null(session_phase_to_string(_SESSION_PHASE_MAX));
        assert_string_equal(core_action_to_string(CORE_ACTION_DESTROY), "destroy");
        assert_string_equal(core_action_to_string(CORE_ACTION_DESTROY), "destroy");
        assert_string_equal(core_action_to_string(CORE_ACTION_FAIL), "fail");
        for (int i = 0; i < _CORE_ACTION_MAX; i++)
                assert_non_null(core_action_to_string(i));
        for (int i = 0; i < _CORE_INTENT_MAX; i++)
                assert_non_null(core_intent_to_string(i));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table),     cmocka_unit_test(test_many_sessions),
                cmocka_unit_test(test_busy_wait), cmocka_unit_test(test_reject_errors),
                cmocka_unit_test(test_strings),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
