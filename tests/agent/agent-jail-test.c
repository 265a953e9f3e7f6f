/* SPDX-License-Identifier: MIT */
/* The jail's bookkeeping without a QEMU: the mount table (paths refused, files inside bound
 * directories folded in), its root's checks, and the grant ledger (a POSIX ACL entry per
 * grant, revoked under a directory and all at once when the session goes). */
#include "agent/jail/jail.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#define ACL_XATTR "system.posix_acl_access"
#define TEST_UID  4242424u

struct fx {
        char dir[64];
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        snprintf(f->dir, sizeof(f->dir), "/tmp/fk-jail-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        (void)fk_rm_rf(f->dir);
        free(f);
        return 0;
}

static char *path_in(const struct fx *f, const char *name)
{
        char *p = NULL;

        assert_true(fk_asprintf(&p, "%s/%s", f->dir, name) > 0);
        return p;
}

static void touch(const char *path)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        close(fd);
}

static void test_bind_refuses_unplain_paths(void **state)
{
        struct agent_jail j = {0};

        (void)state;
        assert_int_equal(agent_jail_bind(&j, "usr", 0), -EINVAL);
        assert_int_equal(agent_jail_bind(&j, "/usr/../etc", 0), -EINVAL);
        assert_int_equal(agent_jail_bind(&j, "/usr/./bin", 0), -EINVAL);
        assert_int_equal(agent_jail_bind(&j, "/usr/..", 0), -EINVAL);
        assert_int_equal(agent_jail_bind(&j, "/nonexistent-fk-jail", 0), -ENOENT);
        assert_int_equal(j.n_binds, 0);
        agent_jail_done(&j);
}

static void test_bind_folds_files_into_dirs(void **state)
{
        struct fx *f = *state;
        struct agent_jail j = {0};
        char *sub = path_in(f, "run"), *inner, *twin = path_in(f, "runx");

        assert_int_equal(mkdir(sub, 0700), 0);
        assert_int_equal(mkdir(twin, 0700), 0);
        inner = path_in(f, "run/mem.ram");
        touch(inner);
        assert_int_equal(agent_jail_bind(&j, sub, 0), 0);
        assert_int_equal(agent_jail_bind(&j, inner, AGENT_JAIL_RW), 0);
        /* folded in, and the directory became writable */
        assert_int_equal(j.n_binds, 1);
        assert_true(j.binds[0].dir);
        assert_true(j.binds[0].flags & AGENT_JAIL_RW);
        /* a sibling sharing the prefix is not inside it */
        assert_int_equal(agent_jail_bind(&j, twin, 0), 0);
        assert_int_equal(j.n_binds, 2);
        assert_false(j.binds[1].flags & AGENT_JAIL_RW);
        agent_jail_done(&j);
        assert_int_equal(j.n_binds, 0);
        free(sub);
        free(inner);
        free(twin);
}

static void test_bind_table_full(void **state)
{
        struct fx *f = *state;
        struct agent_jail j = {0};
        char *file = path_in(f, "x");

        touch(file);
        /* distinct paths for the same file: "/tmp/fk-jail-X/x", "//tmp/...", ... are plain */
        for (unsigned i = 0; i < AGENT_JAIL_BINDS_MAX; i++) {
                char p[PATH_MAX];

                snprintf(p, sizeof(p), "%.*s%s", (int)i % 40 + 1,
                         "////////////////////////////////////////", file + 1);
                assert_int_equal(agent_jail_bind(&j, p, 0), 0);
        }
        assert_int_equal(agent_jail_bind(&j, file, 0), -E2BIG);
        agent_jail_done(&j);
        free(file);
}

static void test_mounts_init_checks_root(void **state)
{
        struct fx *f = *state;
        struct agent_jail j = {0};
        char *root = path_in(f, "jail"), *link = path_in(f, "jail-link"), longp[PATH_MAX];
        struct stat st;

        assert_int_equal(agent_jail_mounts_init(&j, "relative/jail"), -ENAMETOOLONG);
        memset(longp, 'a', sizeof(longp) - 1);
        longp[0] = '/';
        longp[sizeof(longp) - 1] = '\0';
        assert_int_equal(agent_jail_mounts_init(&j, longp), -ENAMETOOLONG);
        assert_int_equal(symlink("/tmp", link), 0);
        assert_int_equal(agent_jail_mounts_init(&j, link), -EPERM);
        agent_jail_done(&j);
        assert_int_equal(agent_jail_mounts_init(&j, root), 0);
        assert_int_equal(stat(root, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
        assert_string_equal(j.root, root);
        assert_true(j.n_binds >= 5); /* /usr, the device nodes, ... */
        assert_string_equal(j.binds[0].path, "/usr");
        assert_false(j.binds[0].flags & AGENT_JAIL_RW);
        agent_jail_done(&j);
        free(root);
        free(link);
}

/* True when path's ACL names uid. */
static bool acl_names(const char *path, uid_t uid)
{
        unsigned char buf[4096];
        ssize_t n = getxattr(path, ACL_XATTR, buf, sizeof(buf));

        for (ssize_t off = 4; n > 0 && off + 8 <= n; off += 8) {
                uint16_t tag;
                uint32_t id;

                memcpy(&tag, buf + off, 2);
                memcpy(&id, buf + off + 4, 4);
                if (tag == 0x02 && id == uid)
                        return true;
        }
        return false;
}

static void test_ledger_grant_revoke_forget(void **state)
{
        struct fx *f = *state;
        char *sd = path_in(f, "state"), *uidf = path_in(f, "state/jail-uid"),
             *origin = path_in(f, "state/origin"), *ram = path_in(f, "state/origin/ram"),
             *disk = path_in(f, "disk.qcow2"), *ledger = path_in(f, "state/jail-grants");
        char *text = NULL;
        int r;

        assert_int_equal(mkdir(sd, 0700), 0);
        assert_int_equal(mkdir(origin, 0700), 0);
        touch(ram);
        touch(disk);
        assert_int_equal(fk_write_file_atomic(uidf, "4242424\n", 8, 0600), 0);
        r = agent_jail_grant_logged(sd, disk, TEST_UID, 6);
        if (r == -EOPNOTSUPP)
                skip(); /* /tmp without POSIX ACLs */
        assert_int_equal(r, 0);
        assert_int_equal(agent_jail_grant_logged(sd, ram, TEST_UID, 6), 0);
        assert_int_equal(agent_jail_grant_logged(sd, ram, TEST_UID, 4), 0); /* listed once */
        assert_true(acl_names(disk, TEST_UID));
        assert_true(acl_names(ram, TEST_UID));
        assert_int_equal(fk_read_file(ledger, 4096, &text, NULL), 0);
        assert_non_null(strstr(text, disk));
        assert_non_null(strstr(text, ram));
        assert_null(strstr(strstr(text, ram) + 1, ram));
        free(text);
        /* the fork runs: what it reached through origin/ is taken back, the rest stays */
        assert_int_equal(agent_jail_revoke_under(sd, origin), 0);
        assert_false(acl_names(ram, TEST_UID));
        assert_true(acl_names(disk, TEST_UID));
        /* the session goes: everything, and the ACL folds back into the mode */
        assert_int_equal(agent_jail_forget(sd), 0);
        assert_false(acl_names(disk, TEST_UID));
        assert_true(getxattr(disk, ACL_XATTR, NULL, 0) < 0);
        assert_int_equal(access(ledger, F_OK), -1);
        /* a session never jailed has nothing to forget */
        assert_int_equal(unlink(uidf), 0);
        assert_int_equal(agent_jail_forget(sd), 0);
        free(sd);
        free(uidf);
        free(origin);
        free(ram);
        free(disk);
        free(ledger);
}

/* Two processes granting and revoking each its own uid on one file (two forkletds on a host,
 * each with its own uid range) keep each other's entries: each checks its own after every
 * change. The read, modify, write of each ACL change is under an flock on the file; without
 * it, 2 x 400 changes on 2 cores lost entries in every run. */
static int toggle_own_uid(const char *path, uid_t uid, int rounds)
{
        int lost = 0;

        for (int i = 0; i < rounds; i++) {
                if (agent_jail_grant(path, uid, 6) < 0 || !acl_names(path, uid))
                        lost++;
                if (agent_jail_revoke(path, uid) < 0 || acl_names(path, uid))
                        lost++;
        }
        return lost;
}

static void test_acl_two_processes(void **state)
{
        struct fx *f = *state;
        char *file = path_in(f, "shared.ram");
        int r, status, lost;
        pid_t pid;

        touch(file);
        r = agent_jail_grant(file, TEST_UID + 2, 4); /* an entry neither of them touches */
        if (r == -EOPNOTSUPP)
                skip(); /* /tmp without POSIX ACLs */
        assert_int_equal(r, 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(FK_MIN(toggle_own_uid(file, TEST_UID + 1, 400), 100));
        lost = toggle_own_uid(file, TEST_UID, 400);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(lost, 0);
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_true(acl_names(file, TEST_UID + 2));
        free(file);
}

/* The ledger holds whole lines only: a torn last line is dropped before the next entry, and a
 * write cut short (here by RLIMIT_FSIZE, as ENOSPC would) is taken back, with no grant made. */
static void test_ledger_whole_lines(void **state)
{
        struct fx *f = *state;
        char *sd = path_in(f, "state"), *uidf = path_in(f, "state/jail-uid"),
             *a = path_in(f, "a.qcow2"), *b = path_in(f, "b.qcow2"),
             *ledger = path_in(f, "state/jail-grants");
        char *text = NULL, *want = NULL, *real_a = NULL, *real_b = NULL;
        struct rlimit old, lim;
        struct stat st;
        size_t size = 0;
        int r;

        assert_int_equal(mkdir(sd, 0700), 0);
        touch(a);
        touch(b);
        real_a = realpath(a, NULL);
        real_b = realpath(b, NULL);
        assert_non_null(real_a);
        assert_non_null(real_b);
        assert_int_equal(fk_write_file_atomic(uidf, "4242424\n", 8, 0600), 0);
        assert_int_equal(fk_write_file_atomic(ledger, "/gone/torn", 10, 0600), 0);
        r = agent_jail_grant_logged(sd, a, TEST_UID, 6);
        if (r == -EOPNOTSUPP)
                skip(); /* /tmp without POSIX ACLs */
        assert_int_equal(r, 0);
        assert_int_equal(fk_read_file(ledger, 4096, &text, &size), 0);
        assert_int_equal(asprintf(&want, "%s\n", real_a) > 0, 1);
        assert_string_equal(text, want);
        free(text);
        /* room for 3 more bytes only: the entry for b is cut, then truncated away */
        assert_int_equal(stat(ledger, &st), 0);
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
        signal(SIGXFSZ, SIG_IGN);
        lim = (struct rlimit){.rlim_cur = (rlim_t)st.st_size + 3, .rlim_max = old.rlim_max};
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        r = agent_jail_grant_logged(sd, b, TEST_UID, 6);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        signal(SIGXFSZ, SIG_DFL);
        assert_true(r < 0);
        assert_false(acl_names(b, TEST_UID));
        assert_int_equal(fk_read_file(ledger, 4096, &text, NULL), 0);
        assert_string_equal(text, want);
        free(text);
        assert_int_equal(agent_jail_forget(sd), 0);
        assert_false(acl_names(a, TEST_UID));
        free(want);
        free(real_a);
        free(real_b);
        free(sd);
        free(uidf);
        free(a);
        free(b);
        free(ledger);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bind_refuses_unplain_paths),
                cmocka_unit_test_setup_teardown(test_bind_folds_files_into_dirs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bind_table_full, setup, teardown),
                cmocka_unit_test_setup_teardown(test_mounts_init_checks_root, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ledger_grant_revoke_forget, setup, teardown),
                cmocka_unit_test_setup_teardown(test_acl_two_processes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ledger_whole_lines, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
