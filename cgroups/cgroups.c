/* SPDX-License-Identifier: MIT */
/* The backend-independent half of the cgroups interface: names, create/update/attach,
 * destroy, listing and node capacity. Backend specifics go through m->ops. */
#include "cgroups/cgroups-internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *cg_version_to_string(enum cg_version v)
{
        switch (v) {
        case CG_VERSION_1:
                return "v1";
        case CG_VERSION_2:
                return "v2";
        default:
                return "auto";
        }
}

bool cg_name_is_valid(const char *name)
{
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > 200 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
               n;
}

static int check_name(const char *name, struct fk_error *err)
{
        if (cg_name_is_valid(name))
                return 0;
        return fk_error_set(err, -EINVAL,
                            "cgroup name \"%.64s\": want 1-200 characters of [A-Za-z0-9._-]",
                            name ? name : "(null)");
}

enum cg_version cg_manager_version(const struct cg_manager *m)
{
        return m->ops->version;
}

const char *cg_manager_parent_path(const struct cg_manager *m)
{
        return m->hier[0].parent_path;
}

int cg_manager_cgroup_path(const struct cg_manager *m, const char *name, char **ret)
{
        int r;

        if (!cg_name_is_valid(name))
                return -EINVAL;
        r = fk_asprintf(ret, "%s/%s", m->hier[0].rel_parent, name);

        return r < 0 ? r : 0;
}

/* rmdir name under h. A fake tree (plain directories in unit tests) holds regular files the
 * kernel would not: unlink those first so the same code path runs. */
static int rmdir_cgroup(const struct cg_hier *h, const char *name)
{
        if (h->fake) {
                cleanup_close int fd =
                        openat(h->parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
                struct dirent *de;

                if (d) {
                        fd = -1; /* owned by d now */
                        while ((de = readdir(d)))
                                if (de->d_type == DT_REG)
                                        (void)unlinkat(dirfd(d), de->d_name, 0);
                        closedir(d);
                }
        }
        return unlinkat(h->parent_fd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

int cg_create(struct cg_manager *m, const char *name, const struct cg_limits *limits,
              struct fk_error *err)
{
        bool created[CG_HIER_MAX] = {false}, all_existed = true;
        int r;

        if ((r = check_name(name, err)) < 0)
                return r;
        for (size_t i = 0; i < m->n_hier; i++) {
                if (mkdirat(m->hier[i].parent_fd, name, 0755) == 0)
                        created[i] = true;
                else if (errno != EEXIST) {
                        r = fk_error_set(err, -errno, "mkdir %s/%s: %m", m->hier[i].parent_path,
                                         name);
                        goto undo;
                }
                all_existed = all_existed && !created[i];
        }
        r = m->ops->apply_limits(m, name, limits, err);
        if (r < 0)
                goto undo;
        log_debug("cgroups: %s %s/%s", all_existed ? "adopted" : "created", m->hier[0].parent_path,
                  name);
        return all_existed ? 1 : 0;
undo:
        for (size_t i = 0; i < m->n_hier; i++)
                if (created[i])
                        (void)rmdir_cgroup(&m->hier[i], name);
        return r;
}

static int check_exists(struct cg_manager *m, const char *name, struct fk_error *err)
{
        int r = check_name(name, err);

        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_hier; i++) {
                struct stat st;

                if (fstatat(m->hier[i].parent_fd, name, &st, 0) < 0)
                        return fk_error_set(err, -errno, "cgroup %s/%s: %m", m->hier[i].parent_path,
                                            name);
        }
        return 0;
}

int cg_update_limits(struct cg_manager *m, const char *name, const struct cg_limits *limits,
                     struct fk_error *err)
{
        int r = check_exists(m, name, err);

        if (r < 0)
                return r;
        return m->ops->apply_limits(m, name, limits, err);
}

int cg_attach_pid(struct cg_manager *m, const char *name, pid_t pid, struct fk_error *err)
{
        char buf[32];
        int r = check_exists(m, name, err);

        if (r < 0)
                return r;
        snprintf(buf, sizeof(buf), "%d", (int)pid);
        for (size_t i = 0; i < m->n_hier; i++)
                if ((r = cg_write(&m->hier[i], name, "cgroup.procs", buf, err)) < 0)
                        return r;
        return 0;
}

int cg_stats(struct cg_manager *m, const char *name, struct cg_stats *ret, struct fk_error *err)
{
        struct cg_stats s = {0};
        int r = check_exists(m, name, err);

        if (r < 0)
                return r;
        r = m->ops->stats(m, name, &s, err);
        if (r < 0)
                return r;
        *ret = s;
        return 0;
}

int cg_destroy(struct cg_manager *m, const char *name, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + m->timeout_ns;
        int r = check_name(name, err);

        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_hier; i++) {
                cleanup_free pid_t *pids = NULL;
                size_t n = 0;

                if (!cg_file_exists(&m->hier[i], name, "."))
                        continue;
                r = cg_read_pids(&m->hier[i], name, &pids, &n, err);
                if (r < 0 && r != -ENOENT)
                        return r;
                if (n > 0)
                        return fk_error_set(err, -EBUSY,
                                            "cgroup %s/%s still has %zu process(es) (first %d): "
                                            "kill them first",
                                            m->hier[i].parent_path, name, n, (int)pids[0]);
        }
        for (size_t i = 0; i < m->n_hier; i++) {
                unsigned step = 0;

                /* EBUSY: exiting tasks still charged to the cgroup for a moment */
                while ((r = rmdir_cgroup(&m->hier[i], name)) == -EBUSY &&
                       cg_backoff(deadline, &step) == 0)
                        ;
                if (r < 0 && r != -ENOENT)
                        return fk_error_set(err, r, "rmdir %s/%s: %s", m->hier[i].parent_path, name,
                                            strerror(-r));
        }
        log_debug("cgroups: destroyed %s/%s", m->hier[0].parent_path, name);
        return 0;
}

int cg_manager_remove_parent(struct cg_manager *m, struct fk_error *err)
{
        for (size_t i = 0; i < m->n_hier; i++) {
                struct cg_hier *h = &m->hier[i];

                if (rmdir(h->parent_path) < 0 && errno != ENOENT)
                        return fk_error_set(err, -errno, "rmdir %s: %m", h->parent_path);
        }
        return 0;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int cg_list(struct cg_manager *m, char ***ret, struct fk_error *err)
{
        struct cg_hier *h = &m->hier[0];
        char **names = NULL;
        int fd = openat(h->parent_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int r = 0;

        if (!d) {
                r = -errno;
                if (fd >= 0)
                        close(fd);
                return fk_error_set(err, r, "list %s: %s", h->parent_path, strerror(-r));
        }
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && cg_name_is_valid(de->d_name) &&
                    (r = fk_strv_push(&names, de->d_name)) < 0)
                        break;
        closedir(d);
        if (r >= 0 && !names && !(names = calloc(1, sizeof(char *))))
                r = -ENOMEM;
        if (r < 0) {
                fk_strv_free(names);
                return r;
        }
        qsort(names, fk_strv_length(names), sizeof(char *), cmp_str);
        *ret = names;
        return 0;
}

int cg_pids(struct cg_manager *m, const char *name, pid_t **ret, size_t *ret_n,
            struct fk_error *err)
{
        int r = check_name(name, err);

        if (r < 0)
                return r;
        return cg_read_pids(&m->hier[0], name, ret, ret_n, err);
}

int cg_node_capacity(const char *meminfo_path, struct cg_capacity *ret, struct fk_error *err)
{
        const char *path = meminfo_path ? meminfo_path : "/proc/meminfo";
        cleanup_free char *text = NULL;
        unsigned long long kb;
        cpu_set_t set;
        const char *p;
        int r = fk_read_file(path, 1 << 20, &text, NULL);

        if (r < 0)
                return fk_error_set(err, r, "read %s: %s", path, strerror(-r));
        p = strstr(text, "MemTotal:");
        if (!p || (p != text && p[-1] != '\n') || sscanf(p, "MemTotal: %llu kB", &kb) != 1)
                return fk_error_set(err, -EINVAL, "%s: no \"MemTotal: N kB\" line", path);
        if (sched_getaffinity(0, sizeof(set), &set) < 0)
                return fk_error_set(err, -errno, "sched_getaffinity: %m");
        ret->memory_bytes = (uint64_t)kb * 1024;
        ret->cpus = (unsigned)CPU_COUNT(&set);
        return 0;
}
