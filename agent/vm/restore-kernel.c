/* SPDX-License-Identifier: MIT */
/* The kernel and initrd a restored QEMU (fork, rollback) is started with: QEMU reads -kernel and
 * -initrd into its own memory (fw_cfg), 12 MiB per QEMU for the minimal image, though a restored
 * guest never boots them (-no-reboot: a reboot ends QEMU). The stub keeps the bzImage's setup
 * header and code plus one page, so QEMU builds the same devices and option ROM. */
#include "agent/vm/vm.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SETUP_SECTS_OFF 0x1f1
#define HDR_MAGIC_OFF   0x202
#define HDR_VERSION_OFF 0x206
#define STUB_TAIL       4096
#define STUB_INITRD     4096

static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;

long agent_restore_kernel_stub_len(const uint8_t *head, size_t n, uint64_t file_size)
{
        uint64_t setup;

        if (n < HDR_VERSION_OFF + 2 || memcmp(head + HDR_MAGIC_OFF, "HdrS", 4) != 0)
                return -EINVAL;
        /* boot protocol 2.00+ (what QEMU's x86 loader expects of a bzImage) */
        if ((head[HDR_VERSION_OFF] | head[HDR_VERSION_OFF + 1] << 8) < 0x200)
                return -EINVAL;
        setup = ((uint64_t)(head[SETUP_SECTS_OFF] ? head[SETUP_SECTS_OFF] : 4) + 1) * 512;
        if (setup + STUB_TAIL >= file_size)
                return -EINVAL;
        return (long)(setup + STUB_TAIL);
}

/* Writes the stub of kernel into path (atomically). */
static int write_stub(const char *kernel, const char *path)
{
        cleanup_close int fd = open(kernel, O_RDONLY | O_CLOEXEC);
        cleanup_free uint8_t *buf = NULL;
        struct stat st;
        ssize_t got = 0, k;
        long len;

        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (!(buf = malloc(64 * 1024)))
                return -ENOMEM;
        while (got < 64 * 1024 && (k = read(fd, buf + got, (size_t)(64 * 1024 - got))) > 0)
                got += k;
        len = agent_restore_kernel_stub_len(buf, (size_t)got, (uint64_t)st.st_size);
        if (len < 0 || len > got)
                return -EINVAL;
        return fk_write_file_atomic(path, buf, (size_t)len, 0644);
}

int agent_restore_kernel(const char *run_root, const char *kernel, char **ret_kernel,
                         char **ret_initrd)
{
        cleanup_free char *dir = NULL, *k = NULL, *i = NULL;
        struct stat st;
        int r = 0;

        if (stat(kernel, &st) < 0)
                return -errno;
        /* named by the kernel's identity: a rebuilt image gets a new stub */
        if (fk_asprintf(&dir, "%s/restore-kernels", run_root) < 0 ||
            fk_asprintf(&k, "%s/vmlinuz-%" PRIu64 "-%" PRIu64 "-%" PRIu64, dir, (uint64_t)st.st_ino,
                        (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec) < 0 ||
            fk_asprintf(&i, "%s/initrd", dir) < 0)
                return -ENOMEM;
        pthread_mutex_lock(&stub_lock);
        if (access(k, R_OK) < 0 || access(i, R_OK) < 0) {
                static const uint8_t zero[STUB_INITRD];

                r = fk_mkdir_p(dir, 0755);
                if (r >= 0)
                        r = write_stub(kernel, k);
                if (r >= 0)
                        r = fk_write_file_atomic(i, zero, sizeof(zero), 0644);
        }
        pthread_mutex_unlock(&stub_lock);
        if (r < 0)
                return r;
        *ret_kernel = TAKE_PTR(k);
        *ret_initrd = TAKE_PTR(i);
        return 0;
}
