/* SPDX-License-Identifier: MIT */
/* Unit tests for the cgroup v2 backend on a fake unified tree (a production-like host with
 * cgroup2 at /sys/fs/cgroup), for choosing v2 on a hybrid host whose unified mount has
 * controllers, and for a partial hierarchy (v2_mount, partial_controllers) like this host's. */
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

static void v2_root(const char *root, const char *mnt)
{
        char rel[256];

        snprintf(rel, sizeof(rel), "%s/cgroup.controllers", mnt);
        fake_put(root, rel, "cpuset cpu io memory hugetlb pids rdma misc\n");
        snprintf(rel, sizeof(rel), "%s/cgroup.subtree_control", mnt);
        fake_put(root, rel, "memory pids\n");
        /* what the kernel shows in the parent once the root delegates to it */
        snprintf(rel, sizeof(rel), "%s/forklet/cgroup.controllers", mnt);
        fake_put(root, rel, "cpu io memory pids\n");
        snprintf(rel, sizeof(rel), "%s/forklet/cgroup.subtree_control", mnt);
        fake_put(root, rel, "");
}

static int setup(void **state)
{
        struct cg_fx *f = cg_fx_new();
        struct cg_options o = {
                .parent = "forklet", .mountinfo_path = fake_data("mountinfo-v2"), .timeout_ms = 60};

        v2_root(f->root, CG);
        return cg_fx_open(f, &o, state);
}

static void test_detect_enables_controllers(void **state)
{
        struct cg_fx *f = *state;
        char expect[4096];

        assert_int_equal(cg_manager_version(f->m), CG_VERSION_2);
        snprintf(expect, sizeof(expect), "%s/" CG "/forklet", f->root);
        assert_string_equal(cg_manager_parent_path(f->m), expect);
        /* only what is missing is enabled, top-down */
        assert_string_equal(fake_get(f->root, CG "/cgroup.subtree_control"), "+cpu +io");
        assert_string_equal(fake_get(f->root, CG "/forklet/cgroup.subtree_control"),
                            "+cpu +memory +pids +io");
}

static void test_create_update(void **state)
{
        struct cg_fx *f = *state;
        struct cg_limits l = {.cpu_cores = 0.5,
                              .cpu_weight = 250,
                              .memory_max = 512 << 20,
                              .memory_high = 400 << 20,
                              .pids_max = 64,
                              .io_weight = 300};

        fake_dir(f->root, CG "/forklet/s1", fake_v2_session);
        assert_int_equal(cg_create(f->m, "s1", &l, &f->err), 1);
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cpu.max"), "50000 100000");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cpu.weight"), "250");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/memory.max"), "536870912");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/memory.high"), "419430400");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/pids.max"), "64");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/io.weight"), "default 300");

        l = (struct cg_limits){.cpu_cores = 0.001, .memory_max = 1 << 30};
        assert_int_equal(cg_update_limits(f->m, "s1", &l, &f->err), 0);
        /* the kernel refuses quotas under 1 ms: clamp */
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cpu.max"), "1000 100000");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cpu.weight"), "100");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/memory.high"), "max");
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/pids.max"), "max");
        l.cpu_cores = 0;
        assert_int_equal(cg_update_limits(f->m, "s1", &l, &f->err), 0);
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cpu.max"), "max 100000");
}

static void test_create_error_names_file(void **state)
{
        struct cg_fx *f = *state;
        struct cg_limits l = {.io_weight = 100};
        char expect[4096];

        assert_int_equal(cg_create(f->m, "bare", &l, &f->err), -ENOENT);
        snprintf(expect, sizeof(expect), "%s/" CG "/forklet/bare/cpu.max", f->root);
        assert_non_null(strstr(f->err.msg, expect));
        assert_false(fake_exists(f->root, CG "/forklet/bare"));

        fake_dir(f->root, CG "/forklet/noio", fake_v2_session);
        assert_int_equal(unlink(strcat(strcpy(expect, f->root), "/" CG "/forklet/noio/io.weight")),
                         0);
        assert_int_equal(cg_create(f->m, "noio", &l, &f->err), -EOPNOTSUPP);
        assert_non_null(strstr(f->err.msg, "noio/io.weight"));
}

static void test_stats(void **state)
{
        struct cg_fx *f = *state;
        struct cg_stats s;
        char path[4096];

        fake_dir(f->root, CG "/forklet/s1", fake_v2_session);
        assert_int_equal(cg_stats(f->m, "s1", &s, &f->err), 0);
        assert_int_equal(s.cpu_usage_ns, 2500000);
        assert_int_equal(s.memory_current, 4096);
        assert_true(s.has_memory_peak);
        assert_int_equal(s.memory_peak, 8192);
        assert_int_equal(s.oom_kills, 1);
        assert_int_equal(s.pids_current, 2);

        /* kernels before 5.19 have no memory.peak */
        snprintf(path, sizeof(path), "%s/" CG "/forklet/s1/memory.peak", f->root);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(cg_stats(f->m, "s1", &s, &f->err), 0);
        assert_false(s.has_memory_peak);
        fake_put(f->root, CG "/forklet/s1/memory.events", "low 0\nhigh 0\n");
        assert_int_equal(cg_stats(f->m, "s1", &s, &f->err), -ENOENT);
        assert_non_null(strstr(f->err.msg, "memory.events"));
        assert_non_null(strstr(f->err.msg, "oom_kill"));
}

static void test_freeze_waits_for_events(void **state)
{
        struct cg_fx *f = *state;

        fake_dir(f->root, CG "/forklet/s1", fake_v2_session);
        /* cgroup.events still says "frozen 0": the bounded wait must give up */
        assert_int_equal(cg_freeze(f->m, "s1", &f->err), -ETIMEDOUT);
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cgroup.freeze"), "1");
        assert_non_null(strstr(f->err.msg, "cgroup.events"));
        fake_put(f->root, CG "/forklet/s1/cgroup.events", "populated 1\nfrozen 1\n");
        assert_int_equal(cg_freeze(f->m, "s1", &f->err), 0);
        assert_int_equal(cg_thaw(f->m, "s1", &f->err), -ETIMEDOUT);
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cgroup.freeze"), "0");
        fake_put(f->root, CG "/forklet/s1/cgroup.events", "populated 1\nfrozen 0\n");
        assert_int_equal(cg_thaw(f->m, "s1", &f->err), 0);
}

static void test_kill_uses_cgroup_kill(void **state)
{
        struct cg_fx *f = *state;

        fake_dir(f->root, CG "/forklet/s1", fake_v2_session);
        assert_int_equal(cg_kill_all(f->m, "s1", &f->err), 0);
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cgroup.kill"), "1");
        /* a pid that never leaves (the fake cannot kill): bounded, then -ETIMEDOUT */
        fake_put(f->root, CG "/forklet/s1/cgroup.procs", "999999999\n");
        assert_int_equal(cg_kill_all(f->m, "s1", &f->err), -ETIMEDOUT);
        assert_non_null(strstr(f->err.msg, "1 process(es) left"));
}

static void test_join_fd_and_destroy(void **state)
{
        struct cg_fx *f = *state;
        struct cg_join *j = NULL;
        char want[32];
        pid_t pid;

        fake_dir(f->root, CG "/forklet/s1", fake_v2_session);
        assert_int_equal(cg_prepare_join(f->m, "s1", &j, &f->err), 0);
        assert_true(cg_join_cgroup_fd(j) >= 0);
        pid = cg_fx_join_child(j, false);
        snprintf(want, sizeof(want), "%d", (int)pid);
        assert_string_equal(fake_get(f->root, CG "/forklet/s1/cgroup.procs"), want);
        cg_join_free(j);

        assert_int_equal(cg_destroy(f->m, "s1", &f->err), -EBUSY);
        fake_put(f->root, CG "/forklet/s1/cgroup.procs", "");
        assert_int_equal(cg_destroy(f->m, "s1", &f->err), 0);
        assert_false(fake_exists(f->root, CG "/forklet/s1"));
}

/* A hybrid host whose unified mount serves the controllers is v2, even with v1 mounted. */
static void test_hybrid_with_controllers_picks_v2(void **state)
{
        char *root = fake_mkdtemp();
        struct cg_options o = {.parent = "forklet",
                               .mountinfo_path = fake_data("mountinfo-v1-host")};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};

        (void)state;
        o.root = root;
        v2_root(root, CG "/unified");
        fake_put(root, CG "/memory/cgroup.procs", "");
        assert_int_equal(cg_manager_new(&o, &m, &err), 0);
        assert_int_equal(cg_manager_version(m), CG_VERSION_2);
        cg_manager_free(m);
        /* forcing v1 still works and uses the v1 mounts */
        o.version = CG_VERSION_1;
        assert_int_equal(cg_manager_new(&o, &m, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "/sys/fs/cgroup/cpu"));
        /* the unified mount lacks pids: v2 setup says so, naming the file */
        fake_put(root, CG "/unified/forklet/cgroup.controllers", "cpu memory\n");
        o.version = CG_VERSION_2;
        assert_int_equal(cg_manager_new(&o, &m, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err.msg, "unified/forklet/cgroup.controllers"));
        assert_non_null(strstr(err.msg, "lacks pids ("));
        fake_rm(root);
        free(root);
}

/* This host: cgroup2 at /sys/fs/cgroup/unified beside v1, offering avail (e.g. only hugetlb). */
static int open_unified(const char *root, const char *avail, const char *parent_avail, bool partial,
                        struct cg_manager **m, struct fk_error *err)
{
        struct cg_options o = {.parent = "forklet",
                               .mountinfo_path = fake_data("mountinfo-v1-host"),
                               .v2_mount = "/sys/fs/cgroup/unified/",
                               .partial_controllers = partial,
                               .timeout_ms = 60,
                               .root = root};

        fake_put(root, CG "/unified/cgroup.controllers", avail);
        fake_put(root, CG "/unified/cgroup.subtree_control", "");
        fake_put(root, CG "/unified/forklet/cgroup.controllers", parent_avail);
        fake_put(root, CG "/unified/forklet/cgroup.subtree_control", "");
        return cg_manager_new(&o, m, err);
}

/* A nonzero limit for a missing controller fails naming the controller and the file. */
static void assert_refused(struct cg_manager *m, const char *root, const struct cg_limits *l,
                           const char *what)
{
        struct fk_error err = {0};

        assert_int_equal(cg_create(m, "s2", l, &err), -EOPNOTSUPP);
        if (!strstr(err.msg, what))
                fail_msg("\"%s\" not in: %s", what, err.msg);
        assert_false(fake_exists(root, CG "/unified/forklet/s2"));
}

static void test_partial_core_only(void **state)
{
        char *root = fake_mkdtemp();
        struct cg_manager *m = NULL;
        struct fk_error err = {0};
        struct cg_stats st;

        (void)state;
        assert_int_equal(open_unified(root, "hugetlb\n", "", true, &m, &err), 0);
        assert_int_equal(cg_manager_version(m), CG_VERSION_2);
        assert_string_equal(fake_get(root, CG "/unified/cgroup.subtree_control"), "");
        fake_dir(root, CG "/unified/forklet/s1", fake_v2_core);
        assert_int_equal(cg_create(m, "s1", &(struct cg_limits){.cpu_period_us = 50000}, &err), 1);
        assert_refused(m, root, &(struct cg_limits){.cpu_cores = 1},
                       "forklet/s2/cpu.max: the cpu controller is not enabled");
        assert_refused(m, root, &(struct cg_limits){.cpu_weight = 50}, "s2/cpu.weight: the cpu");
        assert_refused(m, root, &(struct cg_limits){.memory_max = 1 << 20},
                       "s2/memory.max: the memory controller");
        assert_refused(m, root, &(struct cg_limits){.memory_high = 1 << 20},
                       "s2/memory.high: the memory controller");
        assert_refused(m, root, &(struct cg_limits){.pids_max = 5}, "s2/pids.max: the pids");
        assert_refused(m, root, &(struct cg_limits){.io_weight = 5}, "s2/io.weight: missing");
        /* a live update refuses too and leaves the session alone */
        assert_int_equal(cg_update_limits(m, "s1", &(struct cg_limits){.pids_max = 5}, &err),
                         -EOPNOTSUPP);
        assert_true(fake_exists(root, CG "/unified/forklet/s1/cgroup.procs"));
        assert_int_equal(cg_stats(m, "s1", &st, &err), 0);
        assert_int_equal(st.cpu_usage_ns, 700000);
        assert_false(st.has_memory);
        assert_false(st.has_pids);
        assert_false(st.has_memory_peak);
        assert_int_equal(st.memory_current + st.pids_current + st.oom_kills, 0);
        fake_put(root, CG "/unified/forklet/s1/cgroup.events", "populated 0\nfrozen 1\n");
        assert_int_equal(cg_freeze(m, "s1", &err), 0);
        assert_int_equal(cg_kill_all(m, "s1", &err), 0);
        assert_string_equal(fake_get(root, CG "/unified/forklet/s1/cgroup.kill"), "1");
        assert_int_equal(cg_destroy(m, "s1", &err), 0);
        cg_manager_free(m);
        fake_rm(root);
        free(root);
}

/* Partial: what is offered is enabled and used; only the missing one refuses. */
static void test_partial_some_controllers(void **state)
{
        struct cg_limits l = {.cpu_cores = 0.5, .memory_max = 1 << 20};
        char *root = fake_mkdtemp();
        struct cg_manager *m = NULL;
        struct fk_error err = {0};
        struct cg_stats st;

        (void)state;
        assert_int_equal(open_unified(root, "cpu memory hugetlb\n", "cpu memory\n", true, &m, &err),
                         0);
        assert_string_equal(fake_get(root, CG "/unified/cgroup.subtree_control"), "+cpu +memory");
        assert_string_equal(fake_get(root, CG "/unified/forklet/cgroup.subtree_control"),
                            "+cpu +memory");
        fake_dir(root, CG "/unified/forklet/s1", fake_v2_session);
        assert_int_equal(cg_create(m, "s1", &l, &err), 1);
        assert_string_equal(fake_get(root, CG "/unified/forklet/s1/cpu.max"), "50000 100000");
        assert_string_equal(fake_get(root, CG "/unified/forklet/s1/memory.max"), "1048576");
        assert_string_equal(fake_get(root, CG "/unified/forklet/s1/pids.max"), "max");
        l.pids_max = 10;
        assert_int_equal(cg_update_limits(m, "s1", &l, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err.msg, "s1/pids.max: the pids controller"));
        assert_int_equal(cg_stats(m, "s1", &st, &err), 0);
        assert_true(st.has_memory && st.has_memory_peak && !st.has_pids);
        assert_int_equal(st.memory_current, 4096);
        assert_int_equal(st.pids_current, 0);
        cg_manager_free(m);
        /* strict (forkletd's default) refuses the same tree, naming only what lacks */
        assert_int_equal(
                open_unified(root, "cpu memory hugetlb\n", "cpu memory\n", false, &m, &err),
                -EOPNOTSUPP);
        assert_non_null(strstr(err.msg, "unified/./cgroup.controllers: \"cpu memory hugetlb\" "
                                        "lacks pids ("));
        fake_rm(root);
        free(root);
}

static void test_v2_mount_option(void **state)
{
        char *root = fake_mkdtemp();
        struct cg_options o = {.parent = "forklet",
                               .mountinfo_path = fake_data("mountinfo-v1-host"),
                               .root = root};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};

        (void)state;
        fake_put(root, CG "/unified/cgroup.controllers", "hugetlb\n");
        fake_put(root, CG "/unified/cgroup.subtree_control", "");
        fake_put(root, CG "/unified/forklet/cgroup.controllers", "");
        fake_put(root, CG "/unified/forklet/cgroup.subtree_control", "");
        o.v2_mount = "/sys/fs/cgroup/memory"; /* a v1 mount */
        assert_int_equal(cg_manager_new(&o, &m, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "no cgroup2 mount at /sys/fs/cgroup/memory"));
        o.v2_mount = "/sys/fs/cgroup/unified";
        o.version = CG_VERSION_1;
        assert_int_equal(cg_manager_new(&o, &m, &err), -EINVAL);
        /* forcing v2 without v2_mount: a mount offering none of ours only with partial */
        o.v2_mount = NULL;
        o.version = CG_VERSION_2;
        assert_int_equal(cg_manager_new(&o, &m, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err.msg, "no cgroup2 mount with controllers"));
        o.partial_controllers = true;
        assert_int_equal(cg_manager_new(&o, &m, &err), 0);
        assert_int_equal(cg_manager_version(m), CG_VERSION_2);
        cg_manager_free(m);
        fake_rm(root);
        free(root);
}

/* A failed setup removes the levels of the parent it created. */
static void test_failed_setup_removes_created_levels(void **state)
{
        char *root = fake_mkdtemp();
        struct cg_options o = {
                .parent = "fresh/sub", .mountinfo_path = fake_data("mountinfo-v2"), .root = root};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};

        (void)state;
        v2_root(root, CG);
        /* fresh/ gets no cgroup.controllers (a kernel always has one): enabling there fails */
        assert_int_equal(cg_manager_new(&o, &m, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "fresh/cgroup.controllers"));
        assert_false(fake_exists(root, CG "/fresh"));
        assert_true(fake_exists(root, CG "/forklet"));
        fake_rm(root);
        free(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_detect_enables_controllers, setup,
                                                cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_create_update, setup, cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_create_error_names_file, setup,
                                                cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_stats, setup, cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_freeze_waits_for_events, setup,
                                                cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_kill_uses_cgroup_kill, setup, cg_fx_teardown),
                cmocka_unit_test_setup_teardown(test_join_fd_and_destroy, setup, cg_fx_teardown),
                cmocka_unit_test(test_hybrid_with_controllers_picks_v2),
                cmocka_unit_test(test_partial_core_only),
                cmocka_unit_test(test_partial_some_controllers),
                cmocka_unit_test(test_v2_mount_option),
                cmocka_unit_test(test_failed_setup_removes_created_levels),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
