/* SPDX-License-Identifier: MIT */
/* vmm_sparse_copy: the same bytes and the same holes through copy_file_range (one filesystem),
 * through the read/write fallback across filesystems (tmpfs /dev/shm -> /tmp) and forced
 * (VMM_COPY_NO_OFFLOAD), zero blocks left as holes by the fallback, an existing or symlinked
 * path refused, and ENOSPC from a full tmpfs (root only) with nothing left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#define MIB        (1024 * 1024)
#define FILE_SIZE  (8 * MIB)
#define ZERO_BLOCK (MIB + 4096) /* an all-zero block inside the second data extent */
#define SHM_DIR    "/dev/shm"

struct env {
        char disk[64]; /* under /tmp */
        char shm[64];  /* under /dev/shm (tmpfs), "" when there is none */
};

static int setup(void **state)
{
        struct env *e = calloc(1, sizeof(*e));
        struct stat st;

        assert_non_null(e);
        strcpy(e->disk, "/tmp/fk-copy-XXXXXX");
        assert_non_null(mkdtemp(e->disk));
        strcpy(e->shm, SHM_DIR "/fk-copy-XXXXXX");
        if (stat(SHM_DIR, &st) < 0 || !mkdtemp(e->shm))
                e->shm[0] = '\0';
        *state = e;
        return 0;
}

static int teardown(void **state)
{
        struct env *e = *state;

        assert_int_equal(fk_rm_rf(e->disk), 0);
        if (e->shm[0])
                assert_int_equal(fk_rm_rf(e->shm), 0);
        free(e);
        return 0;
}

static void fill(char *buf, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                buf[i] = (char)(1 + (i * 31 + seed) % 251); /* never 0 */
}

static void put(int fd, off_t off, size_t n, unsigned seed, bool zero)
{
        cleanup_free char *buf = malloc(n);

        assert_non_null(buf);
        if (zero)
                memset(buf, 0, n);
        else
                fill(buf, n, seed);
        assert_int_equal(pwrite(fd, buf, n, off), (ssize_t)n);
}

/* 8 MiB: data at [0, 64K), [1M, 1M+12K) whose middle 4K is written zeros, [5M, 5M+100001);
 * holes elsewhere (also at the end). */
static void make_sparse(const char *path)
{
        cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, FILE_SIZE), 0);
        put(fd, 0, 65536, 1, false);
        put(fd, MIB, 4096, 2, false);
        put(fd, ZERO_BLOCK, 4096, 0, true);
        put(fd, ZERO_BLOCK + 4096, 4096, 3, false);
        put(fd, 5 * MIB, 100001, 4, false);
}

static void assert_same_bytes(const char *a, const char *b)
{
        cleanup_free char *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;

        assert_int_equal(fk_read_file(a, 2 * FILE_SIZE, &x, &nx), 0);
        assert_int_equal(fk_read_file(b, 2 * FILE_SIZE, &y, &ny), 0);
        assert_int_equal(nx, FILE_SIZE);
        assert_int_equal(ny, nx);
        assert_memory_equal(x, y, nx);
}

/* The first data at or after off in path (the file size when only a hole follows). */
static off_t next_data(const char *path, off_t off)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        off_t r;

        assert_true(fd >= 0);
        r = lseek(fd, off, SEEK_DATA);
        return r < 0 && errno == ENXIO ? FILE_SIZE : r;
}

static blkcnt_t blocks(const char *path)
{
        struct stat st;

        assert_int_equal(stat(path, &st), 0);
        return st.st_blocks;
}

/* Holes of the source are holes of dst: nothing between the extents, nothing at the end. */
static void assert_holes_kept(const char *src, const char *dst)
{
        assert_int_equal(next_data(dst, 65536 + 4096), MIB);
        assert_int_equal(next_data(dst, 2 * MIB), 5 * MIB);
        assert_int_equal(next_data(dst, 6 * MIB), FILE_SIZE);
        assert_true(blocks(dst) <= blocks(src));
        assert_true(blocks(dst) * 512 < 2 * MIB); /* 8 MiB long, ~180 KiB of data */
}

static void copy_and_check(const char *src, const char *dst, unsigned flags,
                           struct vmm_copy_stats *st)
{
        make_sparse(src);
        assert_int_equal(vmm_sparse_copy(src, dst, flags, st), 0);
        assert_same_bytes(src, dst);
        assert_holes_kept(src, dst);
        /* extents are whole blocks: the last one ends at 5M + 100001 rounded up */
        assert_int_equal(st->data_bytes, 65536 + 3 * 4096 + 25 * 4096);
}

static void test_same_fs(void **state)
{
        struct env *e = *state;
        char src[128], dst[128];
        struct vmm_copy_stats st = {0};

        snprintf(src, sizeof(src), "%s/src", e->disk);
        snprintf(dst, sizeof(dst), "%s/dst", e->disk);
        copy_and_check(src, dst, 0, &st);
        assert_false(st.fallback);
        assert_int_equal(st.written_bytes, st.data_bytes);
}

/* The fallback writes no all-zero block: the written zeros become a hole. */
static void test_forced_fallback(void **state)
{
        struct env *e = *state;
        char src[128], dst[128];
        struct vmm_copy_stats st = {0};

        snprintf(src, sizeof(src), "%s/src2", e->disk);
        snprintf(dst, sizeof(dst), "%s/dst2", e->disk);
        copy_and_check(src, dst, VMM_COPY_NO_OFFLOAD, &st);
        assert_true(st.fallback);
        assert_int_equal(st.written_bytes, st.data_bytes - 4096);
        assert_int_equal(next_data(dst, ZERO_BLOCK), ZERO_BLOCK + 4096);
        assert_true(blocks(dst) < blocks(src));
}

/* tmpfs -> ext4 (the stock host's runDir -> stateDir): copy_file_range says EXDEV. */
static void test_cross_fs(void **state)
{
        struct env *e = *state;
        char src[128], dst[128], back[128];
        struct vmm_copy_stats st = {0};
        struct stat a, b;

        if (!e->shm[0])
                skip();
        snprintf(src, sizeof(src), "%s/ram", e->shm);
        snprintf(dst, sizeof(dst), "%s/ram", e->disk);
        snprintf(back, sizeof(back), "%s/ram.back", e->shm);
        copy_and_check(src, dst, 0, &st);
        assert_int_equal(stat(e->shm, &a), 0);
        assert_int_equal(stat(e->disk, &b), 0);
        if (a.st_dev != b.st_dev)
                assert_true(st.fallback);
        /* and back (rollback: stateDir -> runDir) */
        assert_int_equal(vmm_sparse_copy(dst, back, 0, &st), 0);
        assert_same_bytes(src, back);
        assert_holes_kept(src, back);
}

static void test_refused(void **state)
{
        struct env *e = *state;
        char src[128], dst[128], link[128];

        snprintf(src, sizeof(src), "%s/src3", e->disk);
        snprintf(dst, sizeof(dst), "%s/dst3", e->disk);
        snprintf(link, sizeof(link), "%s/link3", e->disk);
        make_sparse(src);
        assert_int_equal(fk_write_file_atomic(dst, "keep", 4, 0600), 0);
        assert_int_equal(vmm_sparse_copy(src, dst, 0, NULL), -EEXIST);
        assert_int_equal(blocks(dst) > 0, 1); /* untouched */
        assert_int_equal(symlink(src, link), 0);
        unlink(dst);
        assert_int_equal(vmm_sparse_copy(link, dst, 0, NULL), -ELOOP);
        assert_int_equal(access(dst, F_OK), -1);
        assert_int_equal(vmm_sparse_copy("/nonexistent/x", dst, 0, NULL), -ENOENT);
}

/* In a child with its own mount namespace: a 1 MiB tmpfs as the target. 0 when the copy
 * failed with ENOSPC and left no file, 2 when the namespace or mount is not allowed. */
static int enospc_child(const char *src, const char *mnt)
{
        char dst[160];
        int r;

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0)
                return 2;
        snprintf(dst, sizeof(dst), "%s/ram", mnt);
        for (unsigned flags = 0; flags <= VMM_COPY_NO_OFFLOAD; flags += VMM_COPY_NO_OFFLOAD) {
                r = vmm_sparse_copy(src, dst, flags, NULL);
                if (r != -ENOSPC || access(dst, F_OK) == 0) {
                        fprintf(stderr, "copy to a full tmpfs: %d (%s), dst %s\n", r, strerror(-r),
                                access(dst, F_OK) == 0 ? "left behind" : "removed");
                        return 1;
                }
        }
        return 0;
}

static void test_enospc(void **state)
{
        struct env *e = *state;
        char src[128], mnt[128];
        int status = 0;
        pid_t pid;

        if (geteuid() != 0)
                skip();
        snprintf(src, sizeof(src), "%s/big", e->disk);
        snprintf(mnt, sizeof(mnt), "%s/mnt", e->disk);
        assert_int_equal(mkdir(mnt, 0700), 0);
        {
                cleanup_close int fd = open(src, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

                assert_true(fd >= 0);
                for (int i = 0; i < 4; i++)
                        put(fd, (off_t)i * MIB, MIB, (unsigned)i, false);
        }
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(enospc_child(src, mnt));
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 2)
                skip();
        assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_same_fs),  cmocka_unit_test(test_forced_fallback),
                cmocka_unit_test(test_cross_fs), cmocka_unit_test(test_refused),
                cmocka_unit_test(test_enospc),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
