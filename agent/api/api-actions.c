/* SPDX-License-Identifier: MIT */
/* POST .../sessions/NAME/{pause,resume,stop,start}[?wait=SECONDS]: set spec.state and
 * optionally wait for the phase; GET|PUT .../sessions/NAME/files?path=/abs[&mode=0644]: guest
 * files as raw bytes. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

static const struct {
        const char *verb;
        enum session_state state;
        enum session_phase phase;
} actions[] = {
        {"pause", SESSION_STATE_PAUSED, SESSION_PHASE_PAUSED},
        {"resume", SESSION_STATE_RUNNING, SESSION_PHASE_RUNNING},
        {"start", SESSION_STATE_RUNNING, SESSION_PHASE_RUNNING},
        {"stop", SESSION_STATE_STOPPED, SESSION_PHASE_STOPPED},
};

static int reply_err(struct MHD_Connection *c, int r, const struct fk_error *err)
{
        const char *reason;
        unsigned status = api_status_from_errno(r, &reason);

        if (r == -EIO) {
                status = MHD_HTTP_CONFLICT;
                reason = "Failed";
        }
        return api_reply_error(c, status, reason, NULL, "%s",
                               err->msg[0] ? err->msg : strerror(-r));
}

/* ?wait=SECONDS: 0 or absent returns at once; bad text is a 400. */
static int parse_wait(struct MHD_Connection *c, unsigned *ret)
{
        const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "wait");
        char *end;
        unsigned long n;

        *ret = 0;
        if (!v || !*v)
                return 0;
        errno = 0;
        n = strtoul(v, &end, 10);
        if (errno || *end || n > 24 * 3600)
                return -EINVAL;
        *ret = (unsigned)n * 1000;
        return 0;
}

int api_handle_action(struct MHD_Connection *c, struct api_request *req)
{
        struct fk_error err = {0};
        unsigned wait_ms;
        bool changed = false;
        json_t *j = NULL;
        size_t i;
        int r;

        if (strcmp(req->method, "POST") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "%s not allowed here", req->method);
        for (i = 0; i < ARRAY_SIZE(actions); i++)
                if (strcmp(actions[i].verb, req->route.subresource) == 0)
                        break;
        if (i == ARRAY_SIZE(actions))
                return api_reply_error(c, MHD_HTTP_NOT_FOUND, "NotFound", NULL, "no such action");
        if (parse_wait(c, &wait_ms) < 0)
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                       "wait: a number of seconds is required");
        r = agent_daemon_set_state(req->d, req->route.ns, req->route.name, actions[i].state,
                                   &changed, &err);
        if (r >= 0 && wait_ms)
                r = agent_daemon_wait_phase(req->d, req->route.ns, req->route.name,
                                            actions[i].phase, wait_ms, &err);
        if (r < 0)
                return reply_err(c, r, &err);
        r = agent_daemon_session_json(req->d, req->route.ns, req->route.name, &j);
        if (r < 0) {
                fk_error_set(&err, r, "session %s/%s is gone", req->route.ns, req->route.name);
                return reply_err(c, r, &err);
        }
        return api_reply_json(c, MHD_HTTP_OK, j, changed ? "configured" : "unchanged");
}

static int files_get(struct MHD_Connection *c, struct api_request *req, const char *path)
{
        struct MHD_Response *resp;
        struct fk_error err = {0};
        void *data = NULL;
        size_t size = 0;
        int r;

        r = agent_daemon_read_file(req->d, req->route.ns, req->route.name, path, CORE_API_MAX_FILE,
                                   &data, &size, &err);
        if (r < 0)
                return reply_err(c, r == -EFBIG ? -EINVAL : r, &err);
        resp = MHD_create_response_from_buffer(size, data, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(data);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}

static int files_put(struct MHD_Connection *c, struct api_request *req, const char *path)
{
        const char *m = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mode");
        struct fk_error err = {0};
        unsigned long mode = 0644;
        char *end = NULL;
        int r;

        if (m && *m) {
                mode = strtoul(m, &end, 8);
                if (*end || mode > 07777)
                        return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                               "mode: octal permission bits required");
        }
        r = agent_daemon_write_file(req->d, req->route.ns, req->route.name, path,
                                    req->body ? req->body : "", req->body_size, (unsigned)mode,
                                    &err);
        if (r < 0)
                return reply_err(c, r, &err);
        return api_reply_json(c, MHD_HTTP_OK,
                              json_pack("{s:s, s:s, s:s, s:I}", "kind", "Status", "status",
                                        "Success", "path", path, "size",
                                        (json_int_t)req->body_size),
                              NULL);
}

int api_handle_files(struct MHD_Connection *c, struct api_request *req)
{
        const char *path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");

        if (!path || path[0] != '/')
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                       "path: an absolute guest path is required (?path=/...)");
        if (strcmp(req->method, "GET") == 0)
                return files_get(c, req, path);
        if (strcmp(req->method, "PUT") == 0)
                return files_put(c, req, path);
        return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                               "%s not allowed here", req->method);
}
