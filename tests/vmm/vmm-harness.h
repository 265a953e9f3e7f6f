/* SPDX-License-Identifier: MIT */
/* Shared harness of the vmm integration tests: finds a kernel, builds a busybox initramfs,
 * starts microVMs through vmm_build_argv + vmm_process_spawn, and cleans up on any exit. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "vmm/vmm.h"

#define IT_SKIP 77

#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        it_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                           \
                }                                                                                  \
        } while (0)

void it_fail(const char *file, int line, const char *cond, const char *fmt, ...)
        __attribute__((noreturn, format(printf, 4, 5)));
void it_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Root, QEMU, busybox, cpio and a kernel present; otherwise prints why and exits 77. Creates
 * the test's temp dir (its name contains a comma, to exercise QEMU option escaping) and the
 * initramfs, and registers cleanup. */
void it_setup(const char *test_name);
const char *it_dir(void);
/* Boots the built guest image (kernel, initrd with the agent as init) instead of the busybox
 * initramfs; exits 77 when FORKLET_IMAGE_DIR has none. */
void it_use_image(void);

struct it_vm {
        char *name;
        char *dir;
        char *mem_path, *qmp_path, *agent_path, *console, *log, *pidfile;
        struct vmm_config cfg;
        struct vmm_process *proc;
        struct qmp_client *qmp;
};

/* Fills vm with a config for a 256 MiB TCG microVM under it_dir()/name (share=on RAM). */
void it_vm_init(struct it_vm *vm, const char *name);
/* Spawns the VM (registered for cleanup); returns the spawn result. */
int it_vm_spawn(struct it_vm *vm, struct fk_error *err);
/* Connects QMP (fails the test on error). */
void it_vm_connect(struct it_vm *vm);
/* Waits until the console log contains text; returns ms waited or fails the test. */
unsigned it_wait_console(struct it_vm *vm, const char *text, unsigned timeout_ms);
/* Highest "tick N" the guest printed so far (0: none). */
unsigned it_last_tick(struct it_vm *vm);
/* QMP helpers that fail the test on error. */
void it_qmp(struct it_vm *vm, const char *command, const char *args_json);
void it_expect_status(struct it_vm *vm, const char *status);
/* Kills and frees everything of vm. */
void it_vm_destroy(struct it_vm *vm);

double it_ms_since(uint64_t t0_ns);
