/* SPDX-License-Identifier: MIT */
/* agent_disk_create_overlay_from over real qcow2 files made with qemu-img in a temp dir: the
 * first overlay of a kind is kept as a template and the next one is a byte-for-byte copy made
 * without qemu-img (PATH emptied), as allocated as the original, which qemu-img check accepts;
 * another backing is not served from it; a damaged template is not used. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
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

#include "agent/disk/disk.h"
#include "common/cleanup.h"
#include "common/util.h"

static char dir[64];
static char *saved_path;

static int setup(void **state)
{
        cleanup_free char *cmd = NULL;

        (void)state;
        if (system("command -v qemu-img >/dev/null") != 0)
                return -1;
        strcpy(dir, "/tmp/fk-disk-XXXXXX");
        if (!mkdtemp(dir) || fk_asprintf(&cmd,
                                         "mkdir %s/tpl && cd %s && qemu-img create -q -f "
                                         "qcow2 layer-a.qcow2 64M && qemu-img create -q -f "
                                         "qcow2 layer-b.qcow2 64M",
                                         dir, dir) < 0)
                return -1;
        saved_path = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
        return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        setenv("PATH", saved_path, 1);
        free(saved_path);
        return fk_rm_rf(dir);
}

static char *path_in(const char *name)
{
        char *p = NULL;

        assert_true(fk_asprintf(&p, "%s/%s", dir, name) >= 0);
        return p;
}

static char *slurp(const char *path, size_t *n)
{
        char *text = NULL;

        assert_int_equal(fk_read_file(path, 1 << 20, &text, n), 0);
        return text;
}

/* The number of templates in dir/tpl. */
static unsigned templates(void)
{
        cleanup_free char *t = path_in("tpl");
        DIR *d = opendir(t);
        struct dirent *e;
        unsigned n = 0;

        assert_non_null(d);
        while ((e = readdir(d)))
                n += strncmp(e->d_name, ".overlay-", 9) == 0 && !strstr(e->d_name, ".tmp-");
        closedir(d);
        return n;
}

static void test_template(void **state)
{
        cleanup_free char *tpl = path_in("tpl"), *a = path_in("layer-a.qcow2"),
                          *b = path_in("layer-b.qcow2"), *o1 = path_in("o1.qcow2"),
                          *o2 = path_in("o2.qcow2"), *o3 = path_in("o3.qcow2"), *t1 = NULL,
                          *t2 = NULL, *cmd = NULL;
        struct fk_error err = {0};
        struct stat s1, s2;
        size_t n1 = 0, n2 = 0;

        (void)state;
        assert_int_equal(agent_disk_create_overlay_from(o1, a, tpl, &err), 0);
        assert_int_equal(templates(), 1);
        /* no qemu-img to be found: the copy */
        setenv("PATH", dir, 1);
        assert_int_equal(agent_disk_create_overlay_from(o2, a, tpl, &err), 0);
        t1 = slurp(o1, &n1);
        t2 = slurp(o2, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(t1, t2, n1);
        assert_int_equal(stat(o1, &s1), 0);
        assert_int_equal(stat(o2, &s2), 0);
        assert_int_equal(s1.st_mode, s2.st_mode);
        /* allocated as qemu-img left it: a sparse copy slowed the cont after a checkpoint */
        assert_true(s2.st_blocks >= s1.st_blocks);
        /* another backing has no template yet: qemu-img it would be, and there is none */
        assert_true(agent_disk_create_overlay_from(o3, b, tpl, &err) < 0);
        setenv("PATH", saved_path, 1);
        assert_true(fk_asprintf(&cmd,
                                "cd %s && qemu-img check -q o2.qcow2 && qemu-img info "
                                "o2.qcow2 | grep -q '^backing file: layer-a.qcow2$'",
                                dir) >= 0);
        assert_int_equal(system(cmd), 0);
}

/* The template made ahead (a checkpoint's Writing phase) is the one the first overlay of its
 * layer made beside the layer copies: no qemu-img for it, the same bytes qemu-img writes. */
static void test_template_ahead(void **state)
{
        cleanup_free char *tpl = path_in("tpl"), *a = path_in("layer-a.qcow2"),
                          *o1 = path_in("o1.qcow2"), *o2 = path_in("o2.qcow2"), *t1 = NULL,
                          *t2 = NULL;
        struct fk_error err = {0};
        size_t n1 = 0, n2 = 0;

        (void)state;
        assert_int_equal(agent_disk_overlay_template(a, tpl, &err), 0);
        assert_int_equal(templates(), 1);
        assert_int_equal(agent_disk_overlay_template(a, tpl, &err), 0); /* there: kept */
        assert_int_equal(templates(), 1);
        setenv("PATH", dir, 1);
        assert_int_equal(agent_disk_create_overlay_from(o1, a, tpl, &err), 0);
        setenv("PATH", saved_path, 1);
        /* what qemu-img makes without a template */
        assert_int_equal(agent_disk_create_overlay(o2, a, &err), 0);
        t1 = slurp(o1, &n1);
        t2 = slurp(o2, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(t1, t2, n1);
        /* nothing left beside the template */
        assert_int_equal(templates(), 1);
        assert_true(agent_disk_overlay_template("no-slash", tpl, &err) < 0);
}

static void test_damaged_template(void **state)
{
        cleanup_free char *tpl = path_in("tpl"), *a = path_in("layer-a.qcow2"),
                          *o1 = path_in("o1.qcow2"), *o2 = path_in("o2.qcow2"), *cmd = NULL;
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(agent_disk_create_overlay_from(o1, a, tpl, &err), 0);
        assert_int_equal(templates(), 1);
        assert_true(fk_asprintf(&cmd, "for f in %s/.overlay-*.qcow2; do echo garbage > $f; done",
                                tpl) >= 0);
        assert_int_equal(system(cmd), 0);
        free(cmd);
        cmd = NULL;
        assert_int_equal(agent_disk_create_overlay_from(o2, a, tpl, &err), 0);
        assert_true(fk_asprintf(&cmd, "cd %s && qemu-img check -q o2.qcow2", dir) >= 0);
        assert_int_equal(system(cmd), 0);
}

#define RACERS 6

static char *racer_out[RACERS];
static int racer_r[RACERS];

static void *racer(void *arg)
{
        size_t i = (size_t)(intptr_t)arg;
        cleanup_free char *tpl = path_in("tpl"), *a = path_in("layer-a.qcow2");
        struct fk_error err = {0};

        racer_r[i] = agent_disk_create_overlay_from(racer_out[i], a, tpl, &err);
        return NULL;
}

/* Forks of one checkpoint start in several threads at once: every overlay and the template
 * they leave are whole, no temporary file is left behind, and qemu-img ran once (a wrapper
 * first in PATH counts its runs), not once per thread. */
static void test_concurrent(void **state)
{
        cleanup_free char *first = NULL, *tpl_dir = path_in("tpl"), *cmd = NULL, *wrap = NULL,
                          *bin = path_in("bin"), *calls = path_in("qemu-img.calls"), *path = NULL;
        pthread_t th[RACERS];
        size_t n0 = 0, n_calls = 0;

        (void)state;
        assert_true(fk_asprintf(&wrap,
                                "mkdir %s && printf '#!/bin/sh\\necho run >> %s\\nPATH=%s exec "
                                "qemu-img \"$@\"\\n' > %s/qemu-img && chmod +x %s/qemu-img",
                                bin, calls, saved_path, bin, bin) >= 0);
        assert_int_equal(system(wrap), 0);
        assert_true(fk_asprintf(&path, "%s:%s", bin, saved_path) >= 0);
        setenv("PATH", path, 1);
        for (size_t i = 0; i < RACERS; i++) {
                assert_true(fk_asprintf(&racer_out[i], "%s/r%zu.qcow2", dir, i) >= 0);
                assert_int_equal(pthread_create(&th[i], NULL, racer, (void *)(intptr_t)i), 0);
        }
        for (size_t i = 0; i < RACERS; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        setenv("PATH", saved_path, 1);
        free(slurp(calls, &n_calls));
        assert_int_equal(n_calls, strlen("run\n")); /* one run of qemu-img */
        first = slurp(racer_out[0], &n0);
        for (size_t i = 0; i < RACERS; i++) {
                cleanup_free char *t = NULL;
                size_t n = 0;

                assert_int_equal(racer_r[i], 0);
                t = slurp(racer_out[i], &n);
                assert_int_equal(n, n0);
                assert_memory_equal(t, first, n0);
                free(racer_out[i]);
        }
        assert_int_equal(templates(), 1);
        assert_true(fk_asprintf(&cmd,
                                "! ls -a %s | grep -q tmp- && cmp %s/.overlay-*.qcow2 %s/r0.qcow2",
                                tpl_dir, tpl_dir, dir) >= 0);
        assert_int_equal(system(cmd), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_template_ahead, setup, teardown),
                cmocka_unit_test_setup_teardown(test_template, setup, teardown),
                cmocka_unit_test_setup_teardown(test_damaged_template, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
