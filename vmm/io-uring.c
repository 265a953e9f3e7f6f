/* SPDX-License-Identifier: MIT */
/* Whether a QEMU forkletd starts may do its disk I/O through io_uring (vmm_config.disk_io_uring):
 * the kernel has it, allows it to an unprivileged process, and no seccomp filter around forkletd
 * (a container's) refuses it. */
#include <errno.h>
#include <linux/io_uring.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

bool vmm_io_uring_usable_at(const char *sysctl, char *why, size_t size)
{
        cleanup_free char *buf = NULL;
        struct io_uring_params params;
        long fd;

        /* kernel.io_uring_disabled (6.6 and later): 1 leaves it to a group and CAP_SYS_ADMIN,
         * which a jailed QEMU has neither of; 2 turns it off */
        if (fk_read_file(sysctl, 32, &buf, NULL) >= 0 && buf[0] != '0') {
                snprintf(why, size, "%s is %c", sysctl, buf[0]);
                return false;
        }
        memset(&params, 0, sizeof(params));
        fd = syscall(__NR_io_uring_setup, 1, &params);
        if (fd < 0) {
                snprintf(why, size, "io_uring_setup: %s", strerror(errno));
                return false;
        }
        close((int)fd);
        snprintf(why, size, "io_uring_setup works");
        return true;
}
