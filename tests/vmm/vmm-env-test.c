/* SPDX-License-Identifier: MIT */
/* vmm_build_env(): the lean settings of restored TCG QEMUs (THP off, glibc malloc on one arena,
 * merged into a GLIBC_TUNABLES the base already has), none under KVM or for cold boots; and
 * vmm_process_spawn_env() handing both to a real child process (its /proc/self/status and
 * environment). No root needed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

static struct vmm_config restored(enum vmm_accel accel)
{
        return (struct vmm_config){.name = "r", .accel = accel, .incoming_defer = true};
}

/* The entries of e that start with prefix, joined by '|'. */
static char *entries(const struct vmm_exec_env *e, const char *prefix)
{
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);

        assert_non_null(f);
        for (char **v = e->envp; *v; v++)
                if (strncmp(*v, prefix, strlen(prefix)) == 0)
                        fprintf(f, "%s|", *v);
        fclose(f);
        return out;
}

static void build(const struct vmm_config *c, char *const *base, struct vmm_exec_env *e)
{
        struct fk_error err = {};

        if (vmm_build_env(c, base, e, &err) < 0)
                fail_msg("vmm_build_env: %s", err.msg);
        assert_non_null(e->envp);
}

static void test_restored_tcg(void **state)
{
        char *base[] = {(char *)"PATH=/usr/bin", (char *)"HOME=/root", NULL};
        struct vmm_config c = restored(VMM_ACCEL_TCG);
        struct vmm_exec_env e = {};
        cleanup_free char *t = NULL, *p = NULL;

        (void)state;
        build(&c, base, &e);
        assert_true(e.thp_disable);
        t = entries(&e, "GLIBC_TUNABLES=");
        assert_string_equal(t, "GLIBC_TUNABLES=" VMM_LEAN_MALLOC_TUNABLE "|");
        p = entries(&e, "PATH=");
        assert_string_equal(p, "PATH=/usr/bin|");
        assert_int_equal(fk_strv_length(e.envp), 2); /* HOME is not passed on */
        vmm_exec_env_done(&e);
        assert_null(e.envp);
}

static void test_merges_tunables(void **state)
{
        char *base[] = {(char *)"GLIBC_TUNABLES=glibc.malloc.tcache_count=0", NULL};
        char *has[] = {(char *)"GLIBC_TUNABLES=glibc.malloc.arena_max=4", NULL};
        char *empty[] = {(char *)"GLIBC_TUNABLES=", NULL};
        struct vmm_config c = restored(VMM_ACCEL_TCG);
        struct vmm_exec_env e = {};
        char *t;

        (void)state;
        build(&c, base, &e);
        t = entries(&e, "GLIBC_TUNABLES=");
        assert_string_equal(t, "GLIBC_TUNABLES=glibc.malloc.tcache_count=0:" VMM_LEAN_MALLOC_TUNABLE
                               "|");
        free(t);
        vmm_exec_env_done(&e);
        /* an operator's own arena_max wins */
        build(&c, has, &e);
        t = entries(&e, "GLIBC_TUNABLES=");
        assert_string_equal(t, "GLIBC_TUNABLES=glibc.malloc.arena_max=4|");
        free(t);
        vmm_exec_env_done(&e);
        build(&c, empty, &e);
        t = entries(&e, "GLIBC_TUNABLES=");
        assert_string_equal(t, "GLIBC_TUNABLES=" VMM_LEAN_MALLOC_TUNABLE "|");
        free(t);
        vmm_exec_env_done(&e);
}

static void test_unchanged(void **state)
{
        char *base[] = {(char *)"PATH=/usr/bin", (char *)"GLIBC_TUNABLES=glibc.malloc.x=1", NULL};
        struct vmm_config kvm = restored(VMM_ACCEL_KVM), cold = restored(VMM_ACCEL_TCG);
        struct vmm_exec_env e = {};

        (void)state;
        cold.incoming_defer = false;
        /* KVM: no code buffer, vCPU threads that malloc in parallel; cold boots fill the code
         * buffer anyway */
        build(&kvm, base, &e);
        assert_false(e.thp_disable);
        assert_true(fk_strv_equal(e.envp, base));
        vmm_exec_env_done(&e);
        build(&cold, base, &e);
        assert_false(e.thp_disable);
        assert_true(fk_strv_equal(e.envp, base));
        vmm_exec_env_done(&e);
        build(&cold, NULL, &e);
        assert_int_equal(fk_strv_length(e.envp), 0);
        vmm_exec_env_done(&e);
        assert_int_equal(vmm_build_env(NULL, base, &e, NULL), -EINVAL);
}

/* Only what QEMU reads of the environment reaches it: no tokens, keys or FORKLET_* knobs. */
static void test_passes_on_little(void **state)
{
        char *base[] = {(char *)"AWS_SECRET_ACCESS_KEY=k",
                        (char *)"PATH=/usr/bin",
                        (char *)"FORKLET_TOKEN_FILE=/etc/forklet/token",
                        (char *)"LC_ALL=C.UTF-8",
                        (char *)"TMPDIR=/var/tmp",
                        (char *)"HOME=/root",
                        (char *)"TZ=UTC",
                        (char *)"LANG=C",
                        NULL};
        char *want[] = {(char *)"PATH=/usr/bin",   (char *)"LC_ALL=C.UTF-8",
                        (char *)"TMPDIR=/var/tmp", (char *)"TZ=UTC",
                        (char *)"LANG=C",          NULL};
        struct vmm_config cold = restored(VMM_ACCEL_TCG), tcg = restored(VMM_ACCEL_TCG);
        struct vmm_exec_env e = {};
        cleanup_free char *t = NULL;

        (void)state;
        cold.incoming_defer = false;
        build(&cold, base, &e);
        assert_true(fk_strv_equal(e.envp, want));
        vmm_exec_env_done(&e);
        /* a restored TCG QEMU: the same, and the tunable */
        build(&tcg, base, &e);
        assert_int_equal(fk_strv_length(e.envp), 6);
        t = entries(&e, "AWS_");
        assert_string_equal(t, "");
        vmm_exec_env_done(&e);
}

/* A real child gets both: THP_enabled 0 in its status, the tunable in its environment. */
static void test_spawn(void **state)
{
        char dir[] = "/tmp/vmm-env-XXXXXX", out[64], script[256];
        char *base[] = {(char *)"PATH=/usr/bin:/bin", NULL};
        struct vmm_config c = restored(VMM_ACCEL_TCG);
        struct vmm_exec_env e = {};
        struct vmm_process *p = NULL;
        struct fk_error err = {};
        cleanup_free char *text = NULL;
        const char *reason;
        int status;

        (void)state;
        assert_non_null(mkdtemp(dir));
        snprintf(out, sizeof(out), "%s/out", dir);
        snprintf(script, sizeof(script),
                 "grep THP_enabled /proc/self/status > %s; echo \"T=$GLIBC_TUNABLES\" >> %s", out,
                 out);
        char *argv[] = {(char *)"sh", (char *)"-c", script, NULL};
        build(&c, base, &e);
        if (vmm_process_spawn_env(argv, &e, NULL, NULL, NULL, &p, &err) < 0)
                fail_msg("spawn: %s", err.msg);
        assert_int_equal(vmm_process_wait(p, 10000), 1);
        assert_int_equal(vmm_process_poll(p, &status, &reason), 1);
        assert_int_equal(status, 0);
        assert_int_equal(fk_read_file(out, 4096, &text, NULL), 0);
        /* kernels before 6.x do not print THP_enabled: only the tunable is checked there */
        if (strstr(text, "THP_enabled"))
                assert_non_null(strstr(text, "THP_enabled:\t0\n"));
        assert_non_null(strstr(text, "T=" VMM_LEAN_MALLOC_TUNABLE "\n"));
        vmm_process_free(p);
        vmm_exec_env_done(&e);
        fk_rm_rf(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_restored_tcg), cmocka_unit_test(test_merges_tunables),
                cmocka_unit_test(test_unchanged),    cmocka_unit_test(test_passes_on_little),
                cmocka_unit_test(test_spawn),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
