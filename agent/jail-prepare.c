/* SPDX-License-Identifier: MIT */
/* Before a jailed QEMU starts: its uid, its run dir, and read/write grants on exactly the files
 * it opens by name (kernel, initrd, RAM file, disk and the disk's qcow2 backing chain); the
 * migration stream needs none: forkletd opens it and passes the fd. */
#include "agent/agent.h"
#include "agent/jail.h"
#include "vmm/vmm.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JAIL_NOFILE     4096
#define JAIL_NPROC      1024 /* threads count: vCPUs, I/O and RCU threads of one QEMU */
#define QCOW2_MAX_CHAIN 64
#define QCOW2_MAX_NAME  1023

static uint64_t be64(const uint8_t *p)
{
        uint64_t v = 0;

        for (int i = 0; i < 8; i++)
                v = (v << 8) | p[i];
        return v;
}

/* The backing file named in a qcow2 header (absolute), NULL in *ret when it has none. */
static int qcow2_backing(const char *path, char **ret)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        cleanup_free char *dir = NULL;
        uint8_t h[20];
        char name[QCOW2_MAX_NAME + 1];
        uint64_t off;
        uint32_t len;

        *ret = NULL;
        if (fd < 0)
                return -errno;
        if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h, "QFI\xfb", 4))
                return 0; /* not qcow2: no chain */
        off = be64(h + 8);
        len = (uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 | (uint32_t)h[18] << 8 | h[19];
        if (!off || !len)
                return 0;
        if (len > QCOW2_MAX_NAME || pread(fd, name, len, (off_t)off) != (ssize_t)len)
                return -EINVAL;
        name[len] = '\0';
        if (name[0] == '/')
                return (*ret = strdup(name)) ? 0 : -ENOMEM;
        if (!(dir = strdup(path)))
                return -ENOMEM;
        return fk_asprintf(ret, "%s/%s", dirname(dir), name) < 0 ? -ENOMEM : 0;
}

static int grant_disk(const char *disk, uid_t uid, struct fk_error *err)
{
        cleanup_free char *cur = strdup(disk);
        int r;

        if (!cur)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = agent_jail_grant(cur, uid, 6);
        for (int depth = 0; r >= 0 && cur && depth < QCOW2_MAX_CHAIN; depth++) {
                char *next = NULL;

                r = qcow2_backing(cur, &next);
                free(cur);
                cur = next;
                if (r >= 0 && cur)
                        r = agent_jail_grant(cur, uid, 4);
        }
        if (r < 0)
                return fk_error_set(err, r, "jail: grant uid %u the disk chain of %s: %s",
                                    (unsigned)uid, disk, strerror(-r));
        return 0;
}

static int grant(const char *path, uid_t uid, unsigned perm, struct fk_error *err)
{
        int r = path ? agent_jail_grant(path, uid, perm) : 0;

        if (r < 0)
                return fk_error_set(err, r, "jail: grant uid %u %s on %s: %s", (unsigned)uid,
                                    perm & 2 ? "read-write" : "read", path, strerror(-r));
        return 0;
}

int agent_jail_prepare(const struct node_config *cfg, struct agent_boot_params *p,
                       struct agent_jail *j, struct fk_error *err)
{
        int r;

        if (p->n_pre_exec >= AGENT_PRE_EXEC_MAX)
                return fk_error_set(err, -E2BIG, "jail: too many pre-exec hooks");
        r = agent_jail_uid(cfg, p->key, p->state_dir, &j->uid);
        if (r < 0)
                return fk_error_set(err, r, "jail: no uid for %s in [%u, %u): %s", p->key,
                                    cfg->jail_uid_base, cfg->jail_uid_base + cfg->jail_uid_count,
                                    strerror(-r));
        j->tap = p->tap != NULL;
        j->nofile = JAIL_NOFILE;
        j->nproc = JAIL_NPROC;
        r = agent_jail_own_dir(p->run_dir, j->uid);
        if (r < 0)
                return fk_error_set(err, r, "jail: hand %s to uid %u: %s", p->run_dir,
                                    (unsigned)j->uid, strerror(-r));
        /* A fork maps the checkpoint's RAM file MAP_PRIVATE, but QEMU 7.2 still opens it
         * O_RDWR (readonly=on would map it read-only): read-write it must be. */
        /* Opening /dev/net/tun gives nothing without owning a tap or CAP_NET_ADMIN (distros
         * ship it 0666); some hosts have it 0600. */
        if (p->tap && grant("/dev/net/tun", j->uid, 6, err) < 0)
                return err->code;
        /* With KVM, QEMU opens /dev/kvm itself (root:kvm 0660 on Debian): the jailed uid has
         * no kvm group, so it gets its own ACL entry like the tun device. */
        if (p->accel == VMM_ACCEL_KVM && grant("/dev/kvm", j->uid, 6, err) < 0)
                return err->code;
        if (grant(p->kernel, j->uid, 4, err) < 0 || grant(p->initrd, j->uid, 4, err) < 0 ||
            grant(p->rootfs, j->uid, 4, err) < 0 || grant(p->mem_path, j->uid, 6, err) < 0 ||
            (p->disk && grant_disk(p->disk, j->uid, err) < 0))
                return err->code;
        p->jail_uid = j->uid;
        p->pre_exec[p->n_pre_exec++] = (struct agent_pre_exec){agent_jail_pre_exec, j};
        return 0;
}
