/* SPDX-License-Identifier: MIT */
/* The QEMU driver: accelerator detection, the command line (a pure function), process
 * supervision with graceful stop, the QMP client, and the host side of the guest agent. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "vmm/agent-client/agent-client.h"
#include "vmm/console/console.h"

typedef struct json_t json_t; /* jansson */

/* ---- accelerator ---------------------------------------------------------------------- */

enum vmm_accel {
        VMM_ACCEL_TCG,
        VMM_ACCEL_KVM,
};
const char *vmm_accel_to_string(enum vmm_accel a);
/* want: "auto" | "kvm" | "tcg". auto picks KVM when /dev/kvm opens read-write, else TCG;
 * "kvm" without a usable /dev/kvm fails with -ENODEV and a message in err. */
int vmm_accel_resolve(const char *want, enum vmm_accel *ret, struct fk_error *err);

/* ---- command line --------------------------------------------------------------------- */

/* Everything the QEMU command line depends on. Plain data; strings are borrowed. */
struct vmm_config {
        const char *qemu_binary; /* NULL: "qemu-system-x86_64" */
        const char *name;        /* session name (for -name) */
        enum vmm_accel accel;
        unsigned vcpus;
        unsigned memory_mib;
        const char *kernel;     /* vmlinuz */
        const char *initrd;     /* initramfs */
        const char *append;     /* extra kernel args, may be NULL */
        const char *mem_path;   /* RAM backing file (on tmpfs) */
        bool mem_share;         /* share=on (owned RAM) vs share=off (fork: MAP_PRIVATE) */
        const char *qmp_socket; /* unix socket QEMU listens on for QMP */
        /* a second QMP socket, NULL: none; a live checkpoint arms migrate-continue on it while
         * the disk freeze is armed on the first (each monitor parses its own bytes) */
        const char *qmp2_socket;
        const char *agent_socket;   /* unix socket QEMU listens on for the agent port */
        const char *console_log;    /* serial console goes here (file) */
        const char *console_socket; /* instead: a unix socket QEMU listens on for vmm_console */
        const char *vmgenid;        /* GUID string, NULL: none */
        const char *disk;           /* qcow2 workspace disk, NULL: none */
        const char *rootfs;         /* read-only raw root disk of the image, NULL: none */
        const char *tap;            /* tap ifname in the current netns, NULL: no network */
        const char *mac;            /* guest MAC with tap */
        bool incoming_defer;        /* -incoming defer (fork / restore) */
        bool start_paused;          /* -S: runs only on cont (a precopy stream says running) */
        const char *pidfile;        /* NULL: none */
        unsigned tsc_khz;           /* TCG: host TSC kHz for the guest (tsc_early_khz); 0: none */
        bool tsc_reliable;          /* with tsc_khz: the host TSC is invariant (tsc=reliable) */
        unsigned tb_size_mib;       /* TCG translation cache, MiB; 0: VMM_TCG_TB_MIB */
        bool sandbox; /* -sandbox on with obsolete, elevateprivileges, spawn, resourcecontrol
                       * denied (QEMU's seccomp filter; migration must then use fd:) */
        /* a virtio-balloon-device (deflate-on-oom, id VMM_BALLOON_ID) after every other device:
         * a restore must have it exactly when the checkpoint's source had it */
        bool balloon;
        /* with balloon: free page hinting (free-page-hint=on, on an iothread of its own,
         * VMM_BALLOON_IOTHREAD): during a precopy migration the guest tells QEMU which pages it
         * has free, and QEMU neither reads nor sends them. A restore must have it exactly when
         * the checkpoint's source had it (the device's features and state differ). */
        bool balloon_hint;
        /* VMM_RAM_TAIL_KIB more RAM than memory_mib (docs/fork-engine.md "Precopy and QEMU 7.2's
         * TCG dirty tracking"): a restore must have it exactly when its checkpoint's source had */
        bool ram_tail;
        /* virtio-net offers VIRTIO_NET_F_GUEST_ANNOUNCE: only VMs started by forklet before
         * 2026-12-06, and the restores of their checkpoints (the device's features must be the
         * source's). Off, a restore's virtio-net keeps its announce timer (vmm_checkpoint_load). */
        bool guest_announce;
        /* files in disk's backing chain, disk and its bottom counted (0 or 1: disk alone). Each
         * of them, and rootfs, is opened with file-posix's drop-cache=off: a migration
         * inactivates every block node and cont re-activates it, and by default that drops the
         * file's page cache (POSIX_FADV_DONTNEED, for storage another host writes). forklet's
         * disks are local files this QEMU alone writes, so the drop only made cont, inside a
         * checkpoint's pause, read each layer's metadata back from the disk, and emptied the
         * cache other sessions had of the shared rootfs and checkpoint layers. Never more than
         * the chain has: QEMU refuses options for a backing file that is not there. */
        unsigned disk_chain;
};

/* QEMU 7.2 syncs the migration dirty bitmap of a RAM block 64 pages at a time when the block's
 * length is a multiple of 256 KiB, and that path leaves TCG's TLBs writable without tracking:
 * writes after a sync are lost to precopy. A block 8 KiB longer (QEMU rounds -m to 8 KiB) takes
 * the per-page path, which re-arms the tracking of every page it clears. */
#define VMM_RAM_TAIL_KIB 8
/* The guest RAM's size in bytes: memory_mib, plus the tail when ram_tail. */
uint64_t vmm_ram_bytes(unsigned memory_mib, bool ram_tail);

/* The host TSC frequency in kHz, measured once (~100 ms on the first call, then cached;
 * thread-safe), for vmm_config.tsc_khz. -EOPNOTSUPP off x86. Does not log. */
int vmm_host_tsc_khz(unsigned *ret);
/* Whether the host's TSC is invariant (CPUID 0x80000007 EDX bit 8: constant rate, runs in
 * every idle state), for vmm_config.tsc_reliable. false off x86. */
bool vmm_host_tsc_invariant(void);

#define VMM_TCG_TB_MIB 64 /* default TCG translation cache (QEMU's own default is 1 GiB) */

/* Builds the argv (argv[0] = binary). Pure: no I/O, deterministic. *ret is an owned strv.
 * Returns -EINVAL with err filled when a required field is missing. */
int vmm_build_argv(const struct vmm_config *cfg, char ***ret, struct fk_error *err);

/* The rest of what a QEMU process is started with: its environment and its transparent huge
 * page setting. A restored QEMU under TCG (incoming_defer) runs lean: THP off for it (QEMU
 * madvises its TCG code buffer MADV_HUGEPAGE, so every 2 MiB of it the guest's code touched cost
 * 2 MiB) and glibc malloc held to one arena (glibc.malloc.arena_max=1 appended to
 * GLIBC_TUNABLES unless it names arena_max already). Under KVM, and for cold boots, QEMU gets
 * base's entries with THP on. Of base only PATH, TMPDIR, TZ, LANG, LANGUAGE, LC_* and
 * GLIBC_TUNABLES are passed on: nothing else of forkletd's environment reaches a QEMU. Plain
 * data. */
struct vmm_exec_env {
        char **envp;      /* owned strv */
        bool thp_disable; /* prctl(PR_SET_THP_DISABLE) in the child before exec */
};
#define VMM_LEAN_MALLOC_TUNABLE "glibc.malloc.arena_max=1"

/* Builds *ret from cfg and the base environment (NULL-terminated, borrowed; usually environ).
 * Pure: no I/O. -ENOMEM with err filled. */
int vmm_build_env(const struct vmm_config *cfg, char *const *base, struct vmm_exec_env *ret,
                  struct fk_error *err);
/* Frees what e owns and zeroes it; accepts a zeroed e. */
void vmm_exec_env_done(struct vmm_exec_env *e);

/* ---- process -------------------------------------------------------------------------- */

struct vmm_process;

/* Called in the child between fork and exec (e.g. to join a cgroup or netns). Must be
 * async-signal-safe. Non-zero return aborts the spawn with that -errno. */
typedef int (*vmm_pre_exec_fn)(void *userdata);
#define VMM_PRE_EXEC_STEP_MAX 96
/* Names the step a pre-exec hook is at ("what arg", truncated): a failure of the hook is
 * reported as "pre-exec hook failed at <step>: <errno text>". Async-signal-safe; call it only
 * in the child (from a hook). */
void vmm_pre_exec_step(const char *what, const char *arg);

/* Starts QEMU with argv in its own session (setsid) so it survives forkletd; stdout/stderr go
 * to stderr_log (appended; NULL: /dev/null). Only the fds QEMU needs are inherited.
 * Returns the process (owns a pidfd) or -errno with err filled. Does not log. */
int vmm_process_spawn(char *const *argv, const char *stderr_log, vmm_pre_exec_fn pre_exec,
                      void *userdata, struct vmm_process **ret, struct fk_error *err);
/* vmm_process_spawn with env (borrowed; NULL: forkletd's environment, THP as it is): QEMU gets
 * env->envp and, with env->thp_disable, PR_SET_THP_DISABLE (set after the pre-exec hook). */
int vmm_process_spawn_env(char *const *argv, const struct vmm_exec_env *env, const char *stderr_log,
                          vmm_pre_exec_fn pre_exec, void *userdata, struct vmm_process **ret,
                          struct fk_error *err);
/* Adopts a running QEMU by pid, checking its start time (from /proc/PID/stat, field 22)
 * equals start_time so a reused pid is never adopted. -ESRCH if gone or different. */
int vmm_process_adopt(pid_t pid, uint64_t start_time, struct vmm_process **ret);
pid_t vmm_process_pid(const struct vmm_process *p);
uint64_t vmm_process_start_time(const struct vmm_process *p);
/* How long the child's pre-exec hook ran (ns, measured in the child), 0: no hook or adopted. */
uint64_t vmm_process_pre_exec_ns(const struct vmm_process *p);
/* A pollable fd that becomes readable when the process exits (pidfd). Owned by p. */
int vmm_process_fd(const struct vmm_process *p);
/* Non-blocking: returns 1 and fills exit info if it exited, 0 if still running. Reaps the
 * child when it is ours. *ret_status: exit code, or 128+signal; *ret_reason: static text. */
int vmm_process_poll(struct vmm_process *p, int *ret_status, const char **ret_reason);
/* Sends sig. */
int vmm_process_kill(struct vmm_process *p, int sig);
/* Waits up to timeout_ms for exit (0 = don't wait). Returns 1 exited, 0 timed out. */
int vmm_process_wait(struct vmm_process *p, unsigned timeout_ms);
struct vmm_process *vmm_process_free(struct vmm_process *p); /* does not kill */

/* ---- QMP ------------------------------------------------------------------------------- */

struct qmp_client;

/* Connects to a QMP unix socket, retrying until timeout_ms (QEMU may not be listening yet),
 * reads the greeting and negotiates capabilities. */
int qmp_client_connect(const char *path, unsigned timeout_ms, struct qmp_client **ret,
                       struct fk_error *err);
/* Wraps an already-connected fd (tests use a socketpair); takes ownership of fd. Performs the
 * greeting + qmp_capabilities handshake. */
int qmp_client_new_fd(int fd, unsigned timeout_ms, struct qmp_client **ret, struct fk_error *err);
struct qmp_client *qmp_client_free(struct qmp_client *c);
/* Runs one command. args may be NULL (borrowed). On success *ret_return (may be NULL) gets a
 * new reference to the "return" member. A QMP error returns -EIO with err = "Class: desc";
 * timeout -ETIMEDOUT; closed socket -ECONNRESET. Events seen meanwhile are queued. Not
 * thread-safe: one caller at a time per client. */
int qmp_execute(struct qmp_client *c, const char *command, json_t *args, unsigned timeout_ms,
                json_t **ret_return, struct fk_error *err);
/* qmp_execute that takes args (a json_pack result: NULL, its failure, is -ENOMEM) and drops
 * it, whatever the outcome. */
int qmp_execute_take(struct qmp_client *c, const char *command, json_t *args, unsigned timeout_ms,
                     json_t **ret_return, struct fk_error *err);
/* qmp_execute, passing fd (borrowed; QEMU gets a copy) with the command over the unix socket
 * (SCM_RIGHTS), as `getfd` and `add-fd` expect. -EBADF for fd < 0. */
int qmp_execute_with_fd(struct qmp_client *c, const char *command, json_t *args, int fd,
                        unsigned timeout_ms, json_t **ret_return, struct fk_error *err);
/* Sends a command but for its last bytes, so QEMU has parsed it when qmp_fire sends them:
 * QEMU 7.2's monitor reads one byte per main-loop turn (about 10 µs each), so a 100-byte
 * command costs a millisecond before it runs. While armed every other command fails -EBUSY.
 * Events go on arriving. Does not log. */
int qmp_arm(struct qmp_client *c, const char *command, json_t *args, struct fk_error *err);
/* Completes the armed command and waits for its reply, as qmp_execute. */
int qmp_fire(struct qmp_client *c, unsigned timeout_ms, json_t **ret_return, struct fk_error *err);
/* Completes the armed command so that QEMU refuses it without running it; 0 also when nothing
 * was armed, -EPROTO if QEMU ran it after all, else as qmp_execute. */
int qmp_disarm(struct qmp_client *c, unsigned timeout_ms);
/* Pops the oldest queued event (new reference) or returns 0 with *ret NULL if none. */
int qmp_next_event(struct qmp_client *c, json_t **ret);
/* Waits up to timeout_ms for an event whose name is in names (NULL-terminated): the oldest
 * queued one first, else the next QEMU sends; *ret gets it (new reference, taken off the
 * queue). Other events are queued; a stray reply is dropped. -ETIMEDOUT, -ECONNRESET as
 * qmp_execute. Not thread-safe, like qmp_execute. Does not log. */
int qmp_wait_event(struct qmp_client *c, const char *const *names, unsigned timeout_ms,
                   json_t **ret, struct fk_error *err);
/* Takes the oldest queued event whose name is in names: 1 and *ret (new reference), or 0. */
int qmp_take_event(struct qmp_client *c, const char *const *names, json_t **ret);
/* Removes the queued events called name (events nobody else reads, e.g. MIGRATION_PASS). */
void qmp_drop_events(struct qmp_client *c, const char *name);
/* Reads what QEMU already sent without waiting and queues its events (a stray reply is
 * dropped): for a client nobody runs commands on right now. -ECONNRESET once QEMU closed the
 * socket (what came before it is queued). Not thread-safe, like qmp_execute. */
int qmp_client_pump(struct qmp_client *c);
/* The socket, readable when QEMU sent something (for poll), or -1 once closed. */
int qmp_client_fd(const struct qmp_client *c);
/* Convenience: query-status -> "running", "paused", ... (caller frees). */
int qmp_query_status(struct qmp_client *c, unsigned timeout_ms, char **ret, struct fk_error *err);

/* ---- graceful stop --------------------------------------------------------------------- */

/* Stops a VM: agent poweroff (if agent non-NULL), then QMP quit (if qmp non-NULL), then
 * SIGTERM, then SIGKILL, waiting step_timeout_ms after each. Returns once the process is gone. */
int vmm_stop(struct vmm_process *p, struct vmm_agent *agent, struct qmp_client *qmp,
             unsigned step_timeout_ms);

/* The tap's netdev id (vmm_config.tap). */
#define VMM_NETDEV_ID "net0"

/* Ends a VM whose state nobody keeps (a rollback replaces it) without waiting for the kernel
 * to free its memory: with has_tap, QEMU lets go of its tap first (QMP netdev_del, within
 * step_timeout_ms), then SIGKILL. Returns once the tap is free for another QEMU, usually before
 * the process is gone: vmm_stop or vmm_process_wait reaps it later. A failed netdev_del falls
 * back to vmm_stop without the agent (waits). */
int vmm_discard(struct vmm_process *p, struct qmp_client *qmp, bool has_tap,
                unsigned step_timeout_ms);

/* The balloon device's id (vmm_config.balloon); QOM path /machine/peripheral/VMM_BALLOON_ID. */
#define VMM_BALLOON_ID "balloon0"
/* The iothread of a balloon with free page hinting (vmm_config.balloon_hint). */
#define VMM_BALLOON_IOTHREAD "balloon-io"
