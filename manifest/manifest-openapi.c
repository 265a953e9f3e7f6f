/* SPDX-License-Identifier: MIT */
/* OpenAPI v3 schemas of the Session kind, generated from the field table (manifest-fields.c),
 * so `kubectl explain` and kubectl's field validation see what the validator accepts. */
#include "manifest/manifest.h"

#include <jansson.h>
#include <stdbool.h>

#define SCHEMA_SESSION "dev.forklet.v1alpha1.Session"
#define SCHEMA_LIST    "dev.forklet.v1alpha1.SessionList"

static json_t *field_schema(const struct manifest_field *f);

static void put(json_t *o, const char *k, json_t *v, bool *ok)
{
        if (!v || json_object_set_new(o, k, v) < 0)
                *ok = false;
}

static json_t *scalar(enum manifest_ftype t)
{
        switch (t) {
        case MF_INT:
                return json_pack("{s:s, s:s}", "type", "integer", "format", "int64");
        case MF_NUMBER:
                return json_pack("{s:s, s:s}", "type", "number", "format", "double");
        case MF_BOOL:
                return json_pack("{s:s}", "type", "boolean");
        case MF_TIME:
                return json_pack("{s:s, s:s}", "type", "string", "format", "date-time");
        case MF_MAP:
                return json_pack("{s:s, s:{s:s}}", "type", "object", "additionalProperties", "type",
                                 "string");
        case MF_ANY:
                return json_pack("{s:b}", "x-kubernetes-preserve-unknown-fields", 1);
        default:
                return json_pack("{s:s}", "type", "string");
        }
}

static json_t *object_schema(const struct manifest_field *fields, bool *ok)
{
        json_t *o = json_pack("{s:s}", "type", "object"), *props = json_object(),
               *req = json_array();

        for (const struct manifest_field *c = fields; o && props && req && c->name; c++) {
                put(props, c->name, field_schema(c), ok);
                if ((c->flags & MF_REQUIRED) && json_array_append_new(req, json_string(c->name)))
                        *ok = false;
        }
        if (!o || !props || !req) {
                json_decref(props);
                json_decref(req);
                *ok = false;
                return o;
        }
        put(o, "properties", props, ok);
        if (json_array_size(req))
                put(o, "required", req, ok);
        else
                json_decref(req);
        return o;
}

/* An element schema: the field's bounds and enums apply to its items when it is an array. */
static json_t *items_schema(const struct manifest_field *f, enum manifest_ftype t, bool *ok)
{
        json_t *s = t == MF_OBJECT ? object_schema(f->fields, ok) : scalar(t);
        json_t *e;

        if (!s)
                return NULL;
        if (t == MF_INT && f->max > f->min) {
                put(s, "minimum", json_integer(f->min), ok);
                put(s, "maximum", json_integer(f->max), ok);
        }
        if (f->enums && (e = json_array())) {
                for (const char *const *v = f->enums; *v; v++)
                        if (json_array_append_new(e, json_string(*v)) < 0)
                                *ok = false;
                put(s, "enum", e, ok);
        }
        return s;
}

static json_t *field_schema(const struct manifest_field *f)
{
        bool ok = true;
        json_t *s;

        if (f->type == MF_ARRAY) {
                s = json_pack("{s:s}", "type", "array");
                if (s)
                        put(s, "items", items_schema(f, f->items, &ok), &ok);
        } else
                s = items_schema(f, f->type, &ok);
        if (!s)
                return NULL;
        if (f->description)
                put(s, "description", json_string(f->description), &ok);
        if (f->flags & MF_OUTPUT && f->type != MF_ANY)
                put(s, "readOnly", json_true(), &ok);
        if (f->flags & MF_OUTPUT && f->type == MF_OBJECT)
                put(s, "x-kubernetes-preserve-unknown-fields", json_true(), &ok);
        if (!ok) {
                json_decref(s);
                return NULL;
        }
        return s;
}

static json_t *gvk(const char *kind)
{
        return json_pack("[{s:s, s:s, s:s}]", "group", "forklet.dev", "version", "v1alpha1", "kind",
                         kind);
}

json_t *manifest_openapi_schemas(void)
{
        json_t *session = field_schema(manifest_session_fields());
        json_t *list =
                json_pack("{s:s, s:s, s:[s,s], s:{s:{s:s}, s:{s:s}, s:{s:s, s:{s:s}}, s:{s:s, s:s, "
                          "s:{s:{s:s}}}}}",
                          "description", "A list of Sessions.", "type", "object", "required",
                          "kind", "items", "properties", "apiVersion", "type", "string", "kind",
                          "type", "string", "items", "type", "array", "items", "$ref",
                          "#/components/schemas/" SCHEMA_SESSION, "metadata", "type", "object",
                          "description", "Standard list metadata (resourceVersion).", "properties",
                          "resourceVersion", "type", "string");
        json_t *out = json_object();
        bool ok = session && list && out;

        if (ok) {
                put(session, "x-kubernetes-group-version-kind", gvk("Session"), &ok);
                put(list, "x-kubernetes-group-version-kind", gvk("SessionList"), &ok);
        }
        if (ok) {
                put(out, SCHEMA_SESSION, session, &ok);
                put(out, SCHEMA_LIST, list, &ok);
                session = list = NULL;
        }
        if (!ok) {
                json_decref(session);
                json_decref(list);
                json_decref(out);
                return NULL;
        }
        return out;
}
