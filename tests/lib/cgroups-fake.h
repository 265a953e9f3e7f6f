/* SPDX-License-Identifier: MIT */
/* Fake cgroup trees for the cgroups unit tests: directories in mkdtemp() holding files that
 * look like what v1 and v2 kernels show, plus helpers to read them back. */
#pragma once

#include "cgroups/cgroups.h"
#include "common/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One file of a fake cgroup directory: name and initial content. */
struct fake_file {
        const char *name;
        const char *content;
};

/* Files a v1 kernel shows in a fresh session cgroup, per controller directory. */
extern const struct fake_file fake_v1_memory[], fake_v1_cpu[], fake_v1_cpuacct[],
        fake_v1_cpu_cpuacct[], fake_v1_pids[], fake_v1_freezer[], fake_v1_blkio[];
/* Files a v2 kernel (6.x) shows in a fresh session cgroup. */
extern const struct fake_file fake_v2_session[];
/* Files of a v2 session cgroup whose parent enables none of our controllers (core only). */
extern const struct fake_file fake_v2_core[];

/* mkdtemp() under TMPDIR or /tmp; the caller frees the string and calls fake_rm. */
char *fake_mkdtemp(void);
void fake_rm(const char *root);
/* Writes root/rel (creating parent directories) with content. */
void fake_put(const char *root, const char *rel, const char *content);
/* Creates directory root/dir with the files of a NULL-name-terminated table. */
void fake_dir(const char *root, const char *dir, const struct fake_file *files);
/* Reads root/rel into a static buffer, trailing newline removed. */
const char *fake_get(const char *root, const char *rel);
int fake_exists(const char *root, const char *rel);
/* Absolute path of a file in FORKLET_TEST_DATA/cgroups (static buffer). */
const char *fake_data(const char *name);

/* A fake tree and a manager opened on it: the cmocka fixture of the backend tests. */
struct cg_fx {
        char *root;
        struct cg_manager *m;
        struct fk_error err;
};
/* A fixture with a new, empty fake root (owned; freed by cg_fx_teardown). */
struct cg_fx *cg_fx_new(void);
/* Opens f->m on f->root with o (o->root is set here), asserting success; *state = f. */
int cg_fx_open(struct cg_fx *f, struct cg_options *o, void **state);
/* cmocka teardown of a cg_fx: frees the manager, removes and frees the fake tree. */
int cg_fx_teardown(void **state);
/* Forks a child that joins j (cg_join_pre_exec, else cg_join_self) and asserts it exited 0;
 * returns the child's pid. */
pid_t cg_fx_join_child(struct cg_join *j, bool pre_exec);
