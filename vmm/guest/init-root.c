/* SPDX-License-Identifier: MIT */
/* Guest init, disks by label: finds the virtio disk whose ext4 label matches (the workspace,
 * a root filesystem), and switches into a read-only root disk under an overlay (images such as
 * "debian" that ship rootfs.img). The overlay's writable layer lives on the workspace disk, in
 * GA_ROOT_UPPER_DIR, so a pip install has the disk's room instead of guest RAM, and checkpoints,
 * forks, rollback and snapshots carry it with the workspace. It is emptied at every boot (the
 * root's changes are discarded at stop, as with the tmpfs layer it replaces); with no workspace
 * disk the layer is a tmpfs. */
#include "vmm/guest/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXT4_SB_OFFSET    1024
#define EXT4_MAGIC_OFFSET (EXT4_SB_OFFSET + 56)
#define EXT4_LABEL_OFFSET (EXT4_SB_OFFSET + 120)
#define NEWROOT           "/.root/new"
#define WSMNT             "/.root/ws"
#define UPPER             WSMNT "/" GA_ROOT_UPPER_DIR

/* 1 when /dev/<name> holds an ext2/3/4 filesystem labelled label. */
static int has_label(const char *name, const char *label)
{
        char path[300], got[17] = {0};
        unsigned char magic[2];
        int fd, ok;

        snprintf(path, sizeof(path), "/dev/%s", name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ok = pread(fd, magic, 2, EXT4_MAGIC_OFFSET) == 2 && magic[0] == 0x53 && magic[1] == 0xef &&
             pread(fd, got, 16, EXT4_LABEL_OFFSET) == 16;
        close(fd);
        return ok && strcmp(got, label) == 0;
}

int ga_init_find_label(const char *label, char *dev, size_t size)
{
        DIR *d;
        struct dirent *e;
        int r = -ENOENT;

        /* virtio_blk probes while its module loads; give devtmpfs a moment to catch up. */
        for (int i = 0; i < 20 && r < 0; i++) {
                d = opendir("/sys/class/block");
                while (d && (e = readdir(d)))
                        if (strncmp(e->d_name, "vd", 2) == 0 && has_label(e->d_name, label)) {
                                snprintf(dev, size, "/dev/%s", e->d_name);
                                r = 0;
                                break;
                        }
                if (d)
                        closedir(d);
                if (r < 0)
                        usleep(50 * 1000);
        }
        return r;
}

static int copy_file(const char *from, const char *to)
{
        struct stat st;
        int in, out, r = 0;

        in = open(from, O_RDONLY | O_CLOEXEC);
        if (in < 0 || fstat(in, &st) < 0)
                return -errno;
        out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        if (out < 0 || sendfile(out, in, NULL, (size_t)st.st_size) != st.st_size)
                r = -errno;
        close(in);
        if (out >= 0)
                close(out);
        return r;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)ftw;
        if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
                return -1;
        return 0;
}

/* The overlay's writable layer: a fresh directory on the workspace disk (mounted on WSMNT),
 * or a tmpfs when there is none or it cannot be used. Fills upper/work with the paths. */
static int prepare_upper(char *upper, char *work, size_t size)
{
        char dev[64];
        bool on_disk = false;

        (void)mkdir(WSMNT, 0755);
        if (ga_init_find_label("workspace", dev, sizeof(dev)) == 0 &&
            mount(dev, WSMNT, "ext4", MS_NOATIME, GA_WORKSPACE_MOUNT_OPTS) == 0) {
                /* What a previous boot wrote is discarded, as a tmpfs layer would be. */
                if (nftw(UPPER, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 &&
                    errno != ENOENT)
                        fprintf(stderr, "forklet-init: clear %s: %m\n", UPPER);
                on_disk = (mkdir(UPPER, 0700) == 0 || errno == EEXIST) &&
                          (mkdir(UPPER "/upper", 0755) == 0 || errno == EEXIST) &&
                          (mkdir(UPPER "/work", 0755) == 0 || errno == EEXIST);
                if (!on_disk)
                        (void)umount(WSMNT);
        }
        if (on_disk) {
                snprintf(upper, size, "%s", UPPER "/upper");
                snprintf(work, size, "%s", UPPER "/work");
                return 0;
        }
        (void)mkdir("/.root/rw", 0755);
        if (mount("tmpfs", "/.root/rw", "tmpfs", 0, "mode=0755") < 0 ||
            mkdir("/.root/rw/upper", 0755) < 0 || mkdir("/.root/rw/work", 0755) < 0)
                return -errno;
        snprintf(upper, size, "%s", "/.root/rw/upper");
        snprintf(work, size, "%s", "/.root/rw/work");
        return 0;
}

int ga_init_switch_root(const char *label, const char *busybox_copy)
{
        static const char *const moves[] = {"/dev", "/proc", "/sys", "/run", "/tmp"};
        char dev[64], dst[128], upper[64], work[64], opts[256];

        if (ga_init_find_label(label, dev, sizeof(dev)) < 0)
                return -ENOENT;
        /* The initramfs' busybox runs the network setup after the switch; keep a copy. */
        (void)copy_file("/bin/busybox", busybox_copy);
        (void)mkdir("/.root", 0755);
        (void)mkdir("/.root/lower", 0755);
        (void)mkdir(NEWROOT, 0755);
        if (mount(dev, "/.root/lower", "ext4", MS_RDONLY | MS_NOATIME, NULL) < 0 ||
            prepare_upper(upper, work, sizeof(upper)) < 0)
                return -errno;
        snprintf(opts, sizeof(opts), "lowerdir=/.root/lower,upperdir=%s,workdir=%s", upper, work);
        if (mount("overlay", NEWROOT, "overlay", 0, opts) < 0)
                return -errno;
        for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
                snprintf(dst, sizeof(dst), NEWROOT "%s", moves[i]);
                (void)mkdir(dst, 0755);
                if (mount(moves[i], dst, NULL, MS_MOVE, NULL) < 0)
                        return -errno;
        }
        if (chdir(NEWROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
            chdir("/") < 0)
                return -errno;
        return 0;
}

int ga_init_hide_upper(const char *workspace)
{
        char path[256];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", workspace, GA_ROOT_UPPER_DIR);
        if (stat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        /* Writing to an overlay's upper directory behind its back is undefined: cover it. */
        if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0000,size=4k") < 0)
                return -errno;
        return 1;
}
