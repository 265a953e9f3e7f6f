/* SPDX-License-Identifier: MIT */
/* Unit tests for the cgroup v1 backend on a fake tree laid out like this host (split cpu and
 * cpuacct, a controller-less cgroup2 at /sys/fs/cgroup/unified) and like Debian (cpu,cpuacct). */
#include "cgroups/cgroups.h"
#include "common/error.h"
#include "common/util.h"
#include "tests/lib/cgroups-fake.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define CG "sys/fs/cgroup"

static const struct {
        const char *dir;
        const struct fake_file *files;
} host_ctrls[] = {
        {"memory", fake_v1_memory}, {"cpu", fake_v1_cpu},         {"cpuacct", fake_v1_cpuacct},
        {"pids", fake_v1_pids},     {"freezer", fake_v1_freezer}, {"blkio", fake_v1_blkio},
};

/* The session directories a v1 kernel would populate on mkdir. */
static void host_session(const char *root, const char *parent, const char *name)
{
        char dir[512];

        for (size_t i = 0; i < sizeof(host_ctrls) / sizeof(host_ctrls[0]); i++) {
                snprintf(dir, sizeof(dir), CG "/%s/%s/%s", host_ctrls[i].dir, parent, name);
                fake_dir(root, dir, host_ctrls[i].files);
        }
}

static int setup_host(void **state)
{
        struct cg_fx *f = cg_fx_new();
        const char *dirs[] = {"cpu",     "cpuacct", "cpuset", "memory", "devices",
                              "freezer", "blkio",   "pids",   "systemd"};
        struct cg_options o = {.parent = "forklet",
                               .mountinfo_path = fake_data("mountinfo-v1-host")};
        char rel[256];

        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(rel, sizeof(rel), CG "/%s/cgroup.procs", dirs[i]);
                fake_put(f->root, rel, "1\n");
        }
        /* the unified mount exists but serves no controller: v1 must win */
        fake_put(f->root, CG "/unified/cgroup.controllers", "");
        fake_put(f->root, CG "/unified/cgroup.subtree_control", "");
        o.timeout_ms = 100;
        return cg_fx_open(f, &o, state);
}

static void test_detect_host(void **state)
{
        struct cg_fx *f = *state;
        char expect[4096], *path = NULL;

        assert_int_equal(cg_manager_version(f->m), CG_VERSION_1);
        snprintf(expect, sizeof(expect), "%s/" CG "/memory/forklet", f->root);
        assert_string_equal(cg_manager_parent_path(f->m), expect);
        /* the parent exists in every controller the backend uses, not in the others */
        assert_true(fake_exists(f->root, CG "/cpu/forklet"));
        assert_true(fake_exists(f->root, CG "/cpuacct/forklet"));
        assert_true(fake_exists(f->root, CG "/pids/forklet"));
        assert_true(fake_exists(f->root, CG "/freezer/forklet"));
        assert_true(fake_exists(f->root, CG "/blkio/forklet"));
        assert_false(fake_exists(f->root, CG "/devices/forklet"));
        assert_false(fake_exists(f->root, CG "/unified/forklet"));
        assert_int_equal(cg_manager_cgroup_path(f->m, "s1", &path), 0);
        assert_string_equal(path, "/forklet/s1");
        free(path);
}

static void test_create_writes_limits(void **state)
{
        struct cg_fx *f = *state;
        struct cg_limits l = {.cpu_cores = 0.5,
                              .cpu_weight = 200,
                              .memory_max = 256 << 20,
                              .memory_high = 200 << 20,
                              .pids_max = 1024};

        host_session(f->root, "forklet", "s1");
        assert_int_equal(cg_create(f->m, "s1", &l, &f->err), 1); /* adopted: it existed */
        assert_string_equal(fake_get(f->root, CG "/cpu/forklet/s1/cpu.cfs_period_us"), "100000");
        assert_string_equal(fake_get(f->root, CG "/cpu/forklet/s1/cpu.cfs_quota_us"), "50000");
        assert_string_equal(fake_get(f->root, CG "/cpu/forklet/s1/cpu.shares"), "2048");
        assert_string_equal(fake_get(f->root, CG "/memory/forklet/s1/memory.limit_in_bytes"),
                            "268435456");
        assert_string_equal(fake_get(f->root, CG "/memory/forklet/s1/memory.soft_limit_in_bytes"),
                            "209715200");
        assert_string_equal(fake_get(f->root, CG "/pids/forklet/s1/pids.max"), "1024");

        /* live update; zero fields reset to unlimited / default */
        l = (struct cg_limits){.cpu_cores = 1.5, .cpu_period_us = 50000, .memory_max = 1 << 30};
        assert_int_equal(cg_update_limits(f->m, "s1", &l, &f->err), 0);
        assert_string_equal(fake_get(f->root, CG "/cpu/forklet/s1/cpu.cfs_period_us"), "50000");
        assert_string_equal(fake_get(f->root, CG "/cpu/forklet/s1/cpu.cfs_quota_us"), "75000");
        assert_string_equal(fake_get(f->root, CG "/cpu/forklet/s1/cpu.shares"), "1024");
        assert_string_equal(fake_get(f->root, CG "/memory/forklet/s1/memory.limit_in_bytes"),
                            "1073741824");
        assert_string_equal(fake_get(f->root, CG "/memory/forklet/s1/memory.soft_limit_in_bytes"),
                            "-1");
        assert_string_equal(fake_get(f->root, CG "/pids/forklet/s1/pids.max"), "max");
}

static void test_create_error_names_file(void **state)
{
        struct cg_fx *f = *state;
        struct cg_limits l = {.cpu_cores = 1};
        char expect[4096];

        /* a bare mkdir in a fake tree has no control files: the first write must fail and
         * name the file, and the directories this call made must be gone again */
        assert_int_equal(cg_create(f->m, "bare", &l, &f->err), -ENOENT);
        snprintf(expect, sizeof(expect), "%s/" CG "/cpu/forklet/bare/cpu.cfs_period_us", f->root);
        assert_non_null(strstr(f->err.msg, expect));
        assert_false(fake_exists(f->root, CG "/memory/forklet/bare"));
        assert_false(fake_exists(f->root, CG "/cpu/forklet/bare"));

        assert_int_equal(cg_update_limits(f->m, "nope", &l, &f->err), -ENOENT);
        assert_non_null(strstr(f->err.msg, "forklet/nope"));
        assert_int_equal(cg_create(f->m, "../x", &l, &f->err), -EINVAL);
        assert_non_null(strstr(f->err.msg, "../x"));

        host_session(f->root, "forklet", "io");
        l.io_weight = 500; /* the host's blkio has neither weight file */
        assert_int_equal(cg_create(f->m, "io", &l, &f->err), -EOPNOTSUPP);
        assert_non_null(strstr(f->err.msg, "blkio.bfq.weight"));
        fake_put(f->root, CG "/blkio/forklet/io/blkio.bfq.weight", "100\n");
        assert_int_equal(cg_create(f->m, "io", &l, &f->err), 1);
        assert_string_equal(fake_get(f->root, CG "/blkio/forklet/io/blkio.bfq.weight"), "50");
}

static void test_stats(void **state)
{
        struct cg_fx *f = *state;
        struct cg_stats s;

        host_session(f->root, "forklet", "s1");
        assert_int_equal(cg_stats(f->m, "s1", &s, &f->err), 0);
        assert_true(s.cpu_usage_ns == 1534062710ULL);
        assert_int_equal(s.memory_current, 2236416);
        assert_int_equal(s.memory_peak, 4730880);
        assert_true(s.has_memory_peak);
        assert_int_equal(s.oom_kills, 2);
        assert_int_equal(s.pids_current, 3);

        fake_put(f->root, CG "/cpuacct/forklet/s1/cpuacct.usage", "garbage\n");
        assert_int_equal(cg_stats(f->m, "s1", &s, &f->err), -EINVAL);
        assert_non_null(strstr(f->err.msg, "cpuacct.usage"));
}

static void test_freeze(void **state)
{
        struct cg_fx *f = *state;

        host_session(f->root, "forklet", "s1");
        /* a fake file reads back what we wrote, as the kernel does once all tasks froze */
        assert_int_equal(cg_freeze(f->m, "s1", &f->err), 0);
        assert_string_equal(fake_get(f->root, CG "/freezer/forklet/s1/freezer.state"), "FROZEN");
        assert_int_equal(cg_thaw(f->m, "s1", &f->err), 0);
        assert_string_equal(fake_get(f->root, CG "/freezer/forklet/s1/freezer.state"), "THAWED");
}

static void test_destroy_list_pids(void **state)
{
        struct cg_fx *f = *state;
        char **names = NULL;
        pid_t *pids = NULL;
        size_t n = 0;

        host_session(f->root, "forklet", "b-sess");
        host_session(f->root, "forklet", "a-sess");
        fake_put(f->root, CG "/memory/forklet/not-a-cgroup", "");
        assert_int_equal(cg_list(f->m, &names, &f->err), 0);
        assert_int_equal(fk_strv_length(names), 2);
        assert_string_equal(names[0], "a-sess");
        assert_string_equal(names[1], "b-sess");
        fk_strv_free(names);

        fake_put(f->root, CG "/memory/forklet/a-sess/cgroup.procs", "4242\n4243\n");
        fake_put(f->root, CG "/pids/forklet/a-sess/cgroup.procs", "4242\n4243\n");
        assert_int_equal(cg_pids(f->m, "a-sess", &pids, &n, &f->err), 0);
        assert_int_equal(n, 2);
        assert_int_equal(pids[0], 4242);
        assert_int_equal(pids[1], 4243);
        free(pids);

        assert_int_equal(cg_destroy(f->m, "a-sess", &f->err), -EBUSY);
        assert_non_null(strstr(f->err.msg, "4242"));
        assert_non_null(strstr(f->err.msg, "forklet/a-sess"));
        fake_put(f->root, CG "/memory/forklet/a-sess/cgroup.procs", "");
        fake_put(f->root, CG "/pids/forklet/a-sess/cgroup.procs", "");
        assert_int_equal(cg_destroy(f->m, "a-sess", &f->err), 0);
        for (size_t i = 0; i < sizeof(host_ctrls) / sizeof(host_ctrls[0]); i++) {
                char rel[256];

                snprintf(rel, sizeof(rel), CG "/%s/forklet/a-sess", host_ctrls[i].dir);
                assert_false(fake_exists(f->root, rel));
        }
        assert_int_equal(cg_destroy(f->m, "a-sess", &f->err), 0); /* idempotent */
        assert_int_equal(cg_destroy(f->m, "b-sess", &f->err), 0);
        assert_int_equal(cg_list(f->m, &names, &f->err), 0);
        assert_int_equal(fk_strv_length(names), 0);
        fk_strv_free(names);
        assert_int_equal(cg_manager_remove_parent(f->m, &f->err), -ENOTEMPTY); /* the file */
}

static void test_join_self_in_child(void **state)
{
        struct cg_fx *f = *state;
        struct cg_join *j = NULL;
        char want[32];
        pid_t pid;

        host_session(f->root, "forklet", "s1");
        assert_int_equal(cg_prepare_join(f->m, "s1", &j, &f->err), 0);
        assert_int_equal(cg_join_cgroup_fd(j), -EOPNOTSUPP);
        pid = cg_fx_join_child(j, true);
        snprintf(want, sizeof(want), "%d", (int)pid);
        for (size_t i = 0; i < sizeof(host_ctrls) / sizeof(host_ctrls[0]); i++) {
                char rel[256];

                snprintf(rel, sizeof(rel), CG "/%s/forklet/s1/cgroup.procs", host_ctrls[i].dir);
                assert_string_equal(fake_get(f->root, rel), want);
        }
        cg_join_free(j);
        assert_int_equal(cg_prepare_join(f->m, "missing", &j, &f->err), -ENOENT);
        assert_non_null(strstr(f->err.msg, "forklet/missing/cgroup.procs"));
}

/* Debian layout: cpu,cpuacct share one hierarchy, nesting below the caller's own cgroup. */
static void test_debian_combined_nested(void **state)
{
        char *root = fake_mkdtemp();
        struct cg_options o = {.parent = "forklet",
                               .mountinfo_path = fake_data("mountinfo-v1-debian"),
                               .proc_cgroup_path = NULL,
                               .nest_in_self = true,
                               .root = root};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};
        struct cg_limits l = {.cpu_cores = 2};
        struct cg_stats s;
        char procs[4096];

        (void)state;
        fake_put(root, "proc-cgroup",
                 "12:memory:/system.slice/forkletd.service\n4:cpu,cpuacct:/system.slice\n"
                 "3:pids:/\n2:freezer:/\n1:name=systemd:/x\n0::/system.slice/forkletd.service\n");
        snprintf(procs, sizeof(procs), "%s/proc-cgroup", root);
        o.proc_cgroup_path = procs;
        fake_put(root, CG "/unified/cgroup.controllers", "");
        fake_put(root, CG "/cpu,cpuacct/cgroup.procs", "");
        fake_put(root, CG "/memory/cgroup.procs", "");
        fake_put(root, CG "/pids/cgroup.procs", "");
        fake_put(root, CG "/freezer/cgroup.procs", "");
        fake_put(root, CG "/blkio/cgroup.procs", "");
        assert_int_equal(cg_manager_new(&o, &m, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "blkio"));
        fake_put(root, "proc-cgroup",
                 "12:memory:/system.slice/forkletd.service\n4:cpu,cpuacct:/system.slice\n"
                 "3:pids:/\n2:freezer:/\n5:blkio:/\n0::/system.slice/forkletd.service\n");
        assert_int_equal(cg_manager_new(&o, &m, &err), 0);
        assert_true(fake_exists(root, CG "/memory/system.slice/forkletd.service/forklet"));
        assert_true(fake_exists(root, CG "/cpu,cpuacct/system.slice/forklet"));
        assert_true(fake_exists(root, CG "/pids/forklet"));
        fake_dir(root, CG "/memory/system.slice/forkletd.service/forklet/s", fake_v1_memory);
        fake_dir(root, CG "/cpu,cpuacct/system.slice/forklet/s", fake_v1_cpu_cpuacct);
        fake_dir(root, CG "/pids/forklet/s", fake_v1_pids);
        fake_dir(root, CG "/freezer/forklet/s", fake_v1_freezer);
        fake_dir(root, CG "/blkio/forklet/s", fake_v1_blkio);
        assert_int_equal(cg_create(m, "s", &l, &err), 1);
        assert_string_equal(
                fake_get(root, CG "/cpu,cpuacct/system.slice/forklet/s/cpu.cfs_quota_us"),
                "200000");
        assert_int_equal(cg_stats(m, "s", &s, &err), 0);
        assert_int_equal(s.cpu_usage_ns, 77000);
        cg_manager_free(m);
        fake_rm(root);
        free(root);
}

static void test_no_usable_hierarchy(void **state)
{
        char *root = fake_mkdtemp();
        struct cg_options o = {
                .parent = "forklet", .mountinfo_path = fake_data("mountinfo-none"), .root = root};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cg_manager_new(&o, &m, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err.msg, "mountinfo-none"));
        assert_non_null(strstr(err.msg, "cpu, cpuacct, memory, pids, freezer"));
        o.parent = "../etc";
        assert_int_equal(cg_manager_new(&o, &m, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "../etc"));
        fake_rm(root);
        free(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_detect_host, setup_host, cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_create_writes_limits, setup_host,
                                                cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_create_error_names_file, setup_host,
                                                cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_stats, setup_host, cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_freeze, setup_host, cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_destroy_list_pids, setup_host, cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_join_self_in_child, setup_host,
                                                cg_fx_teardown),
                cmocka_unit_test(test_debian_combined_nested),
                cmocka_unit_test(test_no_usable_hierarchy),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
