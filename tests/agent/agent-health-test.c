/* SPDX-License-Identifier: MIT */
/* Guest health over the real REST server with the fake VM backend: a panic ends the VM (kill,
 * not poweroff) and restartPolicy OnFailure boots it again; failed liveness probes in a row make
 * it GuestUnresponsive; OOM kills are events; a disk-error stop is Paused + DiskPressure and
 * continues once the disk has space (auto) or on resume (manual); a QEMU exit says why. */
#include "tests/lib/agent-harness.h"

#define HELLO "/api/v1alpha1/namespaces/default/sessions/hello"

static const char restart_json[] =
        "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\",\"metadata\":{\"name\":"
        "\"hello\"},\"spec\":{\"sizeClass\":\"small\",\"image\":\"minimal\",\"restartPolicy\":"
        "\"OnFailure\"}}";

/* The fake VM of a session (NULL without one). */
static struct fake_vm *vm_of(struct env *e)
{
        struct agent_session *s;
        struct fake_vm *v;

        pthread_mutex_lock(&e->d->lock);
        s = agent_daemon_find(e->d, "default", "hello");
        v = s && s->vm ? s->vm->vm : NULL;
        pthread_mutex_unlock(&e->d->lock);
        return v;
}

static json_t *status_of(struct env *e)
{
        json_t *j = NULL, *st;

        assert_int_equal(req(e, "GET", HELLO, NULL, &j), 200);
        st = json_incref(json_object_get(j, "status"));
        json_decref(j);
        return st;
}

/* "STATUS REASON" of condition type in the session's status (static buffer). */
static const char *cond(struct env *e, const char *type)
{
        static char buf[128];
        json_t *st = status_of(e), *c;
        size_t i;

        snprintf(buf, sizeof(buf), "none");
        json_array_foreach(json_object_get(st, "conditions"), i, c)
        {
                if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
                        snprintf(buf, sizeof(buf), "%s %s",
                                 json_string_value(json_object_get(c, "status")),
                                 json_string_value(json_object_get(c, "reason")));
        }
        json_decref(st);
        return buf;
}

static const char *phase(struct env *e)
{
        static char buf[32];
        json_t *st = status_of(e);

        snprintf(buf, sizeof(buf), "%s", json_string_value(json_object_get(st, "phase")));
        json_decref(st);
        return buf;
}

static void boot(struct env *e, const char *json)
{
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", json, NULL), 201);
        reconcile(e);
        assert_string_equal(phase(e), "Running");
        assert_non_null(vm_of(e));
}

static bool metrics_have(struct env *e, const char *line)
{
        cleanup_free char *text = NULL;

        assert_int_equal(agent_daemon_metrics_text(e->d, &text), 0);
        return strstr(text, line) != NULL;
}

static void test_verdict(void **state)
{
        struct agent_vm_health h = {0};
        char msg[512];

        (void)state;
        assert_null(agent_health_verdict(&h, 2, 3, "x", msg, sizeof(msg)));
        assert_string_equal(agent_health_verdict(&h, 3, 3, "ping: late", msg, sizeof(msg)),
                            "GuestUnresponsive");
        assert_string_equal(msg, "the guest agent did not answer 3 liveness probes in a row (ping: "
                                 "late)");
        assert_null(agent_health_verdict(&h, 30, 0, "x", msg, sizeof(msg))); /* probes off */
        h.panics = 1;
        snprintf(h.panic, sizeof(h.panic), "Kernel panic - not syncing: sysrq triggered crash");
        assert_string_equal(agent_health_verdict(&h, 0, 3, NULL, msg, sizeof(msg)),
                            "GuestPanicked");
        assert_string_equal(
                msg, "the guest kernel panicked: Kernel panic - not syncing: sysrq triggered "
                     "crash");
        /* a panic after OOM kills, or one that says memory, is an OOM */
        h.oom_kills = 2;
        snprintf(h.oom, sizeof(h.oom), "Out of memory: Killed process 87 (forklet-agent)");
        assert_string_equal(agent_health_verdict(&h, 0, 3, NULL, msg, sizeof(msg)), "GuestOOM");
        assert_non_null(strstr(msg, "killed 2 processes, the last: Out of memory: Killed process "
                                    "87 (forklet-agent)"));
        h.oom_kills = 0;
        snprintf(h.panic, sizeof(h.panic),
                 "Kernel panic - not syncing: System is deadlocked on "
                 "memory");
        assert_string_equal(agent_health_verdict(&h, 0, 3, NULL, msg, sizeof(msg)), "GuestOOM");
}

static void test_panic_restarts(void **state)
{
        struct env *e = *state;
        struct fk_error err = {0};
        struct fake_vm *v;
        json_t *st, *f;
        agent_metrics_reset();

        boot(e, restart_json);
        v = vm_of(e);
        v->health.panics = 1;
        snprintf(v->health.panic, sizeof(v->health.panic), "Kernel panic - not syncing: test");
        for (unsigned i = 0; i < 12; i++)
                snprintf(v->health.tail[i % AGENT_CONSOLE_TAIL], AGENT_CONSOLE_LINE, "line %u", i);
        v->health.n_tail = AGENT_CONSOLE_TAIL;
        reconcile(e);
        /* ended without asking the dead guest to power off */
        assert_int_equal(atomic_load(&e->fake.kills), 1);
        assert_int_equal(atomic_load(&e->fake.stops), 0);
        assert_string_equal(phase(e), "Failed");
        assert_string_equal(cond(e, "Ready"), "False GuestPanicked");
        assert_int_equal(agent_daemon_exec_check(e->d, "default", "hello", &err), -EAGAIN);
        assert_non_null(strstr(err.msg, "is Failed, not Running (GuestPanicked: the guest kernel "
                                        "panicked: Kernel panic - not syncing: test)"));
        st = status_of(e);
        f = json_object_get(st, "lastFailure");
        assert_string_equal(json_string_value(json_object_get(f, "reason")), "GuestPanicked");
        assert_int_equal(json_array_size(json_object_get(f, "consoleTail")), AGENT_CONSOLE_TAIL);
        json_decref(st);
        assert_true(metrics_have(e, "forklet_guest_failures_total{reason=\"GuestPanicked\"} 1\n"));
        /* OnFailure: a new VM after the back-off, with a clean bill of health */
        fake_clock_advance(&e->clock, 2);
        reconcile(e);
        assert_string_equal(phase(e), "Running");
        assert_int_equal(atomic_load(&e->fake.boots), 2);
        reconcile(e);
        assert_string_equal(phase(e), "Running");
        st = status_of(e);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(st, "lastFailure"), "reason")),
                "GuestPanicked");
        json_decref(st);
}

static void test_unresponsive(void **state)
{
        struct env *e = *state;
        struct fake_vm *v;
        agent_metrics_reset();

        e->cfg->liveness_failure_threshold = 3;
        boot(e, hello_json);
        v = vm_of(e);
        atomic_store(&v->ping_fail, true);
        /* two failures, an answer, two failures: never three in a row */
        for (int i = 0; i < 5; i++) {
                atomic_store(&v->ping_fail, i != 2);
                agent_health_probe_round(e->d);
                agent_health_probe_round(e->d); /* not due again yet: no probe */
                fake_clock_advance(&e->clock, e->cfg->liveness_interval_s);
                reconcile(e);
                assert_string_equal(phase(e), "Running");
        }
        assert_int_equal(atomic_load(&v->pings), 5);
        agent_health_probe_round(e->d);
        reconcile(e);
        assert_string_equal(phase(e), "Failed");
        assert_string_equal(cond(e, "Ready"), "False GuestUnresponsive");
        assert_int_equal(atomic_load(&e->fake.kills), 1);
        assert_true(
                metrics_have(e, "forklet_guest_failures_total{reason=\"GuestUnresponsive\"} 1"));
}

static void test_oom_event(void **state)
{
        struct env *e = *state;
        struct fake_vm *v;
        json_t *st, *ev;
        unsigned n = 0;
        size_t i;
        agent_metrics_reset();

        boot(e, hello_json);
        v = vm_of(e);
        v->health.oom_kills = 2;
        snprintf(v->health.oom, sizeof(v->health.oom), "Out of memory: Killed process 95 (tail)");
        reconcile(e);
        reconcile(e); /* the same kills again: no second event */
        assert_string_equal(phase(e), "Running");
        st = status_of(e);
        json_array_foreach(json_object_get(st, "events"), i, ev)
        {
                if (strcmp(json_string_value(json_object_get(ev, "reason")), "GuestOOM") != 0)
                        continue;
                n++;
                assert_string_equal(json_string_value(json_object_get(ev, "type")), "Warning");
                assert_non_null(strstr(json_string_value(json_object_get(ev, "message")),
                                       "Killed process 95 (tail) (2 so far"));
        }
        json_decref(st);
        assert_int_equal(n, 1);
        assert_true(metrics_have(e, "forklet_guest_oom_kills_total 2\n"));
}

/* Stopped by ENOSPC: Paused, DiskPressure, exec refused at once; continues when space is back. */
static void test_disk_pressure(void **state)
{
        struct env *e = *state;
        struct fk_error err = {0};
        struct fake_vm *v;
        agent_metrics_reset();

        boot(e, hello_json);
        v = vm_of(e);
        v->health.io_stopped = true;
        v->health.io_stops = 1;
        v->health.io_nospace = true;
        snprintf(v->health.io_device, sizeof(v->health.io_device), "disk0");
        snprintf(v->health.io_reason, sizeof(v->health.io_reason), "No space left on device");
        v->disk_free = 1 << 20;
        reconcile(e);
        assert_string_equal(phase(e), "Paused");
        assert_string_equal(cond(e, "Ready"), "False DiskIOError");
        assert_string_equal(cond(e, "DiskPressure"), "True NoSpace");
        assert_int_equal(agent_daemon_exec_check(e->d, "default", "hello", &err), -EAGAIN);
        assert_non_null(strstr(err.msg, "is Paused: QEMU stopped the VM: a write to disk0 failed: "
                                        "No space left on device"));
        assert_true(metrics_have(e, "forklet_disk_io_error_stops_total 1\n"));
        /* 1 MiB free of the 64 wanted: stays */
        fake_clock_advance(&e->clock, 3);
        reconcile(e);
        reconcile(e);
        assert_int_equal(atomic_load(&v->resumes), 0);
        assert_string_equal(phase(e), "Paused");
        /* space back: the next check lets the planner continue it */
        v->disk_free = 100 << 20;
        fake_clock_advance(&e->clock, 3);
        reconcile(e);
        reconcile(e);
        assert_int_equal(atomic_load(&v->resumes), 1);
        assert_string_equal(phase(e), "Running");
        assert_string_equal(cond(e, "DiskPressure"), "False Resumed");
        assert_string_equal(cond(e, "Ready"), "True Running");
        assert_int_equal(agent_daemon_exec_check(e->d, "default", "hello", &err), 0);
        /* a resume that meets the error at once is stopped again and counted */
        v->health.io_stopped = true;
        v->health.io_stops = 2;
        reconcile(e);
        assert_string_equal(phase(e), "Paused");
        assert_true(metrics_have(e, "forklet_disk_io_error_stops_total 2\n"));
}

/* diskPressure.resume manual: only `forklet resume` continues it. */
static void test_disk_pressure_manual(void **state)
{
        struct env *e = *state;
        struct fake_vm *v;

        e->cfg->disk_pressure_auto_resume = false;
        boot(e, hello_json);
        v = vm_of(e);
        v->health.io_stopped = true;
        v->health.io_stops = 1;
        v->disk_free = 1ull << 30;
        reconcile(e);
        assert_string_equal(cond(e, "DiskPressure"), "True IOError");
        fake_clock_advance(&e->clock, 10);
        reconcile(e);
        assert_int_equal(atomic_load(&v->resumes), 0);
        assert_int_equal(req(e, "POST", HELLO "/resume", NULL, NULL), 200);
        reconcile(e);
        reconcile(e);
        assert_int_equal(atomic_load(&v->resumes), 1);
        assert_string_equal(phase(e), "Running");
        assert_string_equal(cond(e, "DiskPressure"), "False Resumed");
}

/* A QEMU that exits says why: the console's OOM panic, or plainly. */
static void test_exit_explained(void **state)
{
        struct env *e = *state;
        struct fake_vm *v;
        json_t *st;
        const char *msg;
        agent_metrics_reset();

        boot(e, hello_json);
        v = vm_of(e);
        v->exit_status = 0;
        v->health.panics = 1;
        v->health.oom_kills = 3;
        snprintf(v->health.panic, sizeof(v->health.panic),
                 "Kernel panic - not syncing: System is deadlocked on memory");
        snprintf(v->health.oom, sizeof(v->health.oom),
                 "Out of memory: Killed process 87 (forklet-agent)");
        fake_vm_crash(v);
        reconcile(e);
        assert_string_equal(phase(e), "Failed");
        assert_string_equal(cond(e, "Ready"), "False GuestOOM");
        st = status_of(e);
        msg = json_string_value(json_object_get(json_object_get(st, "lastFailure"), "message"));
        assert_non_null(strstr(msg, "the guest ran out of memory: Kernel panic - not syncing: "
                                    "System is deadlocked on memory"));
        assert_non_null(strstr(msg, "QEMU (pid 1000) exited with status 0"));
        json_decref(st);
        assert_true(metrics_have(e, "forklet_guest_failures_total{reason=\"GuestOOM\"} 1\n"));
}

static void test_exit_plain(void **state)
{
        struct env *e = *state;
        struct fake_vm *v;
        json_t *st;

        boot(e, hello_json);
        v = vm_of(e);
        assert_non_null(v);
        v->exit_status = 137; /* SIGKILL, no console words */
        fake_vm_crash(v);
        reconcile(e);
        assert_string_equal(cond(e, "Ready"), "False VMExited");
        st = status_of(e);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(st, "lastFailure"), "message")),
                "QEMU (pid 1000) exited: killed by SIGKILL (status 137)");
        json_decref(st);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_verdict),
                cmocka_unit_test_setup_teardown(test_panic_restarts, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unresponsive, setup, teardown),
                cmocka_unit_test_setup_teardown(test_oom_event, setup, teardown),
                cmocka_unit_test_setup_teardown(test_disk_pressure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_disk_pressure_manual, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exit_explained, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exit_plain, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
