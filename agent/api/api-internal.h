/* SPDX-License-Identifier: MIT */
/* Inside fk_agent_api only: a request being served, authentication, TLS, idempotency, replies,
 * the handlers and the Kubernetes conventions (docs/kubernetes.md). */
#pragma once

#include <stdatomic.h>

#include "agent/api/api.h"
#include "agent/daemon/daemon.h"
#include "agent/obs/obs.h"
#include "common/util.h"
#include "manifest/manifest.h"

/* ---- API internals ----------------------------------------------------------------------- */

struct MHD_Connection;

/* A request being served: route, collected body, the daemon. */
struct api_request {
        struct agent_daemon *d;
        const struct node_config *cfg;
        struct api_route route;
        const char *method; /* borrowed from MHD */
        const char *url;    /* borrowed from MHD (path only) */
        char *body;         /* owned, NUL-terminated */
        size_t body_size;
        bool too_large;
        bool tcp;        /* arrived on the TCP listener */
        char caller[64]; /* "uid:N" or "token:ID" for the audit log */
        uint64_t t0_ns;  /* monotonic arrival time */
};

/* ---- API authentication, idempotency, operational endpoints (api-auth.c, api-idem.c,
 * api-watch.c) ------------------------------------------------------------------------- */

#define API_TOKEN_MIN 32

struct api_token {
        char value[1024];
        size_t size;
        char id[2 * FK_SHA256_SIZE + 1]; /* first 12 hex digits of SHA-256(value) */
};
/* Loads a bearer token: a file of mode 0600 or stricter, >= API_TOKEN_MIN printable bytes
 * (a trailing newline is ignored). Errors in err. */
int api_token_load(const char *path, struct api_token *ret, struct fk_error *err);
/* Constant-time in the length of the expected token. */
bool api_token_equal(const struct api_token *t, const char *given);
/* TCP: checks "Authorization: Bearer" (-EACCES); unix: the peer's uid. Fills caller. */
int api_authenticate(struct MHD_Connection *c, bool tcp, const struct api_token *t, char *caller,
                     size_t size);
struct sockaddr_in;
/* "A.B.C.D:PORT" -> address; without tls, addresses outside 127.0.0.0/8 are refused (-EPERM). */
int api_parse_listen(const char *listen, bool tls, struct sockaddr_in *ret, struct fk_error *err);

/* TLS of the TCP listener (api-tls.c). */
#define API_TLS_PIN_MAX 64 /* "sha256//" + 44 base64 characters + NUL */
struct api_tls {
        bool on;
        char *cert, *key, *client_ca; /* owned PEM text (client_ca NULL: no client certs) */
        char pin[API_TLS_PIN_MAX];    /* the certificate's public-key pin */
};
/* Loads api.tlsCert/tlsKey/tlsClientCA (nothing when unset; ret->on false). The key file must
 * be a regular file not readable by group or others (-EPERM naming api.tlsKey). */
int api_tls_load(const struct node_config *cfg, struct api_tls *ret, struct fk_error *err);
/* Frees the PEM texts (the key is wiped first); leaves t zeroed. */
void api_tls_done(struct api_tls *t);
struct MHD_OptionItem;
/* Fills opts (max >= 5 entries) with MHD's TLS options, MHD_OPTION_END-terminated; returns
 * how many (0 when TLS is off). The strings stay borrowed from t. */
size_t api_tls_options(const struct api_tls *t, struct MHD_OptionItem *opts, size_t max);
/* Mutual TLS: 0 when the client presented a certificate that api.tlsClientCA verifies. */
int api_tls_check_client(struct MHD_Connection *c);

/* A reply as sent (status, JSON text, X-Forklet-Apply), for Idempotency-Key replays and the
 * audit. api_reply_json notes every reply in the thread's active capture. */
struct api_capture {
        unsigned status;
        char *body;  /* owned */
        char *apply; /* owned */
};
void api_capture_begin(struct api_capture *c);
void api_capture_end(void);
void api_capture_note(unsigned status, const char *text, const char *apply);
void api_capture_done(struct api_capture *c);
struct api_idem;
struct api_idem *api_idem_new(void);
struct api_idem *api_idem_free(struct api_idem *m);
/* 0: first use (the caller must api_idem_finish), 1: *ret_replay filled (caller frees with
 * api_capture_done), -EINVAL: key reused for another request, -ENOSPC: table full. */
int api_idem_begin(struct api_idem *m, const char *key, const char *fingerprint,
                   struct api_capture *ret_replay);
/* Stores result (taken) for replays; a streamed reply (no body) forgets the key. */
void api_idem_finish(struct api_idem *m, const char *key, struct api_capture *result);
int api_reply_capture(struct MHD_Connection *c, const struct api_capture *cap);
int api_handle_metrics(struct MHD_Connection *c, struct api_request *req);
int api_handle_audit_verify(struct MHD_Connection *c, struct api_request *req);
/* Streams session events until the client leaves or *stopping is set. */
int api_handle_watch(struct MHD_Connection *c, struct api_request *req,
                     const atomic_bool *stopping);

/* Queue a reply (status + JSON, reference stolen) on the connection. Return MHD_YES/NO. */
int api_reply_json(struct MHD_Connection *c, unsigned status, json_t *j, const char *apply_result);
/* {"kind":"Status","code","reason","message","details":[...]}; details may be NULL. */
int api_reply_error(struct MHD_Connection *c, unsigned status, const char *reason,
                    char *const *details, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* Maps a -errno from the daemon to an HTTP status and reason. */
unsigned api_status_from_errno(int r, const char **ret_reason);
int api_handle_sessions(struct MHD_Connection *c, struct api_request *req);
/* The server's view of exec streams: the stopping flag they watch, and how many are open. */
struct api_exec_streams {
        const atomic_bool *stopping;
        atomic_uint *open;
};
/* Streams an exec; the stream ends with an error line once *es->stopping is set. */
int api_handle_exec(struct MHD_Connection *c, struct api_request *req,
                    const struct api_exec_streams *es);
int api_handle_log(struct MHD_Connection *c, struct api_request *req);
/* checkpoints, forks, rollback, snapshots, restore of a session. */
int api_handle_fork(struct MHD_Connection *c, struct api_request *req);
/* GET (list, or one with route.item) and DELETE of a namespace's filesystem snapshots. */
int api_handle_snapshots(struct MHD_Connection *c, struct api_request *req);
int api_handle_action(struct MHD_Connection *c, struct api_request *req);
int api_handle_files(struct MHD_Connection *c, struct api_request *req);
/* .../NAME/portforward?port=P (GET: check; POST + Upgrade: relay). */
int api_handle_portforward(struct MHD_Connection *c, struct api_request *req);

/* ---- Kubernetes API conventions (api-kube*.c, docs/kubernetes.md) ------------------------ */

struct manifest_diag;
/* GET/POST/PUT/PATCH/DELETE of an API_ROUTE_KUBE path (watch streams end at *stopping). */
int api_kube_handle(struct MHD_Connection *c, struct api_request *req, const atomic_bool *stopping);
/* Discovery and OpenAPI documents (api-kube-discovery.c, api-kube-openapi.c); new references,
 * NULL on ENOMEM. */
json_t *api_kube_version_json(void);
json_t *api_kube_discovery_json(enum api_kube_path p);
json_t *api_kube_openapi_root(void);
json_t *api_kube_openapi_gv(void);

/* metav1.Status (api-kube-status.c). Pure: the Status object for a failure. causes (stolen,
 * may be NULL) is details.causes. */
json_t *api_kube_status_json(unsigned code, const char *reason, const char *name,
                             const char *message, json_t *causes);
/* -errno of a daemon call -> HTTP code and Kubernetes reason. */
unsigned api_kube_errno_status(int r, const char **ret_reason);
/* Validator messages ("<json>: spec.egress[0]: invalid ...") -> [{reason, field, message}]. */
json_t *api_kube_causes(char *const *messages, size_t n);
/* Queue a Status reply (logs nothing). */
int api_kube_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
                          const char *name, json_t *causes, const char *fmt, ...)
        __attribute__((format(printf, 6, 7)));
int api_kube_reply_errno(struct MHD_Connection *c, int r, const char *name, const char *msg);

/* Selectors (api-kube-select.c). Pure. */
#define API_KUBE_SELECTOR_MAX 16
enum api_kube_sel_op { KSEL_EQ, KSEL_NE, KSEL_EXISTS, KSEL_NOT_EXISTS, KSEL_IN, KSEL_NOT_IN };
struct api_kube_req {
        enum api_kube_sel_op op;
        char key[256];
        char values[8][64]; /* EQ/NE: values[0]; IN/NOT_IN: n_values of them */
        size_t n_values;
};
struct api_kube_selector {
        struct api_kube_req reqs[API_KUBE_SELECTOR_MAX];
        size_t n;
};
/* labelSelector syntax (a=b, a==b, a!=b, a, !a, a in (x,y), a notin (x)); NULL/"": match all.
 * -EINVAL with err naming the problem. */
int api_kube_label_selector_parse(const char *s, struct api_kube_selector *ret,
                                  struct fk_error *err);
/* fieldSelector: metadata.name, metadata.namespace, status.phase with =, == or !=. */
int api_kube_field_selector_parse(const char *s, struct api_kube_selector *ret,
                                  struct fk_error *err);
/* Does a Session object match (labels from metadata.labels; fields by their path)? */
bool api_kube_labels_match(const struct api_kube_selector *s, const json_t *obj);
bool api_kube_fields_match(const struct api_kube_selector *s, const json_t *obj);

/* JSON merge patch, RFC 7386 (api-kube-patch.c). Pure: returns the patched document (new
 * reference; target is not changed), NULL on ENOMEM. */
json_t *api_kube_merge_patch(const json_t *target, const json_t *patch);

/* Resource versions and uids (api-kube-rv.c): every object seen gets a resourceVersion that
 * changes when its content does, from one counter seeded by the wall clock (so it grows
 * across restarts). Observing a full list also records deletions for watches. */
/* Stamps metadata.uid/resourceVersion and apiVersion/kind on each item of a full list (all
 * namespaces); returns the list's resourceVersion. */
uint64_t api_kube_observe_list(json_t *items);
/* Stamps one object (a GET or a write reply). */
void api_kube_observe_one(json_t *obj);
/* The events after rv: calls fn(type, object, rv) in resourceVersion order for objects
 * changed (ADDED/MODIFIED) or deleted since; returns the newest rv visited (>= rv). */
uint64_t api_kube_changes_since(uint64_t rv,
                                int (*fn)(void *ud, const char *type, json_t *obj, uint64_t rv),
                                void *ud);
/* The uid of a session: a UUID from its namespace, name and creationTimestamp. Pure. */
void api_kube_uid(const char *ns, const char *name, const char *created, char out[37]);

/* Table responses for kubectl get (api-kube-table.c). Pure (now_s: wall clock seconds). */
/* Does the Accept header ask for meta.k8s.io Table? */
bool api_kube_wants_table(const char *accept);
/* A Table of objects (borrowed); with_columns false leaves columnDefinitions out (watch
 * events after the first); include: "None", "Object" or NULL (PartialObjectMetadata). */
json_t *api_kube_table(json_t *const *objs, size_t n, const char *include, bool with_columns,
                       const char *rv, int64_t now_s);
/* "5s", "3m", "2h", "4d": kubectl's AGE. */
void api_kube_age(int64_t seconds, char *buf, size_t size);

/* Watches (api-kube-watch.c): ?watch=1 on a sessions collection. */
struct api_kube_watch_opts {
        char ns[API_PATH_SEGMENT_MAX]; /* "" = all namespaces */
        struct api_kube_selector labels, fields;
        uint64_t since; /* resourceVersion; 0: ADDED for every object first */
        bool table, bookmarks;
        char include[16];
        unsigned timeout_s; /* timeoutSeconds; 0: none */
};
/* Appends {"type": type, "object": obj} and a newline to the watch stream buffer *out (heap,
 * *out_size bytes). 0 or -ENOMEM (the buffer unchanged). */
int api_watch_event_append(char **out, size_t *out_size, const char *type, json_t *obj);
int api_kube_watch(struct MHD_Connection *c, struct api_request *req,
                   const struct api_kube_watch_opts *o, const atomic_bool *stopping);

/* GET/POST /api/v1alpha1/images, GET/DELETE /api/v1alpha1/images/ID (api-images.c). */
struct MHD_Connection;
struct api_request;
int api_handle_images(struct MHD_Connection *c, struct api_request *req);
