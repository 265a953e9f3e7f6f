/* SPDX-License-Identifier: MIT */
/* The OCI image store without a registry: a store dir laid out as a finished pull leaves it
 * (images/<hex>/, refs.json), then resolve, the image config, lookups, the list, removal and
 * the garbage collector (pinned images kept), and the cleanup of half-done pulls at start. */
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

#include "agent/image/image-internal.h"
#include "common/util.h"
#include "manifest/manifest.h"

#define HEX_A "aaaa0000000000000000000000000000000000000000000000000000000000a1"
#define HEX_B "bbbb0000000000000000000000000000000000000000000000000000000000b2"

struct fixture {
        char dir[64];
        struct node_config *cfg;
        struct agent_image_store *st;
};

static void put(const char *dir, const char *name, const char *text)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void make_image(const char *root, const char *hex, bool pinned)
{
        char dir[256], meta[256];

        snprintf(dir, sizeof(dir), "%s/state/oci/images/%s", root, hex);
        assert_true(fk_mkdir_p(dir, 0755) >= 0);
        put(dir, "rootfs.img", "x");
        put(dir, "config.json",
            "{\"Env\": [\"PATH=/bin\", \"A=1\"], \"WorkingDir\": \"/srv\", \"User\": \"app\", "
            "\"Entrypoint\": [\"/bin/sh\", \"-c\"], \"Cmd\": [\"echo hi\"]}");
        snprintf(meta, sizeof(meta), "{\"pinned\": %s, \"rootfsBytes\": 4096}",
                 pinned ? "true" : "false");
        put(dir, "image.json", meta);
}

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        struct manifest_diag d = {0};
        char *yaml = NULL, tmp[128];

        assert_non_null(f);
        strcpy(f->dir, "/tmp/fk-image-test-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        assert_true(fk_asprintf(&yaml,
                                "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\n"
                                "nodeName: n\nstateDir: %s/state\n"
                                "registries: [{host: \"127.0.0.1:5000\", insecure: true}]\n",
                                f->dir) >= 0);
        assert_int_equal(node_config_parse(yaml, strlen(yaml), "n.yaml", &f->cfg, &d), 0);
        free(yaml);
        make_image(f->dir, HEX_A, false);
        make_image(f->dir, HEX_B, true);
        /* a pull a crash interrupted */
        snprintf(tmp, sizeof(tmp), "%s/state/oci/tmp/pull.half", f->dir);
        assert_true(fk_mkdir_p(tmp, 0700) >= 0);
        assert_int_equal(agent_image_store_new(f->cfg, NULL, NULL, &f->st), 0);
        assert_int_equal(access(tmp, F_OK), -1);
        assert_int_equal(image_refs_set(f->st, "127.0.0.1:5000/a:1", "sha256:" HEX_A), 0);
        assert_int_equal(image_refs_set(f->st, "127.0.0.1:5000/b:1", "sha256:" HEX_B), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;

        agent_image_store_free(f->st);
        node_config_free(f->cfg);
        (void)fk_rm_rf(f->dir);
        free(f);
        return 0;
}

static void test_resolve_and_config(void **state)
{
        struct fixture *f = *state;
        struct agent_image_boot b = {0};
        struct agent_image_config c = {0};
        struct fk_error err = {0};
        char want[256];

        assert_int_equal(agent_image_resolve(f->st, "127.0.0.1:5000/a:1", &b, &err), 0);
        assert_string_equal(b.digest, "sha256:" HEX_A);
        snprintf(want, sizeof(want), "%s/state/oci/images/%s/rootfs.img", f->dir, HEX_A);
        assert_string_equal(b.rootfs, want);
        agent_image_boot_done(&b);
        /* by digest, without a reference entry */
        assert_int_equal(agent_image_resolve(f->st, "127.0.0.1:5000/x@sha256:" HEX_B, &b, &err), 0);
        assert_string_equal(b.digest, "sha256:" HEX_B);
        agent_image_boot_done(&b);
        /* a registry the node does not list: refused before anything is pulled */
        assert_int_equal(agent_image_resolve(f->st, "ghcr.io/a:1", &b, &err), -EPERM);
        assert_non_null(strstr(err.msg, "registry ghcr.io is not allowed on node n"));
        assert_null(agent_image_pull_json(f->st, "ghcr.io/a:1"));

        assert_int_equal(agent_image_config(f->st, "sha256:" HEX_A, &c), 0);
        assert_string_equal(c.env[1], "A=1");
        assert_null(c.env[2]);
        assert_string_equal(c.working_dir, "/srv");
        assert_string_equal(c.user, "app");
        assert_string_equal(c.command[0], "/bin/sh");
        assert_string_equal(c.command[2], "echo hi");
        assert_null(c.command[3]);
        agent_image_config_done(&c);
        assert_int_equal(agent_image_config(f->st, "sha256:" HEX_A "0", &c), -ENOENT);
}

static void test_find_list_remove(void **state)
{
        struct fixture *f = *state;
        char d[80];
        json_t *l;

        assert_int_equal(agent_image_find(f->st, "127.0.0.1:5000/b:1", d, sizeof(d)), 0);
        assert_string_equal(d, "sha256:" HEX_B);
        assert_int_equal(agent_image_find(f->st, "aaaa00000000", d, sizeof(d)), 0);
        assert_string_equal(d, "sha256:" HEX_A);
        assert_int_equal(agent_image_find(f->st, "sha256:bbbb00000000", d, sizeof(d)), 0);
        assert_int_equal(agent_image_find(f->st, "aaaa0000", d, sizeof(d)), -ENOENT); /* short */
        assert_int_equal(agent_image_find(f->st, "cccc00000000", d, sizeof(d)), -ENOENT);
        l = agent_image_list_json(f->st);
        assert_int_equal(json_array_size(l), 2);
        json_decref(l);
        assert_int_equal(agent_image_remove(f->st, "sha256:" HEX_B), 0);
        assert_int_equal(agent_image_remove(f->st, "sha256:" HEX_B), -ENOENT);
        assert_int_equal(agent_image_find(f->st, "127.0.0.1:5000/b:1", d, sizeof(d)), -ENOENT);
        l = agent_image_list_json(f->st);
        assert_int_equal(json_array_size(l), 1);
        assert_string_equal(json_string_value(json_array_get(
                                    json_object_get(json_array_get(l, 0), "references"), 0)),
                            "127.0.0.1:5000/a:1");
        json_decref(l);
}

static void test_gc(void **state)
{
        struct fixture *f = *state;
        char *in_use[] = {(char *)"sha256:" HEX_A, NULL};
        char d[80];

        /* used: kept; pinned (pulled by hand): kept */
        assert_int_equal(agent_image_gc(f->st, in_use), 0);
        /* nothing uses A any more: removed with its reference; B is pinned */
        assert_int_equal(agent_image_gc(f->st, NULL), 1);
        assert_int_equal(agent_image_find(f->st, "127.0.0.1:5000/a:1", d, sizeof(d)), -ENOENT);
        assert_int_equal(agent_image_find(f->st, "127.0.0.1:5000/b:1", d, sizeof(d)), 0);
        assert_int_equal(agent_image_gc(f->st, NULL), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_resolve_and_config, setup, teardown),
                cmocka_unit_test_setup_teardown(test_find_list_remove, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
