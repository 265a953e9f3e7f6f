/* SPDX-License-Identifier: MIT */
/* Golden cases: tests/data/manifests/pass/NAME.yaml must render to NAME.json and fail/NAME.yaml
 * must print exactly their .err; every pass case and example round-trips YAML -> JSON -> struct and
 * JSON -> YAML -> struct. Set FORKLET_REGEN=1 to rewrite the expected files (then review!). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#define CASES "tests/data/manifests"

static struct node_config *cfg;

static int setup(void **state)
{
        const char *src = getenv("FORKLET_SOURCE_DIR");
        struct manifest_diag d = {0};

        (void)state;
        if (!src || chdir(src) < 0)
                return -1;
        if (node_config_load_file("examples/node.yaml", &cfg, &d) < 0) {
                for (size_t i = 0; i < d.n; i++)
                        fprintf(stderr, "%s\n", d.messages[i]);
                manifest_diag_done(&d);
                return -1;
        }
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        cfg = node_config_free(cfg);
        return 0;
}

static char *sibling(const char *yaml_path, const char *ext)
{
        char *p = NULL;
        size_t len = strlen(yaml_path) - strlen(".yaml");

        assert_true(fk_asprintf(&p, "%.*s%s", (int)len, yaml_path, ext) >= 0);
        return p;
}

/* Compares text with the expected file, or rewrites it under FORKLET_REGEN. */
static void check_golden(const char *path, const char *text)
{
        cleanup_free char *expected = NULL;

        if (getenv("FORKLET_REGEN")) {
                assert_int_equal(fk_write_file_atomic(path, text, strlen(text), 0644), 0);
                return;
        }
        if (fk_read_file(path, 1 << 20, &expected, NULL) < 0)
                fail_msg("missing expected file %s; got:\n%s", path, text);
        if (strcmp(expected, text) != 0)
                fail_msg("%s differs.\nexpected:\n%s\ngot:\n%s", path, expected, text);
}

static void roundtrip(const struct session_manifest *m, const char *what)
{
        json_t *j = session_manifest_to_json(m), *j2;
        struct session_manifest *back = NULL, **v = NULL;
        struct manifest_diag d = {0};
        cleanup_free char *yaml = NULL, *text = NULL;
        size_t n = 0;

        assert_non_null(j);
        /* struct -> JSON -> struct */
        assert_int_equal(session_manifest_from_json(j, cfg, &back, &d), 0);
        if (!session_manifest_equal(m, back))
                fail_msg("%s: JSON round trip differs", what);
        back = session_manifest_free(back);
        /* through JSON text */
        text = json_dumps(j, JSON_COMPACT);
        j2 = json_loads(text, 0, NULL);
        assert_non_null(j2);
        assert_int_equal(session_manifest_from_json(j2, cfg, &back, &d), 0);
        assert_true(session_manifest_equal(m, back));
        back = session_manifest_free(back);
        json_decref(j2);
        /* JSON -> YAML text -> struct */
        assert_int_equal(manifest_json_to_yaml(j, &yaml), 0);
        if (manifest_parse_sessions(yaml, strlen(yaml), "<yaml>", cfg, &v, &n, &d) < 0)
                fail_msg("%s: rendered YAML does not parse: %s\n%s", what,
                         d.n ? d.messages[0] : "?", yaml);
        assert_int_equal(n, 1);
        if (!session_manifest_equal(m, v[0]))
                fail_msg("%s: YAML round trip differs:\n%s", what, yaml);
        session_manifest_free(v[0]);
        free(v);
        json_decref(j);
        manifest_diag_done(&d);
}

static void run_pass_case(const char *path)
{
        struct session_manifest **v = NULL;
        struct manifest_diag d = {0};
        cleanup_free char *json_path = sibling(path, ".json"), *text = NULL, *with_nl = NULL;
        json_t *arr = json_array();
        size_t n = 0;
        int r;

        r = manifest_load_sessions_file(path, cfg, &v, &n, &d);
        if (r < 0)
                fail_msg("%s: %s", path, d.n ? d.messages[0] : strerror(-r));
        assert_true(n > 0);
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(v[i]->source, path);
                json_array_append_new(arr, session_manifest_to_json(v[i]));
                roundtrip(v[i], path);
                session_manifest_free(v[i]);
        }
        free(v);
        text = json_dumps(arr, JSON_INDENT(2));
        json_decref(arr);
        assert_non_null(text);
        assert_true(fk_asprintf(&with_nl, "%s\n", text) >= 0);
        check_golden(json_path, with_nl);
}

static size_t for_each(const char *pattern, void (*fn)(const char *))
{
        glob_t g;
        size_t n;

        assert_int_equal(glob(pattern, 0, NULL, &g), 0);
        for (size_t i = 0; i < g.gl_pathc; i++)
                fn(g.gl_pathv[i]);
        n = g.gl_pathc;
        globfree(&g);
        return n;
}

static void test_pass_cases(void **state)
{
        (void)state;
        assert_true(for_each(CASES "/pass/*.yaml", run_pass_case) >= 12);
}

static void run_fail_case(const char *path)
{
        struct session_manifest **v = NULL;
        struct manifest_diag d = {0};
        cleanup_free char *err_path = sibling(path, ".err");
        char *text = NULL;
        size_t n = 0, len = 0;
        FILE *f = open_memstream(&text, &len);
        int r;

        assert_non_null(f);
        r = manifest_load_sessions_file(path, cfg, &v, &n, &d);
        if (r != -EINVAL)
                fail_msg("%s: expected -EINVAL, got %d", path, r);
        assert_true(d.n > 0);
        for (size_t i = 0; i < d.n; i++)
                fprintf(f, "%s\n", d.messages[i]);
        fclose(f);
        check_golden(err_path, text);
        free(text);
        manifest_diag_done(&d);
}

static void test_fail_cases(void **state)
{
        (void)state;
        assert_true(for_each(CASES "/fail/*.yaml", run_fail_case) >= 30);
}

static void run_example(const char *path)
{
        struct session_manifest **v = NULL;
        struct node_config *c = NULL;
        struct manifest_diag d = {0};
        size_t n = 0;

        if (node_config_load_file(path, &c, &d) == 0) {
                node_config_free(c);
                return; /* the node config, not a session */
        }
        manifest_diag_done(&d);
        if (manifest_load_sessions_file(path, cfg, &v, &n, &d) < 0)
                fail_msg("%s: %s", path, d.n ? d.messages[0] : "?");
        for (size_t i = 0; i < n; i++) {
                roundtrip(v[i], path);
                session_manifest_free(v[i]);
        }
        free(v);
}

static void test_examples(void **state)
{
        (void)state;
        assert_true(for_each("examples/*.yaml", run_example) >= 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pass_cases),
                cmocka_unit_test(test_fail_cases),
                cmocka_unit_test(test_examples),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
