/* SPDX-License-Identifier: MIT */
/* The images API: GET /api/v1alpha1/images (list with users and pulls), POST it with
 * {"reference"} (start or join a pull; 202 while it runs, 200 once the image is there),
 * GET /api/v1alpha1/images/ID (inspect) and DELETE it (409 naming the users). ID is a digest
 * (or 12+ of its hex digits). */
#include "agent/api/api-internal.h"
#include "agent/image/image.h"
#include "common/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

static json_t *with_users(struct api_request *req, json_t *item)
{
        const char *digest = json_string_value(json_object_get(item, "digest"));
        char **users = NULL;
        json_t *a = json_array();

        if (digest && agent_image_users(req->d, digest, &users, NULL) >= 0)
                for (size_t i = 0; users && users[i]; i++)
                        json_array_append_new(a, json_string(users[i]));
        fk_strv_free(users);
        json_object_set_new(item, "usedBy", a);
        return item;
}

static int list(struct MHD_Connection *c, struct api_request *req, struct agent_image_store *st)
{
        json_t *items = agent_image_list_json(st), *it;
        size_t i;

        json_array_foreach(items, i, it) with_users(req, it);
        return api_reply_json(
                c, MHD_HTTP_OK,
                json_pack("{s:s, s:o}", "kind", "ImageList", "items", items ? items : json_array()),
                NULL);
}

static int pull(struct MHD_Connection *c, struct api_request *req, struct agent_image_store *st)
{
        json_t *body = json_loadb(req->body ? req->body : "", req->body_size, 0, NULL), *p;
        const char *ref = json_string_value(json_object_get(body, "reference"));
        struct fk_error err = {0};
        int r;

        if (!ref) {
                json_decref(body);
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL, "%s",
                                       "body: {\"reference\": \"HOST/REPO:TAG\"} is required");
        }
        p = agent_image_pull_json(st, ref);
        /* "poll": report the pull there is (the CLI's progress bar); else start or join one */
        r = p && json_is_true(json_object_get(body, "poll"))
                    ? 0
                    : agent_image_pull_start(st, ref, &err);
        json_decref(p);
        if (r < 0) {
                const char *reason;
                unsigned status = api_status_from_errno(r, &reason);

                json_decref(body);
                return api_reply_error(c, r == -EPERM ? MHD_HTTP_FORBIDDEN : status,
                                       r == -EPERM ? "Forbidden" : reason, NULL, "%s", err.msg);
        }
        p = agent_image_pull_json(st, ref);
        json_decref(body); /* ref pointed into it */
        r = p && strcmp(json_string_value(json_object_get(p, "state")), "Pulling") == 0
                    ? MHD_HTTP_ACCEPTED
                    : MHD_HTTP_OK;
        return api_reply_json(c, (unsigned)r, p ? p : json_object(), NULL);
}

static json_t *find_item(struct agent_image_store *st, const char *digest)
{
        json_t *items = agent_image_list_json(st), *it, *found = NULL;
        size_t i;

        json_array_foreach(items, i, it)
        {
                if (strcmp(json_string_value(json_object_get(it, "digest")), digest) == 0)
                        found = json_incref(it);
        }
        json_decref(items);
        return found;
}

static int one(struct MHD_Connection *c, struct api_request *req, struct agent_image_store *st)
{
        char digest[80], **users = NULL;
        cleanup_free char *text = NULL;
        json_t *item;
        int r;

        r = agent_image_find(st, req->route.item, digest, sizeof(digest));
        if (r < 0)
                return api_reply_error(c, r == -EINVAL ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_NOT_FOUND,
                                       r == -EINVAL ? "BadRequest" : "NotFound", NULL,
                                       "image %s: %s", req->route.item,
                                       r == -EINVAL ? "ambiguous (give more of the digest)"
                                                    : "not in the store");
        if (strcmp(req->method, "GET") == 0) {
                item = find_item(st, digest);
                return item ? api_reply_json(c, MHD_HTTP_OK, with_users(req, item), NULL)
                            : api_reply_error(c, MHD_HTTP_NOT_FOUND, "NotFound", NULL,
                                              "image %s is gone", digest);
        }
        r = agent_image_users(req->d, digest, &users, NULL);
        if (r >= 0 && users) {
                for (size_t i = 0; users[i]; i++)
                        if (fk_list_append(&text, ", ", users[i]) < 0)
                                break;
                r = api_reply_error(c, MHD_HTTP_CONFLICT, "InUse", users,
                                    "image %s is in use by %s: delete them first", digest,
                                    text ? text : "sessions");
                fk_strv_free(users);
                return r;
        }
        r = r < 0 ? r : agent_image_remove(st, digest);
        if (r < 0)
                return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError", NULL,
                                       "remove image %s: %s", digest, strerror(-r));
        return api_reply_json(c, MHD_HTTP_OK,
                              json_pack("{s:s, s:s}", "digest", digest, "status", "Deleted"), NULL);
}

int api_handle_images(struct MHD_Connection *c, struct api_request *req)
{
        struct agent_image_store *st = agent_daemon_images(req->d);
        bool item = req->route.item[0] != '\0';

        if (!st)
                return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError", NULL,
                                       "%s", "the image store is not available");
        if (!item && strcmp(req->method, "GET") == 0)
                return list(c, req, st);
        if (!item && strcmp(req->method, "POST") == 0)
                return pull(c, req, st);
        if (item && (strcmp(req->method, "GET") == 0 || strcmp(req->method, "DELETE") == 0))
                return one(c, req, st);
        return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                               "%s not allowed here", req->method);
}
