/* SPDX-License-Identifier: MIT */
/* fk_agent_store: the state store (below the daemon: includes common/ and manifest/ only), one
 * versioned record per session, <stateDir>/sessions/<key>/state.json, held in memory and written by
 * this module only (openat on the session dir, an unpredictable temp name created
 * O_EXCL|O_NOFOLLOW, fsync, renameat, directory fsync). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct json_t json_t; /* jansson */
struct fk_error;

#define AGENT_STORE_FILE   "state.json"
#define AGENT_STORE_SCHEMA 1 /* the schemaVersion this forkletd reads and writes */
/* A record write that failed for any reason but a full device returns -AGENT_STORE_EFAIL, which
 * no other path returns, so the API answers 500 (err keeps the real errno text). */
#define AGENT_STORE_EFAIL ENOTRECOVERABLE

/* The fields of a record (JSON names in agent_store_field_to_string). */
enum agent_store_field {
        AGENT_STORE_SESSION,  /* object: desired state of an API or cluster session */
        AGENT_STORE_VM,       /* object: the running QEMU (pid, startTime, paths, shape) */
        AGENT_STORE_IDENTITY, /* object: status.identity of the running machine */
        AGENT_STORE_RESTORED, /* string: the fork id the guest got on its last restore */
        AGENT_STORE_LINEAGE,  /* string: the checkpoint the machine came from or was saved as */
        AGENT_STORE_DISK,     /* string: the active overlay, a file name in <session>/disk */
        _AGENT_STORE_FIELD_MAX,
};
const char *agent_store_field_to_string(enum agent_store_field f);

struct agent_store;

/* Opens <state_dir>/sessions (created 0700), upgrades the old layout of each session dir
 * (agent_store_upgrade_one; vm.json files under <run_dir>/sessions) and loads every record.
 * -EPROTO with err when a record has a schemaVersion this forkletd does not know; a record that
 * cannot be parsed is logged and kept as it is (agent_store_keeps, never overwritten). Logs. */
int agent_store_open(const char *state_dir, const char *run_dir, struct agent_store **ret,
                     struct fk_error *err);
struct agent_store *agent_store_free(struct agent_store *st);

/* A field of key's record: new reference (get) or heap copy (get_string), NULL when unset.
 * Thread-safe, touches no file. */
json_t *agent_store_get(struct agent_store *st, const char *key, enum agent_store_field f);
char *agent_store_get_string(struct agent_store *st, const char *key, enum agent_store_field f);

/* One field to replace; value is stolen (NULL: remove the field). */
struct agent_store_change {
        enum agent_store_field field;
        json_t *value;
};
/* Replaces fields of key's record (made, with its session dir, when new) and writes it. On
 * failure nothing changes, in memory or on disk: -ENOSPC with the space message, any other
 * failure -AGENT_STORE_EFAIL with err "store session KEY: write PATH: <errno text>".
 * Values are stolen either way. Thread-safe; does not log. */
int agent_store_update(struct agent_store *st, const char *key, const struct agent_store_change *c,
                       size_t n, struct fk_error *err);
int agent_store_set(struct agent_store *st, const char *key, enum agent_store_field f,
                    json_t *value, struct fk_error *err);
int agent_store_set_string(struct agent_store *st, const char *key, enum agent_store_field f,
                           const char *value, struct fk_error *err);
/* Drops key's record from memory (its state dir was removed). */
void agent_store_forget(struct agent_store *st, const char *key);
/* The keys that have a record (NULL-terminated strv, caller frees). */
int agent_store_keys(struct agent_store *st, char ***ret);
/* Whether key's state dir must stay although no session owns it: a stored session (that did not
 * load) or a state.json that could not be read. */
bool agent_store_keeps(struct agent_store *st, const char *key);

/* Pure codec. decode: a record from state.json text (new reference), -EPROTO for another
 * schemaVersion, -EINVAL for anything else that is not a record; err names the field. encode:
 * the text to write (heap) or NULL. */
int agent_store_decode(const char *text, size_t size, json_t **ret, struct fk_error *err);
char *agent_store_encode(const json_t *rec);

/* store-upgrade.c: converts session dir key (under sessions_fd) from the layout of forkletd
 * before schemaVersion 1 (session.json, identity.json, restored, lineage, disk/active, and
 * <run_dir>/sessions/<key>/vm.json) into state.json, then removes the old files. 1 upgraded,
 * 0 nothing to do, -errno with err (the old files stay). Does not log. */
int agent_store_upgrade_one(int sessions_fd, const char *key, const char *run_dir,
                            struct fk_error *err);

/* ---- free space (space.c): the wording of a full device, shared by the daemon
 * -------------------------------------------------------------------- */

/* Margins, not measurements: what a checkpoint or snapshot writes besides RAM and disk data
 * (device state, a new qcow2 overlay, meta.json), and a fork or rollback (an overlay, about
 * 200 KiB, and state.json). */
#define AGENT_SPACE_SLACK   ((uint64_t)8 * 1024 * 1024)
#define AGENT_SPACE_OVERLAY ((uint64_t)1024 * 1024)
/* Bytes an unprivileged writer may still use on the filesystem holding path (statvfs). */
int agent_space_free(const char *path, uint64_t *ret);
/* Allocated bytes of path (st_blocks; holes are free), 0 when it cannot be read. */
uint64_t agent_space_allocated(const char *path);
/* -ENOSPC with err "OP: no space left on the device holding WHAT (N MiB free, M needed)"
 * (free: of path's filesystem now; op may be NULL). Does not log. */
int agent_space_error(const char *path, const char *what, uint64_t need, const char *op,
                      struct fk_error *err);
/* 0 when need bytes fit on path's filesystem, else agent_space_error. */
int agent_space_check(const char *path, const char *what, uint64_t need, const char *op,
                      struct fk_error *err);
/* Whether failure r (with err's text from qemu-img or QEMU) was a full device. */
bool agent_space_is_full(int r, const struct fk_error *err);
/* r, or agent_space_error when r says the device was full (err rewritten). */
int agent_space_explain(int r, const char *path, const char *what, uint64_t need, const char *op,
                        struct fk_error *err);
