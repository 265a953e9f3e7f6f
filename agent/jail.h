/* SPDX-License-Identifier: MIT */
/* Inside agent/ only: the QEMU jail (a persistent uid/gid per session from the node's range, the
 * last pre-exec hook that drops to it, and the file grants QEMU needs as that uid). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct node_config;
struct agent_boot_params;
struct fk_error;

#define AGENT_JAIL_UID_FILE "jail-uid"

/* What the pre-exec hook needs (plain data: the child reads it after fork). */
struct agent_jail {
        uid_t uid; /* gid is the same number */
        bool tap;  /* hand the session's tap (NET_TAP_NAME in the current netns) to uid */
        unsigned nofile, nproc;
};

/* The uid of session key: read from <state_dir>/jail-uid, or allocated (first free from a hash
 * of key, probing over every session's file under <stateDir>/sessions) and recorded there.
 * Serialized internally. Returns 0 with *ret_uid, -ENOSPC when the range is full, -errno;
 * does not log. */
int agent_jail_uid(const struct node_config *cfg, const char *key, const char *state_dir,
                   uid_t *ret_uid);

/* Pre-exec hook (async-signal-safe; run last, after the cgroup join and netns entry): rlimits,
 * the tap's owner, then drops every capability (bounding, ambient, inheritable), all
 * supplementary groups, becomes uid/gid and sets no_new_privs. userdata: struct agent_jail.
 * Returns 0 or -errno. */
int agent_jail_pre_exec(void *userdata);

/* Lets uid open path with perm (4 read, 2 write, bits OR-ed): nothing when the owner or the
 * "other" bits already allow it, else a POSIX ACL user entry (system.posix_acl_access); every
 * ancestor directory that "other" cannot search gets a search entry for uid. Returns 0 or
 * -errno; does not log. */
int agent_jail_grant(const char *path, uid_t uid, unsigned perm);

/* Makes dir (a session's run dir) and the regular files directly in it owned by uid/uid, dir
 * mode 0700, so the jailed QEMU can create its sockets and RAM file there. Returns 0 or -errno. */
int agent_jail_own_dir(const char *dir, uid_t uid);

/* Opens path (regular file, no symlink in its last component) for reading only if its owner is
 * the calling user: files in a jailed QEMU's directory may have been replaced by it. Returns an
 * O_CLOEXEC fd or -errno (-EPERM: owned by somebody else). */
int agent_jail_open_trusted(const char *path);

/* Jails the QEMU that p describes: allocates the uid (j->uid), hands it p->run_dir, grants
 * kernel/initrd (read), RAM file and disk (read-write), the disk's backing chain (read), sets
 * p->jail_uid and appends agent_jail_pre_exec(j) to p->pre_exec (last). j must outlive the spawn.
 * Returns 0 or -errno with err set; does not log. */
int agent_jail_prepare(const struct node_config *cfg, struct agent_boot_params *p,
                       struct agent_jail *j, struct fk_error *err);
