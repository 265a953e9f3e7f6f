/* SPDX-License-Identifier: MIT */
/* Apply with a YAML body (Content-Type: application/yaml, what the Python client sends): the
 * manifest parser's line:column errors, one document per request, and the same apply results
 * as JSON. Over the real unix socket with the fake VM backend. */
#include "tests/lib/agent-harness.h"

#include <string.h>
#include <strings.h>

static const char hello_yaml[] = "apiVersion: forklet.dev/v1alpha1\n"
                                 "kind: Session\n"
                                 "metadata: {name: hello}\n"
                                 "spec:\n"
                                 "  sizeClass: small\n"
                                 "  env: {GREETING: hi}\n";

struct reply {
        char body[4096];
        size_t size;
        char apply[32]; /* X-Forklet-Apply */
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
        struct reply *r = ud;
        size_t n = size * nmemb, room = sizeof(r->body) - 1 - r->size;

        memcpy(r->body + r->size, data, n < room ? n : room);
        r->size += n < room ? n : room;
        r->body[r->size] = '\0';
        return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
        struct reply *r = ud;
        size_t n = size * nmemb, k = strlen("X-Forklet-Apply: ");

        if (n > k && strncasecmp(data, "X-Forklet-Apply: ", k) == 0)
                snprintf(r->apply, sizeof(r->apply), "%.*s", (int)strcspn(data + k, "\r\n"),
                         data + k);
        return n;
}

/* One request with a body of the given Content-Type; *ret gets the parsed reply if asked. */
static long send_body(struct env *e, const char *method, const char *path, const char *ctype,
                      const char *body, json_t **ret, struct reply *rep)
{
        char line[128], url[512];
        struct curl_slist *hdr = NULL;
        CURL *h = curl_easy_init();
        long status = 0;

        assert_non_null(h);
        memset(rep, 0, sizeof(*rep));
        snprintf(line, sizeof(line), "Content-Type: %s", ctype);
        hdr = curl_slist_append(NULL, line);
        snprintf(url, sizeof(url), "http://localhost%s", path);
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, e->cli.socket);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, rep);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, rep);
        assert_int_equal(curl_easy_perform(h), CURLE_OK);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdr);
        if (ret)
                assert_non_null(*ret = json_loads(rep->body, 0, NULL));
        return status;
}

static const char *message_of(json_t *j)
{
        return json_string_value(json_object_get(j, "message"));
}

static void test_yaml_apply(void **state)
{
        struct env *e = *state;
        struct reply rep;
        json_t *j = NULL;

        assert_int_equal(send_body(e, "POST", "/api/v1alpha1/sessions", "application/yaml",
                                   hello_yaml, &j, &rep),
                         201);
        assert_string_equal(rep.apply, "created");
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(j, "spec"), "env"), "GREETING")),
                "hi");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(j, "metadata"), "namespace")),
                "default");
        json_decref(j);
        /* the same document again, with a media-type parameter: unchanged */
        assert_int_equal(send_body(e, "POST", "/api/v1alpha1/sessions",
                                   "application/yaml; charset=utf-8", hello_yaml, NULL, &rep),
                         200);
        assert_string_equal(rep.apply, "unchanged");
        /* PUT on the session's own path, as application/x-yaml */
        assert_int_equal(send_body(e, "PUT", "/api/v1alpha1/namespaces/default/sessions/hello",
                                   "application/x-yaml", hello_yaml, NULL, &rep),
                         200);
        assert_string_equal(rep.apply, "unchanged");
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_string_equal(phase_of(j), "Running");
        json_decref(j);
}

static void test_yaml_errors(void **state)
{
        struct env *e = *state;
        struct reply rep;
        json_t *j = NULL;

        /* the manifest parser's message: source "manifest", line and column of the value */
        assert_int_equal(send_body(e, "POST", "/api/v1alpha1/sessions", "application/yaml",
                                   "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"
                                   "metadata: {name: x}\nspec:\n  sizeClass: huge\n",
                                   &j, &rep),
                         422);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "Invalid");
        assert_non_null(strstr(message_of(j), "manifest:5:14: spec.sizeClass"));
        assert_non_null(strstr(message_of(j), "huge"));
        json_decref(j);
        /* broken YAML */
        assert_int_equal(send_body(e, "POST", "/api/v1alpha1/sessions", "text/yaml",
                                   "metadata: {name: [\n", &j, &rep),
                         422);
        assert_non_null(strstr(message_of(j), "manifest:"));
        json_decref(j);
        /* two documents: one per request */
        assert_int_equal(send_body(e, "POST", "/api/v1alpha1/sessions", "application/yaml",
                                   "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"
                                   "metadata: {name: a}\n---\napiVersion: forklet.dev/v1alpha1\n"
                                   "kind: Session\nmetadata: {name: b}\n",
                                   &j, &rep),
                         400);
        assert_non_null(strstr(message_of(j), "exactly one Session document (this one has 2)"));
        json_decref(j);
        /* the URL's name still has to match the document's */
        assert_int_equal(send_body(e, "PUT", "/api/v1alpha1/namespaces/default/sessions/other",
                                   "application/yaml", hello_yaml, &j, &rep),
                         400);
        assert_non_null(strstr(message_of(j), "metadata.name does not match the URL"));
        json_decref(j);
        /* YAML sent as JSON is still a JSON error */
        assert_int_equal(send_body(e, "POST", "/api/v1alpha1/sessions", "application/json",
                                   hello_yaml, &j, &rep),
                         400);
        assert_non_null(strstr(message_of(j), "invalid JSON"));
        json_decref(j);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/sessions", NULL, &j), 200);
        assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_yaml_apply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_yaml_errors, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
