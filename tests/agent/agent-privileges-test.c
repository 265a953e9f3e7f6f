/* SPDX-License-Identifier: MIT */
/* forkletd's least privilege: the kept set (what it holds and what it must never hold), its
 * names, and, as root, the real drop in a forked child (all five sets in /proc/self/status,
 * securebits, no way back, setuid still clearing capabilities, -EBUSY once threads run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/jail/jail.h"
#include "common/error.h"

#define BIT(c) (UINT64_C(1) << (c))

static void test_keep_mask(void **state)
{
        static const unsigned want[] = {
                CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,           CAP_KILL,      CAP_SETGID,
                CAP_SETUID, CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_NET_ADMIN, CAP_SYS_ADMIN,
        };
        /* never needed by any path of forkletd: a change here needs a reason in privileges.c */
        static const unsigned never[] = {
                CAP_DAC_READ_SEARCH,
                CAP_FSETID,
                CAP_LINUX_IMMUTABLE,
                CAP_NET_BROADCAST,
                CAP_NET_RAW,
                CAP_IPC_LOCK,
                CAP_IPC_OWNER,
                CAP_SYS_MODULE,
                CAP_SYS_RAWIO,
                CAP_SYS_CHROOT,
                CAP_SYS_PTRACE,
                CAP_SYS_PACCT,
                CAP_SYS_BOOT,
                CAP_SYS_NICE,
                CAP_SYS_RESOURCE,
                CAP_SYS_TIME,
                CAP_SYS_TTY_CONFIG,
                CAP_MKNOD,
                CAP_LEASE,
                CAP_AUDIT_WRITE,
                CAP_AUDIT_CONTROL,
                CAP_SETFCAP,
                CAP_MAC_OVERRIDE,
                CAP_MAC_ADMIN,
                CAP_SYSLOG,
                CAP_WAKE_ALARM,
                CAP_BLOCK_SUSPEND,
                CAP_AUDIT_READ,
                CAP_PERFMON,
                CAP_BPF,
                CAP_CHECKPOINT_RESTORE,
        };
        uint64_t m = agent_privileges_keep_mask(), expect = 0;

        (void)state;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                expect |= BIT(want[i]);
        assert_int_equal(m, expect);
        for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
                if (m & BIT(never[i]))
                        fail_msg("capability %u is kept", never[i]);
        /* every capability up to CAP_CHECKPOINT_RESTORE is in exactly one list */
        assert_int_equal(sizeof(want) / sizeof(want[0]) + sizeof(never) / sizeof(never[0]),
                         CAP_CHECKPOINT_RESTORE + 1);
}

static void test_names(void **state)
{
        char buf[512], tiny[12];

        (void)state;
        assert_int_equal(agent_privileges_names(0, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "");
        assert_true(agent_privileges_names(BIT(CAP_CHOWN) | BIT(CAP_SYS_ADMIN) | BIT(40), buf,
                                           sizeof(buf)) > 0);
        assert_string_equal(buf, "cap_chown,cap_sys_admin,cap_40");
        assert_true(agent_privileges_names(agent_privileges_keep_mask(), buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "cap_chown,cap_dac_override,cap_fowner,cap_kill,cap_setgid,"
                                 "cap_setuid,cap_setpcap,cap_net_bind_service,cap_net_admin,"
                                 "cap_sys_admin");
        assert_int_equal(agent_privileges_names(BIT(CAP_DAC_OVERRIDE), tiny, sizeof(tiny)),
                         -ENOBUFS);
}

/* The hex value of "KEY:\t..." in /proc/self/status. */
static uint64_t status_mask(const char *key)
{
        char line[256];
        size_t n = strlen(key);
        uint64_t v = UINT64_MAX;
        FILE *f = fopen("/proc/self/status", "re");

        if (!f)
                return UINT64_MAX;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, n) == 0 && line[n] == ':')
                        v = strtoull(line + n + 1, NULL, 16);
        fclose(f);
        return v;
}

static int raise_cap(unsigned cap)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2];

        if (syscall(SYS_capget, &hdr, data) < 0)
                return -errno;
        data[cap / 32].permitted |= 1u << (cap % 32);
        data[cap / 32].effective |= 1u << (cap % 32);
        return syscall(SYS_capset, &hdr, data) < 0 ? -errno : 0;
}

/* In a forked child (exit status = the failed check's number, 0 when all hold). */
static int child_drop(void)
{
        uint64_t keep = agent_privileges_keep_mask(), kept = 0;
        struct fk_error err = {0};
        int bits, st;
        pid_t pid;

        if (agent_privileges_drop(keep, &kept, &err) < 0) {
                fprintf(stderr, "drop: %s\n", err.msg);
                return 1;
        }
        if (kept != keep || status_mask("CapPrm") != keep || status_mask("CapEff") != keep ||
            status_mask("CapBnd") != keep || status_mask("CapInh") != 0 ||
            status_mask("CapAmb") != 0)
                return 2;
        bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
        if (bits < 0 || (bits & (SECBIT_KEEP_CAPS | SECBIT_NO_SETUID_FIXUP | SECBIT_NOROOT)) ||
            !(bits & SECBIT_NO_SETUID_FIXUP_LOCKED) || !(bits & SECBIT_KEEP_CAPS_LOCKED) ||
            !(bits & SECBIT_NO_CAP_AMBIENT_RAISE))
                return 3;
        if (raise_cap(CAP_SYS_MODULE) != -EPERM || prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == 0 ||
            prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0) == 0)
                return 4;
        /* the jail's path: a setuid() to another uid still clears every capability */
        pid = fork();
        if (pid == 0)
                _exit(syscall(SYS_setresuid, 65534, 65534, 65534) < 0 || status_mask("CapPrm") ||
                      status_mask("CapEff"));
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
                return 5;
        /* a second drop to a narrower set works and cannot widen it again */
        if (agent_privileges_drop(BIT(CAP_NET_ADMIN) | BIT(CAP_SETPCAP), &kept, &err) < 0 ||
            kept != (BIT(CAP_NET_ADMIN) | BIT(CAP_SETPCAP)) ||
            status_mask("CapBnd") != (BIT(CAP_NET_ADMIN) | BIT(CAP_SETPCAP)))
                return 6;
        if (agent_privileges_drop(keep, &kept, &err) < 0 || kept != status_mask("CapPrm") ||
            (kept & BIT(CAP_SYS_ADMIN)))
                return 7;
        return 0;
}

static void *sleeper(void *p)
{
        (void)p;
        pause();
        return NULL;
}

static int child_busy(void)
{
        struct fk_error err = {0};
        pthread_t th;

        if (pthread_create(&th, NULL, sleeper, NULL) != 0)
                return 1;
        if (agent_privileges_drop(agent_privileges_keep_mask(), NULL, &err) != -EBUSY ||
            !strstr(err.msg, "threads"))
                return 2;
        /* nothing was dropped */
        return status_mask("CapBnd") & BIT(CAP_SYS_MODULE) ? 0 : 3;
}

static void run_child(int (*fn)(void))
{
        int st;
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0)
                _exit(fn());
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st))
                fail_msg("check %d failed in the child", WEXITSTATUS(st));
}

static void test_drop_real(void **state)
{
        (void)state;
        /* a real drop needs every kept capability to begin with (root, full bounding set) */
        if (geteuid() != 0 ||
            (status_mask("CapPrm") & agent_privileges_keep_mask()) !=
                    agent_privileges_keep_mask() ||
            !(status_mask("CapBnd") & BIT(CAP_SYS_MODULE)))
                skip();
        run_child(child_drop);
        run_child(child_busy);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_keep_mask),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_drop_real),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
