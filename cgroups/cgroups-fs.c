/* SPDX-License-Identifier: MIT */
/* File access for the cgroups module: every read and write is relative to a hierarchy's parent
 * dirfd, and every error names the absolute file so a person can find it. */
#include "cgroups/cgroups-internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CG_READ_MAX (4u << 20)

int cg_join_path(char *buf, size_t size, const char *name, const char *file)
{
        int n;

        if (name && file)
                n = snprintf(buf, size, "%s/%s", name, file);
        else
                n = snprintf(buf, size, "%s", name ? name : file ? file : ".");
        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        return 0;
}

int cg_hier_find(const struct cg_manager *m, unsigned ctrl)
{
        for (size_t i = 0; i < m->n_hier; i++)
                if (m->hier[i].controllers & ctrl)
                        return (int)i;
        return -1;
}

static int fail(const struct cg_hier *h, const char *rel, int r, const char *what,
                struct fk_error *err)
{
        return fk_error_set(err, r, "%s %s/%s: %s", what, h->parent_path, rel, strerror(-r));
}

int cg_write(const struct cg_hier *h, const char *name, const char *file, const char *value,
             struct fk_error *err)
{
        char rel[512];
        cleanup_close int fd = -1;
        size_t len = strlen(value);
        ssize_t k;
        int r = cg_join_path(rel, sizeof(rel), name, file);

        if (r < 0)
                return fk_error_set(err, r, "cgroup path too long: %s", file);
        /* No O_CREAT: a missing file means the controller or feature is absent. */
        fd = openat(h->parent_fd, rel, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
                return fail(h, rel, -errno, "open", err);
        do
                k = write(fd, value, len);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return fk_error_set(err, -errno, "write \"%s\" to %s/%s: %s", value, h->parent_path,
                                    rel, strerror(errno));
        if ((size_t)k != len)
                return fk_error_set(err, -EIO, "short write to %s/%s", h->parent_path, rel);
        log_debug("cgroups: wrote \"%s\" to %s/%s", value, h->parent_path, rel);
        return 0;
}

int cg_read(const struct cg_hier *h, const char *name, const char *file, char **ret,
            struct fk_error *err)
{
        char rel[512];
        cleanup_close int fd = -1;
        cleanup_free char *buf = NULL;
        size_t size = 0, alloc = 0;
        int r = cg_join_path(rel, sizeof(rel), name, file);

        if (r < 0)
                return fk_error_set(err, r, "cgroup path too long: %s", file);
        fd = openat(h->parent_fd, rel, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return fail(h, rel, -errno, "open", err);
        for (;;) {
                ssize_t k;

                if (size + 1 >= alloc) {
                        char *p;

                        alloc = alloc ? alloc * 2 : 4096;
                        if (alloc > CG_READ_MAX)
                                return fail(h, rel, -EFBIG, "read", err);
                        p = realloc(buf, alloc);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                }
                k = read(fd, buf + size, alloc - size - 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return fail(h, rel, -errno, "read", err);
                if (k == 0)
                        break;
                size += (size_t)k;
        }
        buf[size] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

int cg_read_u64(const struct cg_hier *h, const char *name, const char *file, uint64_t *ret,
                struct fk_error *err)
{
        cleanup_free char *s = NULL;
        int r = cg_read(h, name, file, &s, err);

        if (r < 0)
                return r;
        r = cg_parse_u64(s, ret);
        if (r < 0)
                return fk_error_set(err, r, "parse %s/%s/%s: not a number: \"%.32s\"",
                                    h->parent_path, name ? name : ".", file, s);
        return 0;
}

int cg_read_keyed(const struct cg_hier *h, const char *name, const char *file, const char *key,
                  uint64_t *ret, struct fk_error *err)
{
        cleanup_free char *s = NULL;
        int r = cg_read(h, name, file, &s, err);

        if (r < 0)
                return r;
        r = cg_parse_keyed(s, key, ret);
        if (r < 0)
                return fk_error_set(err, r, "parse %s/%s/%s: no valid \"%s\" line", h->parent_path,
                                    name ? name : ".", file, key);
        return 0;
}

int cg_file_exists(const struct cg_hier *h, const char *name, const char *file)
{
        char rel[512];

        if (cg_join_path(rel, sizeof(rel), name, file) < 0)
                return 0;
        return faccessat(h->parent_fd, rel, F_OK, 0) == 0;
}

int cg_read_pids(const struct cg_hier *h, const char *name, pid_t **ret, size_t *ret_n,
                 struct fk_error *err)
{
        cleanup_free char *s = NULL;
        cleanup_free pid_t *pids = NULL;
        size_t n = 0;
        char *save = NULL;
        int r = cg_read(h, name, "cgroup.procs", &s, err);

        if (r < 0)
                return r;
        for (char *t = strtok_r(s, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
                uint64_t v;
                pid_t *p;

                if (cg_parse_u64(t, &v) < 0 || v == 0 || v > INT32_MAX)
                        return fk_error_set(err, -EINVAL,
                                            "parse %s/%s/cgroup.procs: bad pid \"%s\"",
                                            h->parent_path, name, t);
                p = realloc(pids, (n + 1) * sizeof(*pids));
                if (!p)
                        return -ENOMEM;
                pids = p;
                pids[n++] = (pid_t)v;
        }
        *ret = TAKE_PTR(pids);
        *ret_n = n;
        return 0;
}

int cg_backoff(uint64_t deadline_ns, unsigned *step)
{
        uint64_t now = fk_now_mono_ns(), ms;
        struct timespec ts;

        if (now >= deadline_ns)
                return -ETIMEDOUT;
        ms = *step < 6 ? 1u << *step : 50;
        if (ms > 50)
                ms = 50;
        if (now + ms * 1000000 > deadline_ns)
                ms = (deadline_ns - now) / 1000000 + 1;
        (*step)++;
        ts.tv_sec = (time_t)(ms / 1000);
        ts.tv_nsec = (long)(ms % 1000) * 1000000;
        nanosleep(&ts, NULL);
        return 0;
}
