/* SPDX-License-Identifier: MIT */
/* From an unpacked OCI tree to a bootable read-only root disk: the forklet agent copied in
 * from the node image's initrd (paths resolved inside the tree), mkfs.ext4 -d (no loop mount,
 * no root needed for the build itself), and the image config read from the OCI layout. */
#include "agent/image/image-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AGENT_IN_INITRD "sbin/forklet-agent"
#define EXT4_SLACK      (64ull * 1024 * 1024)

/* openat2 with RESOLVE_IN_ROOT: ".." and absolute symlinks stay inside root_fd. */
static int open_in_root(int root_fd, const char *path, int flags, mode_t mode)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .mode = mode,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));

        return fd < 0 ? -errno : (int)fd;
}

static int copy_fd(int in, int out)
{
        char buf[65536];
        ssize_t k;

        while ((k = read(in, buf, sizeof(buf))) > 0)
                for (ssize_t off = 0; off < k;) {
                        ssize_t w = write(out, buf + off, (size_t)(k - off));

                        if (w < 0)
                                return -errno;
                        off += w;
                }
        return k < 0 ? -errno : 0;
}

int image_inject_agent(const char *initrd, const char *tree, const char *work, struct fk_error *err)
{
        cleanup_free char *agent = NULL, *script = NULL;
        cleanup_close int root = -1, sbin = -1, in = -1, out = -1;
        struct stat st;
        int r;

        if (fk_asprintf(&agent, "%s/agent", work) < 0 ||
            fk_asprintf(&script, "gzip -dc \"$1\" | cpio -i --quiet --to-stdout %s > \"$2\"",
                        AGENT_IN_INITRD) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = image_run((const char *const[]){"/bin/sh", "-c", script, "sh", initrd, agent, NULL}, 0,
                      NULL, NULL, NULL, NULL, err);
        in = r >= 0 ? open(agent, O_RDONLY | O_CLOEXEC) : -1;
        if (r < 0 || in < 0)
                return r < 0 ? r : fk_error_set(err, -errno, "%s: %m", agent);
        if (fstat(in, &st) < 0 || st.st_size == 0)
                return fk_error_set(err, -ENOENT, "%s holds no %s (build the minimal image)",
                                    initrd, AGENT_IN_INITRD);
        root = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return fk_error_set(err, -errno, "open %s: %m", tree);
        /* /sbin may be a symlink (merged /usr): follow it, inside the tree only */
        sbin = open_in_root(root, "sbin", O_RDONLY | O_DIRECTORY, 0);
        if (sbin == -ENOENT && mkdirat(root, "sbin", 0755) == 0)
                sbin = open_in_root(root, "sbin", O_RDONLY | O_DIRECTORY, 0);
        if (sbin < 0)
                return fk_error_set(err, sbin, "the image's /sbin: %s", strerror(-sbin));
        (void)unlinkat(sbin, "forklet-agent", 0);
        out = openat(sbin, "forklet-agent", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     0755);
        if (out < 0)
                return fk_error_set(err, -errno, "create /sbin/forklet-agent in the image: %m");
        r = copy_fd(in, out);
        if (r >= 0 && (fchown(out, 0, 0) < 0 && geteuid() == 0))
                r = -errno;
        if (r >= 0 && fchmod(out, 0755) < 0)
                r = -errno;
        if (r < 0)
                return fk_error_set(err, r, "write /sbin/forklet-agent in the image: %s",
                                    strerror(-r));
        /* the init mounts the workspace here and the API filesystems under the overlay */
        (void)mkdirat(root, "workspace", 0755);
        return 0;
}

static __thread uint64_t tree_bytes;

static int add_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)path;
        (void)type;
        (void)ftw;
        /* data blocks plus an inode and a directory entry's share */
        tree_bytes += (uint64_t)st->st_blocks * 512 + 512;
        return 0;
}

int image_build_ext4(const char *tree, const char *path, struct fk_error *err)
{
        uint64_t size;
        int fd, r;

        tree_bytes = 0;
        if (nftw(tree, add_entry, 64, FTW_PHYS) < 0)
                return fk_error_set(err, -errno, "walk %s: %m", tree);
        /* read-only at run time: the tree, a quarter for ext4's own metadata, some slack */
        size = tree_bytes + tree_bytes / 4 + EXT4_SLACK;
        size = (size + 4095) / 4096 * 4096;
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return fk_error_set(err, -errno, "create %s: %m", path);
        r = ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
        close(fd);
        if (r < 0)
                return fk_error_set(err, r, "size %s: %s", path, strerror(-r));
        return image_run((const char *const[]){"mkfs.ext4", "-q", "-F", "-L", AGENT_ROOTFS_LABEL,
                                               "-d", tree, path, NULL},
                         0, NULL, NULL, NULL, NULL, err);
}

static json_t *load_blob(const char *layout, const char *digest)
{
        cleanup_free char *path = NULL;

        if (!digest || strncmp(digest, "sha256:", 7) != 0 || strchr(digest + 7, '/') ||
            fk_asprintf(&path, "%s/blobs/sha256/%s", layout, digest + 7) < 0)
                return NULL;
        return json_load_file(path, 0, NULL);
}

int image_read_config(const char *work, json_t **ret, struct fk_error *err)
{
        cleanup_free char *layout = NULL, *index_path = NULL;
        json_t *index, *manifest = NULL, *config = NULL, *c;

        if (fk_asprintf(&layout, "%s/layout", work) < 0 ||
            fk_asprintf(&index_path, "%s/index.json", layout) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        index = json_load_file(index_path, 0, NULL);
        manifest = load_blob(
                layout, json_string_value(json_object_get(
                                json_array_get(json_object_get(index, "manifests"), 0), "digest")));
        config = load_blob(layout, json_string_value(json_object_get(
                                           json_object_get(manifest, "config"), "digest")));
        c = json_object_get(config, "config");
        *ret = json_is_object(c) ? json_incref(c) : json_object();
        json_decref(index);
        json_decref(manifest);
        json_decref(config);
        if (!config)
                return fk_error_set(err, -EPROTO, "%s: no image config in the OCI layout", layout);
        return *ret ? 0 : fk_error_set(err, -ENOMEM, "out of memory");
}
