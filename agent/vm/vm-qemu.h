/* SPDX-License-Identifier: MIT */
/* Inside vm-qemu*.c only: the QEMU VM handle and what it was started with (so a fork's
 * checkpoint can start a helper QEMU with the same devices). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/vm/vm.h"

#define VM_QMP_TIMEOUT_MS     5000
#define VM_CONNECT_TIMEOUT_MS 15000 /* a socket of a QEMU that has created it */
#define VM_READY_STEP_MS      1000
/* The second QMP socket in a session's run dir (vmm_config.qmp2_socket): a live checkpoint
 * connects to it for the switch-over and closes it after; QEMUs of older forkletds lack it. */
#define VM_QMP2_SOCKET "qmp2.sock"

/* What QMP events said about the guest (vm-qemu-health.c). */
struct qemu_health {
        bool io_stopped; /* BLOCK_IO_ERROR with action stop, no RESUME since */
        bool io_nospace;
        unsigned io_stops, panics;
        char io_device[64], io_reason[96];
        char panic[AGENT_CONSOLE_LINE];
};

struct qemu_vm {
        struct vmm_process *proc;
        struct vmm_console *console; /* NULL when the console socket could not be reached */
        struct qmp_client *qmp;      /* used by one job at a time (the session is busy) */
        struct vmm_agent *agent;
        /* what QEMU runs with (owned), in its record (state.json's vm) for adoption */
        char *run_dir, *mem_path, *kernel, *initrd, *disk, *tap, *mac, *append;
        char *console_log; /* the session's console log file (state dir) */
        char *rootfs;      /* the image's read-only root disk or NULL */
        bool mem_private;
        bool balloon;        /* QEMU has the balloon device (vmm_config.balloon) */
        bool balloon_hint;   /* ... with free page hinting (vmm_config.balloon_hint) */
        bool ram_tail;       /* its RAM has vmm's tail (vmm_config.ram_tail): precopy is exact */
        bool guest_announce; /* vmm_config.guest_announce: a VM of an older release, or its copy */
        uint64_t mem_bytes;  /* private RAM: allocated bytes of its file at boot (a fork's links
                              * go once it runs) */
        unsigned vcpus, memory_mib;
        int accel;
        uid_t jail_uid; /* QEMU's own uid (agent/jail/jail.h), 0: not jailed */
        struct qemu_health health;
};

/* Builds a vmm_config for q's devices (strings borrowed from q) and spawns QEMU with it:
 * used for the materialize helper (incoming defer, RAM share=on at mem_path, disk, no tap);
 * its stderr goes to dir/helper-qemu.log (dir in stateDir, not the jail uid's run dir). */
int qemu_spawn_helper(const struct qemu_vm *q, const char *dir, const char *mem_path,
                      const char *disk, struct vmm_process **ret_proc, char **ret_qmp,
                      struct fk_error *err);
int qemu_checkpoint(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                    struct agent_checkpoint_result *ret, struct fk_error *err);
int qemu_checkpoint_write(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                          struct agent_checkpoint_result *ret, struct fk_error *err);
uint64_t qemu_checkpoint_bytes(void *vm);
/* The jail uid's grant (perm: 4 read, 6 read-write) on a layer of the session's disk dir,
 * recorded in the session's ledger. */
int qemu_grant_layer(uid_t uid, const char *layer, unsigned perm);
/* The nodes forkletd opens for new overlays (blockdev-add): a compaction closes them once out of
 * the chain. */
#define QEMU_OVERLAY_PREFIX "fkov"
#define QEMU_NODE_SIZE      32
/* Opens path (a qcow2 overlay forkletd made, granted to the jail's uid) as a node of its own,
 * named into node, with no backing yet: blockdev-snapshot gives it disk0's top. */
int qemu_overlay_add(struct qemu_vm *q, const char *path, char node[QEMU_NODE_SIZE],
                     struct fk_error *err);
/* A string member of disk0's "inserted" in query-block ("node-name": the node it writes to,
 * "file": that node's file name), heap; NULL when QEMU cannot tell. */
char *qemu_disk0_inserted(struct qemu_vm *q, const char *member);
/* The files of disk's chain, disk and its bottom counted (vmm_config.disk_chain, which keeps
 * their page cache across a migration); 0 without a disk. Reads the headers. */
unsigned qemu_disk_chain(const char *disk);
/* A live checkpoint into full (vm-qemu-live.c): the disk switches at the switch-over; res says
 * the method, the pause and its steps. -EOPNOTSUPP (err says why) when QEMU refused before the
 * guest was touched: the caller takes the stop-and-copy path. */
int qemu_checkpoint_live(struct qemu_vm *q, const struct agent_checkpoint_params *p,
                         const char *full, struct agent_checkpoint_result *res,
                         struct fk_error *err);
int qemu_snapshot_disk(void *userdata, void *vm, const char *new_disk, struct fk_error *err);

/* Once the guest agent answered (vm-qemu-guest.c): a cold boot's entropy seed and secrets, a
 * fork's secrets and identity, then a restore's clock. */
int qemu_guest_setup(struct qemu_vm *q, const struct agent_boot_params *p, struct fk_error *err);
/* Steps the guest clock to the host's (it stood still while QEMU was stopped). Best effort. */
void qemu_sync_clock(struct qemu_vm *q);

/* Guest health ops (vm-qemu-health.c), see agent_vm_ops. */
int qemu_health(void *userdata, void *vm, struct agent_vm_health *ret);
int qemu_health_fd(void *vm);
int qemu_ping(void *userdata, void *vm, unsigned timeout_ms, struct fk_error *err);
int qemu_kill(void *userdata, void *vm, unsigned timeout_ms);
int qemu_discard(void *userdata, void *vm, unsigned timeout_ms);
int qemu_disk_free(void *userdata, void *vm, uint64_t *ret);

/* Memory back to the host (vm-qemu-balloon.c), see agent_vm_ops. */
uint64_t qemu_ram_bytes(void *vm);
int qemu_give_back(void *userdata, void *vm, const struct agent_give_back_params *p,
                   struct agent_give_back_result *ret, struct fk_error *err);
/* Live disk compaction (vm-qemu-compact.c), see agent_vm_ops. */
int qemu_compact_disk(void *userdata, void *vm, const struct agent_compact_params *p,
                      struct agent_compact_result *ret, struct fk_error *err);
/* After adoption: a balloon a killed forkletd left inflating is let go (best effort). */
void qemu_balloon_adopted(struct qemu_vm *q);
/* An adopted QEMU in runstate status: "io-error" is recorded as stopped by a disk error (1:
 * the guest cannot answer until it continues), "guest-panicked" refused (-ESRCH + err). */
int qemu_health_adopt_status(struct qemu_vm *q, const char *status, struct fk_error *err);

/* vm-qemu-wait.c: the waits of a QEMU's start. qemu_wait_started waits for socket (the first
 * one QEMU binds) while QEMU lives, within the boot's timeout; qemu_wait_ready for the guest
 * agent, giving up early if QEMU dies, a cold boot's guest lost its timer (-EAGAIN) or the boot
 * is cancelled. qemu_explain_exit replaces err with QEMU's last stderr line when it ended. */
int qemu_wait_started(struct qemu_vm *q, const struct agent_boot_params *p, const char *socket,
                      struct fk_error *err);
int qemu_wait_ready(struct qemu_vm *q, const struct agent_boot_params *p, const char *qemu_log,
                    struct fk_error *err);
void qemu_explain_exit(struct qemu_vm *q, const char *run_dir, struct fk_error *err);
