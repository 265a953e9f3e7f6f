/* SPDX-License-Identifier: MIT */
/* vmm_build_argv() against golden files (tests/data/vmm/NAME.args, one argument per line);
 * FORKLET_UPDATE_GOLDEN=1 rewrites them. Also the missing-field and bad-value errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

static struct vmm_config base(void)
{
        return (struct vmm_config){
                .name = "roastery",
                .accel = VMM_ACCEL_TCG,
                .vcpus = 1,
                .memory_mib = 256,
                .kernel = "/var/lib/forklet/images/minimal/vmlinuz",
                .initrd = "/var/lib/forklet/images/minimal/initrd.img",
                .mem_path = "/run/forklet/sessions/roastery/ram",
                .mem_share = true,
                .qmp_socket = "/run/forklet/sessions/roastery/qmp.sock",
                .agent_socket = "/run/forklet/sessions/roastery/agent.sock",
                .console_log = "/var/lib/forklet/sessions/roastery/console.log",
        };
}

static char *join_lines(char **argv)
{
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);

        assert_non_null(f);
        for (char **a = argv; *a; a++)
                fprintf(f, "%s\n", *a);
        fclose(f);
        return out;
}

static void check_golden(const struct vmm_config *cfg, const char *name)
{
        const char *dir = getenv("FORKLET_TEST_DATA");
        cleanup_free char *path = NULL, *want = NULL, *got = NULL;
        struct fk_error err = {};
        char **argv = NULL;
        int r;

        assert_non_null(dir);
        r = vmm_build_argv(cfg, &argv, &err);
        if (r < 0)
                fail_msg("%s: vmm_build_argv: %s", name, err.msg);
        got = join_lines(argv);
        fk_strv_free(argv);
        assert_true(fk_asprintf(&path, "%s/vmm/%s.args", dir, name) >= 0);
        if (getenv("FORKLET_UPDATE_GOLDEN")) {
                assert_int_equal(fk_write_file_atomic(path, got, strlen(got), 0644), 0);
                return;
        }
        r = fk_read_file(path, 1 << 20, &want, NULL);
        if (r < 0)
                fail_msg("%s: %s (run with FORKLET_UPDATE_GOLDEN=1 to create it)", path,
                         strerror(-r));
        if (strcmp(want, got) != 0)
                fail_msg("%s differs.\n--- want\n%s--- got\n%s", path, want, got);
}

static void test_minimal_tcg(void **state)
{
        struct vmm_config c = base();

        (void)state;
        check_golden(&c, "minimal-tcg");
}

/* TCG with the host's TSC frequency, invariant: tsc_early_khz and tsc=reliable. */
static void test_tcg_tsc(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.tsc_khz = 2095991;
        c.tsc_reliable = true;
        c.append = "forklet.fork_id=0";
        check_golden(&c, "tcg-tsc");
}

static void test_kvm(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.accel = VMM_ACCEL_KVM;
        c.vcpus = 2;
        c.memory_mib = 1024;
        c.qemu_binary = "/usr/bin/qemu-system-x86_64";
        c.append = "forklet.fork_id=0";
        check_golden(&c, "kvm");
}

static void test_fork(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.name = "roastery-fork-1";
        c.mem_path = "/var/lib/forklet/checkpoints/roastery/ready/ram";
        c.mem_share = false;
        c.incoming_defer = true;
        c.vmgenid = "0f6c1a9e-3b1d-4e8a-9c77-2d5e4f1a0b3c";
        c.pidfile = "/run/forklet/sessions/roastery-fork-1/qemu.pid";
        check_golden(&c, "fork");
}

/* -S with start_paused only: the materialize helper's guest never runs. */
static void test_start_paused(void **state)
{
        struct vmm_config c = base();
        char **argv = NULL;
        struct fk_error err = {0};
        size_t n = 0;

        (void)state;
        c.incoming_defer = true;
        for (int paused = 0; paused < 2; paused++) {
                bool seen = false;

                c.start_paused = paused;
                assert_int_equal(vmm_build_argv(&c, &argv, &err), 0);
                for (n = 0; argv[n]; n++)
                        seen = seen || strcmp(argv[n], "-S") == 0;
                assert_int_equal(seen, paused);
                fk_strv_free(argv);
        }
}

static void test_disk(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.disk = "/var/lib/forklet/sessions/roastery/disk.qcow2";
        check_golden(&c, "disk");
        /* three files: a drop-cache=off key for each, the bottom's two backings down */
        c.disk_chain = 3;
        check_golden(&c, "disk-chain");
        c.disk_chain = 0;
        c.rootfs = "/var/lib/forklet/images/debian/rootfs.img";
        check_golden(&c, "rootfs");
}

static void test_tap(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.tap = "tap0";
        c.mac = "52:54:00:12:34:56";
        check_golden(&c, "tap");
}

/* A VM of an older release, and the restores of its checkpoints: the NIC keeps offering the
 * guest announce (its features must be the stream's); new VMs turn it off. */
static void test_guest_announce(void **state)
{
        struct vmm_config c = base();
        struct fk_error err = {};
        char **argv = NULL;
        bool seen = false;

        (void)state;
        c.tap = "tap0";
        c.mac = "52:54:00:12:34:56";
        c.guest_announce = true;
        assert_int_equal(vmm_build_argv(&c, &argv, &err), 0);
        for (size_t i = 0; argv[i]; i++)
                if (strncmp(argv[i], "virtio-net-device,", 18) == 0) {
                        assert_string_equal(argv[i],
                                            "virtio-net-device,netdev=net0,mac=52:54:00:12:34:56");
                        seen = true;
                }
        assert_true(seen);
        fk_strv_free(argv);
}

static void test_vmgenid(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.vmgenid = "8e3f5d52-5b2c-4a7e-b1a8-6c0d9e2f7a41";
        check_golden(&c, "vmgenid");
}

static void test_sandbox(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.sandbox = true;
        check_golden(&c, "sandbox");
}

/* The balloon goes after every other device: the same VM without it has the same argv but
 * for the balloon's two arguments, so checkpoints made before it restore with the same slots. */
static void test_balloon(void **state)
{
        struct vmm_config c = base();
        struct fk_error err = {};
        char **with = NULL, **without = NULL;
        size_t n;

        (void)state;
        c.disk = "/var/lib/forklet/sessions/roastery/disk.qcow2";
        c.tap = "tap0";
        c.mac = "52:54:00:12:34:56";
        c.vmgenid = "8e3f5d52-5b2c-4a7e-b1a8-6c0d9e2f7a41";
        c.balloon = true;
        check_golden(&c, "balloon");
        assert_int_equal(vmm_build_argv(&c, &with, &err), 0);
        c.balloon = false;
        assert_int_equal(vmm_build_argv(&c, &without, &err), 0);
        n = fk_strv_length(without);
        assert_int_equal(fk_strv_length(with), n + 2);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(with[i], without[i]);
        assert_string_equal(with[n], "-device");
        assert_string_equal(with[n + 1], "virtio-balloon-device,id=balloon0,deflate-on-oom=on");
        fk_strv_free(with);
        fk_strv_free(without);
}

/* Free page hinting: the balloon, still last, with free-page-hint on its own iothread (an
 * -object before it, which takes no virtio-mmio slot); hinting without a balloon is nothing. */
static void test_balloon_hint(void **state)
{
        struct vmm_config c = base();
        struct fk_error err = {};
        char **with = NULL, **without = NULL, **none = NULL;
        size_t n;

        (void)state;
        c.balloon = true;
        c.balloon_hint = true;
        assert_int_equal(vmm_build_argv(&c, &with, &err), 0);
        c.balloon_hint = false;
        assert_int_equal(vmm_build_argv(&c, &without, &err), 0);
        n = fk_strv_length(without);
        assert_int_equal(fk_strv_length(with), n + 2);
        for (size_t i = 0; i < n - 2; i++)
                assert_string_equal(with[i], without[i]);
        assert_string_equal(with[n - 2], "-object");
        assert_string_equal(with[n - 1], "iothread,id=" VMM_BALLOON_IOTHREAD);
        assert_string_equal(with[n], "-device");
        assert_string_equal(with[n + 1], "virtio-balloon-device,id=balloon0,deflate-on-oom=on,"
                                         "free-page-hint=on,iothread=" VMM_BALLOON_IOTHREAD);
        c.balloon = false;
        c.balloon_hint = true;
        assert_int_equal(vmm_build_argv(&c, &none, &err), 0);
        for (size_t i = 0; none[i]; i++)
                assert_null(strstr(none[i], "balloon"));
        fk_strv_free(with);
        fk_strv_free(without);
        fk_strv_free(none);
}

/* The RAM tail: -m and the backend's size in KiB, 8 KiB over memory_mib; the rest unchanged. */
static void test_ram_tail(void **state)
{
        struct vmm_config c = base();
        struct fk_error err = {};
        char **with = NULL, **without = NULL;
        size_t n, diff = 0;

        (void)state;
        c.ram_tail = true;
        assert_int_equal(vmm_build_argv(&c, &with, &err), 0);
        c.ram_tail = false;
        assert_int_equal(vmm_build_argv(&c, &without, &err), 0);
        n = fk_strv_length(without);
        assert_int_equal(fk_strv_length(with), n);
        for (size_t i = 0; i < n; i++) {
                if (strcmp(with[i], without[i]) == 0)
                        continue;
                diff++;
                if (strcmp(without[i], "256M") == 0)
                        assert_string_equal(with[i], "262152K");
                else
                        assert_non_null(
                                strstr(with[i], "memory-backend-file,id=mem,size=262152K,"));
        }
        assert_int_equal(diff, 2);
        assert_int_equal(vmm_ram_bytes(256, true), (256ull << 20) + 8192);
        assert_int_equal(vmm_ram_bytes(256, false), 256ull << 20);
        fk_strv_free(with);
        fk_strv_free(without);
}

/* Everything at once, with commas in paths (QEMU reads ",," as a literal comma). */
static void test_full_escaped(void **state)
{
        struct vmm_config c = base();

        (void)state;
        c.mem_path = "/run/a,b/ram";
        c.console_log = "/var/log/con,sole.log";
        c.qmp_socket = "/run/a,b/qmp.sock";
        c.qmp2_socket = "/run/a,b/qmp2.sock";
        c.agent_socket = "/run/a,b/agent.sock";
        c.disk = "/var/lib/d,isk.qcow2";
        c.tap = "tap0";
        c.mac = "52:54:00:aa:bb:cc";
        c.vmgenid = "8e3f5d52-5b2c-4a7e-b1a8-6c0d9e2f7a41";
        c.pidfile = "/run/a,b/qemu.pid";
        check_golden(&c, "full-escaped");
}

static void expect_error(const struct vmm_config *c, const char *msg)
{
        struct fk_error err = {};
        char **argv = NULL;

        assert_int_equal(vmm_build_argv(c, &argv, &err), -EINVAL);
        assert_null(argv);
        assert_int_equal(err.code, -EINVAL);
        if (!strstr(err.msg, msg))
                fail_msg("error \"%s\" does not mention \"%s\"", err.msg, msg);
}

static void test_errors(void **state)
{
        struct vmm_config c;

        (void)state;
#define MISSING(field, text)                                                                       \
        c = base();                                                                                \
        c.field = NULL;                                                                            \
        expect_error(&c, text " is required");
        MISSING(name, "name");
        MISSING(kernel, "kernel");
        MISSING(initrd, "initrd");
        MISSING(mem_path, "mem_path");
        MISSING(qmp_socket, "qmp_socket");
        MISSING(agent_socket, "agent_socket");
        MISSING(console_log, "console_log");
#undef MISSING
        c = base();
        c.kernel = "";
        expect_error(&c, "kernel is required");
        c = base();
        c.vcpus = 0;
        expect_error(&c, "vcpus must be at least 1");
        c = base();
        c.memory_mib = 0;
        expect_error(&c, "memory_mib must be at least 1");
        c = base();
        c.tap = "tap0";
        expect_error(&c, "needs a mac");
        c.mac = "52:54:00:12:34";
        expect_error(&c, "needs a mac");
        c.mac = "52:54:00:12:34:5g";
        expect_error(&c, "needs a mac");
        c = base();
        c.vmgenid = "not-a-guid";
        expect_error(&c, "is not a GUID");
        c = base();
        c.accel = (enum vmm_accel)7;
        expect_error(&c, "unknown accelerator");
        c = base();
        c.tap = "ta,p";
        c.mac = "52:54:00:12:34:56";
        expect_error(&c, "has a comma");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_minimal_tcg),
                cmocka_unit_test(test_tcg_tsc),
                cmocka_unit_test(test_kvm),
                cmocka_unit_test(test_fork),
                cmocka_unit_test(test_disk),
                cmocka_unit_test(test_tap),
                cmocka_unit_test(test_guest_announce),
                cmocka_unit_test(test_vmgenid),
                cmocka_unit_test(test_full_escaped),
                cmocka_unit_test(test_sandbox),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_balloon),
                cmocka_unit_test(test_balloon_hint),
                cmocka_unit_test(test_ram_tail),
                cmocka_unit_test(test_start_paused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
