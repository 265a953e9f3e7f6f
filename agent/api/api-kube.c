/* SPDX-License-Identifier: MIT */
/* The Kubernetes-convention API of forklet.dev/v1alpha1 sessions (what kubectl speaks):
 * discovery and OpenAPI documents, list (selectors, Table), get, create, update, merge patch
 * (and server-side apply as a merge of the applied object), delete, watch; failures as
 * metav1.Status. The daemon calls are the same the /api/v1alpha1 handlers make. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *arg(struct MHD_Connection *c, const char *k)
{
        return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, k);
}

static const char *header(struct MHD_Connection *c, const char *k)
{
        return MHD_lookup_connection_value(c, MHD_HEADER_KIND, k);
}

static bool content_type_is(struct MHD_Connection *c, const char *type)
{
        const char *ct = header(c, "Content-Type");
        size_t n = ct ? strcspn(ct, "; \t") : 0;

        return ct && strlen(type) == n && strncasecmp(ct, type, n) == 0;
}

static bool flag(struct MHD_Connection *c, const char *k)
{
        const char *v = arg(c, k);

        return v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

static int reply_doc(struct MHD_Connection *c, json_t *j)
{
        if (!j)
                return api_kube_reply_errno(c, -ENOMEM, NULL, NULL);
        return api_reply_json(c, MHD_HTTP_OK, j, NULL);
}

static int64_t now_s(void)
{
        return (int64_t)time(NULL);
}

/* The session of the route, stamped (apiVersion, kind, uid, resourceVersion). */
static int load(struct api_request *req, json_t **ret)
{
        json_t *j = NULL;
        int r = agent_daemon_session_json(req->d, req->route.ns, req->route.name, &j);

        if (r < 0)
                return r;
        api_kube_observe_one(j);
        *ret = j;
        return 0;
}

static int reply_object(struct MHD_Connection *c, unsigned code, json_t *obj)
{
        const char *accept = header(c, "Accept");
        json_t *t;

        if (!api_kube_wants_table(accept))
                return api_reply_json(c, code, obj, NULL);
        t = api_kube_table(&obj, 1, arg(c, "includeObject"), true,
                           json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                             "resourceVersion")),
                           now_s());
        json_decref(obj);
        return reply_doc(c, t);
}

static int parse_selectors(struct MHD_Connection *c, struct api_kube_selector *labels,
                           struct api_kube_selector *fields, int *reply)
{
        struct fk_error err = {0};

        if (api_kube_label_selector_parse(arg(c, "labelSelector"), labels, &err) < 0) {
                *reply = api_kube_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL, NULL,
                                               "labelSelector: %s", err.msg);
                return -EINVAL;
        }
        if (api_kube_field_selector_parse(arg(c, "fieldSelector"), fields, &err) < 0) {
                *reply = api_kube_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL, NULL,
                                               "fieldSelector: %s", err.msg);
                return -EINVAL;
        }
        return 0;
}

static int start_watch(struct MHD_Connection *c, struct api_request *req,
                       struct api_kube_watch_opts *o, const atomic_bool *stopping)
{
        const char *rv = arg(c, "resourceVersion"), *to = arg(c, "timeoutSeconds");
        const char *inc = arg(c, "includeObject");

        snprintf(o->ns, sizeof(o->ns), "%s", req->route.ns);
        o->since = rv ? strtoull(rv, NULL, 10) : 0;
        o->table = api_kube_wants_table(header(c, "Accept"));
        o->bookmarks = flag(c, "allowWatchBookmarks");
        o->timeout_s = to ? (unsigned)strtoul(to, NULL, 10) : 0;
        snprintf(o->include, sizeof(o->include), "%s", inc ? inc : "");
        return api_kube_watch(c, req, o, stopping);
}

static int handle_list(struct MHD_Connection *c, struct api_request *req,
                       const atomic_bool *stopping)
{
        struct api_kube_watch_opts o = {0};
        json_t *list = NULL, *items, *it, *out;
        char rvs[24];
        uint64_t rv;
        size_t i;
        int r, reply;

        if (parse_selectors(c, &o.labels, &o.fields, &reply) < 0)
                return reply;
        if (flag(c, "watch"))
                return start_watch(c, req, &o, stopping);
        r = agent_daemon_list_json(req->d, &list);
        if (r < 0)
                return api_kube_reply_errno(c, r, NULL, NULL);
        items = json_object_get(list, "items");
        rv = api_kube_observe_list(items);
        snprintf(rvs, sizeof(rvs), "%" PRIu64, rv);
        for (i = json_array_size(items); i-- > 0;) {
                const char *ns;

                it = json_array_get(items, i);
                ns = json_string_value(
                        json_object_get(json_object_get(it, "metadata"), "namespace"));
                if ((req->route.ns[0] && (!ns || strcmp(ns, req->route.ns) != 0)) ||
                    !api_kube_labels_match(&o.labels, it) || !api_kube_fields_match(&o.fields, it))
                        json_array_remove(items, i);
        }
        if (api_kube_wants_table(header(c, "Accept"))) {
                json_t **v = calloc(json_array_size(items) + 1, sizeof(*v));

                for (i = 0; v && i < json_array_size(items); i++)
                        v[i] = json_array_get(items, i);
                out = v ? api_kube_table(v, json_array_size(items), arg(c, "includeObject"), true,
                                         rvs, now_s())
                        : NULL;
                free(v);
        } else
                out = json_pack("{s:s, s:s, s:{s:s}, s:O}", "apiVersion", MANIFEST_API_VERSION,
                                "kind", "SessionList", "metadata", "resourceVersion", rvs, "items",
                                items);
        json_decref(list);
        return reply_doc(c, out);
}

/* The request body as a JSON object (JSON, or one YAML Session document); NULL: replied. */
static json_t *body_json(struct MHD_Connection *c, struct api_request *req, int *reply)
{
        json_error_t jerr;
        json_t *j = json_loadb(req->body ? req->body : "", req->body_size, 0, &jerr);

        if (!j && (content_type_is(c, "application/yaml") ||
                   content_type_is(c, "application/apply-patch+yaml"))) {
                struct manifest_diag diag = {0};
                struct session_manifest **ms = NULL;
                size_t n = 0;

                if (manifest_parse_sessions(req->body ? req->body : "", req->body_size, "body",
                                            NULL, &ms, &n, &diag) == 0 &&
                    n == 1)
                        j = session_manifest_to_json(ms[0]);
                for (size_t i = 0; i < n; i++)
                        session_manifest_free(ms[i]);
                free(ms);
                if (!j) {
                        *reply = api_kube_reply_status(
                                c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL, NULL,
                                "the YAML body is not one Session document: %s",
                                diag.n ? diag.messages[0] : "several documents");
                        manifest_diag_done(&diag);
                        return NULL;
                }
                manifest_diag_done(&diag);
        }
        if (!j) {
                *reply = api_kube_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL, NULL,
                                               "invalid JSON at line %d column %d: %s", jerr.line,
                                               jerr.column, jerr.text);
                return NULL;
        }
        if (!json_is_object(j)) {
                json_decref(j);
                *reply = api_kube_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL, NULL,
                                               "the body must be a JSON object");
                return NULL;
        }
        return j;
}

/* metadata.name/namespace from the URL when absent; false (replied) when they disagree. */
static bool match_url(struct MHD_Connection *c, struct api_request *req, json_t *j, int *reply)
{
        json_t *meta = json_object_get(j, "metadata");
        const char *want[2] = {req->route.ns, req->route.name[0] ? req->route.name : NULL};
        const char *keys[2] = {"namespace", "name"};

        if (!json_is_object(meta)) {
                json_object_set_new(j, "metadata", meta = json_object());
                if (!meta) {
                        *reply = api_kube_reply_errno(c, -ENOMEM, NULL, NULL);
                        return false;
                }
        }
        for (int i = 0; i < 2; i++) {
                json_t *v = json_object_get(meta, keys[i]);

                if (!want[i])
                        continue;
                if (!v)
                        json_object_set_new(meta, keys[i], json_string(want[i]));
                else if (!json_is_string(v) || strcmp(json_string_value(v), want[i]) != 0) {
                        *reply = api_kube_reply_status(
                                c, MHD_HTTP_BAD_REQUEST, "BadRequest", want[1], NULL,
                                "metadata.%s (%s) does not match the URL (%s)", keys[i],
                                json_is_string(v) ? json_string_value(v) : "not a string", want[i]);
                        return false;
                }
        }
        return true;
}

/* Validates j (status dropped) and applies it, or only validates with dryRun=All. */
static int write_session(struct MHD_Connection *c, struct api_request *req, json_t *j,
                         bool creating)
{
        const char *name =
                json_string_value(json_object_get(json_object_get(j, "metadata"), "name"));
        cleanup_free char *ns = NULL, *nm = NULL;
        struct manifest_diag diag = {0};
        struct session_manifest *m = NULL;
        enum agent_apply_result res;
        struct fk_error err = {0};
        const char *dry = arg(c, "dryRun");
        json_t *out = NULL;
        int r;

        json_object_del(j, "status");
        r = session_manifest_from_json(j, req->cfg, &m, &diag);
        if (r < 0) {
                r = r == -ENOMEM
                            ? api_kube_reply_errno(c, r, NULL, NULL)
                            : api_kube_reply_status(c, MHD_HTTP_UNPROCESSABLE_CONTENT, "Invalid",
                                                    name, api_kube_causes(diag.messages, diag.n),
                                                    "Session.forklet.dev \"%s\" is invalid: %s",
                                                    name ? name : "",
                                                    diag.n ? diag.messages[0] : "");
                manifest_diag_done(&diag);
                return r;
        }
        if (dry && strcmp(dry, "All") == 0) {
                out = session_manifest_to_json(m);
                session_manifest_free(m);
                if (out)
                        api_kube_observe_one(out);
                return reply_object(c, creating ? MHD_HTTP_CREATED : MHD_HTTP_OK, out);
        }
        ns = strdup(m->namespace);
        nm = strdup(m->name);
        if (!ns || !nm) {
                session_manifest_free(m);
                return api_kube_reply_errno(c, -ENOMEM, NULL, NULL);
        }
        r = agent_daemon_apply(req->d, m, &res, &err);
        if (r < 0)
                return api_kube_reply_errno(c, r, nm, err.msg);
        r = agent_daemon_session_json(req->d, ns, nm, &out);
        if (r < 0)
                return api_kube_reply_errno(c, r, nm, NULL);
        api_kube_observe_one(out);
        return reply_object(c, res == AGENT_APPLY_CREATED ? MHD_HTTP_CREATED : MHD_HTTP_OK, out);
}

static int handle_create(struct MHD_Connection *c, struct api_request *req)
{
        json_t *j, *cur = NULL;
        const char *name;
        int reply = MHD_NO, r;

        j = body_json(c, req, &reply);
        if (!j)
                return reply;
        if (!match_url(c, req, j, &reply)) {
                json_decref(j);
                return reply;
        }
        name = json_string_value(json_object_get(json_object_get(j, "metadata"), "name"));
        if (name && agent_daemon_session_json(req->d, req->route.ns, name, &cur) == 0) {
                json_decref(cur);
                r = api_kube_reply_status(c, MHD_HTTP_CONFLICT, "AlreadyExists", name, NULL,
                                          "sessions.forklet.dev \"%s\" already exists", name);
                json_decref(j);
                return r;
        }
        r = write_session(c, req, j, true);
        json_decref(j);
        return r;
}

/* A resourceVersion in the body must be the current one (optimistic concurrency). */
static bool rv_matches(const json_t *body, const json_t *cur)
{
        const char *want = json_string_value(
                json_object_get(json_object_get(body, "metadata"), "resourceVersion"));
        const char *have = json_string_value(
                json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));

        return !want || (have && strcmp(want, have) == 0);
}

static int reply_conflict(struct MHD_Connection *c, const char *name)
{
        return api_kube_reply_status(c, MHD_HTTP_CONFLICT, "Conflict", name, NULL,
                                     "Operation cannot be fulfilled on sessions.forklet.dev "
                                     "\"%s\": the object has been modified; please apply your "
                                     "changes to the latest version and try again",
                                     name);
}

static int handle_update(struct MHD_Connection *c, struct api_request *req, bool patch)
{
        bool apply = content_type_is(c, "application/apply-patch+yaml");
        json_t *body, *cur = NULL, *next;
        int reply = MHD_NO, r;

        if (patch && !apply && !content_type_is(c, "application/merge-patch+json"))
                return api_kube_reply_status(
                        c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", req->route.name,
                        NULL,
                        "the patch type %s is not supported: use application/merge-patch+json "
                        "(kubectl patch --type=merge) or application/apply-patch+yaml",
                        header(c, "Content-Type") ? header(c, "Content-Type") : "(none)");
        body = body_json(c, req, &reply);
        if (!body)
                return reply;
        r = load(req, &cur);
        if (r == -ENOENT && apply) { /* server-side apply creates */
                r = match_url(c, req, body, &reply) ? write_session(c, req, body, true) : reply;
                json_decref(body);
                return r;
        }
        if (r < 0) {
                json_decref(body);
                return api_kube_reply_errno(c, r, req->route.name, NULL);
        }
        if (!rv_matches(body, cur)) {
                json_decref(body);
                json_decref(cur);
                return reply_conflict(c, req->route.name);
        }
        next = patch ? api_kube_merge_patch(cur, body) : json_incref(body);
        json_decref(body);
        json_decref(cur);
        if (!next)
                return api_kube_reply_errno(c, -ENOMEM, NULL, NULL);
        r = match_url(c, req, next, &reply) ? write_session(c, req, next, false) : reply;
        json_decref(next);
        return r;
}

static int handle_delete(struct MHD_Connection *c, struct api_request *req)
{
        struct fk_error err = {0};
        json_t *j = NULL, *st;
        int r;

        r = agent_daemon_delete(req->d, req->route.ns, req->route.name, &err);
        if (r < 0)
                return api_kube_reply_errno(c, r, req->route.name, err.msg);
        if (load(req, &j) == 0) /* still tearing down: the object, deletionTimestamp set */
                return api_reply_json(c, MHD_HTTP_OK, j, NULL);
        st = api_kube_status_json(MHD_HTTP_OK, NULL, req->route.name, NULL, NULL);
        return reply_doc(c, st);
}

static int handle_one(struct MHD_Connection *c, struct api_request *req)
{
        const char *m = req->method;
        json_t *j = NULL;
        int r;

        if (strcmp(m, "GET") == 0 || req->route.kube == API_KUBE_STATUS) {
                if (strcmp(m, "GET") != 0)
                        return api_kube_reply_status(
                                c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", req->route.name,
                                NULL, "status is written by the node: change spec instead");
                r = load(req, &j);
                if (r < 0)
                        return api_kube_reply_errno(c, r, req->route.name, NULL);
                return reply_object(c, MHD_HTTP_OK, j);
        }
        if (strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0)
                return handle_update(c, req, strcmp(m, "PATCH") == 0);
        if (strcmp(m, "DELETE") == 0)
                return handle_delete(c, req);
        return api_kube_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                     req->route.name, NULL, "%s not allowed here", m);
}

int api_kube_handle(struct MHD_Connection *c, struct api_request *req, const atomic_bool *stopping)
{
        const char *m = req->method;
        enum api_kube_path p = req->route.kube;
        bool get = strcmp(m, "GET") == 0;

        switch (p) {
        case API_KUBE_SESSIONS:
        case API_KUBE_NS_SESSIONS:
                if (get)
                        return handle_list(c, req, stopping);
                if (p == API_KUBE_NS_SESSIONS && strcmp(m, "POST") == 0)
                        return handle_create(c, req);
                break;
        case API_KUBE_SESSION:
        case API_KUBE_STATUS:
                return handle_one(c, req);
        case API_KUBE_OPENAPI:
                if (get)
                        return reply_doc(c, api_kube_openapi_root());
                break;
        case API_KUBE_OPENAPI_GV:
                if (get)
                        return reply_doc(c, api_kube_openapi_gv());
                break;
        default:
                if (get)
                        return reply_doc(c, api_kube_discovery_json(p));
                break;
        }
        return api_kube_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL, NULL,
                                     "%s not allowed here", m);
}
