/* SPDX-License-Identifier: MIT */
/* Per-session cgroups behind one interface with two backends (v2 unified, v1 split
 * controllers): create with limits, live updates, join before exec, freeze, kill, stats. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fk_error;
struct cg_manager;
struct cg_join;

enum cg_version {
        CG_VERSION_AUTO = 0, /* options only: detect from mountinfo */
        CG_VERSION_1 = 1,
        CG_VERSION_2 = 2,
};

/* Returns "auto", "v1" or "v2" (static). */
const char *cg_version_to_string(enum cg_version v);

struct cg_options {
        /* Parent cgroup under which sessions live, relative to the hierarchy root (or to the
         * caller's own cgroup with nest_in_self), e.g. "forklet" or "forklet.slice/sessions".
         * Borrowed. Required. */
        const char *parent;
        /* Prefix every mount point from mountinfo with this directory (tests: a fake tree in
         * mkdtemp()). NULL: the real root. Borrowed. */
        const char *root;
        /* NULL: /proc/self/mountinfo. Borrowed. */
        const char *mountinfo_path;
        /* Used only with nest_in_self. NULL: /proc/self/cgroup. Borrowed. */
        const char *proc_cgroup_path;
        /* Put parent below the caller's own cgroup in each hierarchy instead of below the
         * hierarchy root (tests and benchmarks stay inside their own accounting). */
        bool nest_in_self;
        /* CG_VERSION_AUTO (detect) or force one backend. */
        enum cg_version version;
        /* Bound for freeze/thaw/kill/destroy waits. 0: 5000 ms. */
        unsigned timeout_ms;
        /* Use this cgroup2 mount point (as mountinfo lists it, e.g. "/sys/fs/cgroup/unified")
         * instead of detecting: forces v2 (with version CG_VERSION_1: -EINVAL); -ENOENT if
         * mountinfo has no cgroup2 mount there. NULL: detect. Borrowed. */
        const char *v2_mount;
        /* v2: open the hierarchy even when cpu, memory or pids cannot be enabled (a host or
         * container that delegates only some controllers; the core interface, i.e. join,
         * freeze, kill, list, cpu.stat, works without any). Every available one of cpu, memory,
         * pids, io is still enabled. A nonzero limit whose controller is missing then fails
         * cg_create/cg_update_limits with -EOPNOTSUPP naming the controller and the file, and
         * cg_stats reports has_memory/has_pids false. false (forkletd): cg_manager_new fails
         * with -EOPNOTSUPP naming what lacks. */
        bool partial_controllers;
};

/* Limits of one session cgroup. Zero means "no limit" (or the kernel default for weights);
 * cg_update_limits applies the whole struct, so a zero field resets that limit. */
struct cg_limits {
        double cpu_cores;       /* CFS quota in cores (0.5: half a core); 0: unlimited */
        uint64_t cpu_period_us; /* CFS period; 0: 100000 */
        /* Relative CPU weight 1..10000 (v2 cpu.weight, default 100). v1 maps it linearly to
         * cpu.shares = weight * 1024 / 100 (clamped to 2..262144). 0: leave default. */
        uint64_t cpu_weight;
        uint64_t memory_max;  /* bytes, hard limit (v2 memory.max, v1 limit_in_bytes) */
        uint64_t memory_high; /* bytes, throttle point (v2 memory.high, v1 soft limit) */
        uint64_t pids_max;    /* tasks */
        /* 1..10000 (v2 io.weight "default N"; v1 blkio.weight or blkio.bfq.weight). 0: unset.
         * Set but unsupported by the host: -EOPNOTSUPP. */
        uint64_t io_weight;
};

struct cg_stats {
        uint64_t cpu_usage_ns;   /* v2 cpu.stat usage_usec * 1000, v1 cpuacct.usage */
        uint64_t memory_current; /* v2 memory.current, v1 memory.usage_in_bytes */
        uint64_t memory_peak;    /* v2 memory.peak, v1 memory.max_usage_in_bytes */
        bool has_memory_peak;    /* false when the kernel has no peak file (v2 < 5.19) */
        uint64_t oom_kills;      /* v2 memory.events oom_kill, v1 memory.oom_control oom_kill */
        uint64_t pids_current;   /* pids.current */
        /* false only on a partial v2 hierarchy without that controller (partial_controllers):
         * the memory fields (oom_kills included) or pids_current are then 0, not measured. */
        bool has_memory;
        bool has_pids;
};

struct cg_capacity {
        uint64_t memory_bytes; /* MemTotal */
        unsigned cpus;         /* CPUs this process may run on */
};

/* Detects the backend (mountinfo: a cgroup2 mount whose cgroup.controllers lists cpu, memory
 * and pids wins; otherwise v1 with cpu, cpuacct, memory, pids and freezer mounted, possibly
 * combined as cpu,cpuacct; blkio is used when mounted; opts->v2_mount skips detection), opens
 * every hierarchy, creates the parent cgroup (mkdir -p; levels it created are removed again on
 * failure) and on v2 enables cpu, memory, pids (and io when available) in
 * cgroup.subtree_control from the top down to the parent (see partial_controllers). *ret is owned
 * by the caller (free with cg_manager_free; the parent cgroup stays). Returns 0 or -errno with err
 * filled naming the file. Does not log above debug. */
int cg_manager_new(const struct cg_options *opts, struct cg_manager **ret, struct fk_error *err);
/* Closes the fds; cgroups on disk are left alone. Accepts NULL, returns NULL. */
struct cg_manager *cg_manager_free(struct cg_manager *m);
enum cg_version cg_manager_version(const struct cg_manager *m);
/* Absolute path of the parent cgroup in the first hierarchy (v2: the only one; v1: memory),
 * e.g. "/sys/fs/cgroup/memory/forklet". Owned by m. */
const char *cg_manager_parent_path(const struct cg_manager *m);
/* Path of session name relative to the hierarchy root, e.g. "/forklet/roastery", as
 * /proc/PID/cgroup shows it (for status.cgroup). Caller frees *ret. */
int cg_manager_cgroup_path(const struct cg_manager *m, const char *name, char **ret);
/* Removes the (empty) parent cgroup in every hierarchy; -EBUSY if sessions remain. */
int cg_manager_remove_parent(struct cg_manager *m, struct fk_error *err);

/* Session names are one path component of [A-Za-z0-9._-], 1..200 chars, not "." or "..". */
bool cg_name_is_valid(const char *name);

/* Creates cgroup name in every hierarchy and writes limits. An existing cgroup is adopted
 * (limits rewritten): returns 1 then, 0 when created. -errno with err naming the file on
 * failure (a cgroup this call created is removed again). */
int cg_create(struct cg_manager *m, const char *name, const struct cg_limits *limits,
              struct fk_error *err);
/* Rewrites all limits of an existing cgroup (live). */
int cg_update_limits(struct cg_manager *m, const char *name, const struct cg_limits *limits,
                     struct fk_error *err);
/* Moves pid (the whole process) into name in every hierarchy. */
int cg_attach_pid(struct cg_manager *m, const char *name, pid_t pid, struct fk_error *err);

/* Precomputes what a child needs to join name between fork and exec: an open cgroup.procs fd
 * per hierarchy, and on v2 a directory fd for clone3(CLONE_INTO_CGROUP). *ret is caller-owned
 * (cg_join_free); all fds are O_CLOEXEC. */
int cg_prepare_join(struct cg_manager *m, const char *name, struct cg_join **ret,
                    struct fk_error *err);
struct cg_join *cg_join_free(struct cg_join *j);
/* In the child after fork: writes getpid() to every prepared cgroup.procs. Async-signal-safe
 * (no allocation, no locks, no errno-dependent libc state). Returns 0 or -errno. */
int cg_join_self(const struct cg_join *j);
/* Same as cg_join_self, with the vmm_pre_exec_fn signature: pass the cg_join as userdata. */
int cg_join_pre_exec(void *userdata);
/* v2: the cgroup directory fd for clone_args.cgroup with CLONE_INTO_CGROUP (owned by j).
 * v1: -EOPNOTSUPP (use cg_join_self in the child). */
int cg_join_cgroup_fd(const struct cg_join *j);

/* Freezes every process in name and waits (bounded by timeout_ms) until the kernel reports
 * it frozen (v2 cgroup.events "frozen 1", v1 freezer.state FROZEN). -ETIMEDOUT otherwise. */
int cg_freeze(struct cg_manager *m, const char *name, struct fk_error *err);
/* Thaws and waits until v2 "frozen 0" / v1 THAWED. */
int cg_thaw(struct cg_manager *m, const char *name, struct fk_error *err);
/* SIGKILLs every process in name and waits until cgroup.procs is empty. v2 with cgroup.kill:
 * one write; otherwise (v1) freeze, kill each pid, thaw, repeat, bounded by timeout_ms.
 * The caller still reaps its own children. -ETIMEDOUT if processes remain. */
int cg_kill_all(struct cg_manager *m, const char *name, struct fk_error *err);
/* Reads usage counters. */
int cg_stats(struct cg_manager *m, const char *name, struct cg_stats *ret, struct fk_error *err);
/* Removes name from every hierarchy. Refuses with -EBUSY while cgroup.procs lists a process;
 * retries rmdir on EBUSY (dying tasks) within timeout_ms. A missing cgroup is success. */
int cg_destroy(struct cg_manager *m, const char *name, struct fk_error *err);
/* Names of the session cgroups under the parent (first hierarchy), sorted. *ret is a
 * NULL-terminated strv owned by the caller (fk_strv_free). */
int cg_list(struct cg_manager *m, char ***ret, struct fk_error *err);
/* Processes in name (first hierarchy's cgroup.procs). *ret is caller-owned (free()). */
int cg_pids(struct cg_manager *m, const char *name, pid_t **ret, size_t *ret_n,
            struct fk_error *err);

/* Node capacity: MemTotal from meminfo_path (NULL: /proc/meminfo) and the number of CPUs in
 * this process's affinity mask. */
int cg_node_capacity(const char *meminfo_path, struct cg_capacity *ret, struct fk_error *err);
