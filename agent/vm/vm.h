/* SPDX-License-Identifier: MIT */
/* fk_agent_vm: the VM interface the daemon calls (agent_vm_ops: boot, adopt, checkpoint, exec,
 * health, ...), what one boot needs (agent_boot_params; where its time went is obs.h's
 * agent_boot_timing), and the real backend over vmm/ (QEMU in the jail, QMP, the guest agent). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct json_t json_t; /* jansson */
struct vmm_exec_request;
struct vmm_exec_result;
struct agent_secret;
struct agent_boot_timing; /* agent/obs/obs.h */

/* The serial console log of a session: <state dir>/console.log, at most AGENT_CONSOLE_MAX
 * bytes, the previous boot's (or the overflow) in console.log.1. */
#define AGENT_CONSOLE_LOG "console.log"
#define AGENT_CONSOLE_MAX (1024u * 1024)

/* Everything needed to boot one session VM. Strings are borrowed for the call. */
#define AGENT_PRE_EXEC_MAX 4

struct agent_secret;

struct agent_boot_params {
        const char *key;       /* "<namespace>.<name>" */
        const char *name;      /* session name */
        const char *run_dir;   /* per-session run dir (exists, empty) */
        const char *state_dir; /* per-session state dir (exists) */
        const char *kernel;
        const char *initrd;
        unsigned vcpus;
        unsigned memory_mib;
        int accel;                   /* enum vmm_accel */
        unsigned boot_timeout_ms;    /* agent readiness */
        const volatile bool *cancel; /* set when the session is deleted meanwhile */
        /* Called once QEMU runs (before the guest is ready) with what identifies it (the record
         * adopt takes, borrowed): it is stored and status shows its pid. A failure (-errno)
         * ends the boot: nothing runs that the state store does not know. */
        int (*spawned)(void *ctx, pid_t pid, const json_t *record);
        void *spawned_ctx;
        /* Run in QEMU's child between fork and exec, in order (join the session's cgroup, enter
         * its netns, drop privileges, ...). Each must be async-signal-safe; the first failure
         * aborts the spawn with its -errno. Borrowed. */
        struct agent_pre_exec {
                int (*fn)(void *userdata);
                void *userdata;
                const char *step; /* named in a failure report ("join netns"), NULL: "hook N" */
        } pre_exec[AGENT_PRE_EXEC_MAX];
        size_t n_pre_exec;
        /* Extra kernel command line (e.g. forklet.ip=...), NULL: none. Borrowed. */
        const char *append;
        /* Extra QEMU inputs the session owns: workspace disk and tap, NULL: none. Borrowed. */
        const char *disk;
        const char *tap;
        const char *mac;
        /* The image's read-only root disk (rootfs.img, "debian"), NULL: the initramfs is the
         * root. The guest finds it by its label (AGENT_ROOTFS_LABEL). Borrowed. */
        const char *rootfs;
        /* Start from a checkpoint instead of a cold boot (fork, rollback); NULL: cold boot. */
        const char *restore_dir; /* holds "state" (device state saved with x-ignore-shared) */
        const char *mem_path;    /* guest RAM file; NULL: <run_dir>/mem.ram */
        bool mem_private;        /* map mem_path share=off (a fork's copy-on-write RAM) */
        const char *fork_id;     /* identity handed to the guest after a restore */
        uid_t jail_uid;          /* QEMU's own uid (agent/jail/jail.h), 0: not jailed */
        /* spec.secrets values (agent-internal.h), written to /run/forklet/secrets/NAME mode
         * 0400 once the agent is ready: right after the identity on a restore. Borrowed. */
        const struct agent_secret *secrets;
        size_t n_secrets;
        /* The backend adds its steps' times (spawn ... identity) here; NULL: not timed. */
        struct agent_boot_timing *timing;
        /* TCG translation cache in MiB for this QEMU, 0: the vmm default. */
        unsigned tb_size_mib;
        /* A memory balloon device (give_back): every cold boot; a restore exactly when its
         * checkpoint's source had one (meta.json "balloon"), or the migration fails. */
        bool balloon;
        /* ... with free page hinting (vmm_config.balloon_hint): a cold boot when forkletd's
         * environment asks (FORKLET_BALLOON_HINT=on); a restore exactly when its checkpoint's
         * source had it (meta.json "balloonHint"). */
        bool balloon_hint;
        /* Restore only: its checkpoint's source had the RAM tail (vmm_config.ram_tail, meta.json
         * "ramTail"), so must it (or the RAM sizes differ). A cold boot's is the backend's: the
         * QEMU backend gives it to every cold boot under TCG (QEMU 7.2's precopy is exact then). */
        bool ram_tail;
        /* Restore only: its checkpoint's source offered the guest announce (vmm_config
         * .guest_announce, meta.json "guestAnnounce", absent: yes); a cold boot's never does. */
        bool guest_announce;
};

/* A checkpoint of a running VM (see agent_vm_ops.checkpoint). Strings borrowed. */
struct agent_checkpoint_params {
        const char *dir;         /* exists, empty: receives "state" and "ram" */
        const char *new_disk;    /* overlay (over frozen_disk) the VM continues on; NULL: no disk */
        const char *frozen_disk; /* the layer that now holds the disk as of the checkpoint */
        unsigned timeout_ms;
};

struct agent_checkpoint_result {
        uint64_t pause_ns;     /* guest paused */
        uint64_t ram_bytes;    /* touched RAM copied */
        uint64_t state_bytes;  /* device state */
        bool disk_switched;    /* the VM now writes to new_disk (also when a later step failed) */
        bool materialized;     /* private RAM (a fork): full stream loaded into a helper QEMU */
        bool live;             /* the guest ran while its RAM was saved (else stop-and-copy) */
        bool background;       /* live by background snapshot (else precopy) */
        bool forced;           /* live, but did not converge: stopped to finish the copy */
        bool write_pending;    /* dir holds a stream: checkpoint_write makes state + ram */
        uint64_t downtime_ms;  /* live: QEMU's reported downtime */
        uint64_t switch_ns;    /* live: the disk switch at the switch-over */
        char pause_steps[192]; /* live precopy: the pause by step, "seen 2.1 switch 0.8 ... ms" */
        char fallback[256];    /* stop-and-copy because the live path was refused: why */
        bool balloon;          /* the VM has a balloon device: so must its restores */
        bool balloon_hint;     /* ... with free page hinting: so must its restores */
        bool ram_tail;         /* the VM's RAM has the tail: so must its restores */
        bool guest_announce;   /* its virtio-net offers the guest announce: so must its restores */
};

/* Memory back to the host (agent_vm_ops.give_back). */
struct agent_give_back_params {
        uint64_t margin_bytes;       /* left free in the guest while the balloon is inflated */
        uint64_t min_bytes;          /* do nothing unless at least this much should come back */
        unsigned timeout_ms;         /* stats and inflation (the deflation as long again) */
        const volatile bool *cancel; /* set: stop inflating (the session is being deleted) */
        const volatile bool *yield;  /* set: stop inflating, keep what came back (a request) */
};

struct agent_give_back_result {
        uint64_t before_bytes, after_bytes; /* the RAM file's allocated bytes around it */
        uint64_t guest_free;                /* the guest's free memory before */
        uint64_t ballooned;                 /* the most the balloon held */
        uint64_t ns;                        /* inflation and deflation */
        bool skipped;                       /* too little to win: the balloon was left alone */
        bool yielded;                       /* cut short for p->yield */
        bool deflating; /* the wait for the deflation was cut short: the guest goes on alone */
};

/* Live compaction of the VM's disk chain (agent_vm_ops.compact_disk). */
struct agent_compact_params {
        unsigned max_layers;         /* agent_disk_stream_base's bound; 0: no compaction */
        bool checkpointed;           /* after a checkpoint of this VM (agent_disk_stream_base) */
        unsigned timeout_ms;         /* the stream's bound: then it is cancelled */
        const volatile bool *cancel; /* set: cancel the stream (the session is being deleted) */
        /* set: cancel the stream, the chain as it was (a request waits), unless at its pace it
         * ends within yield_wait_ms, or the chain has yield_max_files files or more (requests
         * that keep coming must not let it grow) */
        const volatile bool *yield;
        unsigned yield_wait_ms, yield_max_files;
        uint64_t speed; /* bytes/s the stream may copy, 0: no limit */
};

struct agent_compact_result {
        unsigned depth_before, depth_after; /* files in the live chain, its bottom counted */
        uint64_t top_before, top_after;     /* the top overlay's allocated bytes around it */
        uint64_t ns;                        /* the stream job, start to end */
        unsigned dropped;                   /* layers QEMU no longer holds (grants revoked) */
        bool streamed;                      /* a stream ran and rebased the top */
        bool adopted; /* a stream a killed forkletd had started was waited for */
        bool yielded; /* the stream was cancelled for p->yield (not a failure) */
};

/* What a VM backend saw of its guest since the VM was attached (agent_vm_ops.health): the
 * counters only grow. Text comes from the guest: printable ASCII only. */
#define AGENT_CONSOLE_TAIL 10  /* console lines kept */
#define AGENT_CONSOLE_LINE 160 /* bytes per line, NUL included */
struct agent_vm_health {
        unsigned panics;                /* console "Kernel panic" lines and GUEST_PANICKED events */
        unsigned console_panics;        /* those of the console: the guest reboots by itself */
        char panic[AGENT_CONSOLE_LINE]; /* what the first one said */
        unsigned oom_kills;             /* console "Out of memory: Killed process" lines */
        char oom[AGENT_CONSOLE_LINE];   /* the last one */
        bool io_stopped;                /* QEMU stopped the VM on a disk error (BLOCK_IO_ERROR) */
        unsigned io_stops;              /* such stops so far */
        bool io_nospace;                /* the last error was ENOSPC */
        char io_device[64];             /* its device or node name */
        char io_reason[96];             /* and the errno text QEMU reported */
        char tail[AGENT_CONSOLE_TAIL][AGENT_CONSOLE_LINE]; /* last console lines, oldest first */
        unsigned n_tail;
};

/* VM operations the executor calls. A VM is an opaque handle owned by the caller of boot. */
struct agent_vm_ops {
        /* The backend runs QEMU as a process that the node's jail (agent/jail/jail.h) can drop to
         * its own uid; false for test fakes. */
        bool jailable;
        /* Boots and waits for the guest agent. On failure cleans up what it started. */
        int (*boot)(void *userdata, const struct agent_boot_params *p, void **ret_vm,
                    struct fk_error *err);
        /* Re-attaches to a VM left running by a previous forkletd, from the record boot gave
         * (spawned) or record returned, kept in the state store (-ESRCH: gone). */
        int (*adopt)(void *userdata, const char *run_dir, const json_t *record, int accel,
                     void **ret_vm, struct fk_error *err);
        /* What identifies vm now (pid, start time, paths; new reference), after something
         * changed it (a checkpoint moves the disk); NULL in backends without records. */
        json_t *(*record)(void *vm);
        /* Graceful stop; returns once the process is gone. */
        int (*stop)(void *userdata, void *vm, unsigned timeout_ms);
        int (*pause)(void *userdata, void *vm, struct fk_error *err);
        int (*resume)(void *userdata, void *vm, struct fk_error *err);
        /* Runs a command (see vmm_agent_exec); thread-safe against the other ops. */
        int (*exec)(void *userdata, void *vm, const struct vmm_exec_request *req,
                    int (*out_fn)(int stream, const void *data, size_t size, void *ud),
                    void *out_userdata, struct vmm_exec_result *ret, struct fk_error *err);
        /* Pauses, saves device state and RAM into p->dir, moves the disk onto p->new_disk,
         * resumes (also on failure). A VM with private RAM (a fork) is materialized. NULL in
         * backends without checkpoints. */
        int (*checkpoint)(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                          struct agent_checkpoint_result *ret, struct fk_error *err);
        /* The bytes a checkpoint of vm writes at least (its RAM file's allocated blocks; twice
         * that for private RAM, which is materialized through a stream); NULL: unknown. */
        uint64_t (*checkpoint_bytes)(void *vm);
        /* After checkpoint returned write_pending (the guest runs again): turns the stream in
         * p->dir into the files forks map (state, ram) through a helper QEMU; fills ram_bytes
         * and state_bytes. Runs without the session busy, beside the running VM. NULL: never
         * pending. */
        int (*checkpoint_write)(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                                struct agent_checkpoint_result *ret, struct fk_error *err);
        /* Freezes the guest filesystem on /workspace, moves the disk onto new_disk (the old
         * overlay becomes read-only), thaws. */
        int (*snapshot_disk)(void *userdata, void *vm, const char *new_disk, struct fk_error *err);
        /* Guest files (see vmm_agent_write_file/read_file); NULL: not supported. */
        int (*write_file)(void *userdata, void *vm, const char *path, const void *data, size_t size,
                          unsigned mode, struct fk_error *err);
        int (*read_file)(void *userdata, void *vm, const char *path, size_t max, void **ret,
                         size_t *ret_size, struct fk_error *err);
        pid_t (*pid)(void *vm);
        /* A pollable fd readable once QEMU exited, or -1. */
        int (*exit_fd)(void *vm);
        /* 1 and a static reason when exited, 0 while running. */
        int (*poll_exit)(void *vm, int *ret_status, const char **ret_reason);
        /* Guest health (health.c); each NULL in a backend without it. health: what was seen so
         * far, without blocking (QMP events already sent, the console's report); only for a VM
         * no job uses (its QMP client is the job's). health_fd: readable when QEMU sent
         * something (poll), or -1. ping: one round trip to the guest agent; thread-safe.
         * kill: ends a VM whose guest cannot power off (QMP quit, SIGTERM, SIGKILL).
         * discard: ends a VM nobody keeps (rollback) as soon as its tap is free for the next
         * QEMU, without waiting for its memory to be freed (private RAM; a VM with a RAM file of
         * its own is waited for, as kill does); kill then reaps it.
         * disk_free: free bytes on the filesystem holding the VM's disk (-ENOENT: no disk). */
        int (*health)(void *userdata, void *vm, struct agent_vm_health *ret);
        int (*health_fd)(void *vm);
        int (*ping)(void *userdata, void *vm, unsigned timeout_ms, struct fk_error *err);
        int (*kill)(void *userdata, void *vm, unsigned timeout_ms);
        int (*discard)(void *userdata, void *vm, unsigned timeout_ms);
        int (*disk_free)(void *userdata, void *vm, uint64_t *ret);
        /* Memory back to the host (give-back.c); each NULL in a backend without it.
         * ram_bytes: what the VM's RAM file holds on the host (allocated bytes), cheap.
         * give_back: the balloon takes the guest's free memory and gives it back, which leaves
         * those pages as holes in the RAM file; only for a VM whose RAM file is its own
         * (share=on): -EPERM for private RAM (a fork's or rollback's checkpoint file, shared),
         * -ENODEV without a balloon device. Uses the VM's QMP client: the session is busy. */
        uint64_t (*ram_bytes)(void *vm);
        int (*give_back)(void *userdata, void *vm, const struct agent_give_back_params *p,
                         struct agent_give_back_result *ret, struct fk_error *err);
        /* Live disk compaction (compact.c), NULL in a backend without it: finishes a stream a
         * killed forkletd started, streams the layers between the chain's top and its anchor
         * or its bottom into the top (agent_disk_stream_base with p->max_layers; QMP
         * block-stream, the guest running; the top then names that base as its backing), closes the
         * layers QEMU no longer uses and revokes the jail's grants on them. The layers stay on
         * disk. A stream that fails, times out or is cancelled leaves the chain as it was (-errno +
         * err). Uses the VM's QMP client: the session is busy. */
        int (*compact_disk)(void *userdata, void *vm, const struct agent_compact_params *p,
                            struct agent_compact_result *ret, struct fk_error *err);
        /* Clears QEMU's migration dirty bitmap of a restored VM (vmm_dirty_log_reset), which
         * QEMU starts with every page dirty: with the RAM tail, the first sync of its next live
         * checkpoint would otherwise hold QEMU's main loop for every page. 0 and
         * *ret_setup_ms (QEMU's sync), 1 when the VM needs none (no RAM tail), -errno + err.
         * Uses the VM's QMP client: the session is busy. NULL in a backend without it. */
        int (*reset_dirty_log)(void *userdata, void *vm, unsigned *ret_setup_ms,
                               struct fk_error *err);
        void (*free)(void *userdata, void *vm);
        void *userdata;
};
/* The real operations over vmm/ (QEMU, QMP, guest agent). */
extern const struct agent_vm_ops agent_vm_ops_qemu;
/* A VM record's or checkpoint meta's "guestAnnounce": absent (older releases) means on. */
bool agent_vm_guest_announce_of(const json_t *obj);

/* TCG translation cache (MiB) of a restored guest (fork, rollback): see docs/benchmarks.md */
#define AGENT_RESTORED_TB_MIB 64
