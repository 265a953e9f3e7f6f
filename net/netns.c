/* SPDX-License-Identifier: MIT */
/* Named network namespaces as `ip netns` keeps them (/run/netns/NAME bind mounts), and running
 * code inside one from a dedicated thread so the caller's own netns never changes. */
#include <dirent.h>
#include <errno.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

int net_join_netns(int nsfd)
{
        /* raw syscall: nothing here may allocate or take locks (pre-exec hook). */
        if (syscall(SYS_setns, nsfd, CLONE_NEWNET) < 0)
                return -errno;
        return 0;
}

struct netns_thread {
        int nsfd;
        int (*fn)(void *);
        void *userdata;
        int r;
};

static void *netns_thread_main(void *p)
{
        struct netns_thread *t = p;

        if (t->nsfd >= 0 && setns(t->nsfd, CLONE_NEWNET) < 0) {
                t->r = -errno;
                return NULL;
        }
        t->r = t->fn(t->userdata);
        return NULL;
}

int net_netns_run(int nsfd, int (*fn)(void *userdata), void *userdata)
{
        struct netns_thread t = {.nsfd = nsfd, .fn = fn, .userdata = userdata, .r = -EIO};
        pthread_t th;
        int r;

        r = pthread_create(&th, NULL, netns_thread_main, &t);
        if (r != 0)
                return -r;
        r = pthread_join(th, NULL);
        if (r != 0)
                return -r;
        return t.r;
}

bool net_name_valid(const char *name)
{
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > NET_NAME_MAX || name[0] == '.')
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
                        return false;
        return true;
}

/* Like iproute2: make the run dir a shared mount so netns mounts propagate into the mount
 * namespaces of `ip netns exec` and friends. */
static int netns_run_dir_prepare(void)
{
        int r;

        r = fk_mkdir_p(NET_NETNS_RUN_DIR, 0755);
        if (r < 0)
                return r;
        if (mount("", NET_NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) == 0)
                return 0;
        if (errno != EINVAL)
                return -errno;
        if (mount(NET_NETNS_RUN_DIR, NET_NETNS_RUN_DIR, "none", MS_BIND | MS_REC, NULL) < 0)
                return -errno;
        if (mount("", NET_NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) < 0)
                return -errno;
        return 0;
}

static int netns_bind_new(void *userdata)
{
        const char *path = userdata;

        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
        if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0)
                return -errno;
        return 0;
}

int net_netns_create(const char *name, struct fk_error *reterr)
{
        cleanup_free char *path = NULL;
        cleanup_close int fd = -1;
        int r;

        if (!net_name_valid(name))
                return fk_error_set(reterr, -EINVAL, "netns name \"%s\" is not valid",
                                    name ? name : "");
        r = netns_run_dir_prepare();
        if (r < 0)
                return fk_error_set(reterr, r, "prepare %s: %s", NET_NETNS_RUN_DIR, strerror(-r));
        r = fk_asprintf(&path, "%s/%s", NET_NETNS_RUN_DIR, name);
        if (r < 0)
                return fk_error_set(reterr, r, "out of memory");
        fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
        if (fd < 0)
                return fk_error_set(reterr, -errno, "create %s: %m", path);
        r = net_netns_run(-1, netns_bind_new, path);
        if (r < 0) {
                (void)unlink(path);
                return fk_error_set(reterr, r, "bind a new netns on %s: %s", path, strerror(-r));
        }
        return 0;
}

int net_netns_open(const char *name)
{
        cleanup_free char *path = NULL;
        int fd;

        if (!net_name_valid(name))
                return -EINVAL;
        if (fk_asprintf(&path, "%s/%s", NET_NETNS_RUN_DIR, name) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fd;
}

int net_netns_delete(const char *name)
{
        cleanup_free char *path = NULL;

        if (!net_name_valid(name))
                return -EINVAL;
        if (fk_asprintf(&path, "%s/%s", NET_NETNS_RUN_DIR, name) < 0)
                return -ENOMEM;
        if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
                return -errno;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

static int strcmp_ptr(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int net_netns_list(const char *prefix, char ***ret)
{
        char **v = NULL;
        DIR *d;
        struct dirent *de;
        size_t plen = prefix ? strlen(prefix) : 0;
        int r = 0;

        d = opendir(NET_NETNS_RUN_DIR);
        if (!d && errno != ENOENT)
                return -errno;
        while (d && (de = readdir(d))) {
                if (de->d_name[0] == '.' || strncmp(de->d_name, prefix ? prefix : "", plen))
                        continue;
                r = fk_strv_push(&v, de->d_name);
                if (r < 0)
                        break;
        }
        if (d)
                closedir(d);
        if (r < 0) {
                fk_strv_free(v);
                return r;
        }
        if (!v) {
                v = calloc(1, sizeof(char *));
                if (!v)
                        return -ENOMEM;
        }
        qsort(v, fk_strv_length(v), sizeof(char *), strcmp_ptr);
        *ret = v;
        return 0;
}

struct socket_args {
        int domain, type, protocol, fd;
};

static int socket_here(void *userdata)
{
        struct socket_args *a = userdata;

        a->fd = socket(a->domain, a->type | SOCK_CLOEXEC, a->protocol);
        return a->fd < 0 ? -errno : 0;
}

int net_netns_socket(int nsfd, int domain, int type, int protocol)
{
        struct socket_args a = {.domain = domain, .type = type, .protocol = protocol, .fd = -1};
        int r;

        r = net_netns_run(nsfd, socket_here, &a);
        return r < 0 ? r : a.fd;
}
