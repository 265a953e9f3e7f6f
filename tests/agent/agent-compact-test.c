/* SPDX-License-Identifier: MIT */
/* Live disk compaction's pure decisions (agent/disk: onto which layer a chain is streamed, whether
 * a stream is long enough for a waiting request to cancel it, the backing name the top then
 * records) and, over real qcow2 chains made with qemu-img in a temp dir, what a chain holds and
 * which checkpoint layers are freed (agent_checkpoint_free_layers: a layer goes once its checkpoint
 * is gone and no chain, live or a remaining checkpoint's, names it). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/daemon/daemon-internal.h"
#include "agent/disk/disk.h"
#include "common/cleanup.h"
#include "common/util.h"

static void test_stream_base(void **state)
{
        static const uint64_t k = 1024, m = 1024 * 1024;
        /* the chains' allocated bytes, top first, bottom last (its size never matters); ck: right
         * after a checkpoint of the VM */
        static const struct {
                uint64_t alloc[8];
                size_t n;
                unsigned max;
                bool ck;
                size_t base;
        } cases[] = {
                {{0}, 1, 2, true, 0},                   /* a raw disk alone */
                {{196 * k, 0}, 2, 2, true, 0},          /* base + the overlay */
                {{196 * k, 196 * k, 0}, 3, 2, true, 2}, /* a small frozen layer: onto the bottom */
                {{196 * k, 3 * m, 0}, 3, 2, true, 2},   /* ... all of it less than 4 MiB */
                {{196 * k, 64 * m, 0}, 3, 2, true, 0},  /* a large one stays: the anchor */
                /* a fork's or a rollback's new chain over the checkpoint's small layer, which
                 * other forks share: left as it is until this VM's own checkpoints */
                {{196 * k, 196 * k, 0}, 3, 2, false, 0},
                {{196 * k, 196 * k, 196 * k, 0}, 4, 2, false, 3},
                {{196 * k, 1 * m, 64 * m, 0}, 4, 2, true, 2},  /* onto the anchor: copies 1 MiB */
                {{196 * k, 1 * m, 64 * m, 0}, 4, 2, false, 2}, /* the same after a restart */
                {{196 * k, 16 * m, 64 * m, 0}, 4, 2, true, 3}, /* a quarter above: the bottom */
                {{196 * k, 15 * m, 64 * m, 0}, 4, 2, true, 2}, /* just under a quarter */
                {{196 * k, 2 * m, 3 * m, 0}, 4, 2, true, 3},   /* an anchor under 4 MiB */
                {{9 * m, 1 * m, 1 * m, 64 * m, 0}, 5, 2, true, 3}, /* cut streams grew it */
                {{0, 1 * m, 1 * m, 1 * m, 1 * m, 1 * m, 64 * m, 0}, 8, 2, true, 6},
                /* the top's own bytes are never copied nor counted */
                {{1024 * m, 1 * m, 64 * m, 0}, 4, 2, true, 2},
                /* a bound of one layer: no anchor, always onto the bottom */
                {{196 * k, 64 * m, 0}, 3, 1, true, 2},
                {{196 * k, 1 * m, 64 * m, 0}, 4, 1, true, 3},
                /* a wider bound: streams onto the anchor only beyond it */
                {{196 * k, 1 * m, 64 * m, 0}, 4, 4, true, 0},
                {{196 * k, 1 * m, 1 * m, 1 * m, 1 * m, 64 * m, 0}, 7, 4, true, 5},
                {{196 * k, 196 * k, 196 * k, 0}, 4, 4, true, 3}, /* small: onto the bottom anyway */
                {{196 * k, 196 * k, 196 * k, 0}, 4, 4, false, 0},
                {{196 * k, 64 * m, 64 * m, 0}, 4, 0, true, 0}, /* 0: off */
                {{196 * k, 196 * k, 196 * k, 0}, 4, 0, true, 0},
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                size_t got = agent_disk_stream_base(cases[i].alloc, cases[i].n, cases[i].max,
                                                    cases[i].ck);

                if (got != cases[i].base)
                        fail_msg("case %zu: base %zu, want %zu", i, got, cases[i].base);
        }
        /* what the daemon's bound leaves after a stream onto the anchor is within it */
        assert_true(AGENT_DISK_LIVE_MAX_LAYERS >= 2);
}

static void test_stream_outlasts(void **state)
{
        static const uint64_t ms = 1000000, mib = 1048576;
        static const struct {
                uint64_t elapsed, done, len;
                bool outlasts;
        } cases[] = {
                {100 * ms, 0, 1024 * mib, false},         /* nothing copied yet: give it time */
                {250 * ms, 0, 1024 * mib, true},          /* ... but not more than the wait */
                {300 * ms, 768 * mib, 1024 * mib, false}, /* 100 ms left: waited for */
                {300 * ms, 256 * mib, 1024 * mib, true},  /* 900 ms left */
                {1000 * ms, 1 * mib, 1024 * mib, true},   /* a throttled stream: minutes */
                {10 * ms, 1024 * mib, 1024 * mib, false}, /* done */
                {300 * ms, 2048 * mib, 1024 * mib, true}, /* nonsense progress: by time only */
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                assert_int_equal(agent_disk_stream_outlasts(cases[i].elapsed, cases[i].done,
                                                            cases[i].len, 250 * ms),
                                 cases[i].outlasts);
}

static void test_backing_name(void **state)
{
        static const struct {
                const char *path, *backing, *want;
        } cases[] = {
                /* a layer beside the top: its bare name, as qemu-img create -b got it */
                {"/s/sessions/a/disk/workspace-3.qcow2", "/s/sessions/a/disk/layer-ck_1.qcow2",
                 "layer-ck_1.qcow2"},
                /* the image's base (another dir): the path as given */
                {"/s/sessions/a/disk/workspace-3.qcow2", "/img/minimal/workspace.img",
                 "/img/minimal/workspace.img"},
                /* a snapshot's standalone disk, below stateDir */
                {"/s/sessions/a/disk/workspace-0.qcow2", "/s/snapshots/snap_1/disk.qcow2",
                 "/s/snapshots/snap_1/disk.qcow2"},
                /* a directory whose name begins like the top's is another directory */
                {"/s/disk/w.qcow2", "/s/disk2/b.qcow2", "/s/disk2/b.qcow2"},
                {"/s/disk/w.qcow2", "/s/disk/sub/b.qcow2", "/s/disk/sub/b.qcow2"},
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *name = NULL;

                assert_int_equal(agent_disk_backing_name(cases[i].path, cases[i].backing, &name),
                                 0);
                assert_string_equal(name, cases[i].want);
                free(name);
        }
}

/* The temp dir of the running test, removed by teardown even when an assertion failed. */
static char temp_root[64];

static int teardown(void **state)
{
        (void)state;
        if (temp_root[0])
                (void)fk_rm_rf(temp_root);
        temp_root[0] = '\0';
        return 0;
}

/* A session state dir in a temp dir: sd/disk holds base.img's chain. */
struct fixture {
        char root[64];
        char sd[128], disk[160], base[200];
};

static char *path_in(const struct fixture *f, const char *name)
{
        char *p = NULL;

        assert_true(fk_asprintf(&p, "%s/%s", f->disk, name) >= 0);
        return p;
}

/* The layer of checkpoint id: top gets the name layer-ID (as disk_prepare links it), a new
 * overlay over it becomes the top (*top replaced). */
static void freeze(const struct fixture *f, const char *id, char **top)
{
        char *layer = NULL, *next = NULL, name[64];
        struct fk_error err = {0};
        static unsigned n = 1;

        snprintf(name, sizeof(name), "layer-%s.qcow2", id);
        layer = path_in(f, name);
        snprintf(name, sizeof(name), "workspace-%u.qcow2", n++);
        next = path_in(f, name);
        assert_int_equal(link(*top, layer), 0);
        assert_int_equal(agent_disk_create_overlay(next, layer, &err), 0);
        assert_int_equal(unlink(*top), 0);
        free(*top);
        free(layer);
        *top = next;
}

static void add_checkpoint(const struct fixture *f, const char *id, unsigned created)
{
        char dir[256], meta[320], text[512];
        FILE *fp;

        snprintf(dir, sizeof(dir), "%s/checkpoints/%s", f->sd, id);
        assert_int_equal(fk_mkdir_p(dir, 0700), 0);
        snprintf(meta, sizeof(meta), "%s/meta.json", dir);
        snprintf(text, sizeof(text),
                 "{\"id\": \"%s\", \"createdNs\": %u, \"disk\": \"%s/layer-%s.qcow2\"}", id,
                 created, f->disk, id);
        assert_non_null(fp = fopen(meta, "w"));
        fputs(text, fp);
        fclose(fp);
}

static bool exists(const struct fixture *f, const char *name)
{
        char *p = path_in(f, name);
        bool yes = access(p, F_OK) == 0;

        free(p);
        return yes;
}

static void test_chains_and_freeing(void **state)
{
        struct fixture f = {0};
        struct fk_error err = {0};
        char *top = NULL, **files = NULL, **unused = NULL, *stray = NULL, *ck = NULL;
        size_t n = 0;
        FILE *fp;

        (void)state;
        if (system("qemu-img --version >/dev/null 2>&1") != 0)
                skip();
        snprintf(f.root, sizeof(f.root), "/tmp/fk-compact-test-XXXXXX");
        assert_non_null(mkdtemp(f.root));
        snprintf(temp_root, sizeof(temp_root), "%s", f.root);
        snprintf(f.sd, sizeof(f.sd), "%s/sessions/default.web", f.root);
        snprintf(f.disk, sizeof(f.disk), "%s/disk", f.sd);
        snprintf(f.base, sizeof(f.base), "%s/workspace.img", f.root);
        assert_int_equal(fk_mkdir_p(f.disk, 0700), 0);
        assert_non_null(fp = fopen(f.base, "w"));
        assert_int_equal(ftruncate(fileno(fp), 16 << 20), 0);
        fclose(fp);
        top = path_in(&f, "workspace-0.qcow2");
        assert_int_equal(agent_disk_create_overlay(top, f.base, &err), 0);

        /* checkpoints ck_01, ck_02 over the base; a stray layer beside them (over the base) */
        freeze(&f, "ck_01", &top);
        add_checkpoint(&f, "ck_01", 1);
        freeze(&f, "ck_02", &top);
        add_checkpoint(&f, "ck_02", 2);
        stray = path_in(&f, "layer-ck_09.qcow2");
        assert_int_equal(agent_disk_create_overlay(stray, f.base, &err), 0);

        assert_int_equal(agent_disk_chain_files(top, &files, &n), 0);
        assert_int_equal(n, 4);
        assert_string_equal(files[0], top);
        assert_non_null(strstr(files[1], "/disk/layer-ck_02.qcow2"));
        assert_non_null(strstr(files[2], "/disk/layer-ck_01.qcow2"));
        assert_string_equal(files[3], f.base);
        files = fk_strv_free(files);

        assert_int_equal(agent_disk_unused_layers(f.disk, (const char *const *)&top, 1, &unused),
                         0);
        assert_int_equal(fk_strv_length(unused), 1);
        assert_string_equal(unused[0], stray);
        unused = fk_strv_free(unused);

        /* what a stream leaves: the top names the bottom (its header rewritten) */
        {
                char cmd[1024];

                snprintf(cmd, sizeof(cmd), "qemu-img rebase -u -f qcow2 -b '%s' -F raw '%s'",
                         f.base, top);
                assert_int_equal(system(cmd), 0);
        }
        assert_int_equal(agent_disk_chain_files(top, &files, &n), 0);
        assert_int_equal(n, 2);
        files = fk_strv_free(files);
        assert_int_equal(agent_disk_unused_layers(f.disk, (const char *const *)&top, 1, &unused),
                         0);
        assert_int_equal(fk_strv_length(unused), 3);
        unused = fk_strv_free(unused);

        /* a checkpoint being taken (.ID.partial) keeps its layer */
        assert_true(fk_asprintf(&ck, "%s/checkpoints/.ck_05.partial", f.sd) >= 0);
        assert_int_equal(fk_mkdir_p(ck, 0700), 0);
        free(stray);
        stray = path_in(&f, "layer-ck_05.qcow2");
        assert_int_equal(agent_disk_create_overlay(stray, f.base, &err), 0);

        /* ck_09's checkpoint is gone and nothing names its layer: freed; ck_01's and ck_02's
         * checkpoints are there */
        assert_int_equal(agent_checkpoint_free_layers(f.sd, top), 1);
        assert_false(exists(&f, "layer-ck_09.qcow2"));
        assert_true(exists(&f, "layer-ck_01.qcow2") && exists(&f, "layer-ck_02.qcow2"));
        assert_true(exists(&f, "layer-ck_05.qcow2"));

        /* deleting ck_01 frees nothing: ck_02's layer is over it */
        free(ck);
        assert_true(fk_asprintf(&ck, "%s/checkpoints/ck_01", f.sd) >= 0);
        assert_int_equal(fk_rm_rf(ck), 0);
        assert_int_equal(agent_checkpoint_free_layers(f.sd, top), 0);
        assert_true(exists(&f, "layer-ck_01.qcow2"));

        /* deleting ck_02 frees both */
        free(ck);
        assert_true(fk_asprintf(&ck, "%s/checkpoints/ck_02", f.sd) >= 0);
        assert_int_equal(fk_rm_rf(ck), 0);
        assert_int_equal(agent_checkpoint_free_layers(f.sd, top), 2);
        assert_false(exists(&f, "layer-ck_01.qcow2") || exists(&f, "layer-ck_02.qcow2"));
        assert_true(exists(&f, "layer-ck_05.qcow2") && access(top, F_OK) == 0);

        free(ck);
        assert_int_equal(fk_rm_rf(f.sd), 0);
        free(top);
        free(stray);
        assert_int_equal(fk_rm_rf(f.root), 0);
}

static void test_live_chain_keeps(void **state)
{
        struct fixture f = {0};
        struct fk_error err = {0};
        char *top = NULL, *ck = NULL;
        FILE *fp;

        (void)state;
        if (system("qemu-img --version >/dev/null 2>&1") != 0)
                skip();
        snprintf(f.root, sizeof(f.root), "/tmp/fk-compact-test-XXXXXX");
        assert_non_null(mkdtemp(f.root));
        snprintf(temp_root, sizeof(temp_root), "%s", f.root);
        snprintf(f.sd, sizeof(f.sd), "%s/sessions/default.web", f.root);
        snprintf(f.disk, sizeof(f.disk), "%s/disk", f.sd);
        snprintf(f.base, sizeof(f.base), "%s/workspace.img", f.root);
        assert_int_equal(fk_mkdir_p(f.disk, 0700), 0);
        assert_non_null(fp = fopen(f.base, "w"));
        assert_int_equal(ftruncate(fileno(fp), 16 << 20), 0);
        fclose(fp);
        top = path_in(&f, "workspace-0.qcow2");
        assert_int_equal(agent_disk_create_overlay(top, f.base, &err), 0);
        freeze(&f, "ck_0a", &top);
        add_checkpoint(&f, "ck_0a", 1);
        assert_true(fk_asprintf(&ck, "%s/checkpoints/ck_0a", f.sd) >= 0);
        assert_int_equal(fk_rm_rf(ck), 0);
        /* not compacted: the session's own chain uses the layer */
        assert_int_equal(agent_checkpoint_free_layers(f.sd, top), 0);
        assert_true(exists(&f, "layer-ck_0a.qcow2"));
        /* no live chain known: nothing is removed */
        assert_int_equal(agent_checkpoint_free_layers(f.sd, NULL), 0);
        assert_true(exists(&f, "layer-ck_0a.qcow2"));
        free(ck);
        free(top);
        assert_int_equal(fk_rm_rf(f.root), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_stream_base),
                cmocka_unit_test(test_stream_outlasts),
                cmocka_unit_test(test_backing_name),
                cmocka_unit_test_teardown(test_chains_and_freeing, teardown),
                cmocka_unit_test_teardown(test_live_chain_keeps, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
