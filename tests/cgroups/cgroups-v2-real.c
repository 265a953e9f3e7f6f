/* SPDX-License-Identifier: MIT */
/* Integration test of the cgroup v2 backend on the host's real cgroup2 mount, whatever
 * controllers it offers (here: none of ours): limits refused by name, join before exec and
 * CLONE_INTO_CGROUP, freeze/thaw, cgroup.kill, stats, list/orphans, destroy. Root; 77 skips. */
#include "cgroups/cgroups.h"
#include "common/error.h"
#include "common/util.h"

#include <dirent.h>
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define PREFIX "forklet-v2it-"

static struct cg_manager *M;
static struct cg_options OPTS;
static char MNT[256], PARENT[64], PARENT_DIR[512];
/* Every child this test forked: teardown kills those a failed test left outside a cgroup. */
static pid_t CHILDREN[16];
static size_t N_CHILDREN;

static pid_t track(pid_t pid)
{
        if (pid > 0 && N_CHILDREN < sizeof(CHILDREN) / sizeof(CHILDREN[0]))
                CHILDREN[N_CHILDREN++] = pid;
        return pid;
}

/* Absolute path of file in session name (name NULL: the parent), no trailing newline. */
static char *read_cg(const char *name, const char *file)
{
        char path[1024], *s = NULL;
        size_t n;

        snprintf(path, sizeof(path), "%s%s%s/%s", PARENT_DIR, name ? "/" : "", name ? name : "",
                 file);
        if (fk_read_file(path, 1 << 20, &s, &n) < 0)
                return NULL;
        while (n > 0 && s[n - 1] == '\n')
                s[--n] = '\0';
        return s;
}

/* Value of "key N" in a keyed file; fails the test when absent. */
static uint64_t keyed(const char *name, const char *file, const char *key)
{
        char *s = read_cg(name, file), want[64], *p;
        uint64_t v;

        if (!s)
                fail_msg("%s/%s/%s: %s", PARENT_DIR, name ? name : ".", file, strerror(errno));
        snprintf(want, sizeof(want), "%s ", key);
        p = strstr(s, want);
        if (!p || (p != s && p[-1] != '\n'))
                fail_msg("%s: no \"%s\" in \"%s\"", file, key, s);
        v = strtoull(p + strlen(want), NULL, 10);
        free(s);
        return v;
}

static bool cg_exists(const char *name)
{
        char path[1024];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", PARENT_DIR, name);
        return stat(path, &st) == 0;
}

/* Does the mount root offer ctrl in cgroup.controllers? */
static bool mount_has(const char *ctrl)
{
        char path[512], *s = NULL, *save = NULL;
        bool found = false;

        snprintf(path, sizeof(path), "%s/cgroup.controllers", MNT);
        if (fk_read_file(path, 4096, &s, NULL) < 0)
                return false;
        for (char *t = strtok_r(s, " \n", &save); t && !found; t = strtok_r(NULL, " \n", &save))
                found = strcmp(t, ctrl) == 0;
        free(s);
        return found;
}

static void create(const char *name, int want)
{
        struct cg_limits l = {0};
        struct fk_error err = {0};
        int r = cg_create(M, name, &l, &err);

        if (r != want)
                fail_msg("cg_create %s: %d (want %d): %s", name, r, want, err.msg);
}

/* /proc/PID/cgroup must show "0::<path of name>". */
static void assert_in_cgroup(pid_t pid, const char *name)
{
        char path[64], want[700], *pc = NULL, *rel = NULL;

        assert_int_equal(cg_manager_cgroup_path(M, name, &rel), 0);
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        assert_int_equal(fk_read_file(path, 1 << 16, &pc, NULL), 0);
        snprintf(want, sizeof(want), "0::%s\n", rel);
        if (!strstr(pc, want))
                fail_msg("/proc/%d/cgroup lacks \"%s\":\n%s", (int)pid, want, pc);
        free(pc);
        free(rel);
}

/* fork + the pre-exec join + exec of a shell loop printing a line every 20 ms to a pipe;
 * *out gets the non-blocking read end. */
static pid_t spawn_counter(const char *name, int *out)
{
        const char *argv[] = {"/bin/sh", "-c", "while :; do echo x; sleep 0.02; done", NULL};
        struct fk_error err = {0};
        struct cg_join *j = NULL;
        int p[2];
        pid_t pid;

        if (cg_prepare_join(M, name, &j, &err) < 0)
                fail_msg("prepare_join: %s", err.msg);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (cg_join_pre_exec(j) < 0 || dup2(p[1], 1) < 0)
                        _exit(126);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        cg_join_free(j);
        track(pid);
        close(p[1]);
        assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
        *out = p[0];
        return pid;
}

/* Bytes the counter wrote during ms milliseconds (after draining what was pending). */
static size_t progress(int fd, unsigned ms)
{
        char buf[4096];
        size_t total = 0;
        ssize_t k;

        while (read(fd, buf, sizeof(buf)) > 0)
                ;
        usleep(ms * 1000);
        while ((k = read(fd, buf, sizeof(buf))) > 0)
                total += (size_t)k;
        return total;
}

static void kill_reap(const char *name, pid_t pid)
{
        struct fk_error err = {0};
        int status;

        if (cg_kill_all(M, name, &err) < 0)
                fail_msg("kill_all %s: %s", name, err.msg);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        assert_int_equal(kill(pid, 0), -1);
        assert_int_equal(keyed(name, "cgroup.events", "populated"), 0);
}

static void destroy(const char *name)
{
        struct fk_error err = {0};

        if (cg_destroy(M, name, &err) < 0)
                fail_msg("destroy %s: %s", name, err.msg);
        assert_false(cg_exists(name));
}

/* A limit whose controller the mount lacks fails by name and leaves nothing; one it has is
 * written. */
static void check_limit(const char *ctrl, const char *file, const struct cg_limits *l,
                        const char *want)
{
        char name[32], needle[64];
        struct fk_error err = {0};
        char *v;

        snprintf(name, sizeof(name), "lim-%d", (int)getpid());
        if (!mount_has(ctrl)) {
                assert_int_equal(cg_create(M, name, l, &err), -EOPNOTSUPP);
                snprintf(needle, sizeof(needle), "/%s/%s: the %s controller", name, file, ctrl);
                if (!strstr(err.msg, needle))
                        fail_msg("error lacks \"%s\": %s", needle, err.msg);
                assert_false(cg_exists(name));
                /* a live update of an existing cgroup refuses too, and keeps the cgroup */
                create(name, 0);
                assert_int_equal(cg_update_limits(M, name, l, &err), -EOPNOTSUPP);
                assert_non_null(strstr(err.msg, needle));
                assert_true(cg_exists(name));
        } else {
                if (cg_create(M, name, l, &err) != 0)
                        fail_msg("create with a %s limit: %s", ctrl, err.msg);
                v = read_cg(name, file);
                assert_non_null(v);
                assert_string_equal(v, want);
                free(v);
        }
        destroy(name);
}

static void test_limits_need_their_controller(void **state)
{
        (void)state;
        check_limit("cpu", "cpu.max", &(struct cg_limits){.cpu_cores = 0.5}, "50000 100000");
        check_limit("cpu", "cpu.weight", &(struct cg_limits){.cpu_weight = 200}, "200");
        check_limit("memory", "memory.max", &(struct cg_limits){.memory_max = 64 << 20},
                    "67108864");
        check_limit("memory", "memory.high", &(struct cg_limits){.memory_high = 32 << 20},
                    "33554432");
        check_limit("pids", "pids.max", &(struct cg_limits){.pids_max = 50}, "50");
}

static void test_join_freeze_kill(void **state)
{
        char name[32];
        struct fk_error err = {0};
        struct cg_stats s;
        pid_t *pids = NULL, pid;
        size_t n = 0;
        int out;

        (void)state;
        snprintf(name, sizeof(name), "s-%d", (int)getpid());
        create(name, 0);
        create(name, 1); /* adopted */
        pid = spawn_counter(name, &out);
        for (int i = 0; i < 200 && progress(out, 10) == 0; i++)
                ; /* the shell may still be starting under load */
        assert_in_cgroup(pid, name);
        assert_int_equal(cg_pids(M, name, &pids, &n, &err), 0);
        assert_true(n >= 1);
        assert_int_equal(pids[0], pid);
        free(pids);
        assert_int_equal(keyed(name, "cgroup.events", "populated"), 1);
        assert_true(keyed(NULL, "cgroup.stat", "nr_descendants") >= 1);

        if (cg_freeze(M, name, &err) < 0)
                fail_msg("freeze: %s", err.msg);
        assert_int_equal(keyed(name, "cgroup.events", "frozen"), 1);
        assert_int_equal(progress(out, 400), 0);
        if (cg_thaw(M, name, &err) < 0)
                fail_msg("thaw: %s", err.msg);
        assert_int_equal(keyed(name, "cgroup.events", "frozen"), 0);
        for (int i = 0; i < 10 && progress(out, 200) == 0; i++)
                ;
        assert_true(progress(out, 400) > 0);

        assert_int_equal(cg_stats(M, name, &s, &err), 0);
        assert_true(s.cpu_usage_ns > 0);
        assert_int_equal(s.has_memory, mount_has("memory"));
        assert_int_equal(s.has_pids, mount_has("pids"));
        if (s.has_pids)
                assert_true(s.pids_current >= 1);
        if (s.has_memory)
                assert_true(s.memory_current > 0);

        assert_int_equal(cg_destroy(M, name, &err), -EBUSY);
        assert_true(cg_exists(name));
        /* deleting a paused session: kill while frozen */
        assert_int_equal(cg_freeze(M, name, &err), 0);
        kill_reap(name, pid);
        close(out);
        destroy(name);
}

struct clone_args_v2 {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
                set_tid_size, cgroup;
};

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

static void test_clone_into_cgroup(void **state)
{
        const char *argv[] = {"/bin/sleep", "60", NULL};
        struct clone_args_v2 a = {.exit_signal = SIGCHLD};
        struct fk_error err = {0};
        struct cg_join *j = NULL;
        char name[32];
        long pid;

        (void)state;
        snprintf(name, sizeof(name), "clone-%d", (int)getpid());
        create(name, 0);
        assert_int_equal(cg_prepare_join(M, name, &j, &err), 0);
        assert_true(cg_join_cgroup_fd(j) >= 0);
        a.flags = CLONE_INTO_CGROUP;
        a.cgroup = (uint64_t)cg_join_cgroup_fd(j);
        pid = syscall(SYS_clone3, &a, sizeof(a));
        if (pid == 0) {
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        track((pid_t)pid);
        cg_join_free(j);
        if (pid < 0)
                fail_msg("clone3(CLONE_INTO_CGROUP): %s", strerror(errno));
        /* in the cgroup from its first instruction: no join needed */
        assert_in_cgroup((pid_t)pid, name);
        kill_reap(name, (pid_t)pid);
        destroy(name);
}

/* A cgroup left by a previous daemon (still holding a process) is listed and cleaned. */
static void test_list_orphans(void **state)
{
        const char *argv[] = {"/bin/sleep", "60", NULL};
        char orphan[32], empty[32], **names = NULL;
        struct fk_error err = {0};
        struct cg_manager *old = M;
        pid_t pid, *pids = NULL;
        size_t n = 0;
        int seen = 0;

        (void)state;
        snprintf(orphan, sizeof(orphan), "orphan-%d", (int)getpid());
        snprintf(empty, sizeof(empty), "empty-%d", (int)getpid());
        create(orphan, 0);
        create(empty, 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        track(pid);
        if (cg_attach_pid(M, orphan, pid, &err) < 0)
                fail_msg("attach: %s", err.msg);
        /* the "previous daemon" goes away; a new one opens the same parent */
        if (cg_manager_new(&OPTS, &M, &err) < 0)
                fail_msg("reopen: %s", err.msg);
        cg_manager_free(old);
        assert_int_equal(cg_list(M, &names, &err), 0);
        for (size_t i = 0; names[i]; i++)
                seen += strcmp(names[i], orphan) == 0 || strcmp(names[i], empty) == 0;
        assert_int_equal(seen, 2);
        fk_strv_free(names);
        assert_int_equal(cg_pids(M, orphan, &pids, &n, &err), 0);
        assert_int_equal(n, 1);
        assert_int_equal(pids[0], pid);
        free(pids);
        assert_int_equal(cg_manager_remove_parent(M, &err), -EBUSY);
        kill_reap(orphan, pid);
        destroy(orphan);
        /* a paused session whose QEMU already exited: freeze, kill and destroy an empty one */
        if (cg_freeze(M, empty, &err) < 0)
                fail_msg("freeze empty: %s", err.msg);
        assert_int_equal(keyed(empty, "cgroup.events", "frozen"), 1);
        assert_int_equal(cg_kill_all(M, empty, &err), 0);
        destroy(empty);
        assert_int_equal(cg_destroy(M, empty, &err), 0); /* already gone */
        assert_int_equal(cg_list(M, &names, &err), 0);
        for (size_t i = 0; names[i]; i++)
                if (strcmp(names[i], orphan) == 0 || strcmp(names[i], empty) == 0)
                        fail_msg("%s still listed after destroy", names[i]);
        fk_strv_free(names);
}

/* Without partial_controllers a mount lacking cpu, memory or pids is refused by name, and
 * the refusal creates nothing. */
static void test_strict_names_missing_controllers(void **state)
{
        struct cg_options o = OPTS;
        struct cg_manager *m = NULL;
        struct fk_error err = {0};
        char parent[80], dir[600];
        struct stat st;
        int r;

        (void)state;
        snprintf(parent, sizeof(parent), "%s/strict", PARENT);
        snprintf(dir, sizeof(dir), "%s/strict", PARENT_DIR);
        o.parent = parent;
        o.partial_controllers = false;
        r = cg_manager_new(&o, &m, &err);
        if (mount_has("cpu") && mount_has("memory") && mount_has("pids")) {
                if (r < 0)
                        fail_msg("strict open: %s", err.msg);
                assert_int_equal(cg_manager_remove_parent(m, &err), 0);
                cg_manager_free(m);
                return;
        }
        assert_int_equal(r, -EOPNOTSUPP);
        assert_non_null(strstr(err.msg, "cgroup.controllers"));
        for (size_t i = 0; i < 3; i++) {
                const char *c = (const char *[]){"cpu", "memory", "pids"}[i];
                char needle[32];

                snprintf(needle, sizeof(needle), "%s", c);
                if (!mount_has(c) && !strstr(strstr(err.msg, "lacks"), needle))
                        fail_msg("error does not name %s: %s", c, err.msg);
        }
        assert_int_equal(stat(dir, &st), -1);
}

/* Kills, reaps and destroys whatever a failed test left, then removes the parent. */
static int cleanup_parent(struct cg_manager *m)
{
        struct fk_error err = {0};
        char **names = NULL;

        if (cg_list(m, &names, &err) == 0) {
                for (size_t i = 0; names[i]; i++) {
                        (void)cg_thaw(m, names[i], NULL);
                        (void)cg_kill_all(m, names[i], NULL);
                        while (waitpid(-1, NULL, WNOHANG) > 0)
                                ;
                        if (cg_destroy(m, names[i], &err) < 0)
                                fprintf(stderr, "cleanup: %s\n", err.msg);
                }
                fk_strv_free(names);
        }
        if (cg_manager_remove_parent(m, &err) < 0) {
                fprintf(stderr, "cleanup: %s\n", err.msg);
                return -1;
        }
        return 0;
}

static int group_teardown(void **state)
{
        int r;

        (void)state;
        for (size_t i = 0; i < N_CHILDREN; i++)
                if (waitpid(CHILDREN[i], NULL, WNOHANG) == 0) {
                        (void)kill(CHILDREN[i], SIGKILL);
                        (void)waitpid(CHILDREN[i], NULL, 0);
                }
        r = cleanup_parent(M);
        M = cg_manager_free(M);
        return r;
}

/* The cgroup2 mount point from mountinfo (the first one), or -ENOENT. */
static int find_v2_mount(char *buf, size_t size)
{
        char *text = NULL, *save = NULL;
        int r = -ENOENT;

        if (fk_read_file("/proc/self/mountinfo", 4 << 20, &text, NULL) < 0)
                return -EIO;
        for (char *l = strtok_r(text, "\n", &save); l && r < 0; l = strtok_r(NULL, "\n", &save)) {
                char mp[256];

                if (strstr(l, " - cgroup2 ") && sscanf(l, "%*s %*s %*s %*s %255s", mp) == 1) {
                        snprintf(buf, size, "%s", mp);
                        r = 0;
                }
        }
        free(text);
        return r;
}

/* Parents of earlier runs whose process is gone (killed by a timeout): clean them. */
static void sweep_stale(void)
{
        DIR *d = opendir(MNT);
        struct dirent *de;

        while (d && (de = readdir(d))) {
                struct cg_options o = OPTS;
                struct cg_manager *m = NULL;
                long pid;

                if (strncmp(de->d_name, PREFIX, strlen(PREFIX)) != 0)
                        continue;
                pid = strtol(de->d_name + strlen(PREFIX), NULL, 10);
                if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                        continue;
                o.parent = de->d_name;
                if (cg_manager_new(&o, &m, NULL) == 0) {
                        fprintf(stderr, "cgroups-v2-real: removing stale %s\n", de->d_name);
                        (void)cleanup_parent(m);
                        cg_manager_free(m);
                }
        }
        if (d)
                closedir(d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_limits_need_their_controller),
                cmocka_unit_test(test_join_freeze_kill),
                cmocka_unit_test(test_clone_into_cgroup),
                cmocka_unit_test(test_list_orphans),
                cmocka_unit_test(test_strict_names_missing_controllers),
        };
        struct fk_error err = {0};
        struct stat st;
        int r;

        if (geteuid() != 0) {
                fprintf(stderr, "cgroups-v2-real: skipped: needs root\n");
                return 77;
        }
        if (find_v2_mount(MNT, sizeof(MNT)) < 0) {
                fprintf(stderr, "cgroups-v2-real: skipped: no cgroup2 mount\n");
                return 77;
        }
        snprintf(PARENT, sizeof(PARENT), PREFIX "%d", (int)getpid());
        snprintf(PARENT_DIR, sizeof(PARENT_DIR), "%s/%s", MNT, PARENT);
        OPTS = (struct cg_options){
                .parent = PARENT, .v2_mount = MNT, .partial_controllers = true, .timeout_ms = 5000};
        sweep_stale();
        if (cg_manager_new(&OPTS, &M, &err) < 0) {
                fprintf(stderr, "cgroups-v2-real: open %s: %s\n", MNT, err.msg);
                (void)rmdir(PARENT_DIR);
                return 1;
        }
        fprintf(stderr,
                "cgroups-v2-real: %s (controllers of the mount: cpu %d memory %d pids %d)\n",
                cg_manager_parent_path(M), mount_has("cpu"), mount_has("memory"),
                mount_has("pids"));
        r = cmocka_run_group_tests_name("cgroups-v2-real", tests, NULL, group_teardown);
        if (stat(PARENT_DIR, &st) == 0) {
                fprintf(stderr, "cgroups-v2-real: %s left behind\n", PARENT_DIR);
                r |= 1;
        }
        return r;
}
