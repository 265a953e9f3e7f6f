/* SPDX-License-Identifier: MIT */
/* The Kubernetes-convention API over a real unix socket with the fake VM backend: discovery,
 * create / get / 409 AlreadyExists / 422 Invalid with causes, merge patch and its content
 * types, resourceVersion and generation, a stale resourceVersion (409 Conflict), label and
 * field selectors, Table, a watch from a resourceVersion (MODIFIED, DELETED), delete, and the
 * /api/v1alpha1 paths answering as before. */
#include "tests/lib/agent-harness.h"

#include <string.h>

#define NS_URL "/apis/forklet.dev/v1alpha1/namespaces/default/sessions"

struct kbuf {
        char *data;
        size_t size;
};

static size_t kbuf_write(char *p, size_t size, size_t n, void *ud)
{
        struct kbuf *b = ud;
        char *q = realloc(b->data, b->size + size * n + 1);

        assert_non_null(q);
        memcpy(q + b->size, p, size * n);
        b->data = q;
        b->size += size * n;
        q[b->size] = '\0';
        return size * n;
}

/* One request with its own Content-Type and Accept; *ret: the JSON reply (or NULL). */
static long kreq(struct env *e, const char *method, const char *path, const char *ctype,
                 const char *accept, const char *body, json_t **ret)
{
        CURL *h = curl_easy_init();
        struct curl_slist *hdr = NULL;
        struct kbuf b = {0};
        char url[512], line[256];
        long status = 0;

        assert_non_null(h);
        snprintf(url, sizeof(url), "http://localhost%s", path);
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, e->sock);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kbuf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
        if (body)
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        snprintf(line, sizeof(line), "Content-Type: %s", ctype ? ctype : "application/json");
        hdr = curl_slist_append(hdr, line);
        if (accept) {
                snprintf(line, sizeof(line), "Accept: %s", accept);
                hdr = curl_slist_append(hdr, line);
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        if (curl_easy_perform(h) != CURLE_OK)
                fail_msg("%s %s failed", method, path);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (ret)
                *ret = json_loads(b.data ? b.data : "", JSON_DISABLE_EOF_CHECK, NULL);
        free(b.data);
        curl_slist_free_all(hdr);
        curl_easy_cleanup(h);
        return status;
}

static const char *sget(const json_t *j, const char *a, const char *b)
{
        return json_string_value(json_object_get(json_object_get(j, a), b));
}

static const char web_json[] =
        "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\",\"metadata\":{\"name\":"
        "\"web\",\"labels\":{\"app\":\"demo\"},\"annotations\":{\"note\":\"kept\"}},\"spec\":{"
        "\"egress\":[\"203.0.113.0/24\"]}}";

static void test_discovery(void **state)
{
        struct env *e = *state;
        json_t *j = NULL, *r0;

        assert_int_equal(kreq(e, "GET", "/apis", NULL, NULL, NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(
                                    json_array_get(json_object_get(j, "groups"), 0), "name")),
                            "forklet.dev");
        json_decref(j);
        assert_int_equal(kreq(e, "GET", "/api", NULL, NULL, NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIVersions");
        json_decref(j);
        assert_int_equal(kreq(e, "GET", "/apis/forklet.dev/v1alpha1", NULL, NULL, NULL, &j), 200);
        r0 = json_array_get(json_object_get(j, "resources"), 0);
        assert_string_equal(json_string_value(json_object_get(r0, "name")), "sessions");
        assert_true(json_is_true(json_object_get(r0, "namespaced")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(r0, "shortNames"), 0)),
                            "sess");
        assert_string_equal(json_string_value(json_object_get(
                                    json_array_get(json_object_get(j, "resources"), 1), "name")),
                            "sessions/status");
        json_decref(j);
        assert_int_equal(kreq(e, "GET", "/version", NULL, NULL, NULL, &j), 200);
        assert_non_null(json_object_get(j, "gitVersion"));
        assert_string_equal(json_string_value(json_object_get(j, "apiVersion")),
                            "forklet.dev/v1alpha1");
        json_decref(j);
        assert_int_equal(kreq(e, "GET", "/openapi/v3", NULL, NULL, NULL, &j), 200);
        assert_non_null(strstr(
                sget(json_object_get(j, "paths"), "apis/forklet.dev/v1alpha1", "serverRelativeURL"),
                "/openapi/v3/apis/forklet.dev/v1alpha1?hash="));
        json_decref(j);
        assert_int_equal(
                kreq(e, "GET", "/openapi/v3/apis/forklet.dev/v1alpha1", NULL, NULL, NULL, &j), 200);
        assert_non_null(
                json_object_get(json_object_get(json_object_get(j, "components"), "schemas"),
                                "dev.forklet.v1alpha1.Session"));
        json_decref(j);
        assert_int_equal(kreq(e, "DELETE", "/apis", NULL, NULL, NULL, NULL), 405);
}

static void test_crud(void **state)
{
        struct env *e = *state;
        json_t *j = NULL, *c0;
        char rv[32], body[256];

        assert_int_equal(kreq(e, "GET", NS_URL "/web", NULL, NULL, NULL, &j), 404);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "NotFound");
        assert_string_equal(json_string_value(json_object_get(j, "status")), "Failure");
        assert_string_equal(json_string_value(json_object_get(j, "message")),
                            "sessions.forklet.dev \"web\" not found");
        json_decref(j);
        assert_int_equal(kreq(e, "POST", NS_URL, NULL, NULL, web_json, &j), 201);
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(j, "metadata"), "annotations"), "note")),
                "kept");
        assert_int_equal(strlen(sget(j, "metadata", "uid")), 36);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "metadata"), "generation")),
                1);
        snprintf(rv, sizeof(rv), "%s", sget(j, "metadata", "resourceVersion"));
        json_decref(j);
        assert_int_equal(kreq(e, "POST", NS_URL, NULL, NULL, web_json, &j), 409);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "AlreadyExists");
        json_decref(j);
        /* 422 with the validator's field in details.causes */
        assert_int_equal(kreq(e, "POST", NS_URL, NULL, NULL,
                              "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                              "\"metadata\":{\"name\":\"bad\"},\"spec\":{\"sizeClass\":\"huge\"}}",
                              &j),
                         422);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "Invalid");
        c0 = json_array_get(json_object_get(json_object_get(j, "details"), "causes"), 0);
        assert_string_equal(json_string_value(json_object_get(c0, "field")), "spec.sizeClass");
        assert_non_null(strstr(json_string_value(json_object_get(c0, "message")), "huge"));
        json_decref(j);
        /* merge patch: spec.state only; generation grows, the annotation stays */
        assert_int_equal(kreq(e, "PATCH", NS_URL "/web", "application/merge-patch+json", NULL,
                              "{\"spec\":{\"state\":\"Paused\"}}", &j),
                         200);
        assert_string_equal(sget(j, "spec", "state"), "Paused");
        assert_string_equal(sget(j, "spec", "sizeClass"), "small");
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "metadata"), "generation")),
                2);
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(j, "metadata"), "annotations"), "note")),
                "kept");
        assert_string_not_equal(sget(j, "metadata", "resourceVersion"), rv);
        json_decref(j);
        /* an annotation alone: a new resourceVersion, the same generation */
        assert_int_equal(kreq(e, "PATCH", NS_URL "/web", "application/merge-patch+json", NULL,
                              "{\"metadata\":{\"annotations\":{\"other\":\"x\"}}}", &j),
                         200);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "metadata"), "generation")),
                2);
        json_decref(j);
        assert_int_equal(
                kreq(e, "PATCH", NS_URL "/web", "application/json-patch+json", NULL, "[]", &j),
                415);
        json_decref(j);
        /* a stale resourceVersion is a conflict, on patch and on update */
        snprintf(body, sizeof(body), "{\"metadata\":{\"resourceVersion\":\"%s\"}}", rv);
        assert_int_equal(
                kreq(e, "PATCH", NS_URL "/web", "application/merge-patch+json", NULL, body, &j),
                409);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "Conflict");
        json_decref(j);
        assert_int_equal(kreq(e, "PATCH", NS_URL "/web", "application/merge-patch+json", NULL,
                              "{\"metadata\":{\"name\":\"other\"}}", NULL),
                         400);
        assert_int_equal(kreq(e, "PUT", NS_URL "/nosuch", NULL, NULL, web_json, NULL), 404);
        /* status subresource: read-only */
        assert_int_equal(kreq(e, "GET", NS_URL "/web/status", NULL, NULL, NULL, &j), 200);
        assert_string_equal(sget(j, "metadata", "name"), "web");
        json_decref(j);
        assert_int_equal(kreq(e, "PUT", NS_URL "/web/status", NULL, NULL, web_json, NULL), 405);
        /* dryRun: validated, not applied */
        assert_int_equal(kreq(e, "PATCH", NS_URL "/web?dryRun=All", "application/merge-patch+json",
                              NULL, "{\"spec\":{\"state\":\"Stopped\"}}", &j),
                         200);
        assert_string_equal(sget(j, "spec", "state"), "Stopped");
        json_decref(j);
        assert_int_equal(kreq(e, "GET", NS_URL "/web", NULL, NULL, NULL, &j), 200);
        assert_string_equal(sget(j, "spec", "state"), "Paused");
        json_decref(j);
        /* the old paths answer as before */
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/web", NULL, &j),
                         200);
        assert_null(json_object_get(json_object_get(j, "metadata"), "resourceVersion"));
        json_decref(j);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/nope", NULL, &j),
                         404);
        assert_true(json_is_array(json_object_get(j, "details")));
        json_decref(j);
}

static void test_list_table(void **state)
{
        struct env *e = *state;
        const char *table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        json_t *j = NULL, *rows;

        assert_int_equal(kreq(e, "POST", NS_URL, NULL, NULL, web_json, NULL), 201);
        assert_int_equal(kreq(e, "POST", NS_URL, NULL, NULL,
                              "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                              "\"metadata\":{\"name\":\"db\",\"labels\":{\"app\":\"store\"}}}",
                              NULL),
                         201);
        assert_int_equal(kreq(e, "GET", NS_URL, NULL, NULL, NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "SessionList");
        assert_int_equal(json_array_size(json_object_get(j, "items")), 2);
        assert_non_null(sget(j, "metadata", "resourceVersion"));
        json_decref(j);
        assert_int_equal(kreq(e, "GET", NS_URL "?labelSelector=app%3Ddemo", NULL, NULL, NULL, &j),
                         200);
        assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
        assert_string_equal(
                sget(json_array_get(json_object_get(j, "items"), 0), "metadata", "name"), "web");
        json_decref(j);
        assert_int_equal(
                kreq(e, "GET",
                     "/apis/forklet.dev/v1alpha1/sessions?fieldSelector=metadata.name%3Ddb", NULL,
                     NULL, NULL, &j),
                200);
        assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
        json_decref(j);
        assert_int_equal(kreq(e, "GET", NS_URL "?fieldSelector=spec.x%3D1", NULL, NULL, NULL, &j),
                         400);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "BadRequest");
        json_decref(j);
        assert_int_equal(kreq(e, "GET", "/apis/forklet.dev/v1alpha1/namespaces/other/sessions",
                              NULL, NULL, NULL, &j),
                         200);
        assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
        json_decref(j);
        assert_int_equal(kreq(e, "GET", NS_URL, NULL, table, NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "Table");
        rows = json_object_get(j, "rows");
        assert_int_equal(json_array_size(rows), 2);
        json_decref(j);
        assert_int_equal(kreq(e, "GET", NS_URL "/db", NULL, table, NULL, &j), 200);
        assert_int_equal(json_array_size(json_object_get(j, "rows")), 1);
        json_decref(j);
        /* delete: then 404 */
        assert_int_equal(kreq(e, "DELETE", NS_URL "/db", NULL, NULL, NULL, &j), 200);
        json_decref(j);
        reconcile(e);
        assert_int_equal(kreq(e, "GET", NS_URL "/db", NULL, NULL, NULL, NULL), 404);
        assert_int_equal(kreq(e, "DELETE", NS_URL "/db", NULL, NULL, NULL, &j), 404);
        assert_string_equal(json_string_value(json_object_get(j, "message")),
                            "sessions.forklet.dev \"db\" not found");
        json_decref(j);
}

static char *watch_text(struct env *e, const char *rv)
{
        char url[256];
        struct kbuf b = {0};
        CURL *h = curl_easy_init();

        snprintf(url, sizeof(url),
                 "http://localhost" NS_URL "?watch=1&timeoutSeconds=2&resourceVersion=%s", rv);
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, e->sock);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kbuf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
        assert_int_equal(curl_easy_perform(h), CURLE_OK);
        curl_easy_cleanup(h);
        return b.data ? b.data : strdup("");
}

/* A watch from a list's resourceVersion sees what changed after it (the newest state of each
 * object: MODIFIED, then DELETED once gone), never the objects as they were (no ADDED), and
 * ends at timeoutSeconds; from 0 it starts with an ADDED per object. */
static void test_watch(void **state)
{
        struct env *e = *state;
        char rv[32], *text;
        json_t *j = NULL;

        assert_int_equal(kreq(e, "POST", NS_URL, NULL, NULL, web_json, NULL), 201);
        assert_int_equal(kreq(e, "GET", NS_URL, NULL, NULL, NULL, &j), 200);
        snprintf(rv, sizeof(rv), "%s", sget(j, "metadata", "resourceVersion"));
        json_decref(j);
        text = watch_text(e, rv);
        assert_string_equal(text, "");
        free(text);
        assert_int_equal(kreq(e, "PATCH", NS_URL "/web", "application/merge-patch+json", NULL,
                              "{\"metadata\":{\"labels\":{\"app\":\"v2\"}}}", NULL),
                         200);
        text = watch_text(e, rv);
        assert_non_null(strstr(text, "{\"type\":\"MODIFIED\""));
        assert_non_null(strstr(text, "\"app\":\"v2\""));
        assert_null(strstr(text, "\"ADDED\""));
        free(text);
        text = watch_text(e, "0");
        assert_non_null(strstr(text, "{\"type\":\"ADDED\""));
        free(text);
        assert_int_equal(kreq(e, "DELETE", NS_URL "/web", NULL, NULL, NULL, NULL), 200);
        reconcile(e);
        text = watch_text(e, rv);
        assert_non_null(strstr(text, "{\"type\":\"DELETED\""));
        free(text);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_discovery, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crud, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_table, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
