/* SPDX-License-Identifier: MIT */
/* Boots, forks, drives and stops microVMs for the fork-engine test and bench/fork. */
#include "tests/fork/fork-harness.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define BOOT_TIMEOUT_MS 240000
#define CALL_TIMEOUT_MS 60000

void fh_guid(char out[37])
{
        unsigned char r[16];

        (void)fk_random_bytes(r, sizeof(r));
        r[6] = (r[6] & 0x0f) | 0x40;
        r[8] = (r[8] & 0x3f) | 0x80;
        snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
                 r[13], r[14], r[15]);
}

unsigned fh_tb_size_mib;
bool fh_ram_tail;
const char *fh_disk;

static int collect(int stream, const void *data, size_t size, void *userdata)
{
        struct fh_out *b = userdata;

        if (stream != 1)
                return 0;
        size = FK_MIN(size, sizeof(b->data) - 1 - b->len);
        memcpy(b->data + b->len, data, size);
        b->len += size;
        b->data[b->len] = '\0';
        return 0;
}

int fh_sh(struct fh_vm *vm, const char *script, struct fh_out *out)
{
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)script, NULL};
        struct vmm_exec_request req = {.argv = argv, .timeout_ms = CALL_TIMEOUT_MS};
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct fh_out *local = NULL;
        int r;

        if (!out) {
                local = calloc(1, sizeof(*local));
                if (!local)
                        return -ENOMEM;
                out = local;
        }
        out->len = 0;
        out->data[0] = '\0';
        r = vmm_agent_exec(vm->agent, &req, collect, out, &res, &err);
        if (r < 0)
                fprintf(stderr, "exec '%s': %s\n", script, err.msg);
        while (out->len > 0 && out->data[out->len - 1] == '\n')
                out->data[--out->len] = '\0';
        free(local);
        if (r < 0)
                return r;
        return res.signaled ? 128 + res.signal : res.exit_code;
}

static int vm_paths(struct fh_vm *vm, const char *workdir, const char *name, const char *ckpt_dir)
{
        snprintf(vm->dir, sizeof(vm->dir), "%s/%s", workdir, name);
        if (fk_mkdir_p(vm->dir, 0700) < 0)
                return -errno;
        if (ckpt_dir)
                snprintf(vm->mem, sizeof(vm->mem), "%s/ram", ckpt_dir);
        else
                snprintf(vm->mem, sizeof(vm->mem), "%s/mem.ram", vm->dir);
        snprintf(vm->qmp_path, sizeof(vm->qmp_path), "%s/qmp.sock", vm->dir);
        snprintf(vm->agent_path, sizeof(vm->agent_path), "%s/agent.sock", vm->dir);
        snprintf(vm->console, sizeof(vm->console), "%s/console.log", vm->dir);
        snprintf(vm->log, sizeof(vm->log), "%s/qemu.log", vm->dir);
        return 0;
}

int fh_vm_config(struct fh_vm *vm, const char *workdir, const char *name, const char *image,
                 unsigned memory_mib, const char *ckpt_dir, struct vmm_config *ret,
                 struct fk_error *err)
{
        bool fork = ckpt_dir != NULL;
        enum vmm_accel accel;
        unsigned tsc_khz = 0;
        int r;

        r = vm_paths(vm, workdir, name, ckpt_dir);
        if (r < 0)
                return fk_error_set(err, r, "mkdir %s: %s", vm->dir, strerror(-r));
        if (snprintf(vm->kernel, sizeof(vm->kernel), "%s/vmlinuz", image) >=
                    (int)sizeof(vm->kernel) ||
            snprintf(vm->initrd, sizeof(vm->initrd), "%s/initrd.img", image) >=
                    (int)sizeof(vm->initrd))
                return fk_error_set(err, -ENAMETOOLONG, "image path %s too long", image);
        r = vmm_accel_resolve("auto", &accel, err);
        if (r < 0)
                return r;
        (void)vmm_host_tsc_khz(&tsc_khz);
        fh_guid(vm->guid);
        *ret = (struct vmm_config){
                .name = name,
                .accel = accel,
                .vcpus = 1,
                .memory_mib = memory_mib,
                .kernel = vm->kernel,
                .initrd = vm->initrd,
                .mem_path = vm->mem,
                .mem_share = !fork,
                .qmp_socket = vm->qmp_path,
                .agent_socket = vm->agent_path,
                .console_log = vm->console,
                .vmgenid = vm->guid,
                .incoming_defer = fork,
                .tsc_khz = tsc_khz,
                .tsc_reliable = vmm_host_tsc_invariant(),
                .tb_size_mib = fh_tb_size_mib,
                .ram_tail = fh_ram_tail,
                .disk = fh_disk,
        };
        return 0;
}

static int vm_spawn(struct fh_vm *vm, const struct vmm_config *cfg, struct fk_error *err)
{
        struct vmm_exec_env env = {0};
        char **argv = NULL;
        int r;

        r = vmm_build_argv(cfg, &argv, err);
        if (r < 0)
                return r;
        r = vmm_build_env(cfg, environ, &env, err);
        if (r < 0) {
                fk_strv_free(argv);
                return r;
        }
        vm->spawn_ns = fk_now_mono_ns();
        r = vmm_process_spawn_env(argv, &env, vm->log, NULL, NULL, &vm->proc, err);
        fk_strv_free(argv);
        vmm_exec_env_done(&env);
        return r;
}

int fh_vm_wait(struct fh_vm *vm, const char *name, bool fork, struct fk_error *err)
{
        int r = vmm_agent_wait_ready(vm->agent, BOOT_TIMEOUT_MS, err);

        if (r < 0)
                return r;
        if (!fork) {
                /* as forkletd does after a cold boot: the guest's CRNG is ready before a
                 * checkpoint (an older image's agent answers ENOSYS) */
                unsigned char seed[64];

                r = fk_random_bytes(seed, sizeof(seed));
                if (r >= 0)
                        r = vmm_agent_add_entropy(vm->agent, seed, sizeof(seed), CALL_TIMEOUT_MS,
                                                  err);
                if (r < 0 && r != -ENOSYS)
                        return r;
        }
        if (fork) {
                /* A copied machine shares the parent's CRNG state: give it its own identity and
                 * fresh entropy before anything else, as forkletd does. */
                unsigned char entropy[64];

                r = fk_random_bytes(entropy, sizeof(entropy));
                if (r < 0)
                        return fk_error_set(err, r, "getrandom failed");
                r = vmm_agent_set_identity(vm->agent, name, NULL, entropy, sizeof(entropy),
                                           CALL_TIMEOUT_MS, err);
                if (r < 0)
                        return r;
        }
        vm->ready_ns = fk_now_mono_ns();
        return 0;
}

bool fh_full_stream;

int fh_vm_start(struct fh_vm *vm, const char *workdir, const char *name, const char *image,
                unsigned memory_mib, const char *ckpt_dir, bool wait, struct fk_error *err)
{
        struct vmm_config cfg;
        int r;

        r = fh_vm_config(vm, workdir, name, image, memory_mib, ckpt_dir, &cfg, err);
        if (r < 0)
                return r;
        r = vm_spawn(vm, &cfg, err);
        if (r < 0)
                return r;
        r = qmp_client_connect(vm->qmp_path, 30000, &vm->qmp, err);
        if (r < 0)
                return r;
        if (ckpt_dir && fh_full_stream) {
                cleanup_free char *full = NULL;

                /* a live checkpoint's stream: RAM and devices into the private mapping */
                if (fk_asprintf(&full, "%s/full", ckpt_dir) < 0)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                r = vmm_migrate_load_file(vm->qmp, full, false, CALL_TIMEOUT_MS, err);
                if (r >= 0)
                        r = qmp_execute(vm->qmp, "cont", NULL, CALL_TIMEOUT_MS, NULL, err);
                if (r < 0)
                        return r;
        } else if (ckpt_dir) {
                r = vmm_checkpoint_load(vm->qmp, ckpt_dir, true, false, CALL_TIMEOUT_MS, err);
                if (r < 0)
                        return r;
        }
        r = vmm_agent_connect(vm->agent_path, 30000, &vm->agent, err);
        if (r < 0)
                return r;
        return wait ? fh_vm_wait(vm, name, ckpt_dir != NULL, err) : 0;
}

void fh_vm_stop(struct fh_vm *vm)
{
        if (vm->proc) {
                vmm_process_kill(vm->proc, SIGKILL);
                vmm_process_wait(vm->proc, 10000);
        }
        vm->agent = vmm_agent_free(vm->agent);
        vm->qmp = qmp_client_free(vm->qmp);
        vm->proc = vmm_process_free(vm->proc);
}

static void dump_file(const char *path)
{
        cleanup_free char *text = NULL;

        if (fk_read_file(path, 1 << 20, &text, NULL) >= 0)
                fprintf(stderr, "--- %s:\n%s\n---\n", path, text);
}

void fh_vm_dump(const struct fh_vm *vm)
{
        if (vm->dir[0]) {
                dump_file(vm->log);
                dump_file(vm->console);
        }
}

int fh_fail(const struct fh_vm *vm, const char *what, const struct fk_error *err)
{
        fprintf(stderr, "FAIL: %s%s%s\n", what, err && err->msg[0] ? ": " : "",
                err ? err->msg : "");
        fh_vm_dump(vm);
        return 1;
}
