/* SPDX-License-Identifier: MIT */
/* Fake cgroup trees for the cgroups unit tests (see cgroups-fake.h). File contents are what
 * Linux 6.x shows in a new cgroup. */
#include "tests/lib/cgroups-fake.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

const struct fake_file fake_v1_memory[] = {
        {"cgroup.procs", ""},
        {"tasks", ""},
        {"memory.limit_in_bytes", "9223372036854771712\n"},
        {"memory.soft_limit_in_bytes", "9223372036854771712\n"},
        {"memory.usage_in_bytes", "2236416\n"},
        {"memory.max_usage_in_bytes", "4730880\n"},
        {"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"},
        {NULL, NULL},
};
const struct fake_file fake_v1_cpu[] = {
        {"cgroup.procs", ""},
        {"cpu.cfs_period_us", "100000\n"},
        {"cpu.cfs_quota_us", "-1\n"},
        {"cpu.shares", "1024\n"},
        {NULL, NULL},
};
const struct fake_file fake_v1_cpuacct[] = {
        {"cgroup.procs", ""},
        {"cpuacct.usage", "1534062710\n"},
        {NULL, NULL},
};
const struct fake_file fake_v1_cpu_cpuacct[] = {
        {"cgroup.procs", ""},     {"cpu.cfs_period_us", "100000\n"}, {"cpu.cfs_quota_us", "-1\n"},
        {"cpu.shares", "1024\n"}, {"cpuacct.usage", "77000\n"},      {NULL, NULL},
};
const struct fake_file fake_v1_pids[] = {
        {"cgroup.procs", ""},
        {"pids.max", "max\n"},
        {"pids.current", "3\n"},
        {NULL, NULL},
};
const struct fake_file fake_v1_freezer[] = {
        {"cgroup.procs", ""},
        {"freezer.state", "THAWED\n"},
        {NULL, NULL},
};
const struct fake_file fake_v1_blkio[] = {
        {"cgroup.procs", ""},
        {NULL, NULL},
};
const struct fake_file fake_v2_session[] = {
        {"cgroup.procs", ""},
        {"cgroup.controllers", "cpu io memory pids\n"},
        {"cgroup.subtree_control", ""},
        {"cgroup.freeze", "0\n"},
        {"cgroup.events", "populated 0\nfrozen 0\n"},
        {"cgroup.kill", ""},
        {"cpu.max", "max 100000\n"},
        {"cpu.weight", "100\n"},
        {"cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\nnr_periods 0\n"},
        {"memory.max", "max\n"},
        {"memory.high", "max\n"},
        {"memory.current", "4096\n"},
        {"memory.peak", "8192\n"},
        {"memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n"},
        {"pids.max", "max\n"},
        {"pids.current", "2\n"},
        {"io.weight", "default 100\n"},
        {NULL, NULL},
};
const struct fake_file fake_v2_core[] = {
        {"cgroup.procs", ""},
        {"cgroup.controllers", ""},
        {"cgroup.subtree_control", ""},
        {"cgroup.freeze", "0\n"},
        {"cgroup.events", "populated 0\nfrozen 0\n"},
        {"cgroup.kill", ""},
        {"cgroup.stat", "nr_descendants 0\nnr_dying_descendants 0\n"},
        {"cpu.stat", "usage_usec 700\nuser_usec 500\nsystem_usec 200\n"},
        {NULL, NULL},
};

char *fake_mkdtemp(void)
{
        const char *tmp = getenv("TMPDIR");
        char *p = NULL;

        assert_true(fk_asprintf(&p, "%s/fk-cg-XXXXXX", tmp ? tmp : "/tmp") > 0);
        assert_non_null(mkdtemp(p));
        return p;
}

void fake_rm(const char *root)
{
        assert_int_equal(fk_rm_rf(root), 0);
}

void fake_put(const char *root, const char *rel, const char *content)
{
        char path[4096], *slash;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        slash = strrchr(path, '/');
        *slash = '\0';
        assert_int_equal(fk_mkdir_p(path, 0755), 0);
        *slash = '/';
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(content, f);
        assert_int_equal(fclose(f), 0);
}

void fake_dir(const char *root, const char *dir, const struct fake_file *files)
{
        char path[4096];

        snprintf(path, sizeof(path), "%s/%s", root, dir);
        assert_int_equal(fk_mkdir_p(path, 0755), 0);
        for (size_t i = 0; files[i].name; i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
                fake_put(root, path, files[i].content);
        }
}

const char *fake_get(const char *root, const char *rel)
{
        static char buf[4096];
        char path[4096];
        char *s = NULL;
        size_t n;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        if (fk_read_file(path, sizeof(buf) - 1, &s, &n) < 0)
                fail_msg("cannot read %s", path);
        memcpy(buf, s, n + 1);
        free(s);
        if (n > 0 && buf[n - 1] == '\n')
                buf[n - 1] = '\0';
        return buf;
}

int fake_exists(const char *root, const char *rel)
{
        char path[4096];

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        return access(path, F_OK) == 0;
}

const char *fake_data(const char *name)
{
        static char buf[4096];
        const char *d = getenv("FORKLET_TEST_DATA");

        snprintf(buf, sizeof(buf), "%s/cgroups/%s", d ? d : "tests/data", name);
        return buf;
}

struct cg_fx *cg_fx_new(void)
{
        struct cg_fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        f->root = fake_mkdtemp();
        return f;
}

int cg_fx_open(struct cg_fx *f, struct cg_options *o, void **state)
{
        o->root = f->root;
        assert_int_equal(cg_manager_new(o, &f->m, &f->err), 0);
        *state = f;
        return 0;
}

int cg_fx_teardown(void **state)
{
        struct cg_fx *f = *state;

        cg_manager_free(f->m);
        fake_rm(f->root);
        free(f->root);
        free(f);
        return 0;
}

pid_t cg_fx_join_child(struct cg_join *j, bool pre_exec)
{
        int status;
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0)
                _exit((pre_exec ? cg_join_pre_exec(j) : cg_join_self(j)) == 0 ? 0 : 1);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return pid;
}
