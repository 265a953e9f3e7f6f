/* SPDX-License-Identifier: MIT */
/* OCI references in spec.image: parsing, registry matching, the registries section of a node
 * config, lifecycle.runImageCommand, and the default images found under <stateDir>/images. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "manifest/manifest.h"
#include "tests/manifest/manifest-test-util.h"

#define HDR  "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"
#define NHDR "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\nnodeName: node-a\n"

static void check_ref(const char *s, const char *host, const char *repo, const char *tag,
                      const char *digest)
{
        struct oci_ref r;
        struct fk_error e = {0};
        char back[600];

        assert_int_equal(manifest_oci_ref_parse(s, &r, &e), 0);
        assert_string_equal(r.host, host);
        assert_string_equal(r.repo, repo);
        assert_string_equal(r.tag, tag);
        assert_string_equal(r.digest, digest);
        assert_int_equal(manifest_oci_ref_format(&r, back, sizeof(back)), 0);
        assert_true(manifest_oci_ref_parse(back, &r, NULL) == 0);
}

static void check_bad(const char *s, const char *want)
{
        struct oci_ref r;
        struct fk_error e = {0};

        assert_int_equal(manifest_oci_ref_parse(s, &r, &e), -EINVAL);
        if (!strstr(e.msg, want))
                fail_msg("%s: got \"%s\", want \"%s\"", s, e.msg, want);
}

static void test_ref_parse(void **state)
{
        const char *dg = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        char buf[200];

        (void)state;
        check_ref("127.0.0.1:5000/tools:1", "127.0.0.1:5000", "tools", "1", "");
        check_ref("ghcr.io/org/py/app:3.12-slim", "ghcr.io", "org/py/app", "3.12-slim", "");
        check_ref("GHCR.io/org/app", "ghcr.io", "org/app", "latest", "");
        check_ref("localhost/a_b.c-d", "localhost", "a_b.c-d", "latest", "");
        snprintf(buf, sizeof(buf), "ghcr.io/org/app@%s", dg);
        check_ref(buf, "ghcr.io", "org/app", "", dg);
        snprintf(buf, sizeof(buf), "ghcr.io/org/app:v2@%s", dg);
        check_ref(buf, "ghcr.io", "org/app", "v2", dg);
        assert_true(manifest_image_is_ref("ghcr.io/a"));
        assert_false(manifest_image_is_ref("minimal"));

        check_bad("minimal", "not an image reference");
        check_bad("library/busybox:1", "is not a registry host");
        check_bad("ghcr.io/Org/app", "invalid repository \"Org/app\"");
        check_bad("ghcr.io/a//b", "invalid repository");
        check_bad("ghcr.io/a-/b", "invalid repository");
        check_bad("ghcr.io/a:", "invalid tag \"\"");
        check_bad("ghcr.io/a:-x", "invalid tag");
        check_bad("ghcr.io/a@sha256:abc", "invalid digest");
        check_bad("ghcr.io:99999999/a", "is not a registry host");
        check_bad("ho st.io/a", "is not a registry host");
}

static struct node_config *load(const char *text, struct manifest_diag *d)
{
        struct node_config *c = NULL;

        (void)node_config_parse(text, strlen(text), "/etc/forklet/node.yaml", &c, d);
        return c;
}

static void test_registries(void **state)
{
        struct manifest_diag d = {0};
        struct node_config *c;
        struct fk_error e = {0};
        struct oci_ref r;

        (void)state;
        c = load(NHDR "registries:\n"
                      "  - {host: ghcr.io, authFile: auth/registry.json}\n"
                      "  - {host: \"127.0.0.1:5000\", insecure: true}\n",
                 &d);
        assert_non_null(c);
        assert_int_equal(c->n_registries, 2);
        assert_string_equal(c->registries[0].auth_file, "/etc/forklet/auth/registry.json");
        assert_false(c->registries[0].insecure);
        assert_true(c->registries[1].insecure);
        assert_ptr_equal(node_config_find_registry(c, "GHCR.IO"), &c->registries[0]);
        assert_null(node_config_find_registry(c, "127.0.0.1:5001"));
        assert_int_equal(manifest_check_image_ref(c, "127.0.0.1:5000/a:1", &r, &e), 0);
        assert_string_equal(r.tag, "1");
        assert_int_equal(manifest_check_image_ref(c, "quay.io/a:1", NULL, &e), -EPERM);
        assert_string_equal(e.msg, "registry quay.io is not allowed on node node-a (allowed: "
                                   "ghcr.io, 127.0.0.1:5000)");
        c = node_config_free(c);

        c = load(NHDR "registries: [{host: \"*\"}]\n", &d);
        assert_non_null(c);
        assert_ptr_equal(node_config_find_registry(c, "quay.io"), &c->registries[0]);
        c = node_config_free(c);

        /* no registries: every reference is refused, and the message says how to allow one */
        c = load(NHDR, &d);
        assert_non_null(c);
        assert_int_equal(manifest_check_image_ref(c, "quay.io/a:1", NULL, &e), -EPERM);
        assert_non_null(strstr(e.msg, "(allowed: none; list it under registries"));
        c = node_config_free(c);
}

static void test_registries_errors(void **state)
{
        static const char *const want[] = {
                "/etc/forklet/node.yaml:6:15: registries[0].insecure: plain HTTP is allowed for "
                "loopback registries only (127.0.0.0/8, localhost), not \"ghcr.io\": serve it "
                "over TLS",
                "/etc/forklet/node.yaml:7:12: registries[1].host: invalid registry host "
                "\"no_host\": expected HOST[:PORT] (a name with a '.', localhost or an IPv4 "
                "address) or \"*\" for any registry",
                "/etc/forklet/node.yaml:8:12: registries[2].host: duplicate registry "
                "\"GHCR.io\"",
                "/etc/forklet/node.yaml:9:18: registries[3].tls: unknown field \"tls\" (known: "
                "host, "
                "authFile, insecure)",
                "/etc/forklet/node.yaml:10:27: registries[4].insecure: plain HTTP is allowed for "
                "loopback registries only (127.0.0.0/8, localhost), not \"*\": serve it over TLS",
        };
        struct manifest_diag d = {0};
        const char *text = NHDR "registries:\n"
                                "  - host: ghcr.io\n"
                                "    insecure: true\n"
                                "  - {host: no_host}\n"
                                "  - {host: GHCR.io}\n"
                                "  - {host: a.io, tls: x}\n"
                                "  - {host: \"*\", insecure: true}\n";

        (void)state;
        assert_null(load(text, &d));
        mt_assert_diag(&d, want, sizeof(want) / sizeof(want[0]));
}

static void test_session_image_ref(void **state)
{
        struct manifest_diag d = {0};
        struct session_manifest *m = NULL;
        struct node_config *c;
        json_t *j;

        (void)state;
        c = load(NHDR "registries: [{host: \"127.0.0.1:5000\", insecure: true}]\n", &d);
        assert_non_null(c);
        assert_int_equal(mt_parse(HDR "metadata: {name: a}\nspec:\n  image: "
                                      "127.0.0.1:5000/tools:1\n  lifecycle: {runImageCommand: "
                                      "true}\n",
                                  c, &m, &d),
                         0);
        assert_string_equal(m->image, "127.0.0.1:5000/tools:1");
        assert_true(m->run_image_command);
        j = session_manifest_to_json(m);
        assert_true(json_is_true(json_object_get(
                json_object_get(json_object_get(j, "spec"), "lifecycle"), "runImageCommand")));
        json_decref(j);
        m = session_manifest_free(m);

        {
                static const char *const want[] = {
                        "t.yaml:5:10: spec.image: registry ghcr.io is not allowed on node "
                        "node-a (allowed: 127.0.0.1:5000)",
                };
                assert_int_equal(mt_parse(HDR "metadata: {name: a}\nspec:\n  image: "
                                              "ghcr.io/org/app:1\n",
                                          c, &m, &d),
                                 -EINVAL);
                mt_assert_diag(&d, want, 1);
        }
        {
                static const char *const want[] = {
                        "t.yaml:5:32: spec.lifecycle.runImageCommand: needs an OCI image "
                        "reference in spec.image (HOST/REPO:TAG), not the node image "
                        "\"minimal\"",
                };
                assert_int_equal(mt_parse(HDR "metadata: {name: a}\nspec:\n  lifecycle: "
                                              "{runImageCommand: true}\n",
                                          c, &m, &d),
                                 -EINVAL);
                mt_assert_diag(&d, want, 1);
        }
        node_config_free(c);
}

static void test_default_images(void **state)
{
        char dir[] = "/tmp/fk-oci-test.XXXXXX", path[256], *text = NULL;
        struct manifest_diag d = {0};
        struct node_config *c;

        (void)state;
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/images", dir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/images/debian", dir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/images/Bad_Name", dir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/images/python", dir);
        assert_int_equal(mkdir(path, 0755), 0);
        assert_true(fk_asprintf(&text, NHDR "stateDir: %s\n", dir) >= 0);
        c = load(text, &d);
        assert_non_null(c);
        assert_int_equal(c->n_images, 3);
        assert_string_equal(c->images[0].name, "minimal");
        assert_string_equal(c->images[1].name, "debian");
        assert_string_equal(c->images[2].name, "python");
        snprintf(path, sizeof(path), "%s/images/debian", dir);
        assert_string_equal(node_config_find_image(c, "debian")->dir, path);
        node_config_free(c);
        free(text);
        assert_true(fk_rm_rf(dir) >= 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ref_parse),         cmocka_unit_test(test_registries),
                cmocka_unit_test(test_registries_errors), cmocka_unit_test(test_session_image_ref),
                cmocka_unit_test(test_default_images),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
