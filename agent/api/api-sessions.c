/* SPDX-License-Identifier: MIT */
/* Session resources: list, get, apply (POST/PUT with a JSON manifest, or one YAML document
 * with Content-Type: application/yaml), delete, and the console log. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define API_LOG_TAIL (1024 * 1024)

static int reply_errno(struct MHD_Connection *c, int r, const struct fk_error *err)
{
        const char *reason;
        unsigned status = api_status_from_errno(r, &reason);

        return api_reply_error(c, status, reason, NULL, "%s",
                               err && err->msg[0] ? err->msg : strerror(-r));
}

/* Fills metadata.name/namespace from the URL when absent; 400 when they disagree. */
static int match_url(struct MHD_Connection *c, struct api_request *req, json_t *j, bool *ok)
{
        json_t *meta = json_object_get(j, "metadata");
        const char *want[2] = {req->route.ns[0] ? req->route.ns : NULL,
                               req->route.name[0] ? req->route.name : NULL};
        const char *keys[2] = {"namespace", "name"};

        *ok = false;
        if (!json_is_object(meta))
                return api_reply_error(c, MHD_HTTP_UNPROCESSABLE_CONTENT, "Invalid", NULL,
                                       "metadata: required object missing");
        for (int i = 0; i < 2; i++) {
                json_t *v = json_object_get(meta, keys[i]);

                if (!want[i])
                        continue;
                if (!v)
                        json_object_set_new(meta, keys[i], json_string(want[i]));
                else if (!json_is_string(v) || strcmp(json_string_value(v), want[i]) != 0)
                        return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                               "metadata.%s does not match the URL (%s)", keys[i],
                                               want[i]);
        }
        *ok = true;
        return MHD_YES;
}

static bool body_is_yaml(struct MHD_Connection *c)
{
        static const char *const types[] = {"application/yaml", "application/x-yaml", "text/yaml"};
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        size_t n;

        if (!ct)
                return false;
        n = strcspn(ct, "; \t");
        for (size_t i = 0; i < ARRAY_SIZE(types); i++)
                if (strlen(types[i]) == n && strncasecmp(ct, types[i], n) == 0)
                        return true;
        return false;
}

/* One Session document of a YAML body, parsed by the manifest parser (errors say
 * "manifest:LINE:COL: field: message"), as the JSON the apply path takes. NULL: the error
 * reply is queued in *reply. The namespace is the document's (default "default"). */
static json_t *yaml_body(struct MHD_Connection *c, struct api_request *req, int *reply)
{
        struct manifest_diag diag = {0};
        struct session_manifest **ms = NULL;
        json_t *j = NULL;
        size_t n = 0;
        int r;

        r = manifest_parse_sessions(req->body ? req->body : "", req->body_size, "manifest",
                                    req->cfg, &ms, &n, &diag);
        if (r == -ENOMEM)
                *reply = reply_errno(c, r, NULL);
        else if (r < 0)
                *reply =
                        api_reply_error(c, MHD_HTTP_UNPROCESSABLE_CONTENT, "Invalid", diag.messages,
                                        "%s", diag.n ? diag.messages[0] : "invalid manifest");
        else if (n != 1)
                *reply = api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                         "a YAML body holds exactly one Session document (this "
                                         "one has %zu): send one request per document",
                                         n);
        else if (!(j = session_manifest_to_json(ms[0])))
                *reply = reply_errno(c, -ENOMEM, NULL);
        manifest_diag_done(&diag);
        for (size_t i = 0; i < n; i++)
                session_manifest_free(ms[i]);
        free(ms);
        return j;
}

/* The request's manifest as a JSON object, from a JSON or YAML body; NULL: *reply is queued. */
static json_t *body_manifest(struct MHD_Connection *c, struct api_request *req, int *reply)
{
        json_error_t jerr;
        json_t *j;

        if (body_is_yaml(c))
                return yaml_body(c, req, reply);
        j = json_loadb(req->body ? req->body : "", req->body_size, 0, &jerr);
        if (!j) {
                *reply = api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                         "invalid JSON at line %d column %d: %s", jerr.line,
                                         jerr.column, jerr.text);
                return NULL;
        }
        return j;
}

static int handle_apply(struct MHD_Connection *c, struct api_request *req)
{
        struct manifest_diag diag = {0};
        struct session_manifest *m = NULL;
        enum agent_apply_result res;
        struct fk_error err = {0};
        json_t *j, *out = NULL;
        bool ok;
        int r = MHD_NO;

        j = body_manifest(c, req, &r);
        if (!j)
                return r;
        if (!json_is_object(j)) {
                json_decref(j);
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                       "body must be a JSON object");
        }
        r = match_url(c, req, j, &ok);
        if (!ok) {
                json_decref(j);
                return r;
        }
        r = session_manifest_from_json(j, req->cfg, &m, &diag);
        json_decref(j);
        if (r < 0) {
                r = api_reply_error(c, MHD_HTTP_UNPROCESSABLE_CONTENT, "Invalid", diag.messages,
                                    "%s", diag.n ? diag.messages[0] : "invalid manifest");
                manifest_diag_done(&diag);
                return r;
        }
        cleanup_free char *ns = strdup(m->namespace), *name = strdup(m->name);
        if (!ns || !name)
                return reply_errno(c, -ENOMEM, NULL);
        r = agent_daemon_apply(req->d, m, &res, &err);
        if (r < 0)
                return reply_errno(c, r, &err);
        r = agent_daemon_session_json(req->d, ns, name, &out);
        if (r < 0)
                return reply_errno(c, r, NULL);
        return api_reply_json(c, res == AGENT_APPLY_CREATED ? MHD_HTTP_CREATED : MHD_HTTP_OK, out,
                              agent_apply_result_to_string(res));
}

static int handle_list(struct MHD_Connection *c, struct api_request *req)
{
        json_t *j = NULL, *items, *v;
        size_t i;
        int r;

        r = agent_daemon_list_json(req->d, &j);
        if (r < 0)
                return reply_errno(c, r, NULL);
        items = json_object_get(j, "items");
        if (req->route.kind == API_ROUTE_NS_SESSIONS) {
                for (i = json_array_size(items); i-- > 0;) {
                        v = json_object_get(json_object_get(json_array_get(items, i), "metadata"),
                                            "namespace");
                        if (!json_is_string(v) || strcmp(json_string_value(v), req->route.ns))
                                json_array_remove(items, i);
                }
        }
        return api_reply_json(c, MHD_HTTP_OK, j, NULL);
}

static int handle_one(struct MHD_Connection *c, struct api_request *req)
{
        struct fk_error err = {0};
        json_t *j = NULL;
        int r;

        if (strcmp(req->method, "DELETE") == 0) {
                r = agent_daemon_delete(req->d, req->route.ns, req->route.name, &err);
                if (r < 0)
                        return reply_errno(c, r, &err);
        }
        r = agent_daemon_session_json(req->d, req->route.ns, req->route.name, &j);
        if (r == -ENOENT && strcmp(req->method, "DELETE") == 0)
                return api_reply_json(c, MHD_HTTP_OK,
                                      json_pack("{s:s, s:s, s:I}", "kind", "Status", "status",
                                                "Success", "code", (json_int_t)200),
                                      NULL);
        if (r < 0) {
                fk_error_set(&err, r, "session %s/%s not found", req->route.ns, req->route.name);
                return reply_errno(c, r, &err);
        }
        return api_reply_json(c, MHD_HTTP_OK, j, NULL);
}

int api_handle_sessions(struct MHD_Connection *c, struct api_request *req)
{
        const char *m = req->method;
        bool collection = req->route.kind != API_ROUTE_SESSION;

        if (strcmp(m, "GET") == 0)
                return collection ? handle_list(c, req) : handle_one(c, req);
        if ((collection && strcmp(m, "POST") == 0) || (!collection && strcmp(m, "PUT") == 0))
                return handle_apply(c, req);
        if (!collection && strcmp(m, "DELETE") == 0)
                return handle_one(c, req);
        return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                               "%s not allowed here", m);
}

/* The tail of console.log (the last API_LOG_TAIL bytes); ?previous=1: of console.log.1. */
int api_handle_log(struct MHD_Connection *c, struct api_request *req)
{
        cleanup_free char *path = NULL;
        struct MHD_Response *resp;
        const char *prev;
        struct stat st;
        off_t off;
        int fd, r;

        if (strcmp(req->method, "GET") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "%s not allowed here", req->method);
        r = agent_daemon_console_path(req->d, req->route.ns, req->route.name, &path);
        if (r < 0)
                return api_reply_error(c, MHD_HTTP_NOT_FOUND, "NotFound", NULL,
                                       "session %s/%s not found", req->route.ns, req->route.name);
        prev = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "previous");
        if (prev && strcmp(prev, "0") != 0) {
                char *p1 = NULL;

                if (fk_asprintf(&p1, "%s.1", path) < 0)
                        return MHD_NO;
                free(path);
                path = p1;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                if (fd >= 0)
                        close(fd);
                resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        } else {
                off = st.st_size > API_LOG_TAIL ? st.st_size - API_LOG_TAIL : 0;
                resp = MHD_create_response_from_fd_at_offset64((uint64_t)(st.st_size - off), fd,
                                                               (uint64_t)off);
        }
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/plain");
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}
