/* SPDX-License-Identifier: MIT */
/* The empty overlays every fork and rollback of a checkpoint starts on: made by qemu-img once,
 * kept as a template in the checkpoint's dir, copied for the others. */
#include "agent/disk/disk.h"
#include "agent/disk/disk-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An empty overlay's bytes depend only on qemu-img's arguments (the backing name as written,
 * its format, the virtual size), not on where it is made: the first one of a kind in
 * template_dir is kept there (.overlay-HASH.qcow2) and later ones are copies of it, which saves
 * an exec of qemu-img (38 ms here, far more with forks starting at once). */
#define OVERLAY_TEMPLATE_MAX (1 << 20)

static int template_path(const char *dir, const char *name, bool qcow2, uint64_t bytes, char **ret)
{
        cleanup_free char *key = NULL;
        char hex[2 * FK_SHA256_SIZE + 1];

        if (fk_asprintf(&key, "%s\n%s\n%" PRIu64, name, qcow2 ? "qcow2" : "raw", bytes) < 0)
                return -ENOMEM;
        fk_sha256_hex(key, strlen(key), hex);
        hex[32] = '\0';
        return fk_asprintf(ret, "%s/.overlay-%s.qcow2", dir, hex);
}

/* Copies a small file whole (holes written as zeros: allocated as qemu-img leaves it; a sparse
 * copy made the `cont` after a live checkpoint of a session on it take up to 133 ms instead of
 * 5); dst is created with src's mode (O_EXCL). */
static int copy_small(const char *src, const char *dst)
{
        cleanup_close int in = open(src, O_RDONLY | O_CLOEXEC), out = -1;
        cleanup_free unsigned char *buf = NULL;
        struct stat st;
        ssize_t n;

        if (in < 0 || fstat(in, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size < 4 || st.st_size > OVERLAY_TEMPLATE_MAX)
                return -EINVAL;
        buf = malloc((size_t)st.st_size);
        if (!buf)
                return -ENOMEM;
        n = pread(in, buf, (size_t)st.st_size, 0);
        if (n != st.st_size || memcmp(buf, QCOW2_MAGIC, 4) != 0)
                return n < 0 ? -errno : -EINVAL;
        out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0777);
        if (out < 0)
                return -errno;
        n = fk_write_all(out, buf, (size_t)st.st_size);
        if (n < 0)
                unlink(dst);
        return (int)FK_MIN(n, 0);
}

/* Keeps path as the template: a copy under a name of its own (random: forks of one checkpoint
 * start in several threads at once), renamed over it, so a reader sees a whole file or none.
 * Best effort: without it the next overlay runs qemu-img again. */
static void template_keep(const char *path, const char *tpl)
{
        cleanup_free char *tmp = NULL;
        unsigned char rnd[8];
        char hex[2 * sizeof(rnd) + 1];

        if (fk_random_bytes(rnd, sizeof(rnd)) < 0)
                return;
        fk_hex(rnd, sizeof(rnd), hex);
        if (fk_asprintf(&tmp, "%s.tmp-%s", tpl, hex) < 0)
                return;
        if (copy_small(path, tmp) == 0 && rename(tmp, tpl) < 0)
                (void)unlink(tmp);
}

/* qemu-img create of an empty overlay of backing (named name, qcow2 or raw, bytes long) at
 * path, kept as the template tpl (NULL: none). */
static int overlay_new(const char *path, char *name, bool qcow2, uint64_t bytes, const char *tpl,
                       struct fk_error *err)
{
        char size[32], *argv[14];
        int r, n = 0;

        snprintf(size, sizeof(size), "%" PRIu64, bytes);
        argv[n++] = (char *)"qemu-img";
        argv[n++] = (char *)"create";
        argv[n++] = (char *)"-q";
        argv[n++] = (char *)"-f";
        argv[n++] = (char *)"qcow2";
        /* -u: do not open the backing file, which a running QEMU may hold locked. */
        argv[n++] = (char *)"-u";
        argv[n++] = (char *)"-b";
        /* Relative when in the same directory (QEMU resolves it against the overlay's dir), so
         * a chain of layers hard-linked into another session's dir works there too. */
        argv[n++] = name;
        argv[n++] = (char *)"-F";
        argv[n++] = (char *)(qcow2 ? "qcow2" : "raw");
        argv[n++] = (char *)path;
        argv[n++] = size;
        argv[n] = NULL;
        r = agent_disk_run_tool(argv, err);
        if (r >= 0 && tpl)
                template_keep(path, tpl);
        return r;
}

/* Forks of one checkpoint start in several threads at once, and before the first of them kept
 * the template every one of them found none and ran qemu-img (30 at once in a fork of 30, about
 * 25 ms of CPU each): a thread that finds no template waits here for one that makes it. */
static pthread_mutex_t template_lock = PTHREAD_MUTEX_INITIALIZER;

/* What an overlay of backing at path is made of (the backing name as written, its format and
 * size) and, with template_dir, the template of that kind there. */
struct overlay_kind {
        char *name, *tpl;
        bool qcow2;
        uint64_t bytes;
};

static void overlay_kind_done(struct overlay_kind *k)
{
        free(k->name);
        free(k->tpl);
}

static int overlay_kind(const char *path, const char *backing, const char *template_dir,
                        struct overlay_kind *k, struct fk_error *err)
{
        char magic[4] = "";
        cleanup_close int fd = -1;
        int r;

        r = agent_disk_virtual_size(backing, &k->bytes);
        if (r < 0)
                return fk_error_set(err, r, "disk layer %s: %s", backing, strerror(-r));
        fd = open(backing, O_RDONLY | O_CLOEXEC);
        k->qcow2 = fd >= 0 && read(fd, magic, 4) == 4 && memcmp(magic, QCOW2_MAGIC, 4) == 0;
        if (agent_disk_backing_name(path, backing, &k->name) < 0 ||
            (template_dir && template_path(template_dir, k->name, k->qcow2, k->bytes, &k->tpl) < 0))
                return fk_error_set(err, -ENOMEM, "out of memory");
        return 0;
}

int agent_disk_create_overlay_from(const char *path, const char *backing, const char *template_dir,
                                   struct fk_error *err)
{
        _cleanup_(overlay_kind_done) struct overlay_kind k = {0};
        int r;

        r = overlay_kind(path, backing, template_dir, &k, err);
        if (r < 0)
                return r;
        if (k.tpl && copy_small(k.tpl, path) == 0)
                return 0;
        if (k.tpl) {
                pthread_mutex_lock(&template_lock);
                /* made by the thread that held the lock before */
                r = copy_small(k.tpl, path) == 0
                            ? 0
                            : overlay_new(path, k.name, k.qcow2, k.bytes, k.tpl, err);
                pthread_mutex_unlock(&template_lock);
                return r;
        }
        return overlay_new(path, k.name, k.qcow2, k.bytes, NULL, err);
}

int agent_disk_overlay_template(const char *layer, const char *template_dir, struct fk_error *err)
{
        _cleanup_(overlay_kind_done) struct overlay_kind k = {0};
        cleanup_free char *model = NULL, *scratch = NULL;
        const char *slash = strrchr(layer, '/');
        int r;

        /* a restore makes its overlay beside the layer (a rollback in the session's disk dir,
         * a fork beside its links): the backing is named by its bare file name */
        if (!slash || fk_asprintf(&model, "%.*s/overlay.qcow2", (int)(slash - layer), layer) < 0)
                return fk_error_set(err, -EINVAL, "disk layer %s: not a path", layer);
        r = overlay_kind(model, layer, template_dir, &k, err);
        if (r < 0)
                return r;
        if (access(k.tpl, F_OK) == 0)
                return 0;
        if (fk_asprintf(&scratch, "%s.new", k.tpl) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        pthread_mutex_lock(&template_lock);
        (void)unlink(scratch); /* a killed forkletd's */
        r = access(k.tpl, F_OK) == 0 ? 0
                                     : overlay_new(scratch, k.name, k.qcow2, k.bytes, k.tpl, err);
        (void)unlink(scratch);
        pthread_mutex_unlock(&template_lock);
        return r;
}

int agent_disk_create_overlay(const char *path, const char *backing, struct fk_error *err)
{
        return agent_disk_create_overlay_from(path, backing, NULL, err);
}
