/* SPDX-License-Identifier: MIT */
/* Free space on the filesystems forkletd writes to (stateDir, runDir): checks before an
 * operation whose size is known, and one message for a full device whichever step hit it. */
#include "agent/store/store.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#define MIB       ((uint64_t)1024 * 1024)
#define SPACE_MSG "no space left on the device holding"

int agent_space_free(const char *path, uint64_t *ret)
{
        struct statvfs v;

        if (statvfs(path, &v) < 0)
                return -errno;
        /* f_bavail, as df's "Avail": forkletd (root) leaves ext4's reserve to the host */
        *ret = (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
        return 0;
}

uint64_t agent_space_allocated(const char *path)
{
        struct stat st;

        return stat(path, &st) < 0 ? 0 : (uint64_t)st.st_blocks * 512;
}

int agent_space_error(const char *path, const char *what, uint64_t need, const char *op,
                      struct fk_error *err)
{
        uint64_t avail = 0;

        (void)agent_space_free(path, &avail);
        return fk_error_set(
                err, -ENOSPC, "%s%s" SPACE_MSG " %s (%" PRIu64 " MiB free, %" PRIu64 " MiB needed)",
                op ? op : "", op ? ": " : "", what, avail / MIB, (need + MIB - 1) / MIB);
}

int agent_space_check(const char *path, const char *what, uint64_t need, const char *op,
                      struct fk_error *err)
{
        uint64_t avail = 0;
        int r = agent_space_free(path, &avail);

        if (r < 0)
                return fk_error_set(err, r, "%s%sfree space on %s (%s): %s", op ? op : "",
                                    op ? ": " : "", what, path, strerror(-r));
        return avail < need ? agent_space_error(path, what, need, op, err) : 0;
}

bool agent_space_is_full(int r, const struct fk_error *err)
{
        /* qemu-img and QEMU's migration report a full disk as text (their exit or error-desc) */
        return r == -ENOSPC || (r < 0 && err && strstr(err->msg, "No space left on device"));
}

int agent_space_explain(int r, const char *path, const char *what, uint64_t need, const char *op,
                        struct fk_error *err)
{
        if (!agent_space_is_full(r, err) || (err && strstr(err->msg, SPACE_MSG)))
                return r; /* not full, or said already by the step that knew the size */
        return agent_space_error(path, what, need, op, err);
}
