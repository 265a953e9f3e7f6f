/* SPDX-License-Identifier: MIT */
/* Processes and cgroups: joining before exec (precomputed fds, async-signal-safe), freezing
 * and killing every process of a session cgroup with bounded waits. */
#include "cgroups/cgroups-internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cg_join *cg_join_free(struct cg_join *j)
{
        if (!j)
                return NULL;
        for (size_t i = 0; i < j->n; i++)
                if (j->procs_fd[i] >= 0)
                        close(j->procs_fd[i]);
        if (j->cgroup_fd >= 0)
                close(j->cgroup_fd);
        free(j);
        return NULL;
}

int cg_prepare_join(struct cg_manager *m, const char *name, struct cg_join **ret,
                    struct fk_error *err)
{
        struct cg_join *j;
        char rel[512];
        int r;

        if (!cg_name_is_valid(name))
                return fk_error_set(err, -EINVAL, "cgroup name \"%.64s\" is invalid",
                                    name ? name : "(null)");
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->cgroup_fd = -1;
        for (size_t i = 0; i < m->n_hier; i++) {
                (void)cg_join_path(rel, sizeof(rel), name, "cgroup.procs");
                j->procs_fd[i] = openat(m->hier[i].parent_fd, rel, O_WRONLY | O_CLOEXEC);
                if (j->procs_fd[i] < 0) {
                        r = fk_error_set(err, -errno, "open %s/%s: %m", m->hier[i].parent_path,
                                         rel);
                        cg_join_free(j);
                        return r;
                }
                j->n++;
        }
        if (m->ops->version == CG_VERSION_2) {
                j->cgroup_fd =
                        openat(m->hier[0].parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (j->cgroup_fd < 0) {
                        r = fk_error_set(err, -errno, "open %s/%s: %m", m->hier[0].parent_path,
                                         name);
                        cg_join_free(j);
                        return r;
                }
        }
        *ret = j;
        return 0;
}

int cg_join_self(const struct cg_join *j)
{
        char buf[16];
        size_t len = 0;
        int saved = errno, r = 0;
        unsigned v = (unsigned)getpid();
        char tmp[16];

        /* itoa by hand: snprintf is not async-signal-safe */
        do
                tmp[len++] = (char)('0' + v % 10);
        while ((v /= 10) && len < sizeof(tmp));
        for (size_t i = 0; i < len; i++)
                buf[i] = tmp[len - 1 - i];
        for (size_t i = 0; i < j->n && r == 0; i++) {
                ssize_t k;

                do
                        k = pwrite(j->procs_fd[i], buf, len, 0);
                while (k < 0 && errno == EINTR);
                if (k < 0)
                        r = -errno;
                else if ((size_t)k != len)
                        r = -EIO;
        }
        errno = saved;
        return r;
}

int cg_join_pre_exec(void *userdata)
{
        return cg_join_self(userdata);
}

int cg_join_cgroup_fd(const struct cg_join *j)
{
        return j->cgroup_fd >= 0 ? j->cgroup_fd : -EOPNOTSUPP;
}

int cg_freeze(struct cg_manager *m, const char *name, struct fk_error *err)
{
        if (!cg_name_is_valid(name))
                return fk_error_set(err, -EINVAL, "cgroup name \"%.64s\" is invalid", name);
        return m->ops->set_frozen(m, name, true, err);
}

int cg_thaw(struct cg_manager *m, const char *name, struct fk_error *err)
{
        if (!cg_name_is_valid(name))
                return fk_error_set(err, -EINVAL, "cgroup name \"%.64s\" is invalid", name);
        return m->ops->set_frozen(m, name, false, err);
}

/* SIGKILLs every pid listed in any hierarchy; returns how many were listed. */
static int kill_listed(struct cg_manager *m, const char *name, struct fk_error *err)
{
        int total = 0;

        for (size_t i = 0; i < m->n_hier; i++) {
                cleanup_free pid_t *pids = NULL;
                size_t n = 0;
                int r = cg_read_pids(&m->hier[i], name, &pids, &n, err);

                if (r < 0)
                        return r;
                for (size_t k = 0; k < n; k++)
                        if (kill(pids[k], SIGKILL) < 0 && errno != ESRCH)
                                return fk_error_set(err, -errno, "kill %d in %s/%s: %m",
                                                    (int)pids[k], m->hier[i].parent_path, name);
                total += (int)n;
        }
        return total;
}

int cg_kill_all(struct cg_manager *m, const char *name, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + m->timeout_ns;
        bool freezer = cg_hier_find(m, CG_CTRL_FREEZER) >= 0;
        unsigned step = 0;
        int r, left;

        if (!cg_name_is_valid(name))
                return fk_error_set(err, -EINVAL, "cgroup name \"%.64s\" is invalid", name);
        r = m->ops->kill(m, name, err);
        if (r < 0)
                return r;
        for (;;) {
                bool self_killed = r == 1;

                /* Without cgroup.kill a forking process could outrun us: freeze, kill, thaw
                 * (SIGKILL is delivered once thawed). Freeze failures are not fatal here. */
                if (!self_killed && freezer)
                        (void)m->ops->set_frozen(m, name, true, NULL);
                left = self_killed ? 0 : kill_listed(m, name, err);
                if (!self_killed && freezer)
                        (void)m->ops->set_frozen(m, name, false, NULL);
                if (left < 0)
                        return left;
                if (left == 0) {
                        cleanup_free pid_t *pids = NULL;
                        size_t n = 0;

                        r = cg_read_pids(&m->hier[0], name, &pids, &n, err);
                        if (r < 0)
                                return r;
                        if (n == 0)
                                return 0;
                        left = (int)n;
                }
                if (cg_backoff(deadline, &step) < 0)
                        return fk_error_set(err, -ETIMEDOUT,
                                            "%d process(es) left in %s/%s after SIGKILL", left,
                                            m->hier[0].parent_path, name);
                r = 0;
        }
}
