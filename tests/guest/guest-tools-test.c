/* SPDX-License-Identifier: MIT */
/* forklet-tools: durations and signal names, wget's -T taken out of every argument shape,
 * pgrep/pkill arguments, the /proc reader and matcher over a fake tree (comm with spaces and
 * parentheses, -f/-x/-v/-n/-o/-P), then the real binary on the host: pgrep finds a child by
 * its command line, pkill ends it, timeout exits 124/127/the command's status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/guest/tools/tools.h"

static void test_duration(void **state)
{
        long long ms;

        (void)state;
        assert_int_equal(gt_parse_duration("5", &ms), 0);
        assert_int_equal(ms, 5000);
        assert_int_equal(gt_parse_duration("0.25s", &ms), 0);
        assert_int_equal(ms, 250);
        assert_int_equal(gt_parse_duration("2m", &ms), 0);
        assert_int_equal(ms, 120000);
        assert_int_equal(gt_parse_duration("1.5h", &ms), 0);
        assert_int_equal(ms, 5400000);
        assert_int_equal(gt_parse_duration("1d", &ms), 0);
        assert_int_equal(ms, 86400000);
        assert_int_equal(gt_parse_duration("0", &ms), 0);
        assert_int_equal(ms, 0);
        for (const char *const *bad = (const char *const[]){"", "-1", "+1", " 1", "1x", "1ss",
                                                            "inf", "nan", "s", "1e30", NULL};
             *bad; bad++)
                assert_int_equal(gt_parse_duration(*bad, &ms), -EINVAL);
}

static void test_signal(void **state)
{
        int sig;

        (void)state;
        assert_int_equal(gt_parse_signal("TERM", &sig), 0);
        assert_int_equal(sig, SIGTERM);
        assert_int_equal(gt_parse_signal("sigkill", &sig), 0);
        assert_int_equal(sig, SIGKILL);
        assert_int_equal(gt_parse_signal("9", &sig), 0);
        assert_int_equal(sig, 9);
        assert_int_equal(gt_parse_signal("USR1", &sig), 0);
        assert_int_equal(sig, SIGUSR1);
        assert_int_equal(gt_parse_signal("NOPE", &sig), -EINVAL);
        assert_int_equal(gt_parse_signal("0", &sig), -EINVAL);
        assert_int_equal(gt_parse_signal("999", &sig), -EINVAL);
        assert_string_equal(gt_signal_name(SIGHUP), "HUP");
}

/* wget ARGS... -> the busybox arguments joined by spaces, and the timeout */
static void expect_wget(const char *const *in, const char *want, long long want_ms)
{
        char *argv[16], joined[256] = "";
        struct gt_wget_args a;
        char err[128];
        int argc = 0;

        argv[argc++] = (char *)"wget";
        while (*in)
                argv[argc++] = (char *)*in++;
        argv[argc] = NULL;
        assert_int_equal(gt_wget_args_parse(argc, argv, &a, err, sizeof(err)), 0);
        for (size_t i = 0; a.argv[i]; i++) {
                strcat(joined, i ? " " : "");
                strcat(joined, a.argv[i]);
        }
        assert_string_equal(joined, want);
        assert_int_equal(a.timeout_ms, want_ms);
        gt_wget_args_done(&a);
}

static void test_wget_args(void **state)
{
        (void)state;
        expect_wget((const char *[]){"-q", "-O-", "http://h/", NULL}, "wget -q -O- http://h/", -1);
        expect_wget((const char *[]){"-T", "5", "-q", "http://h/", NULL}, "wget -q http://h/",
                    5000);
        expect_wget((const char *[]){"-T5", "http://h/", NULL}, "wget http://h/", 5000);
        expect_wget((const char *[]){"-qT", "2", "-O-", "u", NULL}, "wget -q -O- u", 2000);
        expect_wget((const char *[]){"-qST3", "u", NULL}, "wget -qS u", 3000);
        expect_wget((const char *[]){"--timeout=7", "u", NULL}, "wget u", 7000);
        expect_wget((const char *[]){"--timeout", "7", "u", NULL}, "wget u", 7000);
        expect_wget((const char *[]){"u", "-T", "1", NULL}, "wget u", 1000);
        /* values that look like -T are values */
        expect_wget((const char *[]){"-O", "-T5", "u", NULL}, "wget -O -T5 u", -1);
        expect_wget((const char *[]){"-qO", "-T5", "u", NULL}, "wget -qO -T5 u", -1);
        expect_wget((const char *[]){"--header", "-T5", "u", NULL}, "wget --header -T5 u", -1);
        expect_wget((const char *[]){"-U-T", "u", NULL}, "wget -U-T u", -1);
        expect_wget((const char *[]){"--", "-T5", NULL}, "wget -- -T5", -1);
        expect_wget((const char *[]){"-T", "0", "u", NULL}, "wget u", 0);
}

static void test_wget_args_bad(void **state)
{
        char *argv[] = {(char *)"wget", (char *)"-T", (char *)"soon", (char *)"u", NULL};
        char *argv2[] = {(char *)"wget", (char *)"u", (char *)"-T", NULL};
        struct gt_wget_args a;
        char err[128];

        (void)state;
        assert_int_equal(gt_wget_args_parse(4, argv, &a, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "'soon'"));
        assert_int_equal(gt_wget_args_parse(3, argv2, &a, err, sizeof(err)), -EINVAL);
}

static void test_pgrep_parse(void **state)
{
        char *a1[] = {(char *)"pkill", (char *)"-KILL", (char *)"-f", (char *)"sleep 9", NULL};
        char *a2[] = {(char *)"pgrep", (char *)"-x", (char *)"-P",
                      (char *)"1,7",   (char *)"sh", NULL};
        char *a3[] = {(char *)"pgrep", (char *)"a", (char *)"b", NULL};
        char *a4[] = {(char *)"pgrep", (char *)"-n", (char *)"-o", (char *)"x", NULL};
        char *a5[] = {(char *)"pgrep", NULL};
        char *a6[] = {(char *)"pkill", (char *)"-s", (char *)"BOGUS", (char *)"x", NULL};
        char *a7[] = {(char *)"pgrep", (char *)"sleep", (char *)"-l", NULL};
        struct gt_pgrep_opts o;
        char err[128];

        (void)state;
        assert_int_equal(gt_pgrep_parse(4, a1, true, &o, err, sizeof(err)), 0);
        assert_int_equal(o.signal, SIGKILL);
        assert_true(o.full);
        assert_string_equal(o.pattern, "sleep 9");
        assert_int_equal(gt_pgrep_parse(5, a2, false, &o, err, sizeof(err)), 0);
        assert_true(o.exact);
        assert_int_equal(o.n_ppids, 2);
        assert_int_equal(o.ppids[1], 7);
        assert_int_equal(gt_pgrep_parse(3, a3, false, &o, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "one pattern"));
        assert_int_equal(gt_pgrep_parse(4, a4, false, &o, err, sizeof(err)), -EINVAL);
        assert_int_equal(gt_pgrep_parse(1, a5, false, &o, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "PATTERN"));
        assert_int_equal(gt_pgrep_parse(4, a6, true, &o, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "BOGUS"));
        assert_int_equal(gt_pgrep_parse(3, a7, false, &o, err, sizeof(err)), 0);
        assert_true(o.list_name);
        assert_string_equal(o.pattern, "sleep");
}

static void fake_proc(const char *root, int pid, const char *comm, int ppid,
                      unsigned long long start, const char *cmdline, size_t cmdlen)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%d", root, pid);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/%d/stat", root, pid);
        assert_non_null(f = fopen(path, "w"));
        fprintf(f, "%d (%s) S %d 1 1 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 1 0 %llu 1000 100\n", pid,
                comm, ppid, start);
        fclose(f);
        snprintf(path, sizeof(path), "%s/%d/cmdline", root, pid);
        assert_non_null(f = fopen(path, "w"));
        fwrite(cmdline, 1, cmdlen, f);
        fclose(f);
}

/* Runs pgrep with ARGS over the fake tree; returns the exit status, output in out. */
static int run_fake(int procfd, char **args, int n, char *out, size_t outlen)
{
        struct gt_pgrep_opts o;
        char err[128];
        FILE *f;
        int r;

        memset(out, 0, outlen);
        f = fmemopen(out, outlen, "w");
        assert_non_null(f);
        assert_int_equal(gt_pgrep_parse(n, args, false, &o, err, sizeof(err)), 0);
        r = gt_pgrep_run(&o, false, procfd, f, stderr);
        fclose(f);
        return r;
}

static char root[] = "/tmp/guest-tools-test.XXXXXX";

static int fake_tree_setup(void **state)
{
        (void)state;
        return mkdtemp(root) ? 0 : -1;
}

static int fake_tree_teardown(void **state)
{
        char cmd[600];

        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        return system(cmd) == 0 ? 0 : -1;
}

static void test_pgrep_fake_proc(void **state)
{
        char out[512], cmd[600];
        char *a1[] = {(char *)"pgrep", (char *)"sleep", NULL};
        char *a2[] = {(char *)"pgrep", (char *)"-f", (char *)"sleep 30", NULL};
        char *a3[] = {(char *)"pgrep", (char *)"-l", (char *)"-x", (char *)"my [(]odd[)] name",
                      NULL};
        char *a4[] = {(char *)"pgrep", (char *)"-n", (char *)"sleep", NULL};
        char *a5[] = {(char *)"pgrep", (char *)"-o", (char *)"-d,", (char *)"sleep", NULL};
        char *a6[] = {(char *)"pgrep", (char *)"-P", (char *)"10", NULL};
        char *a7[] = {(char *)"pgrep", (char *)"-c", (char *)"-v", (char *)"sleep", NULL};
        char *a8[] = {(char *)"pgrep", (char *)"-a", (char *)"kworker", NULL};
        char *a9[] = {(char *)"pgrep", (char *)"-x", (char *)"slee", NULL};
        struct gt_proc p;
        int procfd;

        (void)state;
        fake_proc(root, 10, "sh", 1, 100, "sh\0-c\0x\0", 9);
        fake_proc(root, 11, "sleep", 10, 200,
                  "sleep\0"
                  "30\0",
                  9);
        fake_proc(root, 12, "sleep", 10, 300,
                  "sleep\0"
                  "60\0",
                  9);
        fake_proc(root, 13, "my (odd) name", 1, 50, "odd\0", 4);
        fake_proc(root, 14, "kworker/0:1", 2, 10, "", 0);
        snprintf(cmd, sizeof(cmd), "%s/self", root);
        assert_int_equal(mkdir(cmd, 0755), 0); /* not a PID: skipped */
        procfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(procfd >= 0);

        assert_int_equal(gt_proc_read(procfd, 13, &p), 0);
        assert_string_equal(p.comm, "my (odd) name");
        assert_int_equal(p.ppid, 1);
        assert_int_equal(p.start, 50);
        assert_string_equal(p.cmdline, "odd");
        free(p.cmdline);
        assert_int_equal(gt_proc_read(procfd, 99, &p), -ENOENT);

        assert_int_equal(run_fake(procfd, a1, 2, out, sizeof(out)), 0);
        assert_true(strstr(out, "11\n") && strstr(out, "12\n") && !strstr(out, "10\n"));
        assert_int_equal(run_fake(procfd, a2, 3, out, sizeof(out)), 0);
        assert_string_equal(out, "11\n");
        assert_int_equal(run_fake(procfd, a3, 4, out, sizeof(out)), 0);
        assert_string_equal(out, "13 my (odd) name\n");
        assert_int_equal(run_fake(procfd, a4, 3, out, sizeof(out)), 0);
        assert_string_equal(out, "12\n");
        assert_int_equal(run_fake(procfd, a5, 4, out, sizeof(out)), 0);
        assert_string_equal(out, "11,");
        assert_int_equal(run_fake(procfd, a6, 3, out, sizeof(out)), 0);
        assert_true(strstr(out, "11\n") && strstr(out, "12\n") && !strstr(out, "13"));
        assert_int_equal(run_fake(procfd, a7, 4, out, sizeof(out)), 0);
        assert_string_equal(out, "3\n");
        assert_int_equal(run_fake(procfd, a8, 3, out, sizeof(out)), 0);
        assert_string_equal(out, "14 kworker/0:1\n"); /* no cmdline: the name */
        assert_int_equal(run_fake(procfd, a9, 3, out, sizeof(out)), 1);
        assert_string_equal(out, "");
        close(procfd);
}

/* The built binary, by one of its names: forklet-tools NAME ARGS... */
static int tool(const char *shell_args)
{
        const char *bin = getenv("FORKLET_BINARY_DIR");
        char cmd[1024];
        int st;

        snprintf(cmd, sizeof(cmd), "%s/vmm/guest/tools/forklet-tools %s", bin, shell_args);
        st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_real_binary(void **state)
{
        char args[256];
        pid_t child;
        int st;

        (void)state;
        if (!getenv("FORKLET_BINARY_DIR"))
                skip();
        child = fork();
        if (child == 0) {
                execlp("sleep", "sleep", "37.123", NULL);
                _exit(127);
        }
        assert_true(child > 0);
        for (int i = 0; i < 50 && tool("pgrep -f 'sleep 37[.]123' >/dev/null") != 0; i++)
                usleep(20000);
        snprintf(args, sizeof(args), "pgrep -f 'sleep 37[.]123' | grep -qx %d", (int)child);
        assert_int_equal(tool(args), 0);
        assert_int_equal(tool("pgrep -x no-such-process-name"), 1);
        assert_int_equal(tool("pgrep '('  2>/dev/null"), 2);
        assert_int_equal(tool("pkill -USR1 -f 'sleep 37[.]123'"), 0);
        assert_int_equal(waitpid(child, &st, 0), child);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1);

        assert_int_equal(tool("timeout 0.3 sleep 10"), 124);
        assert_int_equal(tool("timeout 5 sh -c 'exit 7'"), 7);
        assert_int_equal(tool("timeout 1 /no/such/command 2>/dev/null"), 127);
        assert_int_equal(tool("timeout soon true 2>/dev/null"), 125);
        assert_int_equal(tool("timeout -s KILL 0.3 sleep 10"), 137);
        assert_int_equal(tool("timeout -k 0.3 0.3 sh -c 'trap \"\" TERM; sleep 10'"), 137);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_duration),
                cmocka_unit_test(test_signal),
                cmocka_unit_test(test_wget_args),
                cmocka_unit_test(test_wget_args_bad),
                cmocka_unit_test(test_pgrep_parse),
                cmocka_unit_test_setup_teardown(test_pgrep_fake_proc, fake_tree_setup,
                                                fake_tree_teardown),
                cmocka_unit_test(test_real_binary),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
