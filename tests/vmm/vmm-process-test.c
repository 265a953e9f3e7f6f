/* SPDX-License-Identifier: MIT */
/* Process supervision with real (non-QEMU) processes: exit codes, signals, fd hygiene,
 * setsid, the pre-exec hook, exec failures through the CLOEXEC pipe, adopt, and vmm_stop's
 * signal escalation. No root needed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

struct ctx {
        char dir[64];
        char log[96];
};

static int setup(void **state)
{
        struct ctx *c = calloc(1, sizeof(*c));

        assert_non_null(c);
        strcpy(c->dir, "/tmp/vmm-process-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(c->log, sizeof(c->log), "%s/log", c->dir);
        *state = c;
        return 0;
}

static int teardown(void **state)
{
        struct ctx *c = *state;

        fk_rm_rf(c->dir);
        free(c);
        return 0;
}

static struct vmm_process *spawn_sh(struct ctx *c, const char *script)
{
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)script, NULL};
        struct vmm_process *p = NULL;
        struct fk_error err = {};

        if (vmm_process_spawn(argv, c->log, NULL, NULL, &p, &err) < 0)
                fail_msg("spawn: %s", err.msg);
        return p;
}

static char *read_log(struct ctx *c)
{
        char *buf = NULL;

        assert_int_equal(fk_read_file(c->log, 1 << 20, &buf, NULL), 0);
        return buf;
}

static void test_exit_code(void **state)
{
        struct ctx *c = *state;
        struct vmm_process *p = spawn_sh(c, "echo out; echo err >&2; exit 3");
        cleanup_free char *log = NULL;
        const char *reason = NULL;
        int status = -1;

        assert_true(vmm_process_pid(p) > 0);
        assert_true(vmm_process_start_time(p) > 0);
        assert_true(vmm_process_fd(p) >= 0);
        assert_int_equal(vmm_process_wait(p, 5000), 1);
        assert_int_equal(vmm_process_poll(p, &status, &reason), 1);
        assert_int_equal(status, 3);
        assert_string_equal(reason, "exited with status 3");
        /* Polling again returns the same answer (the child was reaped once). */
        assert_int_equal(vmm_process_poll(p, &status, &reason), 1);
        assert_int_equal(status, 3);
        assert_int_equal(vmm_process_kill(p, SIGTERM), -ESRCH);
        log = read_log(c);
        assert_string_equal(log, "out\nerr\n");
        vmm_process_free(p);
}

/* stdin is /dev/null, only 0-2 are inherited, and the child leads its own session. */
static void test_fds_and_session(void **state)
{
        struct ctx *c = *state;
        cleanup_free char *log = NULL, *want = NULL;
        struct vmm_process *p;
        int leak = open("/dev/null", O_RDONLY); /* deliberately without O_CLOEXEC */

        assert_true(leak >= 0);
        assert_true(dup2(leak, 57) == 57);
        /* ls runs as a child of the shell and lists the shell's fds, not its own. */
        p = spawn_sh(c, "echo fds:; ls /proc/$$/fd; echo stdin: $(readlink /proc/$$/fd/0); "
                        "read a b c d e sid rest < /proc/$$/stat; echo sid: $sid pid: $$");
        assert_int_equal(vmm_process_wait(p, 5000), 1);
        log = read_log(c);
        assert_true(fk_asprintf(&want, "fds:\n0\n1\n2\nstdin: /dev/null\nsid: %d pid: %d\n",
                                (int)vmm_process_pid(p), (int)vmm_process_pid(p)) > 0);
        assert_string_equal(log, want);
        close(leak);
        close(57);
        vmm_process_free(p);
}

static void test_kill_signal(void **state)
{
        struct ctx *c = *state;
        struct vmm_process *p;
        const char *reason = NULL;
        int status = -1;
        sigset_t set, old;
        uint64_t t0;

        /* A blocked signal in the parent (forkletd uses signalfd) must not leak into QEMU. */
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        assert_int_equal(sigprocmask(SIG_BLOCK, &set, &old), 0);
        p = spawn_sh(c, "exec sleep 30");
        assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);

        assert_int_equal(vmm_process_poll(p, &status, &reason), 0);
        assert_int_equal(vmm_process_wait(p, 0), 0);
        t0 = fk_now_mono_ns();
        assert_int_equal(vmm_process_wait(p, 100), 0);
        assert_true(fk_now_mono_ns() - t0 >= 90 * 1000000ULL);
        assert_int_equal(vmm_process_kill(p, SIGTERM), 0);
        assert_int_equal(vmm_process_wait(p, 5000), 1);
        assert_int_equal(vmm_process_poll(p, &status, &reason), 1);
        assert_int_equal(status, 128 + SIGTERM);
        assert_string_equal(reason, "killed by signal 15");
        vmm_process_free(p);
}

static void test_missing_binary(void **state)
{
        struct ctx *c = *state;
        char *argv[] = {(char *)"forklet-no-such-qemu", NULL};
        char *abs[] = {(char *)"/nonexistent/qemu-system-x86_64", NULL};
        struct vmm_process *p = NULL;
        struct fk_error err = {};

        assert_int_equal(vmm_process_spawn(argv, c->log, NULL, NULL, &p, &err), -ENOENT);
        assert_null(p);
        assert_non_null(strstr(err.msg, "forklet-no-such-qemu"));
        assert_non_null(strstr(err.msg, "in PATH"));
        assert_int_equal(vmm_process_spawn(abs, NULL, NULL, NULL, &p, &err), -ENOENT);
        assert_null(p);
}

/* Fails inside the child, after fork: reported through the CLOEXEC pipe. */
static void test_exec_failure(void **state)
{
        struct ctx *c = *state;
        char path[128];
        char *argv[] = {path, NULL};
        struct vmm_process *p = NULL;
        struct fk_error err = {};

        snprintf(path, sizeof(path), "%s/not-an-elf", c->dir);
        assert_int_equal(fk_write_file_atomic(path,
                                              "\x7f"
                                              "ELF garbage",
                                              12, 0755),
                         0);
        assert_int_equal(vmm_process_spawn(argv, c->log, NULL, NULL, &p, &err), -ENOEXEC);
        assert_null(p);
        assert_non_null(strstr(err.msg, "exec failed: Exec format error"));
}

static int hook_chdir(void *userdata)
{
        return chdir(userdata) < 0 ? -errno : 0;
}

static int hook_fail(void *userdata)
{
        (void)userdata;
        return -EPERM;
}

/* Names its step as the jail does, then fails there after a measurable pause. */
static int hook_step_fail(void *userdata)
{
        struct timespec ts = {0, 20 * 1000 * 1000};

        (void)userdata;
        vmm_pre_exec_step("jail: tap", "tap0");
        nanosleep(&ts, NULL);
        return -EBUSY;
}

static int hook_sleep(void *userdata)
{
        struct timespec ts = {0, 30 * 1000 * 1000};

        (void)userdata;
        nanosleep(&ts, NULL);
        return 0;
}

static void test_pre_exec(void **state)
{
        struct ctx *c = *state;
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)"pwd", NULL};
        cleanup_free char *log = NULL, *want = NULL;
        struct vmm_process *p = NULL;
        struct fk_error err = {};

        assert_int_equal(vmm_process_spawn(argv, c->log, hook_chdir, c->dir, &p, &err), 0);
        assert_int_equal(vmm_process_wait(p, 5000), 1);
        vmm_process_free(p);
        log = read_log(c);
        assert_true(fk_asprintf(&want, "%s\n", c->dir) > 0);
        assert_string_equal(log, want);

        p = NULL;
        assert_int_equal(vmm_process_spawn(argv, c->log, hook_fail, NULL, &p, &err), -EPERM);
        assert_null(p);
        assert_non_null(strstr(err.msg, "pre-exec hook failed"));
        /* no step named: no "at" */
        assert_null(strstr(err.msg, "failed at"));

        assert_int_equal(vmm_process_spawn(argv, c->log, hook_step_fail, NULL, &p, &err), -EBUSY);
        assert_null(p);
        assert_non_null(strstr(err.msg, "pre-exec hook failed at jail: tap tap0: "));
        assert_non_null(strstr(err.msg, strerror(EBUSY)));

        /* the hook's time, measured in the child, reaches the parent */
        assert_int_equal(vmm_process_spawn(argv, c->log, hook_sleep, NULL, &p, &err), 0);
        assert_true(vmm_process_pre_exec_ns(p) >= 30ull * 1000 * 1000);
        assert_true(vmm_process_pre_exec_ns(p) < 5000ull * 1000 * 1000);
        assert_int_equal(vmm_process_wait(p, 5000), 1);
        vmm_process_free(p);
        p = NULL;
        assert_int_equal(vmm_process_spawn(argv, c->log, NULL, NULL, &p, &err), 0);
        assert_int_equal(vmm_process_pre_exec_ns(p), 0);
        assert_int_equal(vmm_process_wait(p, 5000), 1);
        vmm_process_free(p);
}

static void test_adopt(void **state)
{
        struct ctx *c = *state;
        struct vmm_process *p = spawn_sh(c, "exec sleep 30"), *a = NULL;
        const char *reason = NULL;
        int status = 0;

        assert_int_equal(vmm_process_adopt(vmm_process_pid(p), vmm_process_start_time(p) + 1, &a),
                         -ESRCH);
        assert_null(a);
        assert_int_equal(vmm_process_adopt(vmm_process_pid(p), vmm_process_start_time(p), &a), 0);
        assert_int_equal(vmm_process_pid(a), vmm_process_pid(p));
        assert_int_equal(vmm_process_start_time(a), vmm_process_start_time(p));
        assert_int_equal(vmm_process_poll(a, &status, &reason), 0);
        assert_int_equal(vmm_process_kill(a, SIGKILL), 0);
        /* The adopted handle sees the exit through its pidfd without reaping. */
        assert_int_equal(vmm_process_wait(a, 5000), 1);
        assert_int_equal(vmm_process_poll(a, &status, &reason), 1);
        assert_int_equal(status, -1);
        assert_non_null(strstr(reason, "not our child"));
        /* The real parent still gets the status. */
        assert_int_equal(vmm_process_wait(p, 5000), 1);
        assert_int_equal(vmm_process_poll(p, &status, &reason), 1);
        assert_int_equal(status, 128 + SIGKILL);
        assert_string_equal(reason, "killed by signal 9");
        vmm_process_free(a);
        vmm_process_free(p);
        /* A pid above pid_max never exists. */
        assert_int_equal(vmm_process_adopt(0x3ffffff0, 1, &a), -ESRCH);
}

/* No agent, no QMP: SIGTERM is ignored, so vmm_stop must escalate to SIGKILL. */
static void test_stop_escalates(void **state)
{
        struct ctx *c = *state;
        struct vmm_process *p = spawn_sh(c, "trap '' TERM; echo ready; while :; do :; done");
        cleanup_free char *log = NULL;
        const char *reason = NULL;
        int status = 0, r;
        uint64_t t0;

        /* Wait until the trap is installed. */
        for (int i = 0; i < 500; i++) {
                free(log);
                log = read_log(c);
                if (strstr(log, "ready"))
                        break;
                usleep(10000);
        }
        assert_non_null(strstr(log, "ready"));
        t0 = fk_now_mono_ns();
        r = vmm_stop(p, NULL, NULL, 200);
        assert_int_equal(r, 0);
        assert_true(fk_now_mono_ns() - t0 >= 190 * 1000000ULL);
        assert_int_equal(vmm_process_poll(p, &status, &reason), 1);
        assert_string_equal(reason, "killed by signal 9");
        /* Stopping twice is a no-op. */
        assert_int_equal(vmm_stop(p, NULL, NULL, 200), 0);
        vmm_process_free(p);

        p = spawn_sh(c, "exec sleep 30");
        assert_int_equal(vmm_stop(p, NULL, NULL, 2000), 0);
        assert_int_equal(vmm_process_poll(p, &status, &reason), 1);
        assert_string_equal(reason, "killed by signal 15");
        vmm_process_free(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_exit_code, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fds_and_session, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kill_signal, setup, teardown),
                cmocka_unit_test_setup_teardown(test_missing_binary, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pre_exec, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_escalates, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
