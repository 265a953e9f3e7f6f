/* SPDX-License-Identifier: MIT */
/* Guest agent requests other than exec: chunked file write/read, identity after a fork
 * (fork id, hostname, fresh kernel entropy), filesystem freeze/thaw, and power off. */
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
#include <unistd.h>
#include <time.h>

#define FORK_ID_FILE  "/run/forklet/fork-id"
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
static int add_entropy(const uint8_t *data, size_t size)
{
        struct rand_pool_info *info;
        int fd, r = 0;

        if (size == 0)
                return 0;
        info = malloc(sizeof(*info) + size);
        if (!info)
                return -ENOMEM;
        info->entropy_count = (int)(size * 8);
        info->buf_size = (int)size;
        memcpy(info->buf, data, size);
        fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ioctl(fd, RNDADDENTROPY, info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
                r = -errno;
        if (fd >= 0)
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

void ga_op_identity(struct ga *a, uint32_t id, const void *p, size_t size)
{
        struct guest_msg_identity m;
        int r;

        if (guest_proto_get_identity(p, size, &m) < 0)
                return ga_reply_error(a, id, EBADMSG, "malformed SET_IDENTITY");
        r = add_entropy(m.entropy, m.entropy_size);
        if (r < 0) {
                ga_reply_error(a, id, -r, "add entropy: %s", strerror(-r));
                return guest_msg_identity_done(&m);
        }
        if (m.hostname[0] && sethostname(m.hostname, strlen(m.hostname)) < 0) {
                ga_reply_error(a, id, errno, "sethostname: %s", strerror(errno));
                return guest_msg_identity_done(&m);
        }
        (void)mkdir("/run/forklet", 0755);
        /* both files here: a separate file write from the host is one more round trip, and a
         * restored guest under TCG translates every new code path first */
        static const char *const files[] = {FORK_ID_FILE, IDENTITY_FILE};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                FILE *f = fopen(files[i], "we");

                errno = 0;
                if (!f || fprintf(f, "%s\n", m.fork_id) < 0 || fclose(f) != 0) {
                        ga_reply_error(a, id, errno ? errno : EIO, "write %s", files[i]);
                        return guest_msg_identity_done(&m);
                }
        }
        guest_msg_identity_done(&m);
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
