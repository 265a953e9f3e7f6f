/* SPDX-License-Identifier: MIT */
/* The filesystems a node lives on: which one holds guest RAM, runDir and stateDir (a line each
 * at start), and forkletd's own tmpfs on <runDir>/sessions when runDir is on a disk filesystem,
 * so guest RAM files stay in memory as on a host whose /run is a tmpfs. */
#include "agent/runfs/runfs.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#define RAM_SOURCE "forklet-ram"
/* 100%: bounded by admission (capacity.reserveMemoryMiB), not by a tmpfs limit below RAM */
#define RAM_OPTIONS "mode=0700,size=100%"
#define GIB         ((uint64_t)1 << 30)
#define MIB         ((uint64_t)1 << 20)

static const struct {
        long magic;
        const char *name;
        bool memory;
} fs_magics[] = {
        {0x01021994, "tmpfs", true},
        {(long)0x858458f6, "ramfs", true},
        {(long)0x958458f6, "hugetlbfs", true},
        {0xef53, "ext2/ext3/ext4", false},
        {0x58465342, "xfs", false},
        {(long)0x9123683e, "btrfs", false},
        {0x794c7630, "overlay", false},
        {(long)0xf2f52010, "f2fs", false},
        {0x2fc12fc1, "zfs", false},
        {0x6969, "nfs", false},
};

bool agent_fs_magic_is_memory(long magic)
{
        for (size_t i = 0; i < ARRAY_SIZE(fs_magics); i++)
                if (fs_magics[i].magic == magic)
                        return fs_magics[i].memory;
        return false;
}

const char *agent_fs_magic_name(long magic)
{
        for (size_t i = 0; i < ARRAY_SIZE(fs_magics); i++)
                if (fs_magics[i].magic == magic)
                        return fs_magics[i].name;
        return NULL;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static int unescape(const char *s, char *out, size_t size)
{
        size_t n = 0;

        for (; *s; s++) {
                char c = *s;

                if (c == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
                    s[3] >= '0' && s[3] <= '7') {
                        c = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
                        s += 3;
                }
                if (n + 1 >= size)
                        return -ENAMETOOLONG;
                out[n++] = c;
        }
        out[n] = '\0';
        return 0;
}

int agent_mountinfo_parse(const char *line, struct agent_mount *ret)
{
        cleanup_free char *copy = strdup(line);
        char *tok[6], *save = NULL, *t, *fstype = NULL, *source = NULL;
        struct agent_mount m = {0};
        int n = 0;

        if (!copy)
                return -ENOMEM;
        copy[strcspn(copy, "\n")] = '\0';
        /* id parent major:minor root mount-point options [optional fields...] - type source */
        for (t = strtok_r(copy, " ", &save); t && n < 6; t = strtok_r(NULL, " ", &save))
                tok[n++] = t;
        while (t && strcmp(t, "-") != 0)
                t = strtok_r(NULL, " ", &save);
        if (t && (fstype = strtok_r(NULL, " ", &save)))
                source = strtok_r(NULL, " ", &save);
        if (n < 6 || !source || sscanf(tok[2], "%u:%u", &m.major, &m.minor) != 2)
                return -EINVAL;
        if (unescape(tok[4], m.mount_point, sizeof(m.mount_point)) < 0 ||
            unescape(fstype, m.fstype, sizeof(m.fstype)) < 0 ||
            unescape(source, m.source, sizeof(m.source)) < 0)
                return -ENAMETOOLONG;
        *ret = m;
        return 0;
}

/* True when path is dir or lies below it ("/" holds everything). */
static bool path_under(const char *path, const char *dir)
{
        size_t n = strlen(dir);

        if (n == 1 && dir[0] == '/')
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The mount holding path (absolute, symlinks resolved) on device dev: the longest mount point
 * above it with that device; of equal ones the last (mounted on top). */
static int find_mount(const char *path, dev_t dev, struct agent_mount *ret)
{
        cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
        cleanup_free char *line = NULL;
        size_t cap = 0, best = 0;
        bool found = false;

        if (!f)
                return -errno;
        while (getline(&line, &cap, f) > 0) {
                struct agent_mount m;
                size_t len;

                if (agent_mountinfo_parse(line, &m) < 0 || m.major != major(dev) ||
                    m.minor != minor(dev) || !path_under(path, m.mount_point))
                        continue;
                len = strlen(m.mount_point);
                if (len >= best) {
                        best = len;
                        *ret = m;
                        found = true;
                }
        }
        return found ? 0 : -ENOENT;
}

int agent_fs_describe(const char *path, struct agent_fs_info *ret)
{
        char real[PATH_MAX];
        struct agent_fs_info fi = {0};
        struct statfs sf;
        struct stat st;
        const char *name;

        if (statfs(path, &sf) < 0 || stat(path, &st) < 0 || !realpath(path, real))
                return -errno;
        fi.memory = agent_fs_magic_is_memory((long)sf.f_type);
        fi.size = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
        fi.avail = (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize;
        if (find_mount(real, st.st_dev, &fi.mount) < 0) {
                /* no mountinfo (no /proc): the magic's name, the mount unknown */
                name = agent_fs_magic_name((long)sf.f_type);
                if (name)
                        snprintf(fi.mount.fstype, sizeof(fi.mount.fstype), "%s", name);
                else
                        snprintf(fi.mount.fstype, sizeof(fi.mount.fstype), "0x%lx",
                                 (unsigned long)sf.f_type);
        }
        *ret = fi;
        return 0;
}

static void format_bytes(uint64_t b, char *buf, size_t size)
{
        if (b >= GIB)
                snprintf(buf, size, "%.1f GiB", (double)b / (double)GIB);
        else
                snprintf(buf, size, "%" PRIu64 " MiB", b / MIB);
}

void agent_fs_format(const struct agent_fs_info *fi, char *buf, size_t size)
{
        char avail[32], total[32], where[PATH_MAX + 300] = "";

        format_bytes(fi->avail, avail, sizeof(avail));
        format_bytes(fi->size, total, sizeof(total));
        if (fi->mount.mount_point[0])
                snprintf(where, sizeof(where), "%s on %s, ", fi->mount.source,
                         fi->mount.mount_point);
        snprintf(buf, size, "%s (%s, %s%s free of %s)", fi->mount.fstype,
                 fi->memory ? "memory" : "disk", where, avail, total);
}

static bool is_ours(const struct agent_fs_info *fi, const char *dir)
{
        char real[PATH_MAX];

        return fi->memory && realpath(dir, real) && strcmp(fi->mount.mount_point, real) == 0 &&
               strcmp(fi->mount.source, RAM_SOURCE) == 0;
}

/* 1 when dir has an entry, 0 when empty, -errno. */
static int dir_has_entries(const char *dir)
{
        DIR *dp = opendir(dir);
        struct dirent *de;
        int r = 0;

        if (!dp)
                return -errno;
        while (!r && (de = readdir(dp)))
                r = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        closedir(dp);
        return r;
}

static int log_fs(const char *what, const char *path, const char *note)
{
        struct agent_fs_info fi;
        char text[PATH_MAX + 512];
        int r = agent_fs_describe(path, &fi);

        if (r < 0)
                return log_warning_errno(r, "%s %s: cannot tell its filesystem: %m", what, path);
        agent_fs_format(&fi, text, sizeof(text));
        log_info("%s %s: %s%s", what, path, text, note);
        return 0;
}

/* <runDir>/sessions (guest RAM files live in the session run dirs) is on disk: mount our own
 * tmpfs there while it is empty. Logs the outcome. */
static void mount_ram(const char *dir, const struct agent_fs_info *fi)
{
        int r = dir_has_entries(dir);

        if (r > 0) {
                log_warning("guest RAM %s: on %s (disk) and it holds session dirs already (VMs of "
                            "an earlier forkletd?): no tmpfs mounted over them; guest RAM files "
                            "stay on disk until a start with none",
                            dir, fi->mount.fstype);
                return;
        }
        if (r >= 0 &&
            mount(RAM_SOURCE, dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, RAM_OPTIONS) < 0)
                r = -errno;
        if (r < 0) {
                log_warning_errno(r,
                                  "guest RAM %s: on %s (disk); cannot mount a tmpfs there (%m): "
                                  "guest RAM files stay on disk (run forkletd with "
                                  "CAP_SYS_ADMIN or put runDir on a tmpfs)",
                                  dir, fi->mount.fstype);
                return;
        }
        (void)log_fs("guest RAM", dir, "; forkletd's own tmpfs: runDir is on a disk filesystem");
}

int agent_runfs_setup(const struct node_config *cfg)
{
        cleanup_free char *dir = NULL;
        struct agent_fs_info fi;
        int r;

        if (fk_asprintf(&dir, "%s/sessions", cfg->run_dir) < 0)
                return log_error_errno(-ENOMEM, "out of memory");
        r = fk_mkdir_p(dir, 0700);
        if (r < 0)
                return log_error_errno(r, "create run dir %s: %m", dir);
        (void)log_fs("runDir", cfg->run_dir, "");
        (void)log_fs("stateDir", cfg->state_dir, "");
        r = agent_fs_describe(dir, &fi);
        if (r < 0)
                log_warning_errno(r, "guest RAM %s: cannot tell its filesystem: %m", dir);
        else if (!fi.memory)
                mount_ram(dir, &fi);
        else
                (void)log_fs("guest RAM", dir,
                             is_ours(&fi, dir)
                                     ? "; forkletd's own tmpfs, kept from an earlier start"
                                     : "");
        return 0;
}

/* The first process of this node (a QEMU names its run dir on its command line), 0: none. */
static pid_t node_process(const char *run_dir)
{
        DIR *dp = opendir("/proc");
        struct dirent *de;
        pid_t found = 0;

        while (dp && !found && (de = readdir(dp))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);

                if (pid > 0 && !*end && agent_runfs_pid_is_ours((pid_t)pid, run_dir))
                        found = (pid_t)pid;
        }
        if (dp)
                closedir(dp);
        return found;
}

/* A forkletd serves the node's API socket: the one a second forkletd on the same config
 * failed to start beside, or one running during a --decommission. */
static bool api_answers(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = -1;

        if (!path || strlen(path) >= sizeof(sa.sun_path))
                return false;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        return fd >= 0 && connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0;
}

int agent_runfs_release(const struct node_config *cfg)
{
        cleanup_free char *dir = NULL;
        struct agent_fs_info fi;
        pid_t pid;

        if (fk_asprintf(&dir, "%s/sessions", cfg->run_dir) < 0)
                return log_error_errno(-ENOMEM, "out of memory");
        if (agent_fs_describe(dir, &fi) < 0 || !is_ours(&fi, dir))
                return 0;
        /* A jailed QEMU holds its files through binds in its own mount namespace: the host's
         * umount would succeed under it and hide its sockets from the next forkletd. */
        pid = node_process(cfg->run_dir);
        if (pid > 0) {
                log_info("guest RAM %s: forkletd's tmpfs kept, VMs run on it (pid %d)", dir,
                         (int)pid);
                return 0;
        }
        if (api_answers(cfg->api_socket)) {
                log_info("guest RAM %s: forkletd's tmpfs kept, a forkletd serves %s", dir,
                         cfg->api_socket);
                return 0;
        }
        if (umount2(dir, UMOUNT_NOFOLLOW) < 0)
                return log_error_errno(-errno, "unmount forkletd's tmpfs on %s: %m", dir);
        log_info("guest RAM %s: forkletd's tmpfs unmounted (no VM of this node runs)", dir);
        return 1;
}

/* A process of this node: a QEMU forkletd started has its run dir on the command line. */
bool agent_runfs_pid_is_ours(pid_t pid, const char *run_dir)
{
        cleanup_free char *path = NULL, *cmd = NULL, *needle = NULL;
        size_t n = 0;

        if (fk_asprintf(&path, "/proc/%d/cmdline", (int)pid) < 0 ||
            fk_asprintf(&needle, "%s/sessions/", run_dir) < 0 ||
            fk_read_file(path, 1 << 20, &cmd, &n) < 0)
                return false;
        for (size_t i = 0; i < n; i += strlen(cmd + i) + 1)
                if (strstr(cmd + i, needle))
                        return true;
        return false;
}

bool agent_runfs_pid_exiting(pid_t pid)
{
        cleanup_free char *path = NULL, *buf = NULL;
        unsigned long flags = 0;
        const char *p;
        size_t n = 0;

        if (fk_asprintf(&path, "/proc/%d/stat", (int)pid) < 0 ||
            fk_read_file(path, 4096, &buf, &n) < 0 || !(p = strrchr(buf, ')')))
                return false;
        /* after "(comm)": state ppid pgrp session tty_nr tpgid flags */
        if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
                return false;
        return (flags & 0x4) != 0; /* PF_EXITING, include/linux/sched.h */
}
