/* SPDX-License-Identifier: MIT */
/* Internals of the static guest agent binary (agent.c, agent-exec.c, agent-ops.c, init.c),
 * which serves the host over the virtio-serial port and doubles as /init when run as PID 1. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/guest/protocol.h"

#define GA_VERSION            "0.1.0"
#define GA_DEFAULT_OUTPUT_CAP (16u * 1024 * 1024)
/* Stop reading child pipes while this much is queued for the host (backpressure). */
#define GA_OUT_HIGH_WATER (4u * 1024 * 1024)
/* After a child exits, wait this long for pipes held open by its descendants. */
#define GA_EXIT_GRACE_MS 200

struct ga_exec;
struct pollfd;

struct ga {
        int port_fd;
        /* Local test mode (forklet-agent --listen PATH): serve host tests over a unix socket
         * instead of the virtio port; machine-wide requests (poweroff, identity, freeze) are
         * refused so a test can never touch the host it runs on. */
        int listen_fd;
        bool local;
        bool connected;
        uint64_t lost_ms;     /* when the host went away (ga_now_ms), for the reconnect poll */
        bool host_signal;     /* the port sends SIGIO when the host comes back (O_ASYNC) */
        struct guest_buf out; /* frames queued for the host */
        int sigchld_fd;       /* signalfd for SIGCHLD and SIGIO */
        struct ga_exec *execs;
        bool poweroff_pending;
        uint64_t poweroff_at_ms;
        int inject_fd; /* GA_INJECT_PATH, -1 when absent (local mode) */
        /* Opened at start, so a fork's identity request neither looks up nor allocates a
         * file (both -1 in local mode or when the open failed: the request opens by path). */
        int urandom_fd;
        int identity_fd; /* /run/forklet/identity, its page allocated (ga_identity_open) */
};

uint64_t ga_now_ms(void);
/* Queues an ERROR reply for request id (dropped when the host is away). */
void ga_reply_error(struct ga *a, uint32_t id, int error, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Queues a raw frame. */
void ga_reply_raw(struct ga *a, uint16_t type, uint32_t id, const void *p, size_t size);

/* agent-exec.c: runs EXEC requests. Replies go to a->out. */
void ga_exec_start(struct ga *a, uint32_t id, const struct guest_msg_exec *m);
/* USER[:GROUP] or UID[:GID] -> ids from /etc/passwd and /etc/group (agent-user.c); -ENOENT
 * for a name that is not there, -EINVAL when too long. */
int ga_user_resolve(const char *spec, unsigned *ret_uid, unsigned *ret_gid);
void ga_exec_stdin(struct ga *a, uint32_t id, const void *p, size_t size, bool eof);
void ga_exec_signal(struct ga *a, uint32_t id, int sig);
/* Adds the pollfds of running execs to fds (returns how many) and lowers *timeout_ms to the
 * nearest deadline. */
int ga_exec_pollfds(struct ga *a, struct pollfd *fds, int max, int *timeout_ms);
/* Handles the revents of the fds added by ga_exec_pollfds, reaps children, enforces
 * timeouts and sends EXIT for finished execs. */
void ga_exec_dispatch(struct ga *a, const struct pollfd *fds, int n);
void ga_exec_reap(struct ga *a);
/* The host side (re)connected or went away: running execs belong to requests no one can
 * answer any more. They keep running (their timeouts too) but send nothing. */
void ga_exec_orphan_all(struct ga *a);

/* agent-ops.c: file, identity, freeze and power requests. */
void ga_op_file_write(struct ga *a, uint32_t id, const void *p, size_t size);
void ga_op_file_read(struct ga *a, uint32_t id, const void *p, size_t size);
void ga_op_identity(struct ga *a, uint32_t id, const void *p, size_t size);
void ga_op_add_entropy(struct ga *a, uint32_t id, const void *p, size_t size);
/* At agent start (not in local mode): opens /dev/urandom, creates /run/forklet/identity
 * (empty until the first identity request; content kept if there is some) with its page
 * allocated, and /run/forklet/fork-id as a symlink to it. Failures leave the fds at -1. */
void ga_identity_open(struct ga *a);
void ga_op_set_time(struct ga *a, uint32_t id, const void *p, size_t size);
void ga_op_freeze(struct ga *a, uint32_t id, const void *p, size_t size, bool freeze);
/* Syncs and powers the machine off; does not return. */
void ga_poweroff_now(void);

/* agent-inject.c: a root-only FIFO; each line is a file path whose bytes go verbatim onto the
 * port (hostile-guest tests; see the file for why that grants nothing). */
#define GA_INJECT_PATH "/run/forklet/inject"
/* Creates and opens the FIFO; a->inject_fd stays -1 on failure. */
void ga_inject_open(struct ga *a);
/* Reads lines from the FIFO and queues each named file raw for the host (dropped while
 * disconnected). */
void ga_inject_read(struct ga *a);

/* init.c: PID 1. */
int ga_init_main(void);
/* init-root.c: the virtio disk with this ext4 label ("/dev/vdX" into dev), -ENOENT if none. */
int ga_init_find_label(const char *label, char *dev, size_t size);
/* The workspace disk's ext4 mount options. no_prefetch_block_bitmaps: the kernel's lazyinit
 * thread would otherwise read every group's block bitmap in the background after the mount,
 * seconds into a boot, so every fork of a checkpoint taken early did it again (guest pages it
 * writes); a workspace's few groups gain nothing from it. */
#define GA_WORKSPACE_MOUNT_OPTS "no_prefetch_block_bitmaps"
/* The root overlay's writable layer on the workspace disk (a directory at its top). */
#define GA_ROOT_UPPER_DIR ".forklet-root"
/* Mounts the disk labelled label read-only under an overlay whose writable layer is on the
 * workspace disk (a tmpfs without one) and makes it the root (the API filesystems move
 * along); busybox_copy receives the initramfs' busybox first. -errno. */
int ga_init_switch_root(const char *label, const char *busybox_copy);
/* Covers workspace/GA_ROOT_UPPER_DIR with an empty read-only tmpfs. 1 covered, 0 none, -errno. */
int ga_init_hide_upper(const char *workspace);
