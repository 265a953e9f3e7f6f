/* SPDX-License-Identifier: MIT */
/* manifest_yaml_locate / manifest_json_diag_relocate: field paths of validation messages back
 * to YAML positions (documents, nested maps, list items, label keys with dots, flow style, a
 * field that is absent), and the message rewrite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/manifest.h"

static const char yaml[] = "apiVersion: forklet.dev/v1alpha1\n" /* 1 */
                           "kind: Session\n"                    /* 2 */
                           "metadata: {name: a}\n"              /* 3 */
                           "spec:\n"                            /* 4 */
                           "  image: minimal\n"                 /* 5 */
                           "---\n"                              /* 6 */
                           "apiVersion: forklet.dev/v1alpha1\n" /* 7 */
                           "kind: Session\n"                    /* 8 */
                           "metadata:\n"                        /* 9 */
                           "  name: b\n"                        /* 10 */
                           "  labels:\n"                        /* 11 */
                           "    app.kubernetes.io/name: web\n"  /* 12 */
                           "spec:\n"                            /* 13 */
                           "  sizeClass: huge\n"                /* 14 */
                           "  egress:\n"                        /* 15 */
                           "    - api.github.test\n"            /* 16 */
                           "    - other.test:8080\n"            /* 17 */
                           "  ports: [8080, 9090]\n";           /* 18 */

static void expect_at(size_t doc, const char *path, unsigned line, unsigned col)
{
        unsigned l = 0, c = 0;

        assert_int_equal(manifest_yaml_locate(yaml, strlen(yaml), doc, path, &l, &c), 0);
        if (l != line || c != col)
                fail_msg("%s in document %zu: %u:%u, wanted %u:%u", path, doc, l, c, line, col);
}

static void test_locate(void **state)
{
        unsigned l, c;

        (void)state;
        expect_at(0, "spec.image", 5, 10);
        expect_at(1, "spec.sizeClass", 14, 14);
        expect_at(1, "metadata.name", 10, 9);
        expect_at(1, "metadata.labels.app.kubernetes.io/name", 12, 29);
        expect_at(1, "spec.egress[1]", 17, 7);
        expect_at(1, "spec.ports[1]", 18, 17);
        /* absent: the deepest ancestor present */
        expect_at(0, "spec.sizeClass", 5, 3);
        expect_at(1, "spec.egress[7]", 16, 5);
        expect_at(1, "", 7, 1);
        assert_int_equal(manifest_yaml_locate(yaml, strlen(yaml), 2, "spec", &l, &c), -ENOENT);
}

static void test_relocate(void **state)
{
        char *out = NULL;

        (void)state;
        assert_int_equal(manifest_json_diag_relocate(
                                 "<json>: spec.sizeClass: unknown class \"huge\" (known: small)",
                                 yaml, strlen(yaml), 1, "web.yaml", &out),
                         0);
        assert_string_equal(out, "web.yaml:14:14: spec.sizeClass: unknown class \"huge\" (known: "
                                 "small)");
        free(out);
        /* no field path: the document's start */
        assert_int_equal(manifest_json_diag_relocate("<json>: no room: node is full", yaml,
                                                     strlen(yaml), 1, "web.yaml", &out),
                         0);
        assert_string_equal(out, "web.yaml:7:1: no room: node is full");
        free(out);
        assert_int_equal(manifest_json_diag_relocate("capacity: full", yaml, strlen(yaml), 0,
                                                     "web.yaml", &out),
                         -EINVAL);
        assert_int_equal(manifest_json_diag_relocate("<json>: spec: x", yaml, strlen(yaml), 5,
                                                     "web.yaml", &out),
                         -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_locate),
                cmocka_unit_test(test_relocate),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
