/* SPDX-License-Identifier: MIT */
/* forkletd's least privilege: the capabilities it keeps (each with the code that needs it) and
 * dropping every other one from the bounding, ambient, inheritable, permitted and effective sets,
 * with securebits locked so that a later setuid() still clears capabilities. */
#include "agent/jail/jail.h"
#include "common/error.h"

#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct kept_cap {
        unsigned cap;
        const char *name;
};

/* Each with what needs it (docs/security.md, "What forkletd keeps", has the long form). */
static const struct kept_cap kept[] = {
        /* jail.c agent_jail_own_dir: the session run dir and its files to the jail uid */
        {CAP_CHOWN, "cap_chown"},
        /* run dirs owned by a jail uid (0700): QMP/agent sockets, RAM file, checkpoints,
         * removal at teardown */
        {CAP_DAC_OVERRIDE, "cap_dac_override"},
        /* fchmod and POSIX ACL grants (setxattr) on files no longer owned by root */
        {CAP_FOWNER, "cap_fowner"},
        /* signals to QEMUs under jail uids (stop, orphan and cgroup kill) */
        {CAP_KILL, "cap_kill"},
        /* QEMU's pre-exec child becomes the session's uid/gid (setgroups, setres[ug]id) */
        {CAP_SETGID, "cap_setgid"},
        {CAP_SETUID, "cap_setuid"},
        /* QEMU's child drops its bounding set; this file's own drop and securebits */
        {CAP_SETPCAP, "cap_setpcap"},
        /* the session resolver on 10.0.2.3:53 (net/dns.c); an api.listen port < 1024 */
        {CAP_NET_BIND_SERVICE, "cap_net_bind_service"},
        /* links, addresses, routes, veths, taps (TUNSETIFF/TUNSETOWNER on tap0 in QEMU's
         * child), nftables, SO_*BUFFORCE on the nft socket, net sysctls */
        {CAP_NET_ADMIN, "cap_net_admin"},
        /* unshare/setns of network namespaces, the /run/netns bind mounts, the jail's mount
         * namespace and pivot_root in QEMU's child; also lets forkletd read a fork QEMU's
         * /proc/PID/smaps_rollup (another uid) for its PSS charge: the kernel accepts
         * CAP_PERFMON or CAP_SYS_ADMIN there, so no CAP_SYS_PTRACE (which would also open
         * /proc/PID/mem of every process) */
        {CAP_SYS_ADMIN, "cap_sys_admin"},
};

uint64_t agent_privileges_keep_mask(void)
{
        uint64_t m = 0;

        for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
                m |= UINT64_C(1) << kept[i].cap;
        return m;
}

int agent_privileges_names(uint64_t mask, char *buf, size_t size)
{
        size_t len = 0;

        if (size == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        for (unsigned c = 0; c < 64; c++) {
                const char *name = NULL;
                char other[16];
                int n;

                if (!(mask & (UINT64_C(1) << c)))
                        continue;
                for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
                        if (kept[i].cap == c)
                                name = kept[i].name;
                if (!name) {
                        snprintf(other, sizeof(other), "cap_%u", c);
                        name = other;
                }
                n = snprintf(buf + len, size - len, "%s%s", len ? "," : "", name);
                if (n < 0 || (size_t)n >= size - len)
                        return -ENOBUFS;
                len += (size_t)n;
        }
        return (int)len;
}

/* Capabilities are per thread: a drop in one thread leaves the others as they were. */
static int count_threads(void)
{
        DIR *dp = opendir("/proc/self/task");
        struct dirent *de;
        int n = 0;

        if (!dp)
                return -errno;
        while ((de = readdir(dp)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(dp);
        return n;
}

static int caps_get(struct __user_cap_data_struct data[2])
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};

        memset(data, 0, 2 * sizeof(*data));
        return syscall(SYS_capget, &hdr, data) < 0 ? -errno : 0;
}

/* Keeps keep_caps and no_setuid_fixup off and locks them (a setuid() to a jail uid always
 * clears the capabilities), and forbids raising ambient capabilities. Not SECBIT_NOROOT: the
 * helpers forkletd execs as root (qemu-img, secrets.mintCommand) get the kept set, as the
 * files they work on may belong to a jail uid; QEMU itself has dropped everything by then. */
static int lock_securebits(struct fk_error *reterr)
{
        int cur = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
        unsigned long want;

        if (cur < 0)
                return fk_error_set(reterr, -errno, "PR_GET_SECUREBITS: %m");
        want = ((unsigned long)cur & ~(unsigned long)(SECBIT_KEEP_CAPS | SECBIT_NO_SETUID_FIXUP)) |
               SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
               SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        if (want != (unsigned long)cur && prctl(PR_SET_SECUREBITS, want, 0, 0, 0) < 0)
                return fk_error_set(reterr, -errno, "PR_SET_SECUREBITS 0x%lx (was 0x%x): %m", want,
                                    cur);
        return 0;
}

static int drop_bounding(uint64_t keep, struct fk_error *reterr)
{
        for (unsigned long c = 0; c < 64; c++) {
                int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);

                if (r < 0 && errno == EINVAL)
                        break; /* past the kernel's last capability */
                if (r < 0)
                        return fk_error_set(reterr, -errno, "PR_CAPBSET_READ %lu: %m", c);
                if (r == 1 && !(keep & (UINT64_C(1) << c)) &&
                    prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
                        return fk_error_set(reterr, -errno, "PR_CAPBSET_DROP %lu: %m", c);
        }
        return 0;
}

int agent_privileges_drop(uint64_t keep, uint64_t *ret_kept, struct fk_error *reterr)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2];
        uint64_t permitted;
        int r;

        r = count_threads();
        if (r < 0)
                return fk_error_set(reterr, r, "count threads in /proc/self/task: %s",
                                    strerror(-r));
        if (r != 1)
                return fk_error_set(reterr, -EBUSY,
                                    "%d threads already run; capabilities are per thread, "
                                    "drop them before starting any",
                                    r);
        r = caps_get(data);
        if (r < 0)
                return fk_error_set(reterr, r, "capget: %s", strerror(-r));
        permitted = (uint64_t)data[0].permitted | (uint64_t)data[1].permitted << 32;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return fk_error_set(reterr, -errno, "clear ambient capabilities: %m");
        /* bounding set and securebits need CAP_SETPCAP; without it there is little to drop */
        if (permitted & (UINT64_C(1) << CAP_SETPCAP)) {
                if ((r = lock_securebits(reterr)) < 0 || (r = drop_bounding(keep, reterr)) < 0)
                        return r;
        }
        permitted &= keep;
        memset(data, 0, sizeof(data));
        data[0].permitted = data[0].effective = (__u32)permitted;
        data[1].permitted = data[1].effective = (__u32)(permitted >> 32);
        if (syscall(SYS_capset, &hdr, data) < 0)
                return fk_error_set(reterr, -errno, "capset: %m");
        if (ret_kept)
                *ret_kept = permitted;
        return 0;
}
