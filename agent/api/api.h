/* SPDX-License-Identifier: MIT */
/* fk_agent_api: forkletd's HTTP API (REST and Kubernetes conventions) over the daemon's public
 * functions: routes, the TLS key pin, the server. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

struct agent_daemon;
struct node_config;

enum api_route_kind {
        API_ROUTE_NOT_FOUND,
        API_ROUTE_BAD_NAME, /* a path segment is not a valid name */
        API_ROUTE_HEALTHZ,
        API_ROUTE_VERSION,
        API_ROUTE_NODE,
        API_ROUTE_SESSIONS,       /* /api/v1alpha1/sessions */
        API_ROUTE_NS_SESSIONS,    /* /api/v1alpha1/namespaces/NS/sessions */
        API_ROUTE_SESSION,        /* .../namespaces/NS/sessions/NAME */
        API_ROUTE_SESSION_EXEC,   /* .../NAME/exec */
        API_ROUTE_SESSION_LOG,    /* .../NAME/log */
        API_ROUTE_SESSION_ACTION, /* .../NAME/pause|resume|stop|start */
        API_ROUTE_SESSION_FILES,  /* .../NAME/files?path=/abs */
        API_ROUTE_SESSION_SUBRES, /* .../NAME/<other>: for later verbs (checkpoints, forks) */
        API_ROUTE_METRICS,        /* /metrics (Prometheus text) */
        API_ROUTE_AUDIT_VERIFY,   /* /api/v1alpha1/audit/verify */
        API_ROUTE_SESSION_FORK,   /* .../NAME/{checkpoints[/ID],forks,rollback,snapshots,restore} */
        API_ROUTE_IMAGES,         /* /api/v1alpha1/images[/ID] (item: ID) */
        API_ROUTE_SNAPSHOTS,      /* /api/v1alpha1/namespaces/NS/snapshots[/ID] (item: ID) */
        API_ROUTE_KUBE,           /* Kubernetes conventions (api-kube*.c): route.kube says which */
};

/* API_ROUTE_KUBE paths. /apis/forklet.dev/v1alpha1/namespaces/NS/sessions/NAME/SUB for the
 * other subresources routes as /api/v1alpha1's (exec, checkpoints, ...). */
enum api_kube_path {
        API_KUBE_VERSION,     /* /version */
        API_KUBE_API,         /* /api */
        API_KUBE_APIS,        /* /apis */
        API_KUBE_GROUP,       /* /apis/forklet.dev */
        API_KUBE_RESOURCES,   /* /apis/forklet.dev/v1alpha1 */
        API_KUBE_OPENAPI,     /* /openapi/v3 */
        API_KUBE_OPENAPI_GV,  /* /openapi/v3/apis/forklet.dev/v1alpha1 */
        API_KUBE_SESSIONS,    /* /apis/forklet.dev/v1alpha1/sessions (all namespaces) */
        API_KUBE_NS_SESSIONS, /* .../namespaces/NS/sessions */
        API_KUBE_SESSION,     /* .../namespaces/NS/sessions/NAME */
        API_KUBE_STATUS,      /* .../namespaces/NS/sessions/NAME/status */
};

/* a path segment: a DNS label (63), a checkpoint id, or an image's whole digest (sha256:, 64) */
#define API_PATH_SEGMENT_MAX 80

struct api_route {
        enum api_route_kind kind;
        char ns[API_PATH_SEGMENT_MAX];
        char name[API_PATH_SEGMENT_MAX];
        char subresource[API_PATH_SEGMENT_MAX];
        char item[API_PATH_SEGMENT_MAX]; /* .../NAME/SUB/ITEM (checkpoint id), "" if none */
        enum api_kube_path kube;         /* API_ROUTE_KUBE */
};

/* Maps a URL path (no query) to a route. Pure. Names must be DNS-1123 labels. */
void api_route_parse(const char *path, struct api_route *ret);
/* seg: [api|apis-group] v1alpha1 namespaces NS sessions [NAME [SUB [ITEM]]] (n of them): the
 * session routes (api-route.c). */
void api_route_session(char seg[][API_PATH_SEGMENT_MAX], size_t n, struct api_route *r);
/* The Kubernetes-convention paths (api-kube-route.c): true and *r filled when seg is one. */
bool api_kube_route(char seg[][API_PATH_SEGMENT_MAX], size_t n, struct api_route *r);

/* The public-key pin of a PEM certificate: "sha256//" + base64(SHA-256(SubjectPublicKeyInfo
 * DER)), the form curl's CURLOPT_PINNEDPUBLICKEY takes (api-tls.c). out: >= 64 bytes. */
int api_tls_public_key_pin(const char *cert_pem, char *out, size_t size, struct fk_error *err);
/* The same for a certificate file (api.tlsCert). */
int api_tls_pin_file(const char *cert_path, char *out, size_t size, struct fk_error *err);

struct api_server;

/* Listens on a unix socket at path (replacing a stale one, mode 0600) and serves the API
 * with a thread per connection. Logs nothing; errors in err. */
int api_server_start(struct agent_daemon *d, const struct node_config *cfg, const char *path,
                     struct api_server **ret, struct fk_error *err);
/* Stops serving and removes the socket file; accepts NULL, returns NULL. */
struct api_server *api_server_stop(struct api_server *s);
