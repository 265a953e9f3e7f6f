/* SPDX-License-Identifier: MIT */
/* OpenAPI v3: the root index (/openapi/v3) and the forklet.dev/v1alpha1 document, whose
 * schemas come from the manifest field table (manifest_openapi_schemas) and whose operations
 * declare the query parameters kubectl checks for (fieldValidation, dryRun). */
#include "agent/api/api-internal.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE    "/apis/forklet.dev/v1alpha1"
#define SESSION "#/components/schemas/dev.forklet.v1alpha1.Session"
#define LIST    "#/components/schemas/dev.forklet.v1alpha1.SessionList"

static json_t *param(const char *name, const char *in, const char *desc)
{
        return json_pack("{s:s, s:s, s:s, s:b, s:{s:s}}", "name", name, "in", in, "description",
                         desc, "required", strcmp(in, "path") == 0, "schema", "type", "string");
}

static json_t *params(bool name, bool write)
{
        json_t *a = json_array();

        if (!a)
                return NULL;
        json_array_append_new(a, param("namespace", "path", "the namespace"));
        if (name)
                json_array_append_new(a, param("name", "path", "the session's name"));
        if (write) {
                json_array_append_new(a, param("fieldValidation", "query",
                                               "Strict (default and always): unknown or "
                                               "duplicate fields are refused (422)"));
                json_array_append_new(
                        a, param("dryRun", "query", "All: validate and answer, change nothing"));
                json_array_append_new(a, param("fieldManager", "query", "accepted, not kept"));
        } else {
                json_array_append_new(a, param("labelSelector", "query", "a=b, a!=b, a in (x)"));
                json_array_append_new(a, param("fieldSelector", "query",
                                               "metadata.name, metadata.namespace, status.phase"));
                json_array_append_new(a, param("watch", "query", "stream changes"));
                json_array_append_new(a, param("resourceVersion", "query", "watch from here"));
        }
        return a;
}

static json_t *reply(const char *ref)
{
        return json_pack("{s:{s:s, s:{s:{s:{s:s}}}}}", "200", "description", "OK", "content",
                         "application/json", "schema", "$ref", ref);
}

/* One operation; body: request body schema or NULL; types: its content types. */
static json_t *op(const char *id, const char *action, const char *kind, json_t *ps, const char *ref,
                  const char *const *types)
{
        json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:{s:s, s:s, s:s}}", "operationId", id,
                              "x-kubernetes-action", action, "parameters", ps, "responses",
                              reply(ref), "x-kubernetes-group-version-kind", "group", "forklet.dev",
                              "version", "v1alpha1", "kind", kind);
        json_t *content;

        if (!o || !types)
                return o;
        content = json_object();
        for (size_t i = 0; content && types[i]; i++)
                json_object_set_new(content, types[i],
                                    json_pack("{s:{s:s}}", "schema", "$ref", SESSION));
        json_object_set_new(o, "requestBody",
                            json_pack("{s:o, s:b}", "content", content, "required", 1));
        return o;
}

static json_t *paths(void)
{
        static const char *const json_types[] = {"application/json", "application/yaml", NULL};
        static const char *const patch_types[] = {"application/merge-patch+json",
                                                  "application/apply-patch+yaml", NULL};

        return json_pack(
                "{s:{s:o}, s:{s:o, s:o}, s:{s:o, s:o, s:o, s:o}, s:{s:o}}", BASE "/sessions", "get",
                op("listSessionsAllNamespaces", "list", "Session", json_array(), LIST, NULL),
                BASE "/namespaces/{namespace}/sessions", "get",
                op("listSessions", "list", "Session", params(false, false), LIST, NULL), "post",
                op("createSession", "post", "Session", params(false, true), SESSION, json_types),
                BASE "/namespaces/{namespace}/sessions/{name}", "get",
                op("readSession", "get", "Session", params(true, false), SESSION, NULL), "put",
                op("replaceSession", "put", "Session", params(true, true), SESSION, json_types),
                "patch",
                op("patchSession", "patch", "Session", params(true, true), SESSION, patch_types),
                "delete",
                op("deleteSession", "delete", "Session", params(true, true), SESSION, NULL),
                BASE "/namespaces/{namespace}/sessions/{name}/status", "get",
                op("readSessionStatus", "get", "Session", params(true, false), SESSION, NULL));
}

json_t *api_kube_openapi_gv(void)
{
        json_t *schemas = manifest_openapi_schemas();

        if (!schemas)
                return NULL;
        return json_pack("{s:s, s:{s:s, s:s}, s:o, s:{s:o}}", "openapi", "3.0.0", "info", "title",
                         "forklet", "version", "v1alpha1", "paths", paths(), "components",
                         "schemas", schemas);
}

json_t *api_kube_openapi_root(void)
{
        json_t *doc = api_kube_openapi_gv();
        char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        char hex[2 * FK_SHA256_SIZE + 1], url[256];
        uint8_t d[FK_SHA256_SIZE];
        struct fk_sha256 h;

        json_decref(doc);
        if (!text)
                return NULL;
        fk_sha256_init(&h);
        fk_sha256_update(&h, text, strlen(text));
        fk_sha256_final(&h, d);
        free(text);
        fk_hex(d, sizeof(d), hex);
        snprintf(url, sizeof(url), "/openapi/v3" BASE "?hash=%.32s", hex);
        return json_pack("{s:{s:{s:s}}}", "paths", "apis/forklet.dev/v1alpha1", "serverRelativeURL",
                         url);
}
