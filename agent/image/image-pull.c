/* SPDX-License-Identifier: MIT */
/* One pull, in its own thread: skopeo inspect --raw (the manifest digest and its size), skopeo
 * copy into an OCI layout under <stateDir>/oci/tmp (bytes counted while it runs), umoci raw
 * unpack, the rootfs build, then one rename into images/<hex>. */
#include "agent/image/image-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MANIFEST_MAX (4u * 1024 * 1024)

extern char **environ;

struct run_io {
        int out, errp;
        char *buf;
        size_t n, max;
        char tail[512];
        size_t tn;
};

/* Drains what is readable; returns how many pipes are still open. */
static int run_drain(struct run_io *io, int timeout_ms)
{
        struct pollfd fds[2] = {{.fd = io->out, .events = POLLIN},
                                {.fd = io->errp, .events = POLLIN}};
        char tmp[4096];

        if (poll(fds, 2, timeout_ms) <= 0)
                return (io->out >= 0) + (io->errp >= 0);
        for (int i = 0; i < 2; i++) {
                int *fd = i == 0 ? &io->out : &io->errp;
                ssize_t k;

                if (*fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                k = read(*fd, tmp, sizeof(tmp));
                if (k <= 0) {
                        if (k == 0 || errno != EINTR) {
                                close(*fd);
                                *fd = -1;
                        }
                        continue;
                }
                if (i == 0 && io->buf && io->n + (size_t)k <= io->max) {
                        memcpy(io->buf + io->n, tmp, (size_t)k);
                        io->n += (size_t)k;
                } else if (i == 1) {
                        for (ssize_t c = 0; c < k; c++) {
                                if (io->tn == sizeof(io->tail) - 1)
                                        io->tn = 0;
                                io->tail[io->tn++] = tmp[c];
                        }
                }
        }
        return (io->out >= 0) + (io->errp >= 0);
}

/* skopeo logs as logrus: time="..." level=fatal msg="TEXT": keep TEXT, unquoted, without
 * its "Error parsing image name \"docker://...\": " lead (the reference is said elsewhere). */
static char *tidy(char *line)
{
        static const char lead[] = "Error parsing image name \"";
        char *m = strstr(line, "msg=\""), *w, *r;

        if (!m)
                return line;
        m += 5;
        for (r = w = m; *r && *r != '"'; r++) {
                if (*r == '\\' && r[1])
                        r++;
                *w++ = *r;
        }
        *w = '\0';
        if (strncmp(m, lead, sizeof(lead) - 1) == 0 && (r = strstr(m + sizeof(lead) - 1, "\": ")))
                m = r + 3;
        return m;
}

/* The last non-empty line of what stderr said. */
static const char *last_line(struct run_io *io)
{
        char *nl;

        io->tail[io->tn] = '\0';
        while (io->tn && (io->tail[io->tn - 1] == '\n' || io->tail[io->tn - 1] == ' '))
                io->tail[--io->tn] = '\0';
        nl = strrchr(io->tail, '\n');
        return tidy(nl ? nl + 1 : io->tail);
}

static int spawn_piped(const char *const *argv, struct run_io *io, pid_t *ret)
{
        posix_spawn_file_actions_t fa;
        int o[2], e[2], r;

        if (pipe2(o, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(e, O_CLOEXEC) < 0) {
                close(o[0]);
                close(o[1]);
                return -errno;
        }
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, o[1], 1);
        posix_spawn_file_actions_adddup2(&fa, e[1], 2);
        r = -posix_spawnp(ret, argv[0], &fa, NULL, (char *const *)argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(o[1]);
        close(e[1]);
        io->out = o[0];
        io->errp = e[0];
        return r;
}

int image_run(const char *const *argv, size_t max, char **ret_out, const volatile bool *cancel,
              void (*tick)(void *), void *ctx, struct fk_error *err)
{
        struct run_io io = {.max = max};
        int status = 0, r;
        bool killed = false;
        pid_t pid;

        if (ret_out && !(io.buf = malloc(max + 1)))
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = spawn_piped(argv, &io, &pid);
        if (r < 0) {
                if (io.out >= 0)
                        close(io.out);
                if (io.errp >= 0)
                        close(io.errp);
                free(io.buf);
                return fk_error_set(err, r, "run %s: %s (install it: scripts/install-deps.sh)",
                                    argv[0], strerror(-r));
        }
        while (run_drain(&io, 200) > 0) {
                if (tick)
                        tick(ctx);
                if (cancel && *cancel && !killed) {
                        kill(pid, SIGKILL);
                        killed = true;
                }
        }
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (killed)
                r = fk_error_set(err, -ECANCELED, "%s: cancelled", argv[0]);
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                const char *line = last_line(&io);

                r = fk_error_set(err, -EIO, "%s", line[0] ? line : argv[0]);
        }
        if (r < 0 || !ret_out) {
                free(io.buf);
                return r;
        }
        io.buf[io.n] = '\0';
        *ret_out = io.buf;
        return (int)FK_MIN(io.n, (size_t)INT32_MAX);
}

/* skopeo's transport options for the registry of p (TLS, auth file), appended to argv. */
static void registry_args(const struct image_pull *p, bool copy, const char **argv, size_t *n)
{
        const struct registry_spec *rs = node_config_find_registry(p->st->cfg, p->oref.host);

        if (rs && rs->insecure)
                argv[(*n)++] = copy ? "--src-tls-verify=false" : "--tls-verify=false";
        if (rs && rs->auth_file) {
                argv[(*n)++] = copy ? "--src-authfile" : "--authfile";
                argv[(*n)++] = rs->auth_file;
        }
}

/* docker://host/repo@digest or :tag */
static int transport(const struct image_pull *p, const char *digest, char **ret)
{
        if (digest)
                return fk_asprintf(ret, "docker://%s/%s@%s", p->oref.host, p->oref.repo, digest);
        return fk_asprintf(ret, "docker://%s/%s:%s", p->oref.host, p->oref.repo, p->oref.tag);
}

static int inspect_raw(struct image_pull *p, const char *digest, json_t **ret, char *ret_digest,
                       struct fk_error *err)
{
        cleanup_free char *src = NULL, *out = NULL;
        const char *argv[12] = {"skopeo", "inspect", "--raw"};
        size_t n = 3;
        char hex[2 * FK_SHA256_SIZE + 1];
        int r;

        if (transport(p, digest, &src) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        registry_args(p, false, argv, &n);
        argv[n++] = src;
        r = image_run(argv, MANIFEST_MAX, &out, &p->st->stopping, NULL, NULL, err);
        if (r < 0)
                return r;
        fk_sha256_hex(out, (size_t)r, hex);
        snprintf(ret_digest, 72, "sha256:%s", hex);
        *ret = json_loads(out, 0, NULL);
        if (!json_is_object(*ret))
                return fk_error_set(err, -EPROTO, "%s: the registry's manifest is not JSON", src);
        return 0;
}

/* An index or manifest list: the linux/amd64 entry's digest. */
static const char *platform_digest(json_t *index)
{
        size_t i;
        json_t *m;

        json_array_foreach(json_object_get(index, "manifests"), i, m)
        {
                json_t *pl = json_object_get(m, "platform");
                const char *os = json_string_value(json_object_get(pl, "os"));
                const char *arch = json_string_value(json_object_get(pl, "architecture"));

                if (os && arch && strcmp(os, "linux") == 0 && strcmp(arch, "amd64") == 0)
                        return json_string_value(json_object_get(m, "digest"));
        }
        return NULL;
}

/* The manifest digest and the bytes copy will fetch (config + layers). */
static int resolve_manifest(struct image_pull *p, struct fk_error *err)
{
        char digest[72];
        json_t *m = NULL, *l;
        uint64_t total = 0;
        size_t i;
        int r;

        r = inspect_raw(p, p->oref.digest[0] ? p->oref.digest : NULL, &m, digest, err);
        if (r >= 0 && json_object_get(m, "manifests")) {
                const char *pd = platform_digest(m);
                char pdc[72];

                snprintf(pdc, sizeof(pdc), "%s", pd ? pd : "");
                json_decref(m);
                m = NULL;
                r = pd ? inspect_raw(p, pdc, &m, digest, err)
                       : fk_error_set(err, -ENOENT, "%s has no linux/amd64 image", p->ref);
        }
        if (r >= 0) {
                total = (uint64_t)json_integer_value(
                        json_object_get(json_object_get(m, "config"), "size"));
                json_array_foreach(json_object_get(m, "layers"), i, l) total +=
                        (uint64_t)json_integer_value(json_object_get(l, "size"));
                pthread_mutex_lock(&p->st->lock);
                snprintf(p->digest, sizeof(p->digest), "%s", digest);
                p->bytes_total = total;
                pthread_mutex_unlock(&p->st->lock);
        }
        json_decref(m);
        return r;
}

struct copy_tick {
        struct image_pull *p;
        const char *layout, *blobs;
};

/* Bytes of the regular files in dir whose names start with prefix. */
static uint64_t dir_bytes(const char *dir, const char *prefix)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        struct stat st;
        uint64_t sum = 0;

        while (d && (e = readdir(d)))
                if (e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
                    fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
                        sum += (uint64_t)st.st_size;
        if (d)
                closedir(d);
        return sum;
}

/* skopeo writes each blob as <layout>/oci-put-blob* and renames it into blobs/sha256 */
static void copy_tick(void *ctx)
{
        struct copy_tick *t = ctx;
        uint64_t sum = dir_bytes(t->layout, "oci-put-blob") + dir_bytes(t->blobs, "");

        pthread_mutex_lock(&t->p->st->lock);
        t->p->bytes_done = FK_MIN(sum, t->p->bytes_total ? t->p->bytes_total : sum);
        pthread_mutex_unlock(&t->p->st->lock);
}

static int copy_layout(struct image_pull *p, const char *work, struct fk_error *err)
{
        cleanup_free char *src = NULL, *dst = NULL, *blobs = NULL, *layout = NULL;
        const char *argv[12] = {"skopeo", "copy", "--quiet"};
        struct copy_tick t = {.p = p};
        size_t n = 3;

        if (transport(p, p->digest, &src) < 0 ||
            fk_asprintf(&dst, "oci:%s/layout:image", work) < 0 ||
            fk_asprintf(&blobs, "%s/layout/blobs/sha256", work) < 0 ||
            fk_asprintf(&layout, "%s/layout", work) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        registry_args(p, true, argv, &n);
        argv[n++] = src;
        argv[n++] = dst;
        t.blobs = blobs;
        t.layout = layout;
        return image_run(argv, 0, NULL, &p->st->stopping, copy_tick, &t, err);
}

static int unpack(struct image_pull *p, const char *work, struct fk_error *err)
{
        cleanup_free char *image = NULL, *tree = NULL;
        const char *argv[8] = {"umoci", "raw", "unpack"};
        size_t n = 3;

        if (fk_asprintf(&image, "%s/layout:image", work) < 0 ||
            fk_asprintf(&tree, "%s/tree", work) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        /* as root umoci keeps the layers' owners; unprivileged it maps them to the caller */
        if (geteuid() != 0)
                argv[n++] = "--rootless";
        argv[n++] = "--image";
        argv[n++] = image;
        argv[n++] = tree;
        return image_run(argv, 0, NULL, &p->st->stopping, NULL, NULL, err);
}

/* image.json and config.json beside rootfs.img in out. */
static int write_meta(struct image_pull *p, const char *work, const char *out, struct fk_error *err)
{
        cleanup_free char *cpath = NULL, *mpath = NULL, *text = NULL, *rootfs = NULL;
        json_t *config = NULL, *meta;
        struct stat st;
        int r;

        r = image_read_config(work, &config, err);
        if (r < 0)
                return r;
        if (fk_asprintf(&cpath, "%s/config.json", out) < 0 ||
            fk_asprintf(&mpath, "%s/image.json", out) < 0 ||
            fk_asprintf(&rootfs, "%s/rootfs.img", out) < 0 ||
            json_dump_file(config, cpath, JSON_SORT_KEYS) < 0) {
                json_decref(config);
                return fk_error_set(err, -EIO, "write %s/config.json", out);
        }
        json_decref(config);
        meta = json_pack("{s:s, s:s, s:b, s:I, s:I, s:I}", "digest", p->digest, "reference", p->ref,
                         "pinned", p->pin, "pulledAt",
                         (json_int_t)(fk_now_real_ns() / 1000000000ull), "sizeBytes",
                         (json_int_t)p->bytes_total, "rootfsBytes",
                         (json_int_t)(stat(rootfs, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0));
        text = meta ? json_dumps(meta, JSON_SORT_KEYS) : NULL;
        json_decref(meta);
        if (!text || fk_write_file_atomic(mpath, text, strlen(text), 0644) < 0)
                return fk_error_set(err, -EIO, "write %s", mpath);
        return 0;
}

/* Unpack, inject, mkfs into work/out; then rename it to images/<hex>. */
static int build_and_publish(struct image_pull *p, const char *work, struct fk_error *err)
{
        const struct image_spec *base = node_config_find_image(p->st->cfg, "minimal");
        cleanup_free char *tree = NULL, *out = NULL, *img = NULL, *initrd = NULL, *dst = NULL;
        int r;

        if (!base)
                return fk_error_set(err, -ENOENT,
                                    "the node lists no image \"minimal\": its kernel, initrd and "
                                    "agent boot OCI images");
        if (fk_asprintf(&tree, "%s/tree", work) < 0 || fk_asprintf(&out, "%s/out", work) < 0 ||
            fk_asprintf(&img, "%s/out/rootfs.img", work) < 0 ||
            fk_asprintf(&initrd, "%s/initrd.img", base->dir) < 0 ||
            image_dir(p->st, p->digest, &dst) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = unpack(p, work, err);
        if (r >= 0)
                r = image_inject_agent(initrd, tree, work, err);
        if (r >= 0 && mkdir(out, 0755) < 0)
                r = fk_error_set(err, -errno, "mkdir %s: %m", out);
        if (r >= 0)
                r = image_build_ext4(tree, img, err);
        if (r >= 0)
                r = write_meta(p, work, out, err);
        if (r >= 0 && rename(out, dst) < 0 && errno != EEXIST && errno != ENOTEMPTY)
                r = fk_error_set(err, -errno, "rename %s to %s: %m", out, dst);
        return r;
}

void image_pull_run(struct image_pull *p)
{
        struct agent_image_store *st = p->st;
        cleanup_free char *work = NULL, *dst = NULL, *rootfs = NULL;
        struct fk_error err = {0};
        int r;

        r = resolve_manifest(p, &err);
        if (r >= 0 &&
            (image_dir(st, p->digest, &dst) < 0 || fk_asprintf(&rootfs, "%s/rootfs.img", dst) < 0))
                r = fk_error_set(&err, -ENOMEM, "out of memory");
        /* one copy per digest: another tag of the same image is already here */
        if (r >= 0 && access(rootfs, R_OK) < 0) {
                if (fk_asprintf(&work, "%s/tmp/pull.XXXXXX", st->root) < 0 || !mkdtemp(work))
                        r = fk_error_set(&err, -errno, "create a pull directory: %m");
                if (r >= 0)
                        r = copy_layout(p, work, &err);
                if (r >= 0)
                        r = build_and_publish(p, work, &err);
                if (work)
                        (void)fk_rm_rf(work);
        }
        pthread_mutex_lock(&st->lock);
        if (r >= 0)
                r = image_refs_set(st, p->ref, p->digest);
        if (r >= 0 && p->pin)
                (void)image_pin(st, p->digest);
        p->state = r >= 0 ? IMAGE_PULL_DONE : IMAGE_PULL_FAILED;
        if (r >= 0)
                p->bytes_done = p->bytes_total;
        else
                snprintf(p->msg, sizeof(p->msg), "%s", err.msg[0] ? err.msg : strerror(-r));
        pthread_mutex_unlock(&st->lock);
}
