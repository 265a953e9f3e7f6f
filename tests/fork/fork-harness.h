/* SPDX-License-Identifier: MIT */
/* A small driver shared by the fork-engine test and bench/fork: boots a microVM of the built
 * image (or forks one from a checkpoint) through the vmm API, runs shell commands in it through
 * the guest agent, and tears it down. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct vmm_config;

struct fh_vm {
        char dir[256];
        char mem[300], qmp_path[300], agent_path[300], console[300], log[300];
        char kernel[300], initrd[300], guid[37]; /* what fh_vm_config's config borrows */
        struct vmm_process *proc;                /* owned */
        struct qmp_client *qmp;                  /* owned */
        struct vmm_agent *agent;                 /* owned */
        uint64_t spawn_ns;                       /* monotonic time of spawn */
        uint64_t ready_ns;                       /* monotonic time the agent answered */
};

/* TCG translation cache of the VMs fh_vm_start starts from now on (0: the vmm default). */
extern unsigned fh_tb_size_mib;
/* VMs get vmm's RAM tail (vmm_config.ram_tail) when set; default false */
extern bool fh_ram_tail;
/* A qcow2 the VMs fh_vm_start starts from now on get as their disk (vmm_config.disk); NULL: none */
extern const char *fh_disk;

struct fh_out {
        char data[65536]; /* stdout, NUL-terminated, trailing newlines stripped */
        size_t len;
};

/* Boots vm under workdir/name with memory_mib of RAM (share=on). When ckpt_dir is non-NULL the
 * VM is instead a fork of that checkpoint: RAM ckpt_dir/ram mapped share=off, device state
 * loaded, resumed, and given identity `name` with fresh entropy. Waits for the agent unless
 * wait is false (then call fh_vm_wait). Returns -errno with err filled. */
/* Forks load ckpt_dir/full (a live checkpoint's stream: RAM and devices, x-ignore-shared off)
 * into RAM ckpt_dir/ram mapped share=off, instead of state + ram. */
extern bool fh_full_stream;
int fh_vm_start(struct fh_vm *vm, const char *workdir, const char *name, const char *image,
                unsigned memory_mib, const char *ckpt_dir, bool wait, struct fk_error *err);
int fh_vm_wait(struct fh_vm *vm, const char *name, bool fork, struct fk_error *err);
/* What fh_vm_start boots vm with, for a caller that starts a QEMU of another shape from it:
 * vm's paths under workdir/name (the directory made), the image's kernel and initrd, the
 * accelerator ("auto"), the host's TSC, a fresh vmgenid, fh_tb_size_mib; RAM share=on in
 * DIR/mem.ram, or with ckpt_dir a fork's (ckpt_dir/ram share=off, -incoming defer). *ret
 * borrows vm's strings. Returns -errno with err filled. */
int fh_vm_config(struct fh_vm *vm, const char *workdir, const char *name, const char *image,
                 unsigned memory_mib, const char *ckpt_dir, struct vmm_config *ret,
                 struct fk_error *err);
/* Runs sh -c script; stdout into out (may be NULL). Returns the exit code (128+sig) or -errno. */
int fh_sh(struct fh_vm *vm, const char *script, struct fh_out *out);
/* Kills QEMU and frees everything of vm (idempotent). */
void fh_vm_stop(struct fh_vm *vm);
/* Prints vm's QEMU log and console to stderr. */
void fh_vm_dump(const struct fh_vm *vm);
/* Prints "FAIL: what: err's message" (err may be NULL) to stderr, then vm's log and console
 * (vm may be one never started); returns 1, a test's exit code. */
int fh_fail(const struct fh_vm *vm, const char *what, const struct fk_error *err);
/* A random RFC 4122 v4 GUID string (37 bytes with NUL). */
void fh_guid(char out[37]);
