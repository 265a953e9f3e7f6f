/* SPDX-License-Identifier: MIT */
/* Before a jailed QEMU starts: its uid, its run dir, its mount namespace's table and grants
 * on exactly the files it opens by name (kernel, initrd, RAM file, disk and the disk's qcow2
 * backing chain); the migration stream needs none: forkletd opens it and passes the fd. */
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

/* A grant recorded in the session's ledger (ledger_dir) or, for a short-lived helper whose
 * caller revokes it, not recorded (NULL). */
static int grant(const char *ledger_dir, const char *path, uid_t uid, unsigned perm,
                 struct fk_error *err)
{
        int r = !path        ? 0
                : ledger_dir ? agent_jail_grant_logged(ledger_dir, path, uid, perm)
                             : agent_jail_grant(path, uid, perm);

        if (r < 0)
                return fk_error_set(err, r, "jail: grant uid %u %s on %s: %s", (unsigned)uid,
                                    perm & 2   ? "read-write"
                                    : perm & 4 ? "read"
                                               : "search",
                                    path, strerror(-r));
        return 0;
}

static int bind(struct agent_jail *j, const char *path, unsigned flags, struct fk_error *err)
{
        int r = path ? agent_jail_bind(j, path, flags) : 0;

        if (r < 0)
                return fk_error_set(err, r, "jail: bind %s into QEMU's mount namespace: %s", path,
                                    r == -EINVAL ? "not an absolute plain path" : strerror(-r));
        return 0;
}

/* The disk read-write, its directory (new layers appear there) when asked, and its qcow2
 * backing chain read-only. */
static int jail_disk(struct agent_jail *j, const char *ledger_dir, const char *disk, bool dir_too,
                     struct fk_error *err)
{
        cleanup_free char *cur = strdup(disk), *dir = strdup(disk);
        int r;

        if (!cur || !dir)
                return fk_error_set(err, -ENOMEM, "out of memory");
        (void)dirname(dir); /* in place: dir is now the directory */
        if (dir_too &&
            (bind(j, dir, AGENT_JAIL_RW, err) < 0 || grant(ledger_dir, dir, j->uid, 1, err) < 0))
                return err->code;
        if (bind(j, disk, AGENT_JAIL_RW, err) < 0 || grant(ledger_dir, disk, j->uid, 6, err) < 0)
                return err->code;
        for (int depth = 0; cur && depth < QCOW2_MAX_CHAIN; depth++) {
                char *next = NULL;

                r = qcow2_backing(cur, &next);
                free(cur);
                cur = next;
                if (r < 0)
                        return fk_error_set(err, r, "jail: read the backing chain of %s: %s", disk,
                                            strerror(-r));
                if (cur && (bind(j, cur, 0, err) < 0 || grant(ledger_dir, cur, j->uid, 4, err) < 0))
                        return err->code;
        }
        return 0;
}

int agent_jail_setup(struct agent_jail *j, const struct agent_jail_files *f, const char *ledger_dir,
                     struct fk_error *err)
{
        cleanup_free char *root = NULL;
        int r;

        j->nofile = JAIL_NOFILE;
        j->nproc = JAIL_NPROC;
        j->tap = f->tap;
        r = agent_jail_root_of(f->run_dir, &root);
        if (r >= 0)
                r = agent_jail_mounts_init(j, root);
        if (r < 0)
                return fk_error_set(err, r, "jail: mount root %s: %s", root ? root : "?",
                                    strerror(-r));
        r = agent_jail_own_dir(f->run_dir, j->uid);
        if (r < 0)
                return fk_error_set(err, r, "jail: hand %s to uid %u: %s", f->run_dir,
                                    (unsigned)j->uid, strerror(-r));
        if (bind(j, f->run_dir, AGENT_JAIL_RW, err) < 0)
                return err->code;
        /* Opening /dev/net/tun gives nothing without owning a tap or CAP_NET_ADMIN (distros
         * ship it 0666; some hosts have it 0600). With KVM, QEMU opens /dev/kvm itself
         * (root:kvm 0660 on Debian) and the jailed uid has no kvm group. */
        if (f->tap && (bind(j, "/dev/net/tun", AGENT_JAIL_RW | AGENT_JAIL_DEV, err) < 0 ||
                       grant(ledger_dir, "/dev/net/tun", j->uid, 6, err) < 0))
                return err->code;
        if (f->kvm && (bind(j, "/dev/kvm", AGENT_JAIL_RW | AGENT_JAIL_DEV, err) < 0 ||
                       grant(ledger_dir, "/dev/kvm", j->uid, 6, err) < 0))
                return err->code;
        if (f->disk && jail_disk(j, ledger_dir, f->disk, f->disk_dir, err) < 0)
                return err->code;
        /* A fork maps the checkpoint's RAM file MAP_PRIVATE, but QEMU 7.2 still opens it
         * O_RDWR (readonly=on would map it read-only): read-write it must be. */
        if (bind(j, f->kernel, 0, err) < 0 || grant(ledger_dir, f->kernel, j->uid, 4, err) < 0 ||
            bind(j, f->initrd, 0, err) < 0 || grant(ledger_dir, f->initrd, j->uid, 4, err) < 0 ||
            bind(j, f->rootfs, 0, err) < 0 || grant(ledger_dir, f->rootfs, j->uid, 4, err) < 0 ||
            bind(j, f->mem_path, AGENT_JAIL_RW, err) < 0 ||
            grant(ledger_dir, f->mem_path, j->uid, 6, err) < 0)
                return err->code;
        return 0;
}

int agent_jail_prepare(const struct node_config *cfg, struct agent_boot_params *p,
                       struct agent_jail *j, struct fk_error *err)
{
        struct agent_jail_files f = {
                .run_dir = p->run_dir,
                .kernel = p->kernel,
                .initrd = p->initrd,
                .rootfs = p->rootfs,
                .mem_path = p->mem_path,
                .disk = p->disk,
                .disk_dir = true,
                .tap = p->tap != NULL,
                .kvm = p->accel == VMM_ACCEL_KVM,
        };
        int r;

        if (p->n_pre_exec >= AGENT_PRE_EXEC_MAX)
                return fk_error_set(err, -E2BIG, "jail: too many pre-exec hooks");
        r = agent_jail_uid(cfg, p->key, p->state_dir, &j->uid);
        if (r < 0)
                return fk_error_set(err, r, "jail: no uid for %s in [%u, %u): %s", p->key,
                                    cfg->jail_uid_base, cfg->jail_uid_base + cfg->jail_uid_count,
                                    strerror(-r));
        r = agent_jail_setup(j, &f, p->state_dir, err);
        if (r < 0)
                return r;
        p->jail_uid = j->uid;
        p->pre_exec[p->n_pre_exec++] = (struct agent_pre_exec){agent_jail_pre_exec, j, "jail"};
        return 0;
}
