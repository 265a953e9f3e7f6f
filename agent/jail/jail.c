/* SPDX-License-Identifier: MIT */
/* The QEMU jail: a persistent uid per session from the node's range, the pre-exec hook that
 * drops QEMU to it with no capabilities, and the file grants (owner or POSIX ACL) it needs. */
#include "agent/jail/jail.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "manifest/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#define ACL_XATTR     "system.posix_acl_access"
#define ACL_VERSION   2
#define ACL_USER_OBJ  0x01
#define ACL_USER      0x02
#define ACL_GROUP_OBJ 0x04
#define ACL_GROUP     0x08
#define ACL_MASK      0x10
#define ACL_OTHER     0x20
#define ACL_NO_ID     0xffffffffu
#define ACL_MAX       256    /* entries: a checkpoint's RAM file has one per live fork */
#define JAIL_TAP_NAME "tap0" /* NET_TAP_NAME: agent does not include net/ here */
#define JAIL_MAX_USED 4096

static pthread_mutex_t uid_lock = PTHREAD_MUTEX_INITIALIZER;
/* An ACL change is read, modify, write: forks granting and revoking on the same file (the
 * checkpoint's RAM, linked into every fork) at once would lose each other's entries. Threads
 * take this lock; other processes (a second forkletd on the host, `--decommission`) are kept
 * out by an flock on the file itself (acl_file_lock). */
static pthread_mutex_t acl_lock = PTHREAD_MUTEX_INITIALIZER;

static int read_uid(const char *path, uid_t *ret)
{
        cleanup_free char *buf = NULL;
        char *end;
        unsigned long v;
        int r;

        r = fk_read_file(path, 32, &buf, NULL);
        if (r < 0)
                return r;
        errno = 0;
        v = strtoul(buf, &end, 10);
        if (errno || end == buf || (*end && *end != '\n') || v == 0 || v > UINT32_MAX - 2)
                return -EINVAL;
        *ret = (uid_t)v;
        return 0;
}

/* Every uid recorded by a session under <stateDir>/sessions (at most JAIL_MAX_USED). */
static size_t used_uids(const char *state_root, uid_t *used)
{
        cleanup_free char *dir = NULL;
        struct dirent *de;
        size_t n = 0;
        DIR *dp;

        if (fk_asprintf(&dir, "%s/sessions", state_root) < 0 || !(dp = opendir(dir)))
                return 0;
        while ((de = readdir(dp)) && n < JAIL_MAX_USED) {
                cleanup_free char *p = NULL;

                if (de->d_name[0] == '.' ||
                    fk_asprintf(&p, "%s/%s/" AGENT_JAIL_UID_FILE, dir, de->d_name) < 0)
                        continue;
                if (read_uid(p, &used[n]) >= 0)
                        n++;
        }
        closedir(dp);
        return n;
}

static bool in_list(const uid_t *l, size_t n, uid_t u)
{
        for (size_t i = 0; i < n; i++)
                if (l[i] == u)
                        return true;
        return false;
}

static int allocate(const struct node_config *cfg, const char *key, const char *path, uid_t *ret)
{
        cleanup_free uid_t *used = calloc(JAIL_MAX_USED, sizeof(uid_t));
        uint32_t h = 2166136261u;
        size_t n;
        char text[16];

        if (!used)
                return -ENOMEM;
        n = used_uids(cfg->state_dir, used);
        for (const char *c = key; *c; c++)
                h = (h ^ (uint8_t)*c) * 16777619u;
        for (unsigned i = 0; i < cfg->jail_uid_count && i <= n; i++) {
                uid_t u = cfg->jail_uid_base + (h + i) % cfg->jail_uid_count;

                if (in_list(used, n, u))
                        continue;
                snprintf(text, sizeof(text), "%u\n", (unsigned)u);
                int r = fk_write_file_atomic(path, text, strlen(text), 0600);
                if (r < 0)
                        return r;
                *ret = u;
                return 0;
        }
        return -ENOSPC;
}

int agent_jail_uid(const struct node_config *cfg, const char *key, const char *state_dir,
                   uid_t *ret_uid)
{
        cleanup_free char *path = NULL;
        uid_t u;
        int r;

        if (!cfg->jail_uid_count)
                return -EINVAL;
        if (fk_asprintf(&path, "%s/" AGENT_JAIL_UID_FILE, state_dir) < 0)
                return -ENOMEM;
        pthread_mutex_lock(&uid_lock);
        r = read_uid(path, &u);
        if (r >= 0 && (u < cfg->jail_uid_base || u - cfg->jail_uid_base >= cfg->jail_uid_count))
                r = -ERANGE; /* the node's range changed: allocate anew */
        if (r < 0)
                r = allocate(cfg, key, path, &u);
        pthread_mutex_unlock(&uid_lock);
        if (r >= 0)
                *ret_uid = u;
        return r;
}

int agent_jail_root_of(const char *run_dir, char **ret)
{
        cleanup_free char *copy = strdup(run_dir);
        char *slash;

        for (int i = 0; copy && i < 2; i++)
                if ((slash = strrchr(copy, '/')) && slash != copy)
                        *slash = '\0';
        if (!copy)
                return -ENOMEM;
        return fk_asprintf(ret, "%s/jail", copy) < 0 ? -ENOMEM : 0;
}

/* Gives the persistent tap in the current netns to uid/gid (root still, in the netns). */
static int give_tap(uid_t uid)
{
        struct ifreq ifr;
        int fd, r = 0;

        vmm_pre_exec_step("jail: open /dev/net/tun", NULL);
        fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        memset(&ifr, 0, sizeof(ifr));
        memcpy(ifr.ifr_name, JAIL_TAP_NAME, sizeof(JAIL_TAP_NAME));
        ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
        /* persistent: a tap that did not exist yet (a throwaway netns) outlives this fd */
        vmm_pre_exec_step("jail: TUNSETIFF", JAIL_TAP_NAME);
        if (ioctl(fd, TUNSETIFF, &ifr) < 0)
                r = -errno;
        if (r >= 0)
                vmm_pre_exec_step("jail: TUNSETPERSIST/OWNER/GROUP", JAIL_TAP_NAME);
        if (r >= 0 &&
            (ioctl(fd, TUNSETPERSIST, 1UL) < 0 || ioctl(fd, TUNSETOWNER, (unsigned long)uid) < 0 ||
             ioctl(fd, TUNSETGROUP, (unsigned long)uid) < 0))
                r = -errno;
        close(fd);
        return r;
}

static int set_limit(int resource, rlim_t v)
{
        struct rlimit rl = {.rlim_cur = v, .rlim_max = v};

        return setrlimit(resource, &rl) < 0 ? -errno : 0;
}

/* Raw syscalls: glibc's set*id broadcast to all threads is not meant for a fork child. */
static int drop_to(uid_t uid)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2];

        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        for (unsigned long c = 0; c < 64; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
                        if (errno == EINVAL)
                                break; /* past CAP_LAST_CAP */
                        return -errno;
                }
        if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, uid, uid, uid) < 0 ||
            syscall(SYS_setresuid, uid, uid, uid) < 0)
                return -errno;
        memset(data, 0, sizeof(data));
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

int agent_jail_pre_exec(void *userdata)
{
        const struct agent_jail *j = userdata;
        int r;

        vmm_pre_exec_step("jail: rlimits", NULL);
        if ((r = set_limit(RLIMIT_NOFILE, j->nofile)) < 0 || (r = set_limit(RLIMIT_CORE, 0)) < 0 ||
            (r = set_limit(RLIMIT_NPROC, j->nproc)) < 0)
                return r;
        if (j->tap && (r = give_tap(j->uid)) < 0)
                return r;
        if (j->root && (r = agent_jail_enter_mounts(j)) < 0)
                return r;
        vmm_pre_exec_step("jail: drop to uid", NULL);
        return drop_to(j->uid);
}

struct acl_entry {
        uint16_t tag, perm;
        uint32_t id;
};

static int cmp_entry(const void *a, const void *b)
{
        const struct acl_entry *x = a, *y = b;

        if (x->tag != y->tag)
                return x->tag < y->tag ? -1 : 1;
        return x->id < y->id ? -1 : x->id > y->id;
}

static int acl_load(const char *path, const struct stat *st, struct acl_entry *e, size_t *ret_n)
{
        uint8_t buf[4 + ACL_MAX * sizeof(struct acl_entry)];
        uint32_t version;
        ssize_t len = getxattr(path, ACL_XATTR, buf, sizeof(buf));

        if (len < 0 && errno != ENODATA)
                return -errno;
        if (len < 0) {
                e[0] = (struct acl_entry){ACL_USER_OBJ, (st->st_mode >> 6) & 7, ACL_NO_ID};
                e[1] = (struct acl_entry){ACL_GROUP_OBJ, (st->st_mode >> 3) & 7, ACL_NO_ID};
                e[2] = (struct acl_entry){ACL_OTHER, st->st_mode & 7, ACL_NO_ID};
                *ret_n = 3;
                return 0;
        }
        memcpy(&version, buf, 4);
        if (len < 4 || version != ACL_VERSION || (len - 4) % sizeof(struct acl_entry))
                return -EINVAL;
        *ret_n = (size_t)(len - 4) / sizeof(struct acl_entry);
        memcpy(e, buf + 4, (size_t)len - 4);
        return 0;
}

/* Recomputes the mask (dropped when no named entry is left: the kernel then folds the ACL
 * into the mode bits and removes the xattr) and stores the entries. */
static int acl_store(const char *path, struct acl_entry *e, size_t n)
{
        uint8_t buf[4 + (ACL_MAX + 2) * sizeof(struct acl_entry)];
        uint32_t version = ACL_VERSION;
        bool named = false;
        uint16_t mask = 0;
        size_t i, k = 0;

        for (i = 0; i < n; i++) {
                if (e[i].tag == ACL_USER || e[i].tag == ACL_GROUP)
                        named = true;
                if (e[i].tag == ACL_USER || e[i].tag == ACL_GROUP || e[i].tag == ACL_GROUP_OBJ)
                        mask |= e[i].perm;
        }
        for (i = 0; i < n; i++)
                if (e[i].tag != ACL_MASK)
                        e[k++] = e[i];
        if (named)
                e[k++] = (struct acl_entry){ACL_MASK, mask, ACL_NO_ID};
        qsort(e, k, sizeof(e[0]), cmp_entry);
        memcpy(buf, &version, 4);
        memcpy(buf + 4, e, k * sizeof(e[0]));
        if (setxattr(path, ACL_XATTR, buf, 4 + k * sizeof(e[0]), 0) < 0)
                return -errno;
        return 0;
}

/* Under acl_lock: an exclusive flock on path for its ACL's read, modify, write, so that
 * another process doing the same keeps its entries and leaves ours. Returns the fd to give to
 * acl_file_unlock, or -1 when path cannot be opened for that (a socket): the change is then
 * made under acl_lock only. Opening /dev/net/tun makes a tun file that close drops. */
static int acl_file_lock(const char *path)
{
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

        if (fd < 0)
                return -1;
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR) {
                        close(fd);
                        return -1;
                }
        return fd;
}

static void acl_file_unlock(int fd)
{
        if (fd >= 0)
                close(fd); /* drops the flock */
}

/* Adds (or widens) the user entry for uid. */
static int acl_add_user(const char *path, const struct stat *st, uid_t uid, unsigned perm)
{
        struct acl_entry e[ACL_MAX + 2];
        size_t n = 0, i;
        int r;

        r = acl_load(path, st, e, &n);
        if (r < 0)
                return r;
        for (i = 0; i < n && !(e[i].tag == ACL_USER && e[i].id == uid); i++)
                ;
        if (i == n) {
                if (n >= ACL_MAX)
                        return -ENOSPC;
                e[n++] = (struct acl_entry){ACL_USER, 0, uid};
        }
        e[i].perm |= (uint16_t)perm;
        return acl_store(path, e, n);
}

int agent_jail_grant(const char *path, uid_t uid, unsigned perm)
{
        struct stat st;

        if (stat(path, &st) < 0)
                return -errno;
        if (st.st_uid == uid || (st.st_mode & perm) == perm)
                return 0;
        pthread_mutex_lock(&acl_lock);
        int fd = acl_file_lock(path);
        /* again under the lock: the group bits follow a mask another process may have set */
        int r = stat(path, &st) < 0 ? -errno : acl_add_user(path, &st, uid, perm);
        acl_file_unlock(fd);
        pthread_mutex_unlock(&acl_lock);
        return r;
}

int agent_jail_revoke(const char *path, uid_t uid)
{
        struct acl_entry e[ACL_MAX + 2];
        struct stat st;
        size_t n = 0, k = 0;
        int r, fd;

        if (stat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        pthread_mutex_lock(&acl_lock);
        fd = acl_file_lock(path);
        r = stat(path, &st) < 0 ? -errno : acl_load(path, &st, e, &n);
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (!(e[i].tag == ACL_USER && e[i].id == uid))
                        e[k++] = e[i];
        if (r >= 0 && k != n)
                r = acl_store(path, e, k);
        acl_file_unlock(fd);
        pthread_mutex_unlock(&acl_lock);
        return r == -ENOENT ? 0 : r; /* removed meanwhile: nothing to take back */
}

int agent_jail_own_dir(const char *dir, uid_t uid)
{
        cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct dirent *de;
        DIR *dp;
        int r = 0;

        if (fd < 0)
                return -errno;
        if (fchown(fd, uid, uid) < 0 || fchmod(fd, 0700) < 0)
                return -errno;
        dp = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
        if (!dp)
                return -errno;
        while ((de = readdir(dp)) && r >= 0)
                if (de->d_type == DT_REG &&
                    fchownat(fd, de->d_name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                        r = -errno;
        closedir(dp);
        return r;
}

int agent_jail_open_trusted(const char *path)
{
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
                close(fd);
                return -EPERM;
        }
        return fd;
}

/* Appends path to the ledger unless it is listed already. One write per entry; a write cut
 * short (ENOSPC) is truncated away, and so is a torn last line an earlier one left, so the
 * ledger only ever holds whole lines. */
static int ledger_add(const char *ledger, const char *path)
{
        cleanup_free char *text = NULL, *line = NULL;
        cleanup_close int fd = -1;
        size_t n = strlen(path), size = 0, keep;
        const char *last;
        ssize_t k;
        int r;

        if (strchr(path, '\n'))
                return -EINVAL;
        r = fk_read_file(ledger, 1 << 20, &text, &size);
        if (r < 0 && r != -ENOENT)
                return r;
        /* whole lines only: what follows the last newline is a torn write */
        last = size ? memrchr(text, '\n', size) : NULL;
        keep = last ? (size_t)(last - text) + 1 : 0;
        for (const char *l = text; l && l < text + keep; l = strchr(l, '\n') + 1)
                if (strncmp(l, path, n) == 0 && l[n] == '\n')
                        return 0;
        if (fk_asprintf(&line, "%s\n", path) < 0)
                return -ENOMEM;
        fd = open(ledger, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (keep < size && ftruncate(fd, (off_t)keep) < 0)
                return -errno;
        k = write(fd, line, n + 1);
        if (k == (ssize_t)n + 1)
                return 0;
        r = k < 0 ? -errno : -ENOSPC;
        (void)ftruncate(fd, (off_t)keep);
        return r;
}

int agent_jail_grant_logged(const char *state_dir, const char *path, uid_t uid, unsigned perm)
{
        cleanup_free char *ledger = NULL, *real = realpath(path, NULL);
        int r;

        if (!real)
                return -errno;
        if (fk_asprintf(&ledger, "%s/" AGENT_JAIL_GRANTS_FILE, state_dir) < 0)
                return -ENOMEM;
        /* recorded first: a crash between the two leaves an entry to revoke, never a grant
         * nobody knows of */
        r = ledger_add(ledger, real);
        return r < 0 ? r : agent_jail_grant(real, uid, perm);
}

/* Revokes from the session's uid the ledger's paths under prefix (all when NULL). */
static int revoke_ledger(const char *state_dir, const char *prefix)
{
        cleanup_free char *ledger = NULL, *uidf = NULL, *text = NULL;
        size_t n = prefix ? strlen(prefix) : 0, size = 0;
        char *save = NULL, *last;
        uid_t uid;
        int r, first = 0;

        if (fk_asprintf(&ledger, "%s/" AGENT_JAIL_GRANTS_FILE, state_dir) < 0 ||
            fk_asprintf(&uidf, "%s/" AGENT_JAIL_UID_FILE, state_dir) < 0)
                return -ENOMEM;
        if (read_uid(uidf, &uid) < 0)
                return 0; /* never jailed */
        r = fk_read_file(ledger, 1 << 20, &text, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        /* a torn last line (no newline) names no path that was granted */
        last = size ? memrchr(text, '\n', size) : NULL;
        text[last ? (size_t)(last - text) + 1 : 0] = '\0';
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                if (prefix && (strncmp(l, prefix, n) != 0 || l[n] != '/'))
                        continue;
                r = agent_jail_revoke(l, uid);
                if (r < 0 && !first)
                        first = r;
        }
        return first;
}

int agent_jail_revoke_under(const char *state_dir, const char *dir)
{
        cleanup_free char *real = realpath(dir, NULL);

        return real ? revoke_ledger(state_dir, real) : errno == ENOENT ? 0 : -errno;
}

int agent_jail_forget(const char *state_dir)
{
        cleanup_free char *ledger = NULL;
        int r = revoke_ledger(state_dir, NULL);

        if (r < 0)
                return r;
        if (fk_asprintf(&ledger, "%s/" AGENT_JAIL_GRANTS_FILE, state_dir) < 0)
                return -ENOMEM;
        return unlink(ledger) < 0 && errno != ENOENT ? -errno : 0;
}

int agent_jail_forget_all(const char *state_root)
{
        cleanup_free char *dir = NULL;
        struct dirent *de;
        int n = 0, first = 0;
        DIR *dp;

        if (fk_asprintf(&dir, "%s/sessions", state_root) < 0)
                return -ENOMEM;
        dp = opendir(dir);
        if (!dp)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(dp))) {
                cleanup_free char *sd = NULL;
                int r;

                if (de->d_name[0] == '.' || fk_asprintf(&sd, "%s/%s", dir, de->d_name) < 0)
                        continue;
                r = agent_jail_forget(sd);
                if (r < 0 && !first)
                        first = r;
                n += r >= 0;
        }
        closedir(dp);
        return first < 0 ? first : n;
}
