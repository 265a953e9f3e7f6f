/* SPDX-License-Identifier: MIT */
/* fk_agent_runfs: the node's filesystems: where guest RAM lives (a tmpfs on <runDir>/sessions,
 * forkletd's own when runDir is on a disk), mountinfo and statfs descriptions, and whether a
 * process is one of this node's QEMUs. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct node_config;

/* One line of /proc/self/mountinfo (octal escapes undone). */
struct agent_mount {
        unsigned major, minor;
        char mount_point[PATH_MAX];
        char fstype[64];
        char source[256];
};
/* Parses one mountinfo line into *ret. Pure. Returns 0, -EINVAL (malformed), -ENAMETOOLONG
 * or -ENOMEM. */
int agent_mountinfo_parse(const char *line, struct agent_mount *ret);
/* A statfs f_type: a memory filesystem (tmpfs, ramfs, hugetlbfs)? Its name (NULL: unknown)?
 * Pure. */
bool agent_fs_magic_is_memory(long magic);
const char *agent_fs_magic_name(long magic);

struct agent_fs_info {
        bool memory;              /* tmpfs, ramfs or hugetlbfs: pages in RAM, not on a disk */
        uint64_t size, avail;     /* bytes (statfs f_blocks, f_bavail) */
        struct agent_mount mount; /* the mount holding the path (only fstype set when unknown) */
};
/* statfs and the mount of path (longest mount point above its resolved path on its device).
 * Returns 0 or -errno; does not log. */
int agent_fs_describe(const char *path, struct agent_fs_info *ret);
/* "ext4 (disk, /dev/vda on /, 53.2 GiB free of 80.0 GiB)" into buf. Pure. */
void agent_fs_format(const struct agent_fs_info *fi, char *buf, size_t size);
/* At start, before any session: creates <runDir>/sessions (where the session run dirs and so
 * the guest RAM files live) and logs the filesystems of runDir, stateDir and guest RAM. When
 * that directory is on a disk filesystem and empty, mounts a tmpfs on it (source
 * "forklet-ram"; one left by an earlier start is kept); failing that, guest RAM stays on disk
 * with a warning. Returns 0, or -errno (logged) when the directory cannot be made. */
int agent_runfs_setup(const struct node_config *cfg);
/* At forkletd's exit or --decommission: unmounts forkletd's tmpfs on <runDir>/sessions
 * unless a process of this node still runs (VMs keep running across a restart) or a forkletd
 * answers on the node's API socket. Logs what it did. Returns 1 unmounted, 0 nothing to do or
 * kept, -errno. */
int agent_runfs_release(const struct node_config *cfg);

/* True when pid is a process of the node whose runDir is run_dir: a QEMU forkletd started
 * names "<run_dir>/sessions/" on its command line. Reads /proc/PID/cmdline; does not log. */
bool agent_runfs_pid_is_ours(pid_t pid, const char *run_dir);
/* A process in its exit (PF_EXITING in /proc/PID/stat), e.g. a QEMU a rollback discarded
 * while the kernel frees its memory: it needs no signal and holds no command line any more.
 * False when it cannot be read (gone, or never there). */
bool agent_runfs_pid_exiting(pid_t pid);
