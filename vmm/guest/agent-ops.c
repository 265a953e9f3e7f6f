/* SPDX-License-Identifier: MIT */
/* Guest agent requests other than exec: chunked file write/read, identity after a fork
 * (fork id, hostname, fresh kernel entropy), a cold boot's entropy, filesystem freeze/thaw,
 * and power off. */
#include "vmm/guest/agent.h"
#include "common/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <time.h>

#define FORK_ID_FILE  "/run/forklet/fork-id"  /* a symlink to IDENTITY_FILE */
#define IDENTITY_FILE "/run/forklet/identity" /* the name docs/design.md gives it */

static void reply_ok(struct ga *a, uint32_t id)
{
        ga_reply_raw(a, GUEST_MSG_OK, id, NULL, 0);
}

void ga_op_file_write(struct ga *a, uint32_t id, const void *p, size_t size)
{
        struct guest_msg_file_write m;
        int fd, flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY;
        size_t done = 0;

        if (guest_proto_get_file_write(p, size, &m) < 0)
                return ga_reply_error(a, id, EBADMSG, "malformed FILE_WRITE");
        if (m.flags & GUEST_FILE_TRUNCATE)
                flags |= O_TRUNC;
        fd = open(m.path, flags, m.mode & 07777);
        if (fd < 0) {
                ga_reply_error(a, id, errno, "open %s: %s", m.path, strerror(errno));
                return guest_msg_path_done(&m.path);
        }
        while (done < m.size) {
                ssize_t n = pwrite(fd, m.data + done, m.size - done, (off_t)(m.offset + done));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int e = n < 0 ? errno : EIO;

                        ga_reply_error(a, id, e, "write %s: %s", m.path, strerror(e));
                        close(fd);
                        return guest_msg_path_done(&m.path);
                }
                done += (size_t)n;
        }
        close(fd);
        guest_msg_path_done(&m.path);
        reply_ok(a, id);
}

void ga_op_file_read(struct ga *a, uint32_t id, const void *p, size_t size)
{
        struct guest_msg_file_read m;
        struct guest_msg_file_data d = {0};
        uint8_t *buf;
        size_t want;
        ssize_t n;
        int fd;

        if (guest_proto_get_file_read(p, size, &m) < 0)
                return ga_reply_error(a, id, EBADMSG, "malformed FILE_READ");
        /* Leave room for the FILE_DATA fields within the max payload. */
        want = FK_MIN((size_t)m.max, (size_t)GUEST_PROTO_MAX_PAYLOAD - 64);
        fd = open(m.path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        buf = malloc(want ? want : 1);
        if (fd < 0 || !buf) {
                int e = fd < 0 ? errno : ENOMEM;

                ga_reply_error(a, id, e, "open %s: %s", m.path, strerror(e));
                goto out;
        }
        do
                n = pread(fd, buf, want, (off_t)m.offset);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                ga_reply_error(a, id, errno, "read %s: %s", m.path, strerror(errno));
                goto out;
        }
        d.data = buf;
        d.size = (size_t)n;
        if ((size_t)n < want || want == 0)
                d.flags |= GUEST_FILE_EOF;
        if (a->connected)
                (void)guest_proto_put_file_data(&a->out, id, &d);
out:
        if (fd >= 0)
                close(fd);
        free(buf);
        guest_msg_path_done(&m.path);
}

/* Credits the bytes as entropy and forces a reseed, so a fork stops sharing the parent's
 * RNG state before anything else runs in it. */
static int add_entropy(struct ga *a, const uint8_t *data, size_t size)
{
        struct rand_pool_info *info;
        int fd = a->urandom_fd, r = 0;

        if (size == 0)
                return 0;
        info = malloc(sizeof(*info) + size);
        if (!info)
                return -ENOMEM;
        info->entropy_count = (int)(size * 8);
        info->buf_size = (int)size;
        memcpy(info->buf, data, size);
        if (fd < 0)
                fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ioctl(fd, RNDADDENTROPY, info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
                r = -errno;
        if (fd >= 0 && fd != a->urandom_fd)
                close(fd);
        free(info);
        return r;
}

/* Steps the wall clock: a paused or restored VM's clock stood still meanwhile (QEMU stops
 * the guest's TSC/kvmclock with the vCPUs), so the host says what time it is now. */
void ga_op_set_time(struct ga *a, uint32_t id, const void *p, size_t size)
{
        struct timespec ts;
        uint64_t ns;

        if (guest_proto_get_u64(p, size, &ns) < 0)
                return ga_reply_error(a, id, EBADMSG, "malformed SET_TIME");
        ts.tv_sec = (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        if (clock_settime(CLOCK_REALTIME, &ts) < 0)
                return ga_reply_error(a, id, errno, "clock_settime: %s", strerror(errno));
        ga_reply_raw(a, GUEST_MSG_OK, id, NULL, 0);
}

/* The fork-id name is a symlink to the identity file, so a fork writes one file. A regular
 * file there (an agent before the symlink wrote it) is replaced. */
static void link_fork_id(void)
{
        struct stat st;

        if (symlink("identity", FORK_ID_FILE) == 0 || errno != EEXIST)
                return;
        if (lstat(FORK_ID_FILE, &st) == 0 && !S_ISLNK(st.st_mode) && unlink(FORK_ID_FILE) == 0)
                (void)symlink("identity", FORK_ID_FILE);
}

void ga_identity_open(struct ga *a)
{
        a->urandom_fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
        (void)mkdir("/run/forklet", 0755);
        a->identity_fd = open(IDENTITY_FILE, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        /* Allocates the tmpfs page now, at boot, without changing the size: the file reads
         * empty until a fork writes its id into that page, and a fork of a checkpoint made after
         * this only writes it (allocating a page and creating a file were ~15 guest pages). */
        if (a->identity_fd >= 0)
                (void)fallocate(a->identity_fd, FALLOC_FL_KEEP_SIZE, 0, 4096);
        link_fork_id();
}

/* Rewrites the identity file in place through the fd opened at start (no lookup, no new
 * page); by path when there is none or the file was removed since. */
static int write_identity(struct ga *a, const char *fork_id)
{
        size_t n = strlen(fork_id);
        struct iovec iov[2] = {{(void *)fork_id, n}, {(void *)"\n", 1}};
        struct stat st;
        int fd = a->identity_fd;

        if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_nlink == 0))
                fd = -1;
        if (fd < 0) {
                (void)mkdir("/run/forklet", 0755);
                fd = open(IDENTITY_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                          0644);
                if (fd < 0)
                        return -errno;
                link_fork_id();
        }
        errno = EIO;
        if (pwritev(fd, iov, 2, 0) != (ssize_t)(n + 1) || ftruncate(fd, (off_t)(n + 1)) < 0) {
                int r = -errno;

                if (fd != a->identity_fd)
                        close(fd);
                return r;
        }
        if (fd != a->identity_fd && close(fd) < 0)
                return -errno;
        return 0;
}

void ga_op_identity(struct ga *a, uint32_t id, const void *p, size_t size)
{
        struct guest_msg_identity m;
        int r;

        if (guest_proto_get_identity(p, size, &m) < 0)
                return ga_reply_error(a, id, EBADMSG, "malformed SET_IDENTITY");
        r = add_entropy(a, m.entropy, m.entropy_size);
        if (r < 0) {
                ga_reply_error(a, id, -r, "add entropy: %s", strerror(-r));
                return guest_msg_identity_done(&m);
        }
        if (m.hostname[0] && sethostname(m.hostname, strlen(m.hostname)) < 0) {
                ga_reply_error(a, id, errno, "sethostname: %s", strerror(errno));
                return guest_msg_identity_done(&m);
        }
        /* here rather than a file write from the host: one round trip less, and a restored
         * guest under TCG translates every new code path first */
        r = write_identity(a, m.fork_id);
        guest_msg_identity_done(&m);
        if (r < 0)
                return ga_reply_error(a, id, -r, "write %s: %s", IDENTITY_FILE, strerror(-r));
        reply_ok(a, id);
}

/* A cold boot's seed from the host: the guest has no entropy source of its own (no virtio-rng,
 * no RDRAND in TCG's CPU model), so its CRNG would stay unready until something blocks in
 * getrandom(), and every fork of a checkpoint taken before that would pay the one-time
 * initialisation. */
void ga_op_add_entropy(struct ga *a, uint32_t id, const void *p, size_t size)
{
        int r;

        if (size == 0 || size > GUEST_ENTROPY_MAX)
                return ga_reply_error(a, id, EBADMSG, "malformed ADD_ENTROPY");
        r = add_entropy(a, p, size);
        if (r < 0)
                return ga_reply_error(a, id, -r, "add entropy: %s", strerror(-r));
        reply_ok(a, id);
}

void ga_op_freeze(struct ga *a, uint32_t id, const void *p, size_t size, bool freeze)
{
        struct guest_msg_path m;
        int fd;

        if (guest_proto_get_path(p, size, &m) < 0)
                return ga_reply_error(a, id, EBADMSG, "malformed FSFREEZE/FSTHAW");
        fd = open(m.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || ioctl(fd, freeze ? FIFREEZE : FITHAW, 0) < 0) {
                /* Freezing a frozen fs (EBUSY) or thawing a thawed one (EINVAL) is fine. */
                int e = errno;

                if (fd >= 0 && ((freeze && e == EBUSY) || (!freeze && e == EINVAL))) {
                        reply_ok(a, id);
                } else {
                        ga_reply_error(a, id, e, "%s %s: %s", freeze ? "freeze" : "thaw", m.path,
                                       strerror(e));
                }
        } else {
                reply_ok(a, id);
        }
        if (fd >= 0)
                close(fd);
        guest_msg_path_done(&m.path);
}

void ga_poweroff_now(void)
{
        sync();
        reboot(RB_POWER_OFF);
        /* No way to power off (no ACPI): a reboot ends QEMU run with -no-reboot. */
        reboot(RB_AUTOBOOT);
        _exit(1);
}
