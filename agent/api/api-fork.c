/* SPDX-License-Identifier: MIT */
/* Fork-engine resources of a session: checkpoints (POST create, GET list, DELETE ID with
 * ?cascade=true), forks (POST {from, count}), rollback (POST {checkpoint}), snapshots (POST
 * create) and restore (POST {snapshot} to .../sessions/NEW/restore). The POSTs but restore
 * record an intent and wait for its outcome (agent/daemon/intent.c). */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

static int reply_errno(struct MHD_Connection *c, int r, const struct fk_error *err)
{
        const char *reason;
        unsigned status = api_status_from_errno(r, &reason);

        return api_reply_error(c, status, reason, NULL, "%s",
                               err && err->msg[0] ? err->msg : strerror(-r));
}

/* The reply to a DELETE of id: Success, or the error r. */
static int reply_deleted(struct MHD_Connection *c, int r, const struct fk_error *err,
                         const char *id)
{
        if (r < 0)
                return reply_errno(c, r, err);
        return api_reply_json(
                c, MHD_HTTP_OK,
                json_pack("{s:s, s:s, s:s}", "kind", "Status", "status", "Success", "id", id),
                NULL);
}

static json_t *body_json(struct api_request *req)
{
        json_t *j =
                json_loadb(req->body ? req->body : "{}", req->body ? req->body_size : 2, 0, NULL);

        if (j && !json_is_object(j)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

#define INTENT_TIMEOUT_MS 300000

/* Records the intent (with the request's Idempotency-Key) and waits for its outcome. */
static int intent(struct MHD_Connection *c, struct api_request *req, enum core_intent_kind kind,
                  const char *arg, unsigned count, struct agent_intent_outcome *ret,
                  struct fk_error *err)
{
        struct agent_intent_args a = {
                .kind = kind,
                .arg = arg,
                .count = count,
                .idem_key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key"),
        };

        return agent_daemon_intent(req->d, req->route.ns, req->route.name, &a, INTENT_TIMEOUT_MS,
                                   ret, err);
}

static int bad_request(struct MHD_Connection *c, const char *what)
{
        return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL, "%s", what);
}

/* The item of list j (taken) whose id is the route's, or 404. */
static int reply_one(struct MHD_Connection *c, json_t *j, const struct api_route *rt)
{
        json_t *v, *hit = NULL;
        size_t i;

        json_array_foreach(json_object_get(j, "items"), i, v)
        {
                if (strcmp(json_string_value(json_object_get(v, "id")) ?: "", rt->item) == 0)
                        hit = json_incref(v);
        }
        json_decref(j);
        if (!hit)
                return api_reply_error(c, MHD_HTTP_NOT_FOUND, "NotFound", NULL,
                                       "checkpoint %s not found in session %s/%s", rt->item, rt->ns,
                                       rt->name);
        return api_reply_json(c, MHD_HTTP_OK, hit, NULL);
}

static int handle_checkpoints(struct MHD_Connection *c, struct api_request *req)
{
        struct api_route *rt = &req->route;
        struct fk_error err = {0};
        const char *m = req->method, *cascade;
        json_t *j = NULL;
        int r;

        if (rt->item[0] && strcmp(m, "DELETE") == 0) {
                cascade = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cascade");
                r = agent_daemon_checkpoint_delete(req->d, rt->ns, rt->name, rt->item,
                                                   cascade && strcmp(cascade, "true") == 0, &err);
                return reply_deleted(c, r, &err, rt->item);
        }
        if (rt->item[0] && strcmp(m, "GET") == 0) {
                r = agent_daemon_checkpoint_list(req->d, rt->ns, rt->name, &j, &err);
                if (r < 0)
                        return reply_errno(c, r, &err);
                return reply_one(c, j, rt);
        }
        if (!rt->item[0] && strcmp(m, "GET") == 0) {
                r = agent_daemon_checkpoint_list(req->d, rt->ns, rt->name, &j, &err);
                return r < 0 ? reply_errno(c, r, &err) : api_reply_json(c, MHD_HTTP_OK, j, NULL);
        }
        if (!rt->item[0] && strcmp(m, "POST") == 0) {
                struct agent_intent_outcome o = {0};

                r = intent(c, req, CORE_INTENT_CHECKPOINT, NULL, 0, &o, &err);
                json_decref(o.names);
                if (r < 0)
                        return reply_errno(c, r, &err);
                return api_reply_json(c, MHD_HTTP_CREATED,
                                      json_pack("{s:s, s:s, s:s}", "kind", "Checkpoint", "id", o.id,
                                                "session", rt->name),
                                      NULL);
        }
        return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                               "%s not allowed here", m);
}

static int handle_forks(struct MHD_Connection *c, struct api_request *req, json_t *b)
{
        const char *from = json_string_value(json_object_get(b, "from"));
        json_t *count = json_object_get(b, "count");
        struct agent_intent_outcome o = {0};
        struct fk_error err = {0};
        int r;

        if (!from || !json_is_integer(count) || json_integer_value(count) < 1 ||
            json_integer_value(count) > 1000)
                return bad_request(c, "body must be {\"from\": CHECKPOINT, \"count\": N}");
        r = intent(c, req, CORE_INTENT_FORK, from, (unsigned)json_integer_value(count), &o, &err);
        if (r < 0) {
                json_decref(o.names);
                return reply_errno(c, r, &err);
        }
        return api_reply_json(c, MHD_HTTP_CREATED,
                              json_pack("{s:s, s:s, s:o}", "kind", "ForkList", "from", from,
                                        "names", o.names ? o.names : json_array()),
                              NULL);
}

static int handle_post(struct MHD_Connection *c, struct api_request *req, json_t *b)
{
        const char *sub = req->route.subresource, *v;
        struct fk_error err = {0};
        int r;

        if (strcmp(sub, "forks") == 0)
                return handle_forks(c, req, b);
        if (strcmp(sub, "rollback") == 0) {
                if (!(v = json_string_value(json_object_get(b, "checkpoint"))))
                        return bad_request(c, "body must be {\"checkpoint\": ID}");
                r = intent(c, req, CORE_INTENT_ROLLBACK, v, 0, NULL, &err);
                if (r < 0)
                        return reply_errno(c, r, &err);
                return api_reply_json(c, MHD_HTTP_OK,
                                      json_pack("{s:s, s:s, s:s}", "kind", "Status", "status",
                                                "Success", "checkpoint", v),
                                      NULL);
        }
        if (strcmp(sub, "snapshots") == 0) {
                struct agent_intent_outcome o = {0};

                r = intent(c, req, CORE_INTENT_SNAPSHOT, NULL, 0, &o, &err);
                json_decref(o.names);
                if (r < 0)
                        return reply_errno(c, r, &err);
                return api_reply_json(c, MHD_HTTP_CREATED,
                                      json_pack("{s:s, s:s, s:s}", "kind", "Snapshot", "id", o.id,
                                                "session", req->route.name),
                                      NULL);
        }
        if (!(v = json_string_value(json_object_get(b, "snapshot"))))
                return bad_request(c, "body must be {\"snapshot\": ID}");
        r = agent_daemon_restore(req->d, req->route.ns, v, req->route.name, &err);
        if (r < 0)
                return reply_errno(c, r, &err);
        return api_reply_json(c, MHD_HTTP_CREATED,
                              json_pack("{s:s, s:s, s:s}", "kind", "Status", "status", "Success",
                                        "name", req->route.name),
                              NULL);
}

int api_handle_fork(struct MHD_Connection *c, struct api_request *req)
{
        json_t *b;
        int r;

        if (strcmp(req->route.subresource, "checkpoints") == 0)
                return handle_checkpoints(c, req);
        if (strcmp(req->method, "POST") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "%s not allowed here", req->method);
        b = body_json(req);
        if (!b)
                return bad_request(c, "body must be a JSON object");
        r = handle_post(c, req, b);
        json_decref(b);
        return r;
}

int api_handle_snapshots(struct MHD_Connection *c, struct api_request *req)
{
        const struct api_route *rt = &req->route;
        struct fk_error err = {0};
        json_t *j = NULL;
        int r;

        if (strcmp(req->method, "GET") == 0) {
                r = agent_daemon_snapshot_list(req->d, rt->ns, rt->item[0] ? rt->item : NULL, &j,
                                               &err);
                return r < 0 ? reply_errno(c, r, &err) : api_reply_json(c, MHD_HTTP_OK, j, NULL);
        }
        if (rt->item[0] && strcmp(req->method, "DELETE") == 0) {
                r = agent_daemon_snapshot_delete(req->d, rt->ns, rt->item, &err);
                return reply_deleted(c, r, &err, rt->item);
        }
        return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                               "%s not allowed here", req->method);
}
