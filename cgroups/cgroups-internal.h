/* SPDX-License-Identifier: MIT */
/* Inside the cgroups module: the manager, the backend ops table, file helpers relative to a
 * hierarchy's parent dirfd, and pure parsers (mountinfo, /proc/PID/cgroup, keyed files). */
#pragma once

#include "cgroups/cgroups.h"

#include <stdbool.h>
#include <stdint.h>

struct fk_error;

enum {
        CG_CTRL_CPU = 1u << 0,
        CG_CTRL_CPUACCT = 1u << 1,
        CG_CTRL_MEMORY = 1u << 2,
        CG_CTRL_PIDS = 1u << 3,
        CG_CTRL_FREEZER = 1u << 4,
        CG_CTRL_BLKIO = 1u << 5, /* v1 optional; v2 "io" */
};
#define CG_V1_REQUIRED                                                                             \
        (CG_CTRL_CPU | CG_CTRL_CPUACCT | CG_CTRL_MEMORY | CG_CTRL_PIDS | CG_CTRL_FREEZER)
#define CG_HIER_MAX 6

/* Controller bit of a v1 mount option / v2 controller name ("cpu", "io", ...); 0: unknown. */
unsigned cg_controller_from_name(const char *name);

/* One cgroup mount from mountinfo. */
struct cg_mount {
        char *mount_point; /* owned, unescaped */
        char *root;        /* owned: the hierarchy path mounted there ("/" normally) */
        unsigned dev_major, dev_minor;
        bool v2;
        unsigned controllers; /* v1: from super options; v2: 0 (read cgroup.controllers) */
};

/* Parses mountinfo text into the cgroup/cgroup2 mounts. *ret owned (cg_mounts_free). */
int cg_parse_mountinfo(const char *text, struct cg_mount **ret, size_t *ret_n);
void cg_mounts_free(struct cg_mount *mounts, size_t n);
/* Finds the path of the hierarchy with controller ctrl (v2: ctrl 0) in /proc/PID/cgroup text.
 * *ret owned. -ENOENT if absent. */
int cg_parse_proc_cgroup(const char *text, unsigned ctrl, bool v2, char **ret);
/* Finds "key value" in text (one pair per line) and parses value. -ENOENT if absent. */
int cg_parse_keyed(const char *text, const char *key, uint64_t *ret);
/* Parses a decimal u64 (trailing whitespace allowed; "max" -> UINT64_MAX). */
int cg_parse_u64(const char *s, uint64_t *ret);

/* A hierarchy the manager uses: the parent cgroup opened in it. */
struct cg_hier {
        int parent_fd;        /* O_DIRECTORY fd of the parent cgroup */
        unsigned controllers; /* CG_CTRL_* served by this hierarchy */
        char *parent_path;    /* owned: absolute path of the parent, for messages */
        char *rel_parent;     /* owned: parent relative to the hierarchy root, "/a/b" */
        bool fake;            /* not a cgroup filesystem (unit tests): rmdir unlinks files first */
};

struct cg_manager;

/* Backend operations (crun's cgroup manager pattern): what differs between v1 and v2. */
struct cg_ops {
        enum cg_version version;
        int (*apply_limits)(struct cg_manager *m, const char *name, const struct cg_limits *l,
                            struct fk_error *err);
        int (*set_frozen)(struct cg_manager *m, const char *name, bool frozen,
                          struct fk_error *err);
        /* Returns 1 if the kernel killed everything itself (v2 cgroup.kill), 0 if the caller
         * must kill pid by pid. */
        int (*kill)(struct cg_manager *m, const char *name, struct fk_error *err);
        int (*stats)(struct cg_manager *m, const char *name, struct cg_stats *ret,
                     struct fk_error *err);
};

extern const struct cg_ops cg_ops_v1;
extern const struct cg_ops cg_ops_v2;

struct cg_manager {
        const struct cg_ops *ops;
        struct cg_hier hier[CG_HIER_MAX];
        size_t n_hier;
        uint64_t timeout_ns;
};

struct cg_join {
        int procs_fd[CG_HIER_MAX];
        size_t n;
        int cgroup_fd; /* v2 only, else -1 */
};

/* Index of the hierarchy serving ctrl, or -1. */
int cg_hier_find(const struct cg_manager *m, unsigned ctrl);

/* File helpers: name NULL addresses the parent itself. Errors name the absolute path. */
int cg_write(const struct cg_hier *h, const char *name, const char *file, const char *value,
             struct fk_error *err);
int cg_read(const struct cg_hier *h, const char *name, const char *file, char **ret,
            struct fk_error *err);
int cg_read_u64(const struct cg_hier *h, const char *name, const char *file, uint64_t *ret,
                struct fk_error *err);
int cg_read_keyed(const struct cg_hier *h, const char *name, const char *file, const char *key,
                  uint64_t *ret, struct fk_error *err);
/* 1 if file exists in the cgroup, 0 if not. */
int cg_file_exists(const struct cg_hier *h, const char *name, const char *file);
/* Reads cgroup.procs of name in h. */
int cg_read_pids(const struct cg_hier *h, const char *name, pid_t **ret, size_t *ret_n,
                 struct fk_error *err);
/* Sleeps for the next step of a bounded backoff (1 ms doubling to 50 ms). Returns -ETIMEDOUT
 * once deadline_ns (monotonic) has passed. */
int cg_backoff(uint64_t deadline_ns, unsigned *step);
/* Formats "a/b/file" into buf; -ENAMETOOLONG if it does not fit. */
int cg_join_path(char *buf, size_t size, const char *name, const char *file);
