/* SPDX-License-Identifier: MIT */
/* The Kubernetes-convention API: pure parts (routes, label/field selectors, merge patch,
 * Status mapping and causes, Table, uid, the OpenAPI schema against the manifest field table,
 * the kubeconfig text). The server side: agent-kube-api-test.c. */
#include "agent/api/api-internal.h"
#include "tests/lib/agent-harness.h"

#include <string.h>

static void test_kube_routes(void **state)
{
        struct api_route r;

        (void)state;
        api_route_parse("/apis", &r);
        assert_int_equal(r.kind, API_ROUTE_KUBE);
        assert_int_equal(r.kube, API_KUBE_APIS);
        api_route_parse("/apis/forklet.dev/v1alpha1", &r);
        assert_int_equal(r.kube, API_KUBE_RESOURCES);
        api_route_parse("/apis/forklet.dev/v1alpha1/namespaces/default/sessions", &r);
        assert_int_equal(r.kube, API_KUBE_NS_SESSIONS);
        assert_string_equal(r.ns, "default");
        api_route_parse("/apis/forklet.dev/v1alpha1/namespaces/default/sessions/a/status", &r);
        assert_int_equal(r.kind, API_ROUTE_KUBE);
        assert_int_equal(r.kube, API_KUBE_STATUS);
        assert_string_equal(r.name, "a");
        /* other subresources: the /api/v1alpha1 handlers */
        api_route_parse("/apis/forklet.dev/v1alpha1/namespaces/default/sessions/a/exec", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_EXEC);
        api_route_parse("/apis/forklet.dev/v1alpha1/namespaces/default/sessions/a/checkpoints/c1",
                        &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION_FORK);
        assert_string_equal(r.item, "c1");
        api_route_parse("/apis/forklet.dev/v1alpha1/namespaces/A_B/sessions", &r);
        assert_int_equal(r.kind, API_ROUTE_BAD_NAME);
        api_route_parse("/apis/other.group/v1", &r);
        assert_int_equal(r.kind, API_ROUTE_NOT_FOUND);
        api_route_parse("/openapi/v3/apis/forklet.dev/v1alpha1", &r);
        assert_int_equal(r.kube, API_KUBE_OPENAPI_GV);
        api_route_parse("/api/v1alpha1/namespaces/default/sessions/a", &r);
        assert_int_equal(r.kind, API_ROUTE_SESSION);
}

static json_t *obj_with_labels(const char *name, const char *labels_json)
{
        json_t *o = json_pack("{s:{s:s, s:s, s:o}, s:{s:s}}", "metadata", "name", name, "namespace",
                              "default", "labels", json_loads(labels_json, 0, NULL), "status",
                              "phase", "Running");

        assert_non_null(o);
        return o;
}

static bool lmatch(const char *sel, const json_t *o)
{
        struct api_kube_selector s;
        struct fk_error err = {0};

        assert_int_equal(api_kube_label_selector_parse(sel, &s, &err), 0);
        return api_kube_labels_match(&s, o);
}

static void test_selectors(void **state)
{
        json_t *o = obj_with_labels("web", "{\"app\": \"demo\", \"tier\": \"front\"}");
        struct api_kube_selector s;
        struct fk_error err = {0};

        (void)state;
        assert_true(lmatch("", o));
        assert_true(lmatch(NULL, o));
        assert_true(lmatch("app=demo", o));
        assert_true(lmatch("app==demo,tier", o));
        assert_false(lmatch("app=other", o));
        assert_true(lmatch("app!=other", o));
        assert_false(lmatch("!tier", o));
        assert_true(lmatch("!missing", o));
        assert_true(lmatch("tier in (back, front)", o));
        assert_false(lmatch("tier notin (back,front)", o));
        assert_true(lmatch("app=demo, tier in (front)", o));
        assert_int_equal(api_kube_label_selector_parse("app in x", &s, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "'('"));
        assert_int_equal(api_kube_label_selector_parse("a!b", &s, &err), -EINVAL);
        /* field selectors: the name, namespace and phase only */
        assert_int_equal(api_kube_field_selector_parse("metadata.name=web", &s, &err), 0);
        assert_true(api_kube_fields_match(&s, o));
        assert_int_equal(api_kube_field_selector_parse("metadata.name!=web", &s, &err), 0);
        assert_false(api_kube_fields_match(&s, o));
        assert_int_equal(api_kube_field_selector_parse("status.phase==Running", &s, &err), 0);
        assert_true(api_kube_fields_match(&s, o));
        assert_int_equal(api_kube_field_selector_parse("spec.image=x", &s, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "field label not supported: spec.image"));
        json_decref(o);
}

static void check_patch(const char *target, const char *patch, const char *want)
{
        json_t *t = json_loads(target, 0, NULL), *p = json_loads(patch, JSON_DECODE_ANY, NULL);
        json_t *w = json_loads(want, JSON_DECODE_ANY, NULL), *got;

        assert_non_null(t);
        assert_non_null(p);
        got = api_kube_merge_patch(t, p);
        assert_non_null(got);
        if (!json_equal(got, w)) {
                char *g = json_dumps(got, JSON_COMPACT);

                fail_msg("patch %s on %s: got %s, want %s", patch, target, g, want);
        }
        json_decref(t);
        json_decref(p);
        json_decref(w);
        json_decref(got);
}

/* The examples of RFC 7386 section 3, and that the target is left alone. */
static void test_merge_patch(void **state)
{
        (void)state;
        check_patch("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
        check_patch("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
        check_patch("{\"a\":\"b\"}", "{\"a\":null}", "{}");
        check_patch("{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}");
        check_patch("{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
        check_patch("{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}");
        check_patch("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}",
                    "{\"a\":{\"b\":\"d\"}}");
        check_patch("{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}");
        check_patch("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
        check_patch("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
        check_patch("{\"spec\":{\"state\":\"Running\",\"egress\":[\"a\"]}}",
                    "{\"spec\":{\"state\":\"Paused\"}}",
                    "{\"spec\":{\"state\":\"Paused\",\"egress\":[\"a\"]}}");
}

static void test_status(void **state)
{
        char m0[] = "<json>: spec.egress[0]: invalid egress entry \"a b\": must not contain "
                    "whitespace";
        char m1[] = "<json>: metadata: name: required field missing";
        char m2[] = "<json>: spec.sizeClas: unknown field \"sizeClas\"";
        char *msgs[] = {m0, m1, m2, NULL};
        json_t *c = api_kube_causes(msgs, 3), *st;
        const char *reason;

        (void)state;
        assert_int_equal(json_array_size(c), 3);
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "field")),
                            "spec.egress[0]");
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 0), "message")),
                            "invalid egress entry \"a b\": must not contain whitespace");
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 1), "reason")),
                            "FieldValueRequired");
        assert_string_equal(json_string_value(json_object_get(json_array_get(c, 2), "reason")),
                            "FieldValueNotSupported");
        st = api_kube_status_json(422, "Invalid", "x", "bad", c);
        assert_string_equal(json_string_value(json_object_get(st, "apiVersion")), "v1");
        assert_string_equal(json_string_value(json_object_get(st, "status")), "Failure");
        assert_int_equal(json_integer_value(json_object_get(st, "code")), 422);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(st, "details"), "kind")),
                "Session");
        assert_int_equal(json_array_size(json_object_get(json_object_get(st, "details"), "causes")),
                         3);
        json_decref(st);
        assert_int_equal(api_kube_errno_status(-ENOENT, &reason), 404);
        assert_string_equal(reason, "NotFound");
        assert_int_equal(api_kube_errno_status(-EEXIST, &reason), 409);
        assert_string_equal(reason, "AlreadyExists");
        assert_int_equal(api_kube_errno_status(-EBUSY, &reason), 409);
        assert_string_equal(reason, "Conflict");
        assert_int_equal(api_kube_errno_status(-EUSERS, &reason), 429);
        assert_int_equal(api_kube_errno_status(-EIO, &reason), 500);
        assert_string_equal(reason, "InternalError");
}

static void test_table(void **state)
{
        json_t *a = json_loads("{\"metadata\":{\"name\":\"a\",\"creationTimestamp\":"
                               "\"2026-11-29T00:00:00Z\",\"labels\":{\"x\":\"y\"}},\"spec\":{"
                               "\"state\":\"Running\",\"image\":\"minimal\",\"sizeClass\":"
                               "\"small\"},\"status\":{\"phase\":\"Running\",\"vm\":{\"pid\":42},"
                               "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
                               "\"network\":{\"netns\":\"fk1-a\"}}}",
                               0, NULL);
        json_t *b = json_loads("{\"metadata\":{\"name\":\"b\"},\"status\":{\"phase\":\"Pending\","
                               "\"vm\":null}}",
                               0, NULL);
        json_t *objs[] = {a, b}, *t, *cells;
        char age[16];

        (void)state;
        t = api_kube_table(objs, 2, NULL, true, "7", 1795910400 + 3 * 3600);
        assert_string_equal(json_string_value(json_object_get(t, "kind")), "Table");
        assert_string_equal(json_string_value(json_object_get(t, "apiVersion")), "meta.k8s.io/v1");
        assert_string_equal(
                json_string_value(json_object_get(
                        json_array_get(json_object_get(t, "columnDefinitions"), 0), "name")),
                "Name");
        cells = json_object_get(json_array_get(json_object_get(t, "rows"), 0), "cells");
        assert_string_equal(json_string_value(json_array_get(cells, 0)), "a");
        assert_string_equal(json_string_value(json_array_get(cells, 1)), "Running");
        assert_int_equal(json_integer_value(json_array_get(cells, 2)), 42);
        assert_string_equal(json_string_value(json_array_get(cells, 3)), "3h");
        assert_string_equal(json_string_value(json_array_get(cells, 4)), "True");
        assert_string_equal(json_string_value(json_array_get(cells, 8)), "fk1-a");
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object"),
                        "kind")),
                "PartialObjectMetadata");
        cells = json_object_get(json_array_get(json_object_get(t, "rows"), 1), "cells");
        assert_string_equal(json_string_value(json_array_get(cells, 2)), "-");
        assert_string_equal(json_string_value(json_array_get(cells, 3)), "<unknown>");
        json_decref(t);
        t = api_kube_table(objs, 1, "None", false, "7", 0);
        assert_null(json_object_get(t, "columnDefinitions"));
        assert_null(json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object"));
        json_decref(t);
        api_kube_age(59, age, sizeof(age));
        assert_string_equal(age, "59s");
        api_kube_age(300, age, sizeof(age));
        assert_string_equal(age, "5m");
        api_kube_age(3 * 86400, age, sizeof(age));
        assert_string_equal(age, "3d");
        assert_true(api_kube_wants_table(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
        assert_false(api_kube_wants_table("application/json"));
        json_decref(a);
        json_decref(b);
}

static void test_uid(void **state)
{
        char a[37], b[37], c[37];

        (void)state;
        api_kube_uid("default", "a", "2026-11-29T00:00:00Z", a);
        api_kube_uid("default", "a", "2026-11-29T00:00:00Z", b);
        api_kube_uid("default", "a", "2026-11-29T00:00:01Z", c);
        assert_string_equal(a, b);
        assert_string_not_equal(a, c);
        assert_int_equal(strlen(a), 36);
        assert_int_equal(a[14], '5');
}

/* Every field of the table is in the schema at the same place, with its type, and nothing
 * else is: the schema is the validator's. */
static void check_schema(const struct manifest_field *f, const json_t *s, const char *path)
{
        static const char *const types[] = {
                [MF_STRING] = "string", [MF_INT] = "integer", [MF_NUMBER] = "number",
                [MF_BOOL] = "boolean",  [MF_TIME] = "string", [MF_OBJECT] = "object",
                [MF_MAP] = "object",    [MF_ARRAY] = "array"};
        const json_t *props = json_object_get(s, "properties");
        size_t n = 0;

        if (f->type != MF_ANY)
                assert_string_equal(json_string_value(json_object_get(s, "type")), types[f->type]);
        if (f->type == MF_ARRAY)
                s = json_object_get(s, "items");
        if (!f->fields)
                return;
        props = json_object_get(s, "properties");
        for (const struct manifest_field *c = f->fields; c->name; c++, n++) {
                char p[256];

                snprintf(p, sizeof(p), "%s.%s", path, c->name);
                if (!json_object_get(props, c->name))
                        fail_msg("%s missing from the schema", p);
                check_schema(c, json_object_get(props, c->name), p);
        }
        assert_int_equal(json_object_size(props), n);
}

static void test_openapi_from_field_table(void **state)
{
        json_t *schemas = manifest_openapi_schemas(), *s, *gv;
        const char *names[MANIFEST_FIELDS_MAX + 1];
        const char *const *known;

        (void)state;
        s = json_object_get(schemas, "dev.forklet.v1alpha1.Session");
        assert_non_null(s);
        gv = json_array_get(json_object_get(s, "x-kubernetes-group-version-kind"), 0);
        assert_string_equal(json_string_value(json_object_get(gv, "kind")), "Session");
        check_schema(manifest_session_fields(), s, "Session");
        s = json_object_get(json_object_get(json_object_get(s, "properties"), "spec"),
                            "properties");
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(s, "egress"), "items"), "type")),
                "string");
        assert_int_equal(json_array_size(json_object_get(json_object_get(s, "state"), "enum")), 3);
        assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(json_object_get(s, "ports"), "items"), "maximum")),
                         65535);
        json_decref(schemas);
        /* the validator's known keys come from the same table */
        known = manifest_field_names(manifest_field_find("spec.forks"), names);
        assert_string_equal(known[0], "from");
        assert_string_equal(known[1], "count");
        assert_null(known[2]);
        assert_null(manifest_field_find("spec.nope"));
        assert_int_equal(manifest_field_find("spec.checkpoints")->type, MF_ARRAY);
}

static void test_kubeconfig_render(void **state)
{
        cleanup_free char *out = NULL;

        (void)state;
        assert_int_equal(cli_kubeconfig_render("forklet-n", "https://127.0.0.1:6443",
                                               "-----BEGIN CERTIFICATE-----\n", "tok", "default",
                                               &out),
                         0);
        assert_non_null(strstr(out, "    server: https://127.0.0.1:6443\n"));
        assert_non_null(strstr(
                out, "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n"));
        assert_non_null(strstr(out, "current-context: forklet-n\n"));
        assert_non_null(strstr(out, "    token: \"tok\"\n"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kube_routes),
                cmocka_unit_test(test_selectors),
                cmocka_unit_test(test_merge_patch),
                cmocka_unit_test(test_status),
                cmocka_unit_test(test_table),
                cmocka_unit_test(test_uid),
                cmocka_unit_test(test_openapi_from_field_table),
                cmocka_unit_test(test_kubeconfig_render),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
