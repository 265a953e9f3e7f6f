/* SPDX-License-Identifier: MIT */
/* etcd v3 client over libcurl and etcd's JSON gateway (etcd 3.4): KV range/put/delete,
 * compare-and-swap, leases and a resuming prefix watch on its own thread. Endpoint failover,
 * per-request timeouts and jittered backoff. Logs at debug only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fk_error;
struct etcd_client;
struct etcd_watch;

/* All fields optional: zero means the default given. Strings are borrowed during
 * etcd_client_new() only (copied). */
struct etcd_options {
        unsigned connect_timeout_ms; /* per endpoint connect; default 1000 */
        unsigned request_timeout_ms; /* whole request on one endpoint; default 5000 */
        unsigned attempts;           /* rounds over all endpoints before giving up; default 3 */
        unsigned backoff_base_ms;    /* first backoff between rounds; default 50 */
        unsigned backoff_max_ms;     /* backoff cap (doubles per round, full jitter); def. 2000 */
        const char *ca_file;         /* TLS: CA bundle to verify the server (https endpoints) */
        const char *cert_file;       /* TLS: client certificate (PEM) */
        const char *key_file;        /* TLS: client key (PEM) */
};

/* Flags for etcd_range(), etcd_delete(), etcd_watch_new(). */
#define ETCD_PREFIX (1u << 0) /* operate on every key starting with key ("" = all keys) */

/* One key-value. key and value are heap copies owned by the containing etcd_kvs (or, in a watch
 * callback, by the watch, valid only during the call); both are binary-safe (use the lengths)
 * and also NUL-terminated for convenience. */
struct etcd_kv {
        char *key;
        size_t key_len;
        char *value; /* never NULL (empty: ""); empty for DELETE events */
        size_t value_len;
        int64_t create_revision;
        int64_t mod_revision;
        int64_t version;
        int64_t lease; /* 0: none */
};

/* Result of etcd_range(); free with etcd_kvs_free(). */
struct etcd_kvs {
        size_t n;
        struct etcd_kv *kvs; /* n entries, owned */
        int64_t count;       /* number of keys in the range on the server */
        bool more;
};

/* Frees kvs and every string in it. Accepts NULL; returns NULL. */
struct etcd_kvs *etcd_kvs_free(struct etcd_kvs *kvs);

/* Creates a client for endpoints (NULL-terminated, at least one; "http://host:port",
 * "https://host:port" or "host:port", all copied); opts may be NULL. Does no I/O. Returns 0 and
 * *ret (caller owns; etcd_client_free()), or -EINVAL / -ENOMEM with reterr filled. A client may
 * be used from several threads at once. */
int etcd_client_new(const char *const *endpoints, const struct etcd_options *opts,
                    struct etcd_client **ret, struct fk_error *reterr);
/* Frees the client. All its watches must have been freed first. Accepts NULL; returns NULL. */
struct etcd_client *etcd_client_free(struct etcd_client *c);

/* Every request below tries the endpoint that last worked, then the others on connect failure,
 * and repeats with backoff for opts.attempts rounds (requests that may have been applied, like
 * put/txn/grant, are repeated only when the connection was never made). Errors: -ECONNREFUSED
 * (no endpoint reachable), -ETIMEDOUT, -EAGAIN (etcd unavailable, e.g. no leader), -ENOENT
 * (lease not found), -ESTALE (revision compacted), -EINVAL, -EPROTO (unexpected reply),
 * -ENOMEM; reterr (may be NULL) says which endpoint and why. */

/* Reads key (or, with range_end, the range [key, range_end); with ETCD_PREFIX in flags, every key
 * starting with key; range_end must then be NULL). On 0, *ret (caller owns, etcd_kvs_free()) and
 * *ret_revision (the store revision the read saw; may be NULL) are set; no key gives n == 0. */
int etcd_range(struct etcd_client *c, const char *key, const char *range_end, unsigned flags,
               struct etcd_kvs **ret, int64_t *ret_revision, struct fk_error *reterr);

/* Writes value (len bytes, binary) at key, attached to lease (0: none). *ret_revision (may be
 * NULL) is the revision of the write. */
int etcd_put(struct etcd_client *c, const char *key, const void *value, size_t len, int64_t lease,
             int64_t *ret_revision, struct fk_error *reterr);

/* Deletes key (with ETCD_PREFIX: every key under it). *ret_deleted (may be NULL) = keys gone. */
int etcd_delete(struct etcd_client *c, const char *key, unsigned flags, int64_t *ret_deleted,
                struct fk_error *reterr);

/* Compare-and-swap: writes value at key only if the key's mod_revision is expected_mod_revision
 * (0: only if the key does not exist), in one etcd transaction. Returns 0 with *ret_succeeded
 * telling whether it wrote; *ret_revision (may be NULL) is then the new mod_revision on success,
 * or the key's current mod_revision (0: absent) on failure, for the caller's next try. */
int etcd_txn_cas(struct etcd_client *c, const char *key, int64_t expected_mod_revision,
                 const void *value, size_t len, int64_t lease, bool *ret_succeeded,
                 int64_t *ret_revision, struct fk_error *reterr);

/* Deletes key only if its mod_revision is still expected_mod_revision (> 0), in one etcd
 * transaction. Returns 0 with *ret_succeeded telling whether it deleted. */
int etcd_txn_delete(struct etcd_client *c, const char *key, int64_t expected_mod_revision,
                    bool *ret_succeeded, struct fk_error *reterr);

/* Grants a lease of ttl_s seconds; *ret_id is its ID. */
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *ret_id,
                     struct fk_error *reterr);
/* Renews lease id once; *ret_ttl (may be NULL) = seconds left. -ENOENT if it expired. */
int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ret_ttl,
                         struct fk_error *reterr);
/* Revokes lease id, deleting its keys. -ENOENT if it does not exist (anymore). */
int etcd_lease_revoke(struct etcd_client *c, int64_t id, struct fk_error *reterr);

enum etcd_event_type {
        ETCD_EVENT_PUT,
        ETCD_EVENT_DELETE,
        /* The start revision was compacted away: events were lost. The watch has stopped; re-list
         * with etcd_range() and start a new watch at the listed revision + 1. */
        ETCD_EVENT_COMPACTED,
};

const char *etcd_event_type_to_string(enum etcd_event_type t);

/* Called on the watch thread, in revision order, exactly once per event even across reconnects.
 * kv is borrowed for the call (NULL for COMPACTED); revision is kv->mod_revision, or the compact
 * revision for COMPACTED. Must not free the watch. */
typedef void (*etcd_watch_fn)(enum etcd_event_type type, const struct etcd_kv *kv, int64_t revision,
                              void *userdata);

/* Starts a thread watching key (with ETCD_PREFIX: every key under it) from start_revision
 * (0: from now, fixed when etcd first confirms the watch; usually pass the revision of a previous
 * etcd_range() + 1 so nothing between list and watch is lost). After a disconnect it
 * reconnects (next endpoint, jittered backoff, forever until freed) and resumes at the last
 * delivered revision + 1. Returns 0 and *ret (caller owns; etcd_watch_free()); c must outlive
 * it. -ENOMEM / -EAGAIN (thread) with reterr filled. */
int etcd_watch_new(struct etcd_client *c, const char *key, unsigned flags, int64_t start_revision,
                   etcd_watch_fn fn, void *userdata, struct etcd_watch **ret,
                   struct fk_error *reterr);
/* Waits up to timeout_ms until etcd confirmed the watch (it then sees every later write).
 * 0, -ETIMEDOUT, or -ESTALE if it stopped on compaction (etcd confirms a watch before it
 * reports the compaction, so 0 does not rule out a COMPACTED event right after). */
int etcd_watch_wait_ready(struct etcd_watch *w, unsigned timeout_ms);
/* The revision the watch would resume from now (last delivered + 1). Thread-safe. */
int64_t etcd_watch_next_revision(struct etcd_watch *w);
/* Number of (re)connections made so far, for tests and metrics. Thread-safe. */
unsigned etcd_watch_connects(struct etcd_watch *w);
/* Stops the thread (promptly, even mid-backoff), joins it and frees. Not from the callback.
 * Accepts NULL; returns NULL. */
struct etcd_watch *etcd_watch_free(struct etcd_watch *w);
