/* SPDX-License-Identifier: MIT */
/* Sparse file copies for RAM and checkpoint files: the data extents (SEEK_DATA/SEEK_HOLE)
 * through copy_file_range(), or read/write skipping all-zero blocks where the kernel refuses
 * that between two filesystems. */
#include "vmm/checkpoint/checkpoint.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_CHUNK (1024 * 1024)
#define COPY_BLOCK 4096

struct copy_ctx {
        int in, out;
        bool offload; /* copy_file_range still worth trying in this call */
        char *buf;    /* COPY_CHUNK bytes, allocated on the first fallback */
        struct vmm_copy_stats st;
};

/* What copy_file_range answers when it cannot copy between these two files (EXDEV: different
 * filesystem types, Linux >= 5.19; EINVAL/EOPNOTSUPP: the filesystem has no support). */
static bool offload_refused(int e)
{
        return e == EXDEV || e == ENOSYS || e == EOPNOTSUPP || e == EINVAL;
}

/* [*off, end) through copy_file_range; 1 when refused (*off: where the rest starts). */
static int copy_offload(struct copy_ctx *c, off_t *off, off_t end)
{
        while (*off < end) {
                off_t out = *off;
                ssize_t k = copy_file_range(c->in, off, c->out, &out, (size_t)(end - *off), 0);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && offload_refused(errno))
                        return 1;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -EIO; /* the source shrank under us */
                c->st.written_bytes += (uint64_t)k;
        }
        return 0;
}

static bool block_is_zero(const char *p, size_t n)
{
        return p[0] == 0 && memcmp(p, p + 1, n - 1) == 0;
}

static int pwrite_all(int fd, const char *p, size_t n, off_t off)
{
        while (n > 0) {
                ssize_t k = pwrite(fd, p, n, off);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                p += k;
                n -= (size_t)k;
                off += k;
        }
        return 0;
}

/* Writes the runs of non-zero blocks of buf (n bytes of the source at off); the destination
 * already reads zero there (ftruncate), so zero blocks stay holes. */
static int write_nonzero(struct copy_ctx *c, size_t n, off_t off)
{
        size_t i = 0, start;
        int r;

        while (i < n) {
                size_t b = n - i < COPY_BLOCK ? n - i : COPY_BLOCK;

                if (block_is_zero(c->buf + i, b)) {
                        i += b;
                        continue;
                }
                start = i;
                while (i < n) {
                        b = n - i < COPY_BLOCK ? n - i : COPY_BLOCK;
                        if (block_is_zero(c->buf + i, b))
                                break;
                        i += b;
                }
                r = pwrite_all(c->out, c->buf + start, i - start, off + (off_t)start);
                if (r < 0)
                        return r;
                c->st.written_bytes += i - start;
        }
        return 0;
}

static int copy_rw(struct copy_ctx *c, off_t off, off_t end)
{
        c->st.fallback = true;
        if (!c->buf && !(c->buf = malloc(COPY_CHUNK)))
                return -ENOMEM;
        while (off < end) {
                size_t n = end - off < COPY_CHUNK ? (size_t)(end - off) : COPY_CHUNK;
                ssize_t k = pread(c->in, c->buf, n, off);
                int r;

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -EIO;
                r = write_nonzero(c, (size_t)k, off);
                if (r < 0)
                        return r;
                off += k;
        }
        return 0;
}

static int copy_extent(struct copy_ctx *c, off_t off, off_t end)
{
        int r;

        c->st.data_bytes += (uint64_t)(end - off);
        if (c->offload) {
                r = copy_offload(c, &off, end);
                if (r <= 0)
                        return r;
                c->offload = false; /* refused once: the same for every other extent */
        }
        return copy_rw(c, off, end);
}

static int copy_extents(struct copy_ctx *c, off_t size)
{
        off_t pos = 0;

        while (pos < size) {
                off_t data = lseek(c->in, pos, SEEK_DATA), hole;
                int r;

                if (data < 0)
                        return errno == ENXIO ? 0 : -errno; /* ENXIO: only a hole remains */
                hole = lseek(c->in, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                r = copy_extent(c, data, hole);
                if (r < 0)
                        return r;
                pos = hole;
        }
        return 0;
}

int vmm_sparse_copy(const char *src, const char *dst, unsigned flags, struct vmm_copy_stats *ret)
{
        /* no symlink: the RAM file sits in a directory a jailed QEMU owns */
        cleanup_close int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct copy_ctx c = {.in = in, .out = -1, .offload = !(flags & VMM_COPY_NO_OFFLOAD)};
        struct stat st;
        int r;

        if (in < 0 || fstat(in, &st) < 0)
                return -errno;
        c.out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (c.out < 0)
                return -errno;
        r = ftruncate(c.out, st.st_size) < 0 ? -errno : copy_extents(&c, st.st_size);
        free(c.buf);
        if (close(c.out) < 0 && r >= 0)
                r = -errno;
        if (r < 0) {
                unlink(dst); /* ours (O_EXCL): nothing partial stays */
                return r;
        }
        if (ret)
                *ret = c.st;
        return 0;
}
