/* SPDX-License-Identifier: MIT */
/* fk_agent_jail: the QEMU jail (a persistent uid/gid per session from the node's range, the
 * last pre-exec hook that drops to it, and the file grants QEMU needs as that uid) and
 * forkletd's own least privilege. Below the daemon: includes common/, manifest/ and vmm/ only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct node_config;
struct fk_error;

#define AGENT_JAIL_UID_FILE    "jail-uid"
#define AGENT_JAIL_GRANTS_FILE "jail-grants"

#define AGENT_JAIL_BINDS_MAX 96
#define AGENT_JAIL_RW        1u /* writable bind (else read-only) */
#define AGENT_JAIL_DEV       2u /* device node: the bind keeps dev */

/* One host path QEMU sees in its mount namespace, at the same path. */
struct agent_jail_bind {
        char *path; /* owned; absolute, no "." or ".." component */
        unsigned flags;
        bool dir;
};

/* What the pre-exec hook needs (plain data: the child reads it after fork). Owned strings:
 * agent_jail_done() frees them. */
struct agent_jail {
        uid_t uid; /* gid is the same number */
        bool tap;  /* hand the session's tap (NET_TAP_NAME in the current netns) to uid */
        unsigned nofile, nproc;
        char *root; /* forkletd's empty directory the jail's tmpfs is mounted on */
        size_t n_binds, n_links;
        struct agent_jail_bind binds[AGENT_JAIL_BINDS_MAX];
        struct {
                char *name, *target; /* "lib" -> "usr/lib" on merged-/usr hosts */
        } links[8];
};

/* Starts a jail's mount table: creates root (0700, must be a directory owned by forkletd),
 * adds /usr, /bin.. (symlinks or read-only binds), /etc/ld.so.cache and /dev/{null,zero,full,
 * random,urandom}. Returns 0 or -errno (-EPERM: root is not forkletd's directory,
 * -ENAMETOOLONG: root is not absolute or longer than PATH_MAX / 2). */
int agent_jail_mounts_init(struct agent_jail *j, const char *root);

/* Adds path (absolute, existing; AGENT_JAIL_* flags) to the jail at the same path. A path
 * inside an already bound directory adds nothing (that bind becomes writable if flags ask):
 * add directories before the files in them. Returns 0, -EINVAL (not absolute or has a "." or
 * ".." component), -E2BIG (table full) or -errno of stat. */
int agent_jail_bind(struct agent_jail *j, const char *path, unsigned flags);

/* In the pre-exec child (async-signal-safe): a new mount namespace whose root is a read-only
 * tmpfs on j->root with j's binds and links and a /proc (hidepid), then pivot_root into it.
 * Needs CAP_SYS_ADMIN: run before dropping to uid. Returns 0 or -errno. */
int agent_jail_enter_mounts(const struct agent_jail *j);

/* Frees what j owns and zeroes it. */
void agent_jail_done(struct agent_jail *j);

/* The jail root of the QEMU whose run dir is run_dir (<node runDir>/sessions/<key>):
 * <node runDir>/jail. Returns 0 or -ENOMEM. */
int agent_jail_root_of(const char *run_dir, char **ret);

/* The uid of session key: read from <state_dir>/jail-uid, or allocated (first free from a hash
 * of key, probing over every session's file under <stateDir>/sessions) and recorded there.
 * Serialized internally. Returns 0 with *ret_uid, -ENOSPC when the range is full, -errno;
 * does not log. */
int agent_jail_uid(const struct node_config *cfg, const char *key, const char *state_dir,
                   uid_t *ret_uid);

/* Pre-exec hook (async-signal-safe; run last, after the cgroup join and netns entry): rlimits,
 * the tap's owner, the private mount namespace (when j->root is set), then drops every
 * capability (bounding, ambient, inheritable), all supplementary groups, becomes uid/gid and
 * sets no_new_privs. userdata: struct agent_jail.
 * Returns 0 or -errno. */
int agent_jail_pre_exec(void *userdata);

/* Lets uid open path with perm (4 read, 2 write, bits OR-ed): nothing when uid owns it or the
 * "other" bits already allow it, else a POSIX ACL user entry (system.posix_acl_access) on path
 * itself. Parent directories need nothing: the jail binds path into QEMU's mount namespace.
 * Returns 0 or -errno (-ENOSPC: the ACL is full); does not log. */
int agent_jail_grant(const char *path, uid_t uid, unsigned perm);

/* Removes uid's ACL entry from path (a missing path or entry is fine). Returns 0 or -errno. */
int agent_jail_revoke(const char *path, uid_t uid);

/* agent_jail_grant on path's real path, recorded first in <state_dir>/jail-grants so that
 * agent_jail_forget can take it back when the session goes. Returns 0 or -errno. */
int agent_jail_grant_logged(const char *state_dir, const char *path, uid_t uid, unsigned perm);

/* Revokes the grants in <state_dir>/jail-grants on paths below dir (before dir goes: links
 * to files that live on elsewhere, like a checkpoint's RAM). Returns 0 or the first -errno. */
int agent_jail_revoke_under(const char *state_dir, const char *dir);

/* Revokes every grant in <state_dir>/jail-grants from the session's uid (<state_dir>/jail-uid),
 * then removes the ledger (kept when a revoke failed). Before the state dir is removed: a
 * later session may get the same uid. Returns 0 (also: never jailed) or the first -errno. */
int agent_jail_forget(const char *state_dir);

/* Makes dir (a session's run dir) and the regular files directly in it owned by uid/uid, dir
 * mode 0700, so the jailed QEMU can create its sockets and RAM file there. Returns 0 or -errno. */
int agent_jail_own_dir(const char *dir, uid_t uid);

/* Opens path (regular file, no symlink in its last component) for reading only if its owner is
 * the calling user: files in a jailed QEMU's directory may have been replaced by it. Returns an
 * O_CLOEXEC fd or -errno (-EPERM: owned by somebody else). */
int agent_jail_open_trusted(const char *path);

/* agent_jail_forget for every session dir under <state_root>/sessions (decommissioning a node
 * whose VMs are gone). Returns the number of dirs handled or the first -errno. */
int agent_jail_forget_all(const char *state_root);

/* The files one QEMU opens by name. Borrowed; NULL: none. */
struct agent_jail_files {
        const char *run_dir;                  /* handed to the uid (sockets, logs, mem.ram) */
        const char *kernel, *initrd, *rootfs; /* read-only */
        const char *mem_path;                 /* RAM file, read-write */
        const char *disk;                     /* read-write; its qcow2 backing chain read-only */
        bool disk_dir; /* the disk's directory too, read-write (layers made while running) */
        bool tap, kvm; /* /dev/net/tun, /dev/kvm */
};

/* Fills j (j->uid set by the caller) for a QEMU that opens f: the mount table (agent_jail_*
 * binds under agent_jail_root_of(f->run_dir)), the run dir handed to j->uid, and the grants,
 * recorded in <ledger_dir>/jail-grants (NULL: not recorded; the caller revokes them).
 * Returns 0 or -errno with err set; does not log. */
int agent_jail_setup(struct agent_jail *j, const struct agent_jail_files *f, const char *ledger_dir,
                     struct fk_error *err);

/* Least privilege (privileges.c). The capabilities forkletd keeps (a mask of 1 << CAP_*),
 * fixed at build time: what the netns, nftables, cgroup, jail and checkpoint paths need. */
uint64_t agent_privileges_keep_mask(void);
/* Writes mask as comma-separated "cap_*" names into buf. Returns the length or -ENOBUFS. */
int agent_privileges_names(uint64_t mask, char *buf, size_t size);
/* Drops every capability outside keep from the calling process's bounding, ambient,
 * inheritable, permitted and effective sets, and locks securebits keep_caps and
 * no_setuid_fixup off and no_cap_ambient_raise on (the bounding set and securebits only with
 * CAP_SETPCAP). Must run before any other thread exists (-EBUSY otherwise: capabilities are per
 * thread). *ret_kept (optional): the permitted set afterwards. Returns 0 or -errno with err
 * set; does not log. */
int agent_privileges_drop(uint64_t keep, uint64_t *ret_kept, struct fk_error *err);
