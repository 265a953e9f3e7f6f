/* SPDX-License-Identifier: MIT */
/* The REST server: libmicrohttpd on a unix socket we bind (mode 0600), a thread per
 * connection, request bodies collected up to CORE_API_MAX_BODY, dispatch by route, JSON replies. */
#include "agent/api/api-internal.h"
#include "agent/image/image.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#ifndef FORKLET_VERSION
#define FORKLET_VERSION "0.0.0"
#endif

#define API_CONNECTION_MEMORY (32u * 1024) /* request line + headers must fit */
#define API_CONNECTION_LIMIT  512
#define API_IDEM_KEY_MAX      255
#define API_STOP_WAIT_MS      2000 /* at stop, for exec streams to send their last line */

struct api_server;
struct api_listener {
        struct api_server *s;
        bool tcp;
};

struct api_server {
        struct MHD_Daemon *mhd, *tcp;
        struct agent_daemon *d;
        const struct node_config *cfg;
        char *path; /* owned */
        struct api_listener unix_l, tcp_l;
        struct api_token token;
        struct api_tls tls;    /* of the TCP listener */
        struct api_idem *idem; /* owned */
        atomic_bool stopping;
        atomic_uint exec_streams; /* open exec responses */
};

int api_reply_json(struct MHD_Connection *c, unsigned status, json_t *j, const char *apply_result)
{
        char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        struct MHD_Response *resp;
        size_t len;
        int r;

        json_decref(j);
        if (!text)
                return MHD_NO;
        len = strlen(text);
        api_capture_note(status, text, apply_result);
        resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        if (apply_result)
                MHD_add_response_header(resp, "X-Forklet-Apply", apply_result);
        r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

int api_reply_error(struct MHD_Connection *c, unsigned status, const char *reason,
                    char *const *details, const char *fmt, ...)
{
        json_t *det = json_array();
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        for (size_t i = 0; det && details && details[i]; i++)
                json_array_append_new(det, json_string(details[i]));
        return api_reply_json(c, status,
                              json_pack("{s:s, s:I, s:s, s:s, s:o}", "kind", "Status", "code",
                                        (json_int_t)status, "reason", reason, "message", msg,
                                        "details", det ? det : json_array()),
                              NULL);
}

unsigned api_status_from_errno(int r, const char **ret_reason)
{
        static const struct {
                int err;
                unsigned status;
                const char *reason;
        } map[] = {
                {ENOENT, MHD_HTTP_NOT_FOUND, "NotFound"},
                {EEXIST, MHD_HTTP_CONFLICT, "AlreadyExists"},
                {EPERM, MHD_HTTP_CONFLICT, "Conflict"},
                {EBUSY, MHD_HTTP_CONFLICT, "Conflict"},
                {EAGAIN, MHD_HTTP_CONFLICT, "NotRunning"},
                {EUSERS, MHD_HTTP_TOO_MANY_REQUESTS, "NodeFull"},
                {ENOSPC, MHD_HTTP_INSUFFICIENT_STORAGE, "InsufficientStorage"},
                {EINVAL, MHD_HTTP_BAD_REQUEST, "BadRequest"},
                {ETIMEDOUT, MHD_HTTP_GATEWAY_TIMEOUT, "Timeout"},
        };

        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (-r == map[i].err) {
                        *ret_reason = map[i].reason;
                        return map[i].status;
                }
        *ret_reason = "InternalError";
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

static int reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
        int r;

        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/plain");
        r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static int dispatch_simple(struct MHD_Connection *c, struct api_request *req)
{
        json_t *j = NULL;
        int r;

        if (strcmp(req->method, "GET") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "%s not allowed here", req->method);
        switch (req->route.kind) {
        case API_ROUTE_HEALTHZ:
                return reply_text(c, MHD_HTTP_OK, "ok\n");
        case API_ROUTE_VERSION:
                return api_reply_json(c, MHD_HTTP_OK,
                                      json_pack("{s:s, s:s}", "version", FORKLET_VERSION,
                                                "apiVersion", MANIFEST_API_VERSION),
                                      NULL);
        default:
                r = agent_daemon_node_json(req->d, &j);
                if (r < 0)
                        return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError",
                                               NULL, "%s", strerror(-r));
                return api_reply_json(c, MHD_HTTP_OK, j, NULL);
        }
}

static bool want_watch(struct MHD_Connection *c, struct api_request *req)
{
        const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");

        return strcmp(req->method, "GET") == 0 && w &&
               (strcmp(w, "1") == 0 || strcmp(w, "true") == 0) &&
               (req->route.kind == API_ROUTE_SESSIONS || req->route.kind == API_ROUTE_NS_SESSIONS);
}

static int dispatch(struct MHD_Connection *c, struct api_server *s, struct api_request *req)
{
        if (want_watch(c, req))
                return api_handle_watch(c, req, &s->stopping);
        switch (req->route.kind) {
        case API_ROUTE_METRICS:
                return api_handle_metrics(c, req);
        case API_ROUTE_AUDIT_VERIFY:
                return api_handle_audit_verify(c, req);
        case API_ROUTE_HEALTHZ:
        case API_ROUTE_VERSION:
        case API_ROUTE_NODE:
                return dispatch_simple(c, req);
        case API_ROUTE_SESSIONS:
        case API_ROUTE_NS_SESSIONS:
        case API_ROUTE_SESSION:
                return api_handle_sessions(c, req);
        case API_ROUTE_SESSION_EXEC:
                return api_handle_exec(c, req,
                                       &(struct api_exec_streams){&s->stopping, &s->exec_streams});
        case API_ROUTE_SESSION_LOG:
                return api_handle_log(c, req);
        case API_ROUTE_SESSION_FORK:
                return api_handle_fork(c, req);
        case API_ROUTE_SESSION_ACTION:
                return api_handle_action(c, req);
        case API_ROUTE_SESSION_FILES:
                return api_handle_files(c, req);
        case API_ROUTE_IMAGES:
                return api_handle_images(c, req);
        case API_ROUTE_SNAPSHOTS:
                return api_handle_snapshots(c, req);
        case API_ROUTE_SESSION_SUBRES:
                if (strcmp(req->route.subresource, "portforward") == 0)
                        return api_handle_portforward(c, req);
                return api_reply_error(c, MHD_HTTP_NOT_FOUND, "NotFound", NULL, "no such resource");
        case API_ROUTE_KUBE:
                return api_kube_handle(c, req, &s->stopping);
        case API_ROUTE_BAD_NAME:
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                       "invalid name in path (DNS-1123 labels only)");
        default:
                return api_reply_error(c, MHD_HTTP_NOT_FOUND, "NotFound", NULL, "no such resource");
        }
}

/* File uploads carry raw bytes up to CORE_API_MAX_FILE; everything else is JSON. */
static size_t body_limit(const struct api_request *req)
{
        return req->route.kind == API_ROUTE_SESSION_FILES ? CORE_API_MAX_FILE : CORE_API_MAX_BODY;
}

static int collect_body(struct api_request *req, const char *data, size_t size)
{
        char *p;

        if (req->too_large || req->body_size + size > body_limit(req)) {
                req->too_large = true;
                return 0;
        }
        p = realloc(req->body, req->body_size + size + 1);
        if (!p)
                return -ENOMEM;
        memcpy(p + req->body_size, data, size);
        req->body = p;
        req->body_size += size;
        p[req->body_size] = '\0';
        return 0;
}

/* The session a request acted on: from the URL, else from the reply (apply by POST). */
static void audit_session(const struct api_request *req, const struct api_capture *cap, char *buf,
                          size_t size)
{
        json_t *j = NULL, *meta;

        buf[0] = '\0';
        if (req->route.name[0]) {
                snprintf(buf, size, "%s/%s", req->route.ns, req->route.name);
                return;
        }
        if (cap->body && (j = json_loads(cap->body, 0, NULL))) {
                meta = json_object_get(j, "metadata");
                if (json_is_string(json_object_get(meta, "name")))
                        snprintf(buf, size, "%s/%s",
                                 json_string_value(json_object_get(meta, "namespace")),
                                 json_string_value(json_object_get(meta, "name")));
        }
        json_decref(j);
}

static void audit_request(struct MHD_Connection *c, struct api_server *s,
                          const struct api_request *req, const struct api_capture *cap, int r)
{
        char action[320], result[16], session[2 * API_PATH_SEGMENT_MAX + 2];

        (void)c;
        snprintf(action, sizeof(action), "%s %s", req->method, req->url);
        snprintf(result, sizeof(result), "%u",
                 cap->status    ? cap->status
                 : r == MHD_YES ? 200
                                : 500);
        audit_session(req, cap, session, sizeof(session));
        agent_daemon_audit_entry(s->d,
                                 &(struct agent_audit_entry){
                                         .caller = req->caller,
                                         .session = session[0] ? session : NULL,
                                         .action = action,
                                         .result = result,
                                         .latency_s = (double)(fk_now_mono_ns() - req->t0_ns) / 1e9,
                                 });
}

/* Idempotency-Key: 1 when a reply was sent here (replay or refusal), 0 to go on (*ret_key
 * set when the result must be stored). */
static int idem_start(struct MHD_Connection *c, struct api_server *s, struct api_request *req,
                      char **ret_key, int *ret_mhd)
{
        const char *k = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
        struct api_capture replay = {0};
        cleanup_free char *key = NULL, *fp_in = NULL;
        char fp[2 * FK_SHA256_SIZE + 1];
        int r;

        if (!k || strcmp(req->method, "POST") != 0)
                return 0;
        if (!*k || strlen(k) > API_IDEM_KEY_MAX) {
                *ret_mhd = api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                           "Idempotency-Key must be 1 to %d characters",
                                           API_IDEM_KEY_MAX);
                return 1;
        }
        if (fk_asprintf(&key, "%s %s", req->caller, k) < 0 ||
            fk_asprintf(&fp_in, "%s\n%s\n", req->method, req->url) < 0)
                return -ENOMEM;
        {
                struct fk_sha256 h;
                uint8_t d[FK_SHA256_SIZE];

                fk_sha256_init(&h);
                fk_sha256_update(&h, fp_in, strlen(fp_in));
                fk_sha256_update(&h, req->body ? req->body : "", req->body_size);
                fk_sha256_final(&h, d);
                fk_hex(d, sizeof(d), fp);
        }
        r = api_idem_begin(s->idem, key, fp, &replay);
        if (r == 0) {
                *ret_key = TAKE_PTR(key);
                return 0;
        }
        if (r == 1)
                *ret_mhd = api_reply_capture(c, &replay);
        else if (r == -EINVAL)
                *ret_mhd = api_reply_error(
                        c, MHD_HTTP_UNPROCESSABLE_CONTENT, "IdempotencyKeyReused", NULL,
                        "Idempotency-Key \"%s\" was used for another request", k);
        else
                *ret_mhd = api_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "Unavailable", NULL,
                                           "Idempotency-Key table: %s", strerror(-r));
        api_capture_done(&replay);
        return 1;
}

static int serve(struct MHD_Connection *c, struct api_server *s, struct api_request *req)
{
        bool mutating = strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
        cleanup_free char *key = NULL;
        struct api_capture cap;
        int r = MHD_NO;

        api_capture_begin(&cap);
        if (idem_start(c, s, req, &key, &r) == 0)
                r = dispatch(c, s, req);
        api_capture_end();
        if (mutating)
                audit_request(c, s, req, &cap, r);
        if (key)
                api_idem_finish(s->idem, key, &cap);
        api_capture_done(&cap);
        return r;
}

static int reply_unauthorized(struct MHD_Connection *c)
{
        struct MHD_Response *resp;
        static const char body[] = "{\"kind\": \"Status\", \"code\": 401, \"reason\": "
                                   "\"Unauthorized\", \"message\": \"missing or wrong bearer "
                                   "token\", \"details\": []}";
        int r;

        resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
        r = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, resp);
        MHD_destroy_response(resp);
        return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct api_listener *l = cls;
        struct api_server *s = l->s;
        struct api_request *req = *con_cls;
        const char *cl;

        (void)version;
        if (!req) {
                req = calloc(1, sizeof(*req));
                if (!req)
                        return MHD_NO;
                req->d = s->d;
                req->cfg = s->cfg;
                req->method = method;
                req->url = url;
                req->tcp = l->tcp;
                req->t0_ns = fk_now_mono_ns();
                api_route_parse(url, &req->route);
                *con_cls = req;
                /* Refuse before reading any body. */
                if (api_authenticate(c, l->tcp, &s->token, req->caller, sizeof(req->caller)) < 0 ||
                    (l->tcp && s->tls.client_ca && api_tls_check_client(c) < 0)) {
                        /* Refused attempts are audited whatever the method. */
                        snprintf(req->caller, sizeof(req->caller), "tcp:unauthenticated");
                        audit_request(c, s, req, &(struct api_capture){.status = 401}, MHD_YES);
                        return (enum MHD_Result)reply_unauthorized(c);
                }
                cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
                if (cl && strtoull(cl, NULL, 10) > body_limit(req))
                        req->too_large = true;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                if (collect_body(req, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (req->too_large)
                return (enum MHD_Result)api_reply_error(
                        c, MHD_HTTP_CONTENT_TOO_LARGE, "RequestEntityTooLarge", NULL,
                        "request body exceeds %zu bytes", body_limit(req));
        return (enum MHD_Result)serve(c, s, req);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct api_request *req = *con_cls;

        (void)cls;
        (void)c;
        (void)toe;
        if (!req)
                return;
        free(req->body);
        free(req);
        *con_cls = NULL;
}

/* Binds path with mode 0600; refuses when a live server already answers there. */
static int bind_unix(const char *path, struct fk_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = -1, probe = -1;
        mode_t old;
        int r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return fk_error_set(err, -ENAMETOOLONG, "socket path too long: %s", path);
        strcpy(sa.sun_path, path);
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                return fk_error_set(err, -EADDRINUSE, "%s: another forkletd is listening", path);
        if (unlink(path) < 0 && errno != ENOENT)
                return fk_error_set(err, -errno, "remove stale %s: %m", path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return fk_error_set(err, -errno, "socket: %m");
        old = umask(0177);
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 64) < 0)
                return fk_error_set(err, -errno, "listen on %s: %m", path);
        return TAKE_FD(fd);
}

static struct MHD_Daemon *start_mhd(struct api_listener *l, int fd, const struct sockaddr *sa)
{
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_POLL | MHD_ALLOW_UPGRADE; /* port-forward relays */
        struct MHD_OptionItem tls[6];

        /* TCP with api.tlsCert: HTTPS only (GnuTLS); plain HTTP there fails the handshake. */
        if (fd < 0 && api_tls_options(&l->s->tls, tls, ARRAY_SIZE(tls)) > 0)
                flags |= MHD_USE_TLS;
        else
                tls[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        /* poll(), not select(): forkletd holds several fds per session, often past 1024. */
        if (fd >= 0)
                return MHD_start_daemon(flags, 0, NULL, NULL, on_request, l,
                                        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
                                        on_completed, l->s, MHD_OPTION_CONNECTION_TIMEOUT, 0u,
                                        MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                        (size_t)API_CONNECTION_MEMORY, MHD_OPTION_CONNECTION_LIMIT,
                                        (unsigned)API_CONNECTION_LIMIT, MHD_OPTION_END);
        return MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, l, MHD_OPTION_SOCK_ADDR, sa,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, l->s, MHD_OPTION_CONNECTION_TIMEOUT, 0u,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONNECTION_MEMORY,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONNECTION_LIMIT,
                MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
}

/* The optional TCP listener: only with a valid token; beyond loopback only with TLS. */
static int start_tcp(struct api_server *s, struct fk_error *err)
{
        struct sockaddr_in sa;
        int r;

        if (!s->cfg->api_listen)
                return 0;
        if (!s->cfg->api_token_file)
                return fk_error_set(err, -EINVAL,
                                    "api.listen is set but api.tokenFile is not: refusing to "
                                    "serve TCP without a token");
        r = api_token_load(s->cfg->api_token_file, &s->token, err);
        if (r < 0)
                return r;
        r = api_tls_load(s->cfg, &s->tls, err);
        if (r < 0)
                return r;
        r = api_parse_listen(s->cfg->api_listen, s->tls.on, &sa, err);
        if (r < 0)
                return r;
        s->tcp_l = (struct api_listener){.s = s, .tcp = true};
        s->tcp = start_mhd(&s->tcp_l, -1, (const struct sockaddr *)&sa);
        if (!s->tcp)
                return fk_error_set(err, -EADDRINUSE, "cannot listen on %s", s->cfg->api_listen);
        return 0;
}

/* Exec streams end themselves once stopping is set (a last error line to the client); MHD
 * would cut them mid-line. Bounded: a client that does not read holds nothing up for long. */
static void wait_exec_streams(struct api_server *s)
{
        for (int i = 0; i < API_STOP_WAIT_MS / 10 && atomic_load(&s->exec_streams) > 0; i++) {
                struct timespec ts = {0, 10 * 1000000L};

                nanosleep(&ts, NULL);
        }
}

static struct api_server *server_free(struct api_server *s)
{
        if (!s)
                return NULL;
        atomic_store(&s->stopping, true);
        wait_exec_streams(s);
        /* upgraded (port-forward) connections must be closed before MHD stops */
        if (s->d)
                agent_fwd_close_all(s->d);
        if (s->tcp)
                MHD_stop_daemon(s->tcp);
        if (s->mhd) {
                MHD_stop_daemon(s->mhd);
                unlink(s->path);
        }
        api_idem_free(s->idem);
        explicit_bzero(&s->token, sizeof(s->token));
        api_tls_done(&s->tls);
        free(s->path);
        free(s);
        return NULL;
}

int api_server_start(struct agent_daemon *d, const struct node_config *cfg, const char *path,
                     struct api_server **ret, struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        struct api_server *s;
        int fd, r;

        dir = strdup(path);
        if (!dir)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (strrchr(dir, '/') && strrchr(dir, '/') != dir) {
                *strrchr(dir, '/') = '\0';
                r = fk_mkdir_p(dir, 0755);
                if (r < 0)
                        return fk_error_set(err, r, "create %s: %s", dir, strerror(-r));
        }
        s = calloc(1, sizeof(*s));
        if (!s || !(s->path = strdup(path)) || !(s->idem = api_idem_new())) {
                server_free(s);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        s->d = d;
        s->cfg = cfg;
        s->unix_l = (struct api_listener){.s = s, .tcp = false};
        r = start_tcp(s, err);
        if (r < 0) {
                server_free(s);
                return r;
        }
        fd = bind_unix(path, err);
        if (fd < 0) {
                server_free(s);
                return fd;
        }
        s->mhd = start_mhd(&s->unix_l, fd, NULL);
        if (!s->mhd) {
                close(fd);
                unlink(path);
                server_free(s);
                return fk_error_set(err, -EIO, "libmicrohttpd failed to start on %s", path);
        }
        *ret = s;
        return 0;
}

struct api_server *api_server_stop(struct api_server *s)
{
        return server_free(s);
}
