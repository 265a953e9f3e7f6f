/* SPDX-License-Identifier: MIT */
/* The jailed QEMU's private mount namespace: a tmpfs root holding /usr read-only, the loader
 * cache, a few device nodes, a /proc that shows only its own processes, and exactly the
 * session's files at their host paths; the host's tree is gone after pivot_root. */
#include "agent/jail/jail.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Top-level names that merged-/usr hosts make symlinks into /usr (else bound read-only). */
static const char *const top_names[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
static const char *const dev_nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom"};

/* True when path is dir or lies below it. */
static bool path_under(const char *path, const char *dir)
{
        size_t n = strlen(dir);

        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Absolute, and no "." or ".." component: the child creates it name by name. */
static bool path_plain(const char *p)
{
        if (p[0] != '/' || strlen(p) >= PATH_MAX / 2)
                return false;
        for (const char *c = p; (c = strchr(c, '/')); c++)
                if ((c[1] == '.' && (c[2] == '/' || !c[2])) ||
                    (c[1] == '.' && c[2] == '.' && (c[3] == '/' || !c[3])))
                        return false;
        return true;
}

int agent_jail_bind(struct agent_jail *j, const char *path, unsigned flags)
{
        struct stat st;

        if (!path_plain(path))
                return -EINVAL;
        for (size_t i = 0; i < j->n_binds; i++)
                if (j->binds[i].dir && path_under(path, j->binds[i].path)) {
                        /* inside a bound directory: nothing to add, but the wider wins */
                        j->binds[i].flags |= flags & AGENT_JAIL_RW;
                        return 0;
                }
        if (j->n_binds >= AGENT_JAIL_BINDS_MAX)
                return -E2BIG;
        if (stat(path, &st) < 0)
                return -errno;
        if (!(j->binds[j->n_binds].path = strdup(path)))
                return -ENOMEM;
        j->binds[j->n_binds].flags = flags;
        j->binds[j->n_binds].dir = S_ISDIR(st.st_mode);
        j->n_binds++;
        return 0;
}

/* /usr, the top-level names, the loader cache and the device nodes every QEMU uses. */
static int bind_system(struct agent_jail *j)
{
        char target[PATH_MAX];
        int r = agent_jail_bind(j, "/usr", 0);

        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(top_names); i++) {
                char path[32];
                struct stat st;
                ssize_t n;

                snprintf(path, sizeof(path), "/%s", top_names[i]);
                if (lstat(path, &st) < 0)
                        continue;
                if (!S_ISLNK(st.st_mode)) {
                        r = S_ISDIR(st.st_mode) ? agent_jail_bind(j, path, 0) : 0;
                        continue;
                }
                n = readlink(path, target, sizeof(target) - 1);
                if (n <= 0 || j->n_links >= ARRAY_SIZE(j->links))
                        continue;
                target[n] = '\0';
                j->links[j->n_links].name = strdup(top_names[i]);
                j->links[j->n_links].target = strdup(target);
                if (!j->links[j->n_links].name || !j->links[j->n_links++].target)
                        r = -ENOMEM;
        }
        if (r >= 0 && access("/etc/ld.so.cache", R_OK) == 0)
                r = agent_jail_bind(j, "/etc/ld.so.cache", 0);
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(dev_nodes); i++)
                r = agent_jail_bind(j, dev_nodes[i], AGENT_JAIL_RW | AGENT_JAIL_DEV);
        return r;
}

int agent_jail_mounts_init(struct agent_jail *j, const char *root)
{
        struct stat st;

        /* the child joins root and a bind's path (each under PATH_MAX / 2) in PATH_MAX */
        if (root[0] != '/' || strlen(root) >= PATH_MAX / 2 - 1)
                return -ENAMETOOLONG;
        /* root is forkletd's: only its own empty directory may be covered by the tmpfs */
        if (mkdir(root, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (lstat(root, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
                return -EPERM;
        if (!(j->root = strdup(root)))
                return -ENOMEM;
        return bind_system(j);
}

void agent_jail_done(struct agent_jail *j)
{
        for (size_t i = 0; i < j->n_binds; i++)
                free(j->binds[i].path);
        for (size_t i = 0; i < j->n_links; i++) {
                free(j->links[i].name);
                free(j->links[i].target);
        }
        free(j->root);
        *j = (struct agent_jail){0};
}

/* ---- in the child, before exec: async-signal-safe from here on ---------------------- */

/* buf = root + path (both checked short enough when the table was built). */
static char *join(char *buf, const char *root, const char *path)
{
        size_t a = strlen(root), b = strlen(path);

        memcpy(buf, root, a);
        memcpy(buf + a, path, b + 1);
        return buf;
}

/* Creates every directory of path below the first skip bytes (the jail root), then the last
 * component as a directory or an empty file: the mount point of one bind. */
static int make_mount_point(char *path, size_t skip, bool dir)
{
        int fd;

        for (char *c = path + skip + 1; (c = strchr(c, '/')); c++) {
                *c = '\0';
                int r = mkdir(path, 0755);
                *c = '/';
                if (r < 0 && errno != EEXIST)
                        return -errno;
        }
        if (dir)
                return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

static int bind_one(const struct agent_jail *j, const struct agent_jail_bind *b)
{
        char dst[PATH_MAX];
        unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID;
        int r;

        join(dst, j->root, b->path);
        vmm_pre_exec_step("jail: bind", b->path);
        r = make_mount_point(dst, strlen(j->root), b->dir);
        if (r < 0)
                return r;
        if (mount(b->path, dst, NULL, MS_BIND, NULL) < 0)
                return -errno;
        if (!(b->flags & AGENT_JAIL_RW))
                flags |= MS_RDONLY;
        if (!(b->flags & AGENT_JAIL_DEV))
                flags |= MS_NODEV;
        if (b->flags & AGENT_JAIL_RW)
                flags |= MS_NOEXEC; /* nothing QEMU may write is ever executed */
        return mount(NULL, dst, NULL, flags, NULL) < 0 ? -errno : 0;
}

/* A /proc for /proc/self (QEMU finds its data dir through /proc/self/exe): other users'
 * processes invisible, and, where the kernel has it (5.8+), nothing but process dirs. */
static int mount_proc(const char *root)
{
        char dst[PATH_MAX];
        unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;

        join(dst, root, "/proc");
        vmm_pre_exec_step("jail: mount proc", NULL);
        if (mkdir(dst, 0555) < 0 && errno != EEXIST)
                return -errno;
        if (mount("proc", dst, "proc", flags, "hidepid=invisible,subset=pid") == 0 ||
            mount("proc", dst, "proc", flags, "hidepid=2") == 0)
                return 0;
        return -errno;
}

int agent_jail_enter_mounts(const struct agent_jail *j)
{
        char path[PATH_MAX];
        int r;

        vmm_pre_exec_step("jail: unshare mount ns", NULL);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        vmm_pre_exec_step("jail: tmpfs root", j->root);
        if (mount("forklet-jail", j->root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
                return -errno;
        for (size_t i = 0; i < j->n_links; i++) {
                vmm_pre_exec_step("jail: symlink", j->links[i].name);
                join(path, j->root, "/");
                if (symlink(j->links[i].target, strcat(path, j->links[i].name)) < 0)
                        return -errno;
        }
        for (size_t i = 0; i < j->n_binds; i++)
                if ((r = bind_one(j, &j->binds[i])) < 0)
                        return r;
        if ((r = mount_proc(j->root)) < 0)
                return r;
        /* the tmpfs itself read-only: QEMU writes only where a bind allows it */
        vmm_pre_exec_step("jail: remount root read-only", j->root);
        if (mount(NULL, j->root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                return -errno;
        /* pivot_root(".", "."): the old root ends up on top of the new one and is detached */
        vmm_pre_exec_step("jail: pivot_root", j->root);
        if (chdir(j->root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
            umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
                return -errno;
        return 0;
}
