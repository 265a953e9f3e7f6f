/* SPDX-License-Identifier: MIT */
/* The REST server: libmicrohttpd on a unix socket we bind (mode 0600), a thread per
 * connection, request bodies collected up to API_MAX_BODY, dispatch by route, JSON replies. */
#include "agent/agent-internal.h"
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#ifndef FORKLET_VERSION
#define FORKLET_VERSION "0.0.0"
#endif

struct api_server {
        struct MHD_Daemon *mhd;
        struct agent_daemon *d;
        const struct node_config *cfg;
        char *path; /* owned */
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
                {ENOSPC, MHD_HTTP_TOO_MANY_REQUESTS, "NodeFull"},
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

static int dispatch(struct MHD_Connection *c, struct api_request *req)
{
        switch (req->route.kind) {
        case API_ROUTE_HEALTHZ:
        case API_ROUTE_VERSION:
        case API_ROUTE_NODE:
                return dispatch_simple(c, req);
        case API_ROUTE_SESSIONS:
        case API_ROUTE_NS_SESSIONS:
        case API_ROUTE_SESSION:
                return api_handle_sessions(c, req);
        case API_ROUTE_SESSION_EXEC:
                return api_handle_exec(c, req);
        case API_ROUTE_SESSION_LOG:
                return api_handle_log(c, req);
        case API_ROUTE_BAD_NAME:
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                       "invalid name in path (DNS-1123 labels only)");
        default:
                return api_reply_error(c, MHD_HTTP_NOT_FOUND, "NotFound", NULL, "no such resource");
        }
}

static int collect_body(struct api_request *req, const char *data, size_t size)
{
        char *p;

        if (req->too_large || req->body_size + size > API_MAX_BODY) {
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct api_server *s = cls;
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
                api_route_parse(url, &req->route);
                *con_cls = req;
                cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
                if (cl && strtoull(cl, NULL, 10) > API_MAX_BODY)
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
                        "request body exceeds %u bytes", API_MAX_BODY);
        return (enum MHD_Result)dispatch(c, req);
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
        fd = bind_unix(path, err);
        if (fd < 0)
                return fd;
        s = calloc(1, sizeof(*s));
        if (!s || !(s->path = strdup(path))) {
                free(s);
                close(fd);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        s->d = d;
        s->cfg = cfg;
        /* poll(), not select(): forkletd holds several fds per session, often past 1024. */
        s->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                          MHD_USE_POLL,
                                  0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, fd,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                  MHD_OPTION_CONNECTION_TIMEOUT, 0u, MHD_OPTION_END);
        if (!s->mhd) {
                close(fd);
                unlink(path);
                free(s->path);
                free(s);
                return fk_error_set(err, -EIO, "libmicrohttpd failed to start on %s", path);
        }
        *ret = s;
        return 0;
}

struct api_server *api_server_stop(struct api_server *s)
{
        if (!s)
                return NULL;
        MHD_stop_daemon(s->mhd);
        unlink(s->path);
        free(s->path);
        free(s);
        return NULL;
}
