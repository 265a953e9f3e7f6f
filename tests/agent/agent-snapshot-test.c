/* SPDX-License-Identifier: MIT */
/* Filesystem snapshots once taken, through the REST API of a daemon with the fake VM backend:
 * list and inspect per namespace, and a delete refused while a qcow2 under a session's disk/ or
 * origin/ (made with qemu-img over the snapshot's disk) or a restored session not booted yet has
 * the snapshot at its bottom; then done, and its files gone. An OCI image a snapshot's spec names
 * stays while the snapshot does. */
#include "agent/image/image-internal.h"
#include "tests/lib/agent-harness.h"

#include <unistd.h>

#define SNAP_A "snap_00aa"
#define SNAP_B "snap_00bb"

/* stateDir/snapshots/ID: a qcow2 and the meta.json of a snapshot of session ns/web, whose spec
 * names image. */
static void make_snapshot_of(struct env *e, const char *id, const char *ns, const char *image)
{
        cleanup_free char *dir = NULL, *meta = NULL, *text = NULL, *cmd = NULL;

        assert_true(fk_asprintf(&dir, "%s/state/snapshots/%s", e->dir, id) > 0);
        assert_int_equal(fk_mkdir_p(dir, 0700), 0);
        assert_true(fk_asprintf(&cmd, "qemu-img create -q -f qcow2 %s/disk.qcow2 16M", dir) > 0);
        assert_int_equal(system(cmd), 0);
        assert_true(fk_asprintf(&meta, "%s/meta.json", dir) > 0);
        assert_true(fk_asprintf(&text,
                                "{\"id\": \"%s\", \"session\": \"%s.web\", \"createdNs\": %llu, "
                                "\"manifest\": {\"apiVersion\": \"forklet.dev/v1alpha1\", "
                                "\"kind\": \"Session\", \"metadata\": {\"name\": \"web\", "
                                "\"namespace\": \"%s\"}, \"spec\": {\"sizeClass\": \"small\", "
                                "\"image\": \"%s\"}}}",
                                id, ns, (unsigned long long)T0_NS, ns, image) > 0);
        assert_int_equal(fk_write_file_atomic(meta, text, strlen(text), 0600), 0);
}

static void make_snapshot(struct env *e, const char *id, const char *ns)
{
        make_snapshot_of(e, id, ns, "minimal");
}

/* stateDir/sessions/KEY/SUB/NAME: a qcow2 over snapshot id's disk; *ret its path (heap). */
static void make_layer(struct env *e, const char *key, const char *sub, const char *name,
                       const char *id, char **ret)
{
        cleanup_free char *dir = NULL, *cmd = NULL;

        assert_true(fk_asprintf(&dir, "%s/state/sessions/%s/%s", e->dir, key, sub) > 0);
        assert_int_equal(fk_mkdir_p(dir, 0700), 0);
        assert_true(fk_asprintf(ret, "%s/%s", dir, name) > 0);
        assert_true(fk_asprintf(&cmd,
                                "qemu-img create -q -f qcow2 -F qcow2 -b "
                                "%s/state/snapshots/%s/disk.qcow2 %s",
                                e->dir, id, *ret) > 0);
        assert_int_equal(system(cmd), 0);
}

/* The message of an error reply. */
static const char *message(json_t *j)
{
        return json_string_value(json_object_get(j, "message"));
}

static void test_list_inspect(void **state)
{
        struct env *e = *state;
        cleanup_free char *layer = NULL;
        json_t *j = NULL, *it;

        make_snapshot(e, SNAP_A, "default");
        make_snapshot(e, SNAP_B, "other");
        make_layer(e, "default.child", "disk", "workspace-1.qcow2", SNAP_A, &layer);

        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/snapshots", NULL, &j),
                         200);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "SnapshotList");
        assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
        it = json_array_get(json_object_get(j, "items"), 0);
        assert_string_equal(json_string_value(json_object_get(it, "id")), SNAP_A);
        assert_string_equal(json_string_value(json_object_get(it, "session")), "web");
        assert_string_equal(json_string_value(json_object_get(it, "namespace")), "default");
        assert_string_equal(json_string_value(json_object_get(it, "created")),
                            "2026-11-29T00:00:00Z");
        assert_string_equal(json_string_value(json_object_get(it, "image")), "minimal");
        assert_true(json_integer_value(json_object_get(it, "sizeBytes")) > 0);
        assert_int_equal(json_array_size(json_object_get(it, "usedBy")), 1);
        assert_string_equal(json_string_value(json_array_get(json_object_get(it, "usedBy"), 0)),
                            "default/child");
        json_decref(j);

        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/other/snapshots/" SNAP_B, NULL, &j), 200);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "Snapshot");
        assert_int_equal(json_array_size(json_object_get(j, "usedBy")), 0);
        json_decref(j);
        /* another namespace's snapshot is not found here */
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_B, NULL, &j), 404);
        assert_non_null(strstr(message(j), "snapshot " SNAP_B " not found in namespace default"));
        json_decref(j);
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/snapshots/ck_00aa", NULL, &j), 400);
        assert_non_null(strstr(message(j), "not a snapshot id"));
        json_decref(j);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/namespaces/default/snapshots", "{}", &j),
                         405);
        json_decref(j);
}

static void test_delete(void **state)
{
        struct env *e = *state;
        cleanup_free char *overlay = NULL, *origin = NULL, *dir = NULL;
        json_t *j = NULL;

        make_snapshot(e, SNAP_A, "default");
        make_layer(e, "default.child", "disk", "workspace-1.qcow2", SNAP_A, &overlay);
        /* a fork's origin/ link of a checkpoint layer over the restored session's disk */
        make_layer(e, "default.child-fork-0", "origin", "layer-ck_01.qcow2", SNAP_A, &origin);
        assert_true(fk_asprintf(&dir, "%s/state/snapshots/" SNAP_A, e->dir) > 0);

        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j),
                409);
        /* in the order the session dirs are read */
        assert_true(strstr(message(j), "default/child, default/child-fork-0:") ||
                    strstr(message(j), "default/child-fork-0, default/child:"));
        json_decref(j);
        assert_int_equal(unlink(overlay), 0);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j),
                409);
        assert_non_null(strstr(message(j), "under the disks of default/child-fork-0:"));
        json_decref(j);
        assert_int_equal(access(dir, F_OK), 0);
        assert_int_equal(unlink(origin), 0);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j),
                200);
        assert_string_equal(json_string_value(json_object_get(j, "id")), SNAP_A);
        json_decref(j);
        assert_int_equal(access(dir, F_OK), -1);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j),
                404);
        json_decref(j);
}

static void test_restored_not_booted(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;

        make_snapshot(e, SNAP_A, "default");
        assert_int_equal(req(e, "POST", "/api/v1alpha1/namespaces/default/sessions/web2/restore",
                             "{\"snapshot\": \"" SNAP_A "\"}", &j),
                         201);
        json_decref(j);
        /* no reconcile: web2 has no disk yet, its record names the snapshot */
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j),
                409);
        assert_non_null(strstr(message(j), "default/web2"));
        json_decref(j);
        assert_int_equal(
                req(e, "GET", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j), 200);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "usedBy"), 0)),
                            "default/web2");
        json_decref(j);
}

static void test_restore_after_delete(void **state)
{
        struct env *e = *state;
        json_t *j = NULL;

        make_snapshot(e, SNAP_A, "default");
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j),
                200);
        json_decref(j);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/namespaces/default/sessions/web3/restore",
                             "{\"snapshot\": \"" SNAP_A "\"}", &j),
                         404);
        assert_non_null(strstr(message(j), "not found"));
        json_decref(j);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/web3", NULL, &j),
                         404);
        json_decref(j);
}

#define IMAGE_HEX "aaaa0000000000000000000000000000000000000000000000000000000000a1"
#define IMAGE_REF "127.0.0.1:5000/app:1"

/* An OCI image a snapshot's spec names by reference is in use while the snapshot is there:
 * its removal is refused naming the snapshot, and done once the snapshot is deleted. */
static void test_image_used_by_snapshot(void **state)
{
        struct env *e = *state;
        cleanup_free char *dir = NULL;
        json_t *j = NULL;

        assert_true(fk_asprintf(&dir, "%s/state/oci/images/" IMAGE_HEX, e->dir) > 0);
        assert_int_equal(fk_mkdir_p(dir, 0700), 0);
        for (const char *const *f =
                     (const char *const[]){"rootfs.img", "config.json", "image.json", NULL};
             *f; f++) {
                cleanup_free char *p = NULL;
                const char *text = strcmp(*f, "rootfs.img") == 0 ? "x" : "{}";

                assert_true(fk_asprintf(&p, "%s/%s", dir, *f) > 0);
                assert_int_equal(fk_write_file_atomic(p, text, strlen(text), 0600), 0);
        }
        assert_int_equal(image_refs_set(agent_daemon_images(e->d), IMAGE_REF, "sha256:" IMAGE_HEX),
                         0);
        make_snapshot_of(e, SNAP_A, "default", IMAGE_REF);
        make_snapshot(e, SNAP_B, "default");
        /* the whole digest, as an API client has it from the image list */
        assert_int_equal(req(e, "DELETE", "/api/v1alpha1/images/sha256:" IMAGE_HEX, NULL, &j), 409);
        assert_non_null(strstr(message(j), "in use by snapshot " SNAP_A ":"));
        json_decref(j);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/snapshots/" SNAP_A, NULL, &j),
                200);
        json_decref(j);
        assert_int_equal(req(e, "DELETE", "/api/v1alpha1/images/" IMAGE_HEX, NULL, &j), 200);
        json_decref(j);
        assert_int_equal(access(dir, F_OK), -1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_list_inspect, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restored_not_booted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restore_after_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_image_used_by_snapshot, setup, teardown),
        };

        if (system("command -v qemu-img >/dev/null") != 0) {
                fprintf(stderr, "qemu-img not installed\n");
                return 77;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
