/* SPDX-License-Identifier: MIT */
/* Shared harness of the vmm integration tests (see vmm-harness.h). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "tests/vmm/vmm-harness.h"
#include "vmm/vmm-internal.h"

#define IT_MAX_VMS 8

static char it_tmp[128];
static char *it_kernel;
static char *it_initrd;
static char it_append[64];
static struct it_vm *it_vms[IT_MAX_VMS];
static const char *it_name = "vmm-it";

static const char it_init_script[] =
        "#!/bin/busybox sh\n"
        "/bin/busybox mount -t proc proc /proc\n"
        "echo forklet-test-init up\n"
        "i=0\n"
        "while :; do i=$((i+1)); echo tick $i; /bin/busybox sleep 1; done\n";

static void it_cleanup(void)
{
        for (size_t i = 0; i < IT_MAX_VMS; i++)
                if (it_vms[i])
                        it_vm_destroy(it_vms[i]);
        if (it_tmp[0] && !getenv("FORKLET_KEEP_TMP"))
                fk_rm_rf(it_tmp);
}

static void it_on_signal(int sig)
{
        it_cleanup();
        signal(sig, SIG_DFL);
        raise(sig);
}

void it_log(const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "%s: ", it_name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

void it_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "%s: FAIL %s:%d: %s: ", it_name, file, line, cond);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        for (size_t i = 0; i < IT_MAX_VMS; i++) {
                cleanup_free char *log = NULL;
                if (it_vms[i] && fk_read_file(it_vms[i]->log, 1 << 16, &log, NULL) >= 0 && *log)
                        fprintf(stderr, "--- %s qemu log:\n%s", it_vms[i]->name, log);
        }
        exit(1);
}

static void skip(const char *why)
{
        fprintf(stderr, "%s: SKIP: %s\n", it_name, why);
        exit(IT_SKIP);
}

/* FORKLET_TEST_KERNEL, else the built image's vmlinuz, else the newest /boot/vmlinuz-*. */
static char *find_kernel(void)
{
        const char *env = getenv("FORKLET_TEST_KERNEL"), *img = getenv("FORKLET_IMAGE_DIR");
        char *path = NULL;
        struct dirent *de;
        DIR *d;

        if (env && *env)
                return access(env, R_OK) == 0 ? strdup(env) : NULL;
        if (img && fk_asprintf(&path, "%s/vmlinuz", img) >= 0 && access(path, R_OK) == 0)
                return path;
        free(path);
        path = NULL;
        d = opendir("/boot");
        while (d && (de = readdir(d))) {
                char *cand = NULL;
                if (strncmp(de->d_name, "vmlinuz-", 8) != 0)
                        continue;
                if (fk_asprintf(&cand, "/boot/%s", de->d_name) < 0)
                        break;
                if (!path || strverscmp(cand, path) > 0) {
                        free(path);
                        path = cand;
                } else
                        free(cand);
        }
        if (d)
                closedir(d);
        return path;
}

static void build_initramfs(void)
{
        cleanup_free char *root = NULL, *init = NULL, *cmd = NULL;

        CHECK(fk_asprintf(&root, "%s/initramfs", it_tmp) >= 0, "oom");
        CHECK(fk_asprintf(&it_initrd, "%s/initrd.img", it_tmp) >= 0, "oom");
        CHECK(fk_asprintf(&init, "%s/init", root) >= 0, "oom");
        CHECK(fk_mkdir_p(root, 0755) >= 0, "mkdir %s", root);
        CHECK(fk_write_file_atomic(init, it_init_script, strlen(it_init_script), 0755) >= 0,
              "write %s", init);
        CHECK(fk_asprintf(&cmd,
                          "set -e; cd '%s'; mkdir -p bin proc dev; cp /bin/busybox bin/busybox; "
                          "find . | cpio -o -H newc --quiet | gzip -1 > '%s'",
                          root, it_initrd) >= 0,
              "oom");
        CHECK(system(cmd) == 0, "building the initramfs failed: %s", cmd);
}

void it_setup(const char *test_name)
{
        it_name = test_name;
        if (geteuid() != 0)
                skip("needs root");
        if (system("command -v qemu-system-x86_64 >/dev/null && command -v cpio >/dev/null") != 0)
                skip("qemu-system-x86_64 or cpio missing (scripts/install-deps.sh)");
        if (access("/bin/busybox", X_OK) != 0)
                skip("/bin/busybox missing (busybox-static)");
        it_kernel = find_kernel();
        if (!it_kernel)
                skip("no kernel: set FORKLET_TEST_KERNEL, build the guest-image target, or "
                     "install linux-image-amd64");
        snprintf(it_tmp, sizeof(it_tmp), "/tmp/%s-%d,x", test_name, (int)getpid());
        CHECK(mkdir(it_tmp, 0700) == 0, "mkdir %s: %m", it_tmp);
        atexit(it_cleanup);
        signal(SIGINT, it_on_signal);
        signal(SIGTERM, it_on_signal);
        build_initramfs();
        {
                unsigned khz = 0;
                /* Without it the TCG guest's TSC calibration fails on a busy host and the
                 * kernel hangs at boot (see vmm/tsc.c). */
                if (vmm_host_tsc_khz(&khz) >= 0)
                        snprintf(it_append, sizeof(it_append), "tsc_early_khz=%u", khz);
        }
        it_log("kernel %s, dir %s, append \"%s\"", it_kernel, it_tmp, it_append);
}

void it_use_image(void)
{
        const char *img = getenv("FORKLET_IMAGE_DIR");
        char *kernel = NULL, *initrd = NULL;

        if (!img || fk_asprintf(&kernel, "%s/vmlinuz", img) < 0 ||
            fk_asprintf(&initrd, "%s/initrd.img", img) < 0 || access(kernel, R_OK) != 0 ||
            access(initrd, R_OK) != 0) {
                free(kernel);
                free(initrd);
                skip("no guest image: build the guest-image target (FORKLET_IMAGE_DIR)");
        }
        free(it_kernel);
        free(it_initrd);
        it_kernel = kernel;
        it_initrd = initrd;
        it_log("guest image %s", img);
}

const char *it_dir(void)
{
        return it_tmp;
}

double it_ms_since(uint64_t t0_ns)
{
        return (double)(fk_now_mono_ns() - t0_ns) / 1e6;
}

void it_vm_init(struct it_vm *vm, const char *name)
{
        *vm = (struct it_vm){};
        vm->name = strdup(name);
        CHECK(fk_asprintf(&vm->dir, "%s/%s", it_tmp, name) >= 0, "oom");
        CHECK(fk_mkdir_p(vm->dir, 0700) >= 0, "mkdir %s", vm->dir);
        CHECK(fk_asprintf(&vm->mem_path, "%s/ram", vm->dir) >= 0 &&
                      fk_asprintf(&vm->qmp_path, "%s/qmp.sock", vm->dir) >= 0 &&
                      fk_asprintf(&vm->agent_path, "%s/agent.sock", vm->dir) >= 0 &&
                      fk_asprintf(&vm->console, "%s/console.log", vm->dir) >= 0 &&
                      fk_asprintf(&vm->log, "%s/qemu.log", vm->dir) >= 0 &&
                      fk_asprintf(&vm->pidfile, "%s/qemu.pid", vm->dir) >= 0,
              "oom");
        vm->cfg = (struct vmm_config){
                .name = vm->name,
                .accel = VMM_ACCEL_TCG,
                .vcpus = 1,
                .memory_mib = 256,
                .kernel = it_kernel,
                .initrd = it_initrd,
                .mem_path = vm->mem_path,
                .mem_share = true,
                .qmp_socket = vm->qmp_path,
                .agent_socket = vm->agent_path,
                .console_log = vm->console,
                .pidfile = vm->pidfile,
                .append = it_append,
        };
}

int it_vm_spawn(struct it_vm *vm, struct fk_error *err)
{
        char **argv = NULL;
        int r;

        r = vmm_build_argv(&vm->cfg, &argv, err);
        if (r < 0)
                return r;
        r = vmm_process_spawn(argv, vm->log, NULL, NULL, &vm->proc, err);
        fk_strv_free(argv);
        for (size_t i = 0; r >= 0 && i < IT_MAX_VMS; i++)
                if (!it_vms[i] || it_vms[i] == vm) {
                        it_vms[i] = vm;
                        break;
                }
        return r;
}

void it_vm_connect(struct it_vm *vm)
{
        struct fk_error err = {};

        CHECK(qmp_client_connect(vm->qmp_path, 10000, &vm->qmp, &err) >= 0, "%s: %s", vm->name,
              err.msg);
}

unsigned it_wait_console(struct it_vm *vm, const char *text, unsigned timeout_ms)
{
        uint64_t t0 = fk_now_mono_ns();

        for (;;) {
                cleanup_free char *log = NULL;
                if (fk_read_file(vm->console, 1 << 20, &log, NULL) >= 0 && strstr(log, text))
                        return (unsigned)it_ms_since(t0);
                CHECK(it_ms_since(t0) < timeout_ms, "%s: console never showed \"%s\" (%s)",
                      vm->name, text, log ? log : "no console log");
                CHECK(vmm_process_poll(vm->proc, NULL, NULL) == 0, "%s: QEMU exited", vm->name);
                usleep(20000);
        }
}

unsigned it_last_tick(struct it_vm *vm)
{
        cleanup_free char *log = NULL;
        unsigned last = 0, n;

        if (fk_read_file(vm->console, 1 << 20, &log, NULL) < 0)
                return 0;
        for (const char *p = log; (p = strstr(p, "tick ")); p += 5)
                if (sscanf(p, "tick %u", &n) == 1 && n > last)
                        last = n;
        return last;
}

void it_qmp(struct it_vm *vm, const char *command, const char *args_json)
{
        struct fk_error err = {};
        json_t *args = args_json ? json_loads(args_json, 0, NULL) : NULL;
        int r;

        CHECK(!args_json || args, "bad test JSON %s", args_json);
        r = qmp_execute(vm->qmp, command, args, 10000, NULL, &err);
        json_decref(args);
        CHECK(r >= 0, "%s: %s: %s", vm->name, command, err.msg);
}

void it_expect_status(struct it_vm *vm, const char *status)
{
        cleanup_free char *got = NULL;
        struct fk_error err = {};

        CHECK(qmp_query_status(vm->qmp, 10000, &got, &err) >= 0, "%s: %s", vm->name, err.msg);
        CHECK(strcmp(got, status) == 0, "%s: status %s, want %s", vm->name, got, status);
}

void it_vm_destroy(struct it_vm *vm)
{
        for (size_t i = 0; i < IT_MAX_VMS; i++)
                if (it_vms[i] == vm)
                        it_vms[i] = NULL;
        if (vm->proc && vmm_process_poll(vm->proc, NULL, NULL) == 0) {
                vmm_process_kill(vm->proc, SIGKILL);
                vmm_process_wait(vm->proc, 10000);
        }
        vm->qmp = qmp_client_free(vm->qmp);
        vm->proc = vmm_process_free(vm->proc);
        free(vm->name);
        free(vm->dir);
        free(vm->mem_path);
        free(vm->qmp_path);
        free(vm->agent_path);
        free(vm->console);
        free(vm->log);
        free(vm->pidfile);
        *vm = (struct it_vm){};
}
