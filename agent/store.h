/* SPDX-License-Identifier: MIT */
/* The state store: one versioned record per session, <stateDir>/sessions/<key>/state.json, held
 * in memory and written by this module only (openat on the session dir, an unpredictable temp
 * name created O_EXCL|O_NOFOLLOW, fsync, renameat, directory fsync). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct json_t json_t; /* jansson */
struct fk_error;
struct node_config;
struct agent_session;

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

/* store-session.c: s's desired state as AGENT_STORE_SESSION (new reference or NULL), stored
 * (err as agent_store_update), its removal (the rest of the record stays until the state dir
 * goes), and every stored session at start (invalid ones are logged and skipped). */
json_t *agent_store_session_json(const struct agent_session *s);
int agent_store_save(struct agent_store *st, const struct agent_session *s, struct fk_error *err);
int agent_store_remove(struct agent_store *st, const char *key, struct fk_error *err);
int agent_store_load_sessions(struct agent_store *st, const struct node_config *cfg,
                              struct agent_session ***ret, size_t *ret_n);

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
