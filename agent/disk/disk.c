/* SPDX-License-Identifier: MIT */
/* A session's workspace disk: qcow2 overlays under <state>/disk over the image's raw
 * workspace.img or over a checkpoint's frozen layer, the active one (a field of the session's
 * state record), and qemu-img. */
#include "agent/disk/disk.h"
#include "agent/disk/disk-internal.h"
#include "agent/store/store.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int agent_disk_dir(const char *state_dir, char **ret)
{
        return fk_asprintf(ret, "%s/disk", state_dir);
}

int agent_disk_run_tool(char *const *argv, struct fk_error *err)
{
        posix_spawn_file_actions_t fa;
        int pipefd[2], status = 0, r;
        char out[1024] = "";
        size_t n = 0;
        ssize_t k;
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return fk_error_set(err, -errno, "pipe: %m");
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
        r = -posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        if (r < 0) {
                close(pipefd[0]);
                return fk_error_set(err, r, "run %s: %s", argv[0], strerror(-r));
        }
        while ((k = read(pipefd[0], out + n, sizeof(out) - 1 - n)) > 0 || (k < 0 && errno == EINTR))
                if (k > 0 && (n += (size_t)k) >= sizeof(out) - 1)
                        n = 0; /* keep only the tail */
        out[n] = '\0';
        close(pipefd[0]);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return fk_error_set(err, -errno, "wait for %s: %m", argv[0]);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
                out[--n] = '\0';
        return fk_error_set(err, -EIO, "%s failed: %.200s", argv[0],
                            strrchr(out, '\n') ? strrchr(out, '\n') + 1 : out);
}

int agent_disk_virtual_size(const char *path, uint64_t *ret)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        unsigned char h[32];
        struct stat st;
        uint64_t v = 0;

        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) && memcmp(h, QCOW2_MAGIC, 4) == 0) {
                for (int i = 24; i < 32; i++) /* big-endian size at offset 24 */
                        v = (v << 8) | h[i];
                *ret = v;
                return 0;
        }
        *ret = (uint64_t)st.st_size;
        return 0;
}

static bool same_dir(const char *a, const char *b)
{
        const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');

        return sa && sb && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0;
}

int agent_disk_backing_name(const char *path, const char *backing, char **ret)
{
        char *name = strdup(same_dir(path, backing) ? strrchr(backing, '/') + 1 : backing);

        if (!name)
                return -ENOMEM;
        *ret = name;
        return 0;
}

int agent_disk_active(struct agent_store *st, const char *sd, const char *key, char **ret)
{
        cleanup_free char *name = agent_store_get_string(st, key, AGENT_STORE_DISK);
        char *path;

        if (!name)
                return -ENOENT;
        if (fk_asprintf(&path, "%s/disk/%s", sd, name) < 0)
                return -ENOMEM;
        if (access(path, F_OK) < 0) {
                int r = -errno;

                free(path);
                return r;
        }
        *ret = path;
        return 0;
}

int agent_disk_set_active(struct agent_store *st, const char *key, const char *path,
                          struct fk_error *err)
{
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;

        return agent_store_set_string(st, key, AGENT_STORE_DISK, base, err);
}

int agent_disk_next_path(const char *state_dir, const char *prefix, char **ret)
{
        cleanup_free char *dir = NULL;
        int r;

        if (agent_disk_dir(state_dir, &dir) < 0)
                return -ENOMEM;
        r = fk_mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < 100000; i++) {
                char *p;

                if (fk_asprintf(&p, "%s/%s-%u.qcow2", dir, prefix, i) < 0)
                        return -ENOMEM;
                if (access(p, F_OK) < 0 && errno == ENOENT) {
                        *ret = p;
                        return 0;
                }
                free(p);
        }
        return -ENOSPC;
}

int agent_disk_prepare(struct agent_store *st, const char *sd, const char *key, const char *base,
                       char **ret, struct fk_error *err)
{
        cleanup_free char *path = NULL;
        int r;

        r = agent_disk_active(st, sd, key, ret);
        if (r != -ENOENT)
                return r < 0 ? fk_error_set(err, r, "workspace disk of %s: %s", key, strerror(-r))
                             : 0;
        r = agent_disk_next_path(sd, "workspace", &path);
        if (r < 0)
                return fk_error_set(err, r, "workspace disk in %s: %s", sd, strerror(-r));
        r = agent_disk_create_overlay(path, base, err);
        if (r < 0)
                return r;
        r = agent_disk_set_active(st, key, path, err);
        if (r < 0) {
                unlink(path);
                return r;
        }
        *ret = TAKE_PTR(path);
        return 0;
}

int agent_disk_workspace_base(const char *node_state_dir, unsigned mib, char **ret,
                              struct fk_error *err)
{
        cleanup_free char *dir = NULL, *path = NULL, *tmp = NULL;
        char *argv[] = {
                (char *)"mkfs.ext4", (char *)"-q", (char *)"-F", (char *)"-L", (char *)"workspace",
                (char *)"-m",        (char *)"0",  NULL,         NULL};
        uint64_t rnd = 0;
        int fd, r;

        /* Two boots of one class may race here: each makes its own temp file. */
        (void)fk_random_bytes(&rnd, sizeof(rnd));
        if (fk_asprintf(&dir, "%s/disks", node_state_dir) < 0 ||
            fk_asprintf(&path, "%s/workspace-%uM.img", dir, mib) < 0 ||
            fk_asprintf(&tmp, "%s/.workspace-%uM.img.%016" PRIx64, dir, mib, rnd) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (access(path, R_OK) == 0) {
                *ret = TAKE_PTR(path);
                return 0;
        }
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return fk_error_set(err, -errno, "create %s: %m", dir);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return fk_error_set(err, -errno, "create %s: %m", tmp);
        r = ftruncate(fd, (off_t)mib << 20) < 0 ? -errno : 0;
        close(fd);
        if (r < 0) {
                unlink(tmp);
                return fk_error_set(err, r, "size %s to %u MiB: %s", tmp, mib, strerror(-r));
        }
        argv[7] = tmp;
        r = agent_disk_run_tool(argv, err);
        if (r >= 0 && rename(tmp, path) < 0)
                r = fk_error_set(err, -errno, "rename %s: %m", tmp);
        if (r < 0) {
                unlink(tmp);
                return r;
        }
        *ret = TAKE_PTR(path);
        return 0;
}

int agent_disk_convert(const char *src, const char *dst, struct fk_error *err)
{
        /* -U: src is a read-only layer a running QEMU holds open (nobody writes it). */
        char *argv[] = {(char *)"qemu-img", (char *)"convert", (char *)"-U", (char *)"-O",
                        (char *)"qcow2",    (char *)src,       (char *)dst,  NULL};

        return agent_disk_run_tool(argv, err);
}

/* The backing file name recorded in a qcow2 header (heap) or NULL (raw, or no backing). */
static char *backing_of(const char *path)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        unsigned char h[20];
        uint64_t off = 0;
        uint32_t len = 0;
        char *name;

        if (fd < 0 || pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
            memcmp(h, QCOW2_MAGIC, 4) != 0)
                return NULL;
        for (int i = 8; i < 16; i++)
                off = (off << 8) | h[i];
        for (int i = 16; i < 20; i++)
                len = (len << 8) | h[i];
        if (off == 0 || len == 0 || len > 4096 || !(name = calloc(1, len + 1)))
                return NULL;
        if (pread(fd, name, len, (off_t)off) != (ssize_t)len) {
                free(name);
                return NULL;
        }
        if (name[0] != '/' && strrchr(path, '/')) {
                char *abs = NULL;

                (void)fk_asprintf(&abs, "%.*s/%s", (int)(strrchr(path, '/') - path), path, name);
                free(name);
                return abs;
        }
        return name;
}

int agent_disk_chain(const char *path, unsigned *ret_depth, char **ret_base)
{
        char *cur = strdup(path), *next;
        unsigned depth = 1;

        if (!cur)
                return -ENOMEM;
        while ((next = backing_of(cur)) && depth < 10000) {
                free(cur);
                cur = next;
                depth++;
        }
        *ret_depth = depth;
        if (ret_base)
                *ret_base = cur;
        else
                free(cur);
        return 0;
}

uint64_t agent_disk_chain_allocated(const char *path)
{
        char *cur = strdup(path), *next;
        uint64_t sum = 0;

        for (unsigned i = 0; cur && i < 10000; i++) {
                sum += agent_space_allocated(cur);
                next = backing_of(cur);
                free(cur);
                cur = next;
        }
        free(cur);
        return sum;
}

size_t agent_disk_stream_base(const uint64_t *alloc, size_t n, unsigned max_layers,
                              bool checkpointed)
{
        size_t anchor = n - 2;
        uint64_t above = 0;

        if (max_layers == 0 || n < 3)
                return 0;
        for (size_t i = 1; i < anchor; i++)
                above += alloc[i];
        if (max_layers >= 2 && alloc[anchor] >= AGENT_DISK_ANCHOR_MIN &&
            above < alloc[anchor] / AGENT_DISK_ANCHOR_SHARE)
                return n - 1 > max_layers ? anchor : 0;
        return n - 1 > max_layers || (checkpointed && above + alloc[anchor] < AGENT_DISK_ANCHOR_MIN)
                       ? n - 1
                       : 0;
}

bool agent_disk_stream_outlasts(uint64_t elapsed_ns, uint64_t done, uint64_t len, uint64_t wait_ns)
{
        if (done == 0 || done > len)
                return elapsed_ns >= wait_ns;
        return (double)elapsed_ns * (double)(len - done) / (double)done > (double)wait_ns;
}

int agent_disk_chain_files(const char *path, char ***ret, size_t *ret_n)
{
        char **v = NULL, *cur = strdup(path), *next;
        size_t n = 0;
        int r = cur ? 0 : -ENOMEM;

        for (unsigned i = 0; cur && r >= 0 && i < 10000; i++) {
                r = fk_strv_push(&v, cur);
                next = backing_of(cur);
                free(cur);
                cur = next;
                n++;
        }
        free(cur);
        if (r < 0) {
                fk_strv_free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* Whether one of roots' chains holds a file named path (names compared: a chain names its
 * layers by their own names, and links of one file in other dirs are other layers). */
static bool chains_hold(const char *const *roots, size_t n_roots, const char *path)
{
        for (size_t i = 0; i < n_roots; i++) {
                char **files = NULL;
                size_t n = 0;
                bool found = false;

                if (!roots[i] || agent_disk_chain_files(roots[i], &files, &n) < 0)
                        continue;
                for (size_t k = 0; k < n && !found; k++)
                        found = strcmp(files[k], path) == 0;
                fk_strv_free(files);
                if (found)
                        return true;
        }
        return false;
}

int agent_disk_unused_layers(const char *disk_dir, const char *const *roots, size_t n_roots,
                             char ***ret)
{
        char **v = NULL;
        struct dirent *de;
        DIR *dp = opendir(disk_dir);
        int r = 0;

        if (!dp)
                return -errno;
        while (r >= 0 && (de = readdir(dp))) {
                cleanup_free char *p = NULL;
                size_t n = strlen(de->d_name);

                if (strncmp(de->d_name, "layer-ck_", 9) || n < 16 ||
                    strcmp(de->d_name + n - 6, ".qcow2"))
                        continue;
                if (fk_asprintf(&p, "%s/%s", disk_dir, de->d_name) < 0)
                        r = -ENOMEM;
                else if (!chains_hold(roots, n_roots, p))
                        r = fk_strv_push(&v, p);
        }
        closedir(dp);
        if (r >= 0 && !v && !(v = calloc(1, sizeof(*v))))
                r = -ENOMEM;
        if (r < 0) {
                fk_strv_free(v);
                return r;
        }
        *ret = v;
        return 0;
}

int agent_disk_compact(const char *path, unsigned max_depth, struct fk_error *err)
{
        cleanup_free char *base = NULL;
        unsigned depth = 0;
        bool qcow2;
        int r;

        r = agent_disk_chain(path, &depth, &base);
        if (r < 0)
                return fk_error_set(err, r, "read the chain of %s", path);
        if (depth <= max_depth || depth < 3)
                return 0;
        {
                char magic[4] = "";
                cleanup_close int fd = open(base, O_RDONLY | O_CLOEXEC);

                qcow2 = fd >= 0 && read(fd, magic, 4) == 4 && memcmp(magic, QCOW2_MAGIC, 4) == 0;
        }
        /* Safe rebase onto the chain's bottom: copies into path every cluster the layers in
         * between changed. Those layers stay (checkpoints and forks use them); -U: running forks
         * may hold them open read-only. */
        char *argv[] = {(char *)"qemu-img", (char *)"rebase",
                        (char *)"-U",       (char *)"-q",
                        (char *)"-f",       (char *)"qcow2",
                        (char *)"-b",       base,
                        (char *)"-F",       (char *)(qcow2 ? "qcow2" : "raw"),
                        (char *)path,       NULL};
        return agent_disk_run_tool(argv, err) < 0 ? -EIO : 1;
}

int agent_disk_link_chain(const char *layer, const char *dst_dir, char **ret, struct fk_error *err)
{
        char *cur = strdup(layer), *next, *top = NULL;
        int r = 0;

        if (!cur)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = fk_mkdir_p(dst_dir, 0700);
        if (r < 0) {
                free(cur);
                return fk_error_set(err, r, "create %s: %s", dst_dir, strerror(-r));
        }
        for (unsigned i = 0; cur && same_dir(cur, layer) && i < 10000; i++) {
                cleanup_free char *dst = NULL;

                if (fk_asprintf(&dst, "%s/%s", dst_dir, strrchr(cur, '/') + 1) < 0) {
                        r = fk_error_set(err, -ENOMEM, "out of memory");
                        break;
                }
                if (link(cur, dst) < 0 && errno != EEXIST) {
                        r = fk_error_set(err, -errno, "link %s -> %s: %m", cur, dst);
                        break;
                }
                if (i == 0 && !(top = strdup(dst))) {
                        r = fk_error_set(err, -ENOMEM, "out of memory");
                        break;
                }
                next = backing_of(cur);
                free(cur);
                cur = next;
        }
        free(cur);
        if (r >= 0 && ret)
                *ret = TAKE_PTR(top);
        free(top);
        return r;
}
