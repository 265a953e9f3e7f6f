/* SPDX-License-Identifier: MIT */
/* The node's filesystems without root: mountinfo lines (escapes, optional fields, malformed
 * ones), statfs magics (memory or disk), the start-log text, and a real directory's mount;
 * a process in its exit. */
#include "agent/runfs/runfs.h"
#include "common/util.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static void test_mountinfo_line(void **state)
{
        struct agent_mount m;

        (void)state;
        assert_int_equal(agent_mountinfo_parse("29 1 254:1 / / rw,relatime shared:1 - ext4 "
                                               "/dev/vda1 rw,errors=remount-ro\n",
                                               &m),
                         0);
        assert_int_equal(m.major, 254);
        assert_int_equal(m.minor, 1);
        assert_string_equal(m.mount_point, "/");
        assert_string_equal(m.fstype, "ext4");
        assert_string_equal(m.source, "/dev/vda1");
        /* no optional field, escaped space and backslash in the mount point */
        assert_int_equal(agent_mountinfo_parse("47 26 0:41 / /tmp/a\\040b\\134c rw - tmpfs "
                                               "forklet-ram rw,size=100k,mode=700",
                                               &m),
                         0);
        assert_string_equal(m.mount_point, "/tmp/a b\\c");
        assert_string_equal(m.fstype, "tmpfs");
        assert_string_equal(m.source, "forklet-ram");
        /* several optional fields */
        assert_int_equal(agent_mountinfo_parse("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 "
                                               "shared:7 propagate_from:2 - xfs /dev/sdb rw",
                                               &m),
                         0);
        assert_string_equal(m.mount_point, "/mnt2");
        assert_string_equal(m.fstype, "xfs");
}

static void test_mountinfo_malformed(void **state)
{
        struct agent_mount m = {.major = 7};

        (void)state;
        assert_int_equal(agent_mountinfo_parse("", &m), -EINVAL);
        assert_int_equal(agent_mountinfo_parse("29 1 254:1 / / rw shared:1 ext4 /dev/vda", &m),
                         -EINVAL); /* no separator */
        assert_int_equal(agent_mountinfo_parse("29 1 254:1 / / rw - ext4", &m), -EINVAL);
        assert_int_equal(agent_mountinfo_parse("29 1 x / / rw - ext4 /dev/vda rw", &m), -EINVAL);
        assert_int_equal(m.major, 7); /* untouched on failure */
}

static void test_magics(void **state)
{
        (void)state;
        assert_true(agent_fs_magic_is_memory(0x01021994));       /* tmpfs */
        assert_true(agent_fs_magic_is_memory((long)0x858458f6)); /* ramfs */
        assert_true(agent_fs_magic_is_memory((long)0x958458f6)); /* hugetlbfs */
        assert_false(agent_fs_magic_is_memory(0xef53));          /* ext4 */
        assert_false(agent_fs_magic_is_memory(0x58465342));      /* xfs */
        assert_false(agent_fs_magic_is_memory(0x12345678));      /* unknown: not memory */
        assert_string_equal(agent_fs_magic_name(0x01021994), "tmpfs");
        assert_string_equal(agent_fs_magic_name((long)0x9123683e), "btrfs");
        assert_null(agent_fs_magic_name(0x12345678));
}

static void test_format(void **state)
{
        struct agent_fs_info disk = {
                .size = (uint64_t)80 << 30,
                .avail = (uint64_t)53 << 30 | (uint64_t)200 << 20,
                .mount = {.mount_point = "/", .fstype = "ext4", .source = "/dev/vda1"},
        };
        struct agent_fs_info mem = {
                .memory = true,
                .size = (uint64_t)800 << 20,
                .avail = (uint64_t)700 << 20,
                .mount = {.mount_point = "/run", .fstype = "tmpfs", .source = "tmpfs"},
        };
        struct agent_fs_info unknown = {.mount = {.fstype = "0x1234"}};
        char buf[512];

        (void)state;
        agent_fs_format(&disk, buf, sizeof(buf));
        assert_string_equal(buf, "ext4 (disk, /dev/vda1 on /, 53.2 GiB free of 80.0 GiB)");
        agent_fs_format(&mem, buf, sizeof(buf));
        assert_string_equal(buf, "tmpfs (memory, tmpfs on /run, 700 MiB free of 800 MiB)");
        agent_fs_format(&unknown, buf, sizeof(buf));
        assert_string_equal(buf, "0x1234 (disk, 0 MiB free of 0 MiB)");
}

/* A directory of this host: its mount is found (a mount point above it, a type named). */
static void test_describe_real_dir(void **state)
{
        char dir[] = "/tmp/fk-runfs-XXXXXX";
        struct agent_fs_info fi;
        size_t n;

        (void)state;
        assert_non_null(mkdtemp(dir));
        assert_int_equal(agent_fs_describe(dir, &fi), 0);
        n = strlen(fi.mount.mount_point);
        assert_true(n > 0);
        assert_true(n == 1 || (strncmp(dir, fi.mount.mount_point, n) == 0 && dir[n] == '/'));
        assert_true(fi.mount.fstype[0] != '\0');
        assert_true(fi.size >= fi.avail);
        assert_int_equal(rmdir(dir), 0);
        assert_int_equal(agent_fs_describe(dir, &fi), -ENOENT);
        assert_int_equal(agent_fs_describe("/proc/self", &fi), 0);
        assert_string_equal(fi.mount.fstype, "proc");
        assert_string_equal(fi.mount.mount_point, "/proc");
        assert_false(fi.memory);
}

/* A zombie is in its exit (PF_EXITING), a sleeping child is not, nor a pid that is gone; a
 * command name with ") " in it does not fool the parse. */
static void test_pid_exiting(void **state)
{
        pid_t sleeper, zombie;
        int st;

        (void)state;
        sleeper = fork();
        assert_true(sleeper >= 0);
        if (sleeper == 0) {
                prctl(PR_SET_NAME, "a) b 1 2 3");
                pause();
                _exit(0);
        }
        zombie = fork();
        assert_true(zombie >= 0);
        if (zombie == 0)
                _exit(0);
        /* until the kernel made it a zombie */
        for (int i = 0; i < 200 && !agent_runfs_pid_exiting(zombie); i++)
                usleep(5000);
        assert_true(agent_runfs_pid_exiting(zombie));
        usleep(20000); /* the sleeper renamed itself */
        assert_false(agent_runfs_pid_exiting(sleeper));
        assert_false(agent_runfs_pid_exiting(getpid()));
        kill(sleeper, SIGKILL);
        assert_int_equal(waitpid(sleeper, &st, 0), sleeper);
        assert_int_equal(waitpid(zombie, &st, 0), zombie);
        assert_false(agent_runfs_pid_exiting(zombie)); /* reaped: no /proc entry */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mountinfo_line),
                cmocka_unit_test(test_mountinfo_malformed),
                cmocka_unit_test(test_magics),
                cmocka_unit_test(test_format),
                cmocka_unit_test(test_describe_real_dir),
                cmocka_unit_test(test_pid_exiting),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
