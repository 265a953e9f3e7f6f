/* SPDX-License-Identifier: MIT */
/* Accelerator selection with the KVM device path pointed at temp files. */
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

#include "vmm/vmm-internal.h"
#include "vmm/vmm.h"

static void test_accel(void **state)
{
        char dir[] = "/tmp/vmm-accel-XXXXXX", dev[64], missing[64];
        enum vmm_accel a = 99;
        struct fk_error err = {};
        FILE *f;

        (void)state;
        assert_non_null(mkdtemp(dir));
        snprintf(dev, sizeof(dev), "%s/kvm", dir);
        snprintf(missing, sizeof(missing), "%s/missing", dir);
        f = fopen(dev, "w");
        assert_non_null(f);
        fclose(f);

        assert_int_equal(vmm_accel_resolve_at("tcg", dev, false, &a, &err), 0);
        assert_int_equal(a, VMM_ACCEL_TCG);
        assert_int_equal(vmm_accel_resolve_at("auto", dev, false, &a, &err), 0);
        assert_int_equal(a, VMM_ACCEL_KVM);
        assert_int_equal(vmm_accel_resolve_at("kvm", dev, false, &a, &err), 0);
        assert_int_equal(a, VMM_ACCEL_KVM);

        assert_int_equal(vmm_accel_resolve_at("auto", missing, false, &a, &err), 0);
        assert_int_equal(a, VMM_ACCEL_TCG);
        a = 99;
        assert_int_equal(vmm_accel_resolve_at("kvm", missing, false, &a, &err), -ENODEV);
        assert_int_equal(a, 99);
        assert_int_equal(err.code, -ENODEV);
        assert_non_null(strstr(err.msg, missing));
        assert_non_null(strstr(err.msg, "No such file or directory"));
        assert_non_null(strstr(err.msg, "use accel: auto or tcg"));

        assert_int_equal(vmm_accel_resolve_at("hvf", dev, false, &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "known: auto, kvm, tcg"));
        assert_int_equal(vmm_accel_resolve_at(NULL, dev, false, &a, &err), -EINVAL);

        assert_string_equal(vmm_accel_to_string(VMM_ACCEL_TCG), "tcg");
        assert_string_equal(vmm_accel_to_string(VMM_ACCEL_KVM), "kvm");
        unlink(dev);
        rmdir(dir);
}

/* The real device: whatever this host has, the answer must match it. */
static void test_accel_host(void **state)
{
        enum vmm_accel a;
        struct fk_error err = {};
        int openable = access("/dev/kvm", R_OK | W_OK) == 0;
        int usable = openable && vmm_kvm_probe("/dev/kvm") == 0;

        (void)state;
        assert_int_equal(vmm_accel_resolve("auto", &a, &err), 0);
        assert_int_equal(a, usable ? VMM_ACCEL_KVM : VMM_ACCEL_TCG);
        assert_int_equal(vmm_accel_resolve("kvm", &a, &err), openable ? 0 : -ENODEV);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accel),
                cmocka_unit_test(test_accel_host),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
