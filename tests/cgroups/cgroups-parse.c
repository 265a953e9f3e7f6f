/* SPDX-License-Identifier: MIT */
/* Unit tests for the cgroups parsers (mountinfo, /proc/PID/cgroup, keyed files), name rules
 * and the node capacity helper, on recorded kernel text from tests/data/cgroups. */
#include "cgroups/cgroups-internal.h"
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

#include <cmocka.h>

static char *slurp(const char *name)
{
        char *s = NULL;

        assert_int_equal(fk_read_file(fake_data(name), 1 << 20, &s, NULL), 0);
        return s;
}

static const struct cg_mount *find_mount(const struct cg_mount *m, size_t n, const char *mp)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(m[i].mount_point, mp) == 0)
                        return &m[i];
        return NULL;
}

static void test_mountinfo_v1_host(void **state)
{
        char *text = slurp("mountinfo-v1-host");
        struct cg_mount *m = NULL;
        size_t n = 0;
        const struct cg_mount *p;

        (void)state;
        assert_int_equal(cg_parse_mountinfo(text, &m, &n), 0);
        /* 9 v1 hierarchies (cpu, cpuacct, cpuset, memory, devices, freezer, blkio, pids,
         * name=systemd) and the unified mount; the tmpfs at /sys/fs/cgroup is not one */
        assert_int_equal(n, 10);
        p = find_mount(m, n, "/sys/fs/cgroup/cpu");
        assert_non_null(p);
        assert_false(p->v2);
        assert_int_equal(p->controllers, CG_CTRL_CPU);
        assert_int_equal(p->dev_minor, 29);
        p = find_mount(m, n, "/sys/fs/cgroup/unified");
        assert_non_null(p);
        assert_true(p->v2);
        p = find_mount(m, n, "/sys/fs/cgroup/systemd");
        assert_int_equal(p->controllers, 0);
        assert_string_equal(p->root, "/");
        cg_mounts_free(m, n);
        free(text);
}

static void test_mountinfo_combined_and_escaped(void **state)
{
        char *text = slurp("mountinfo-v1-debian");
        const char *esc = "50 27 0:40 /lxc/c1 /mnt/my\\040cg rw - cgroup cgroup rw,pids\n"
                          "51 27 0:41 / /x rw shared:3 master:1 - cgroup2 none rw\n";
        struct cg_mount *m = NULL;
        size_t n = 0;
        const struct cg_mount *p;

        (void)state;
        assert_int_equal(cg_parse_mountinfo(text, &m, &n), 0);
        p = find_mount(m, n, "/sys/fs/cgroup/cpu,cpuacct");
        assert_non_null(p);
        assert_int_equal(p->controllers, CG_CTRL_CPU | CG_CTRL_CPUACCT);
        p = find_mount(m, n, "/sys/fs/cgroup/net_cls,net_prio");
        assert_int_equal(p->controllers, 0);
        cg_mounts_free(m, n);
        free(text);

        assert_int_equal(cg_parse_mountinfo(esc, &m, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(m[0].mount_point, "/mnt/my cg");
        assert_string_equal(m[0].root, "/lxc/c1");
        assert_true(m[1].v2);
        assert_string_equal(m[1].mount_point, "/x");
        cg_mounts_free(m, n);
}

static void test_proc_cgroup(void **state)
{
        char *v1 = slurp("proc-cgroup-v1-host"), *v2 = slurp("proc-cgroup-v2"), *p = NULL;

        (void)state;
        assert_int_equal(cg_parse_proc_cgroup(v1, CG_CTRL_MEMORY, false, &p), 0);
        assert_string_equal(p, "/process_api/692cf0f866f23d6e6bbf90c2471f0c47");
        free(p);
        assert_int_equal(cg_parse_proc_cgroup(v1, CG_CTRL_CPUACCT, false, &p), 0);
        assert_string_equal(p, "/");
        free(p);
        assert_int_equal(cg_parse_proc_cgroup(v1, 0, true, &p), 0);
        assert_string_equal(p, "/");
        free(p);
        assert_int_equal(
                cg_parse_proc_cgroup("3:cpu,cpuacct:/user.slice\n", CG_CTRL_CPUACCT, false, &p), 0);
        assert_string_equal(p, "/user.slice");
        free(p);
        assert_int_equal(cg_parse_proc_cgroup(v2, 0, true, &p), 0);
        assert_string_equal(p, "/user.slice/user-1000.slice/session-3.scope");
        free(p);
        assert_int_equal(cg_parse_proc_cgroup(v2, CG_CTRL_MEMORY, false, &p), -ENOENT);
        free(v1);
        free(v2);
}

static void test_keyed_and_numbers(void **state)
{
        const char *events = "low 0\nhigh 0\nmax 4\noom 1\noom_kill 3\n";
        uint64_t v;

        (void)state;
        assert_int_equal(cg_parse_keyed(events, "oom_kill", &v), 0);
        assert_int_equal(v, 3);
        assert_int_equal(cg_parse_keyed(events, "oom", &v), 0);
        assert_int_equal(v, 1);
        assert_int_equal(cg_parse_keyed(events, "oom_group_kill", &v), -ENOENT);
        assert_int_equal(cg_parse_keyed("frozen x\n", "frozen", &v), -EINVAL);
        assert_int_equal(cg_parse_u64("max\n", &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(cg_parse_u64("9223372036854771712\n", &v), 0);
        assert_true(v == 9223372036854771712ULL);
        assert_int_equal(cg_parse_u64("-1", &v), -EINVAL);
        assert_int_equal(cg_parse_u64("12abc", &v), -EINVAL);
        assert_int_equal(cg_parse_u64("", &v), -EINVAL);
}

static void test_names(void **state)
{
        (void)state;
        assert_true(cg_name_is_valid("roastery-fork-0"));
        assert_true(cg_name_is_valid("a.b_c"));
        assert_false(cg_name_is_valid(""));
        assert_false(cg_name_is_valid("."));
        assert_false(cg_name_is_valid(".."));
        assert_false(cg_name_is_valid("a/b"));
        assert_false(cg_name_is_valid("a b"));
        assert_false(cg_name_is_valid(NULL));
        assert_string_equal(cg_version_to_string(CG_VERSION_1), "v1");
        assert_string_equal(cg_version_to_string(CG_VERSION_2), "v2");
}

static void test_capacity(void **state)
{
        struct cg_capacity c;
        struct fk_error err = {0};
        char *root = fake_mkdtemp(), path[4096];

        (void)state;
        assert_int_equal(cg_node_capacity(fake_data("meminfo"), &c, &err), 0);
        assert_true(c.memory_bytes == 24683652ULL * 1024);
        assert_true(c.cpus >= 1);
        fake_put(root, "meminfo", "MemFree: 1 kB\n");
        snprintf(path, sizeof(path), "%s/meminfo", root);
        assert_int_equal(cg_node_capacity(path, &c, &err), -EINVAL);
        assert_non_null(strstr(err.msg, path));
        assert_non_null(strstr(err.msg, "MemTotal"));
        fake_rm(root);
        free(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mountinfo_v1_host),
                cmocka_unit_test(test_mountinfo_combined_and_escaped),
                cmocka_unit_test(test_proc_cgroup),
                cmocka_unit_test(test_keyed_and_numbers),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_capacity),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
