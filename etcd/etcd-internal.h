/* SPDX-License-Identifier: MIT */
/* Inside etcd/ only: the client struct, the pure codec (JSON requests/replies,
 * prefix ranges, backoff), the watch stream splitter and the HTTP transport. */
#pragma once

#include "etcd/etcd.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

struct fk_error;

DEFINE_CLEANUP_FUNC(struct etcd_kvs *, etcd_kvs_free);
/* jansson >= 2.11 provides json_decrefp() for _cleanup_(). */
DEFINE_CLEANUP_FUNC(struct etcd_client *, etcd_client_free);

struct etcd_client {
        char **endpoints; /* base URLs without trailing '/', owned */
        size_t n_endpoints;
        atomic_uint preferred;    /* index of the endpoint that last worked */
        struct etcd_options opts; /* defaults applied; strings below */
        char *ca_file, *cert_file, *key_file;
        pthread_mutex_t lock; /* guards pool */
        void **pool;          /* idle CURL easy handles (kept for connection reuse) */
        size_t n_pool;
};

/* ---- codec (etcd-codec.c), pure ---- */

/* range_end for "every key starting with key": key with its last byte below 0xff incremented
 * and the rest cut; "\0" (len 1) when key is empty or all 0xff (meaning: to the end). */
int etcd_prefix_range_end(const void *key, size_t len, char **ret, size_t *ret_len);

/* Parses an int64 given as JSON string or integer; absent (NULL) gives 0. -EPROTO otherwise. */
int etcd_json_int64(const json_t *v, int64_t *ret);

/* Maps a gRPC status code (the gateway's "code") to a negative errno. */
int etcd_grpc_to_errno(int code);
/* If reply is an error object ({"error":..,"code":..} or {"error":{...}}), fills reterr and
 * returns its negative errno; 0 otherwise. */
int etcd_reply_error(const json_t *reply, struct fk_error *reterr);

/* Full-jitter exponential backoff: uniform in [0, min(max, base << round)] using rnd. */
unsigned etcd_backoff_ms(unsigned round, unsigned base_ms, unsigned max_ms, uint32_t rnd);

/* Request builders: new JSON object (caller owns, json_decref()) or NULL on ENOMEM/EINVAL. */
json_t *etcd_req_range(const char *key, const char *range_end, unsigned flags);
json_t *etcd_req_put(const char *key, const void *value, size_t len, int64_t lease);
json_t *etcd_req_delete(const char *key, unsigned flags);
json_t *etcd_req_txn_cas(const char *key, int64_t expected_mod_revision, const void *value,
                         size_t len, int64_t lease);
json_t *etcd_req_watch_create(const char *key, unsigned flags, int64_t start_revision);

/* Fills kv from a gateway kv object (base64 key/value, string int64s). Frees nothing on error;
 * the caller releases kv with etcd_kv_done(). */
int etcd_parse_kv(const json_t *o, struct etcd_kv *kv);
void etcd_kv_done(struct etcd_kv *kv);
/* Range reply -> *ret (caller owns) and the header revision. */
int etcd_parse_range(const json_t *reply, struct etcd_kvs **ret, int64_t *ret_revision);
/* Header revision of any reply (0 if absent). */
int etcd_parse_header_revision(const json_t *reply, int64_t *ret);
/* Txn: delete key if its mod_revision is expected_mod_revision, else get it. */
json_t *etcd_req_txn_delete(const char *key, int64_t expected_mod_revision);
/* Txn CAS reply: succeeded, and the new or current mod_revision (see etcd_txn_cas()). */
int etcd_parse_txn_cas(const json_t *reply, bool *ret_succeeded, int64_t *ret_revision);

/* ---- watch stream (etcd-stream.c), pure ---- */

/* Splits a byte stream into top-level JSON objects, whatever the chunking (objects split across
 * chunks, several per chunk, with or without newlines between them). */
struct etcd_stream {
        char *buf;
        size_t len, alloc, scanned; /* scanned: bytes of the current object already scanned */
        int depth;
        bool in_string, escape;
        size_t max; /* largest object accepted */
};

void etcd_stream_init(struct etcd_stream *s, size_t max);
void etcd_stream_done(struct etcd_stream *s);
void etcd_stream_reset(struct etcd_stream *s);
int etcd_stream_feed(struct etcd_stream *s, const void *data, size_t len);
/* Returns 1 and a parsed object in *ret (caller owns), 0 if no complete object is buffered,
 * -EMSGSIZE when one exceeds max, -EPROTO on a byte that cannot start an object or bad JSON. */
int etcd_stream_next(struct etcd_stream *s, json_t **ret);

struct etcd_watch_event {
        enum etcd_event_type type;
        struct etcd_kv kv;
};

/* One parsed watch response ({"result":{...}} or an error object). */
struct etcd_watch_reply {
        bool created, canceled;
        int64_t header_revision;
        int64_t compact_revision; /* > 0: the watch was canceled by compaction */
        size_t n_events;
        struct etcd_watch_event *events; /* owned */
        int error;                       /* negative errno if this was an error object */
        char message[FK_ERROR_MSG_MAX];  /* cancel reason or error message */
};

int etcd_parse_watch_reply(const json_t *o, struct etcd_watch_reply *ret);
void etcd_watch_reply_done(struct etcd_watch_reply *r);

/* ---- transport (etcd-client.c) ---- */

/* POSTs req (borrowed) to path ("/v3/kv/range") with failover, timeouts and backoff; on 0 *ret
 * is the parsed reply (caller owns). idempotent: may be retried after the request was sent. */
int etcd_call(struct etcd_client *c, const char *path, json_t *req, bool idempotent, json_t **ret,
              struct fk_error *reterr);
/* Applies TLS and timeout options to a CURL easy handle (no total timeout if !total). */
void etcd_curl_setup(struct etcd_client *c, void *curl, bool total);
/* Maps a CURLcode to a negative errno. */
int etcd_curl_to_errno(int code);
/* A random 32-bit number for jitter (never fails: falls back to the clock). */
uint32_t etcd_random32(void);
