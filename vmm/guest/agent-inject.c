/* SPDX-License-Identifier: MIT */
/* /run/forklet/inject: a root-only FIFO whose bytes the agent copies verbatim onto the agent
 * port, so a test can make a real guest send hostile frames (tests/integration/agent-hostile.sh
 * plays a compromised guest with it). */
#include "vmm/guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* This grants nothing a guest lacks: guest root can already kill this agent (or ptrace it) and
 * write whatever it likes on the port, and the host treats every byte from the port as
 * untrusted. The FIFO is 0600 root, so unprivileged guest users gain nothing either. */
void ga_inject_open(struct ga *a)
{
        struct stat st;

        a->inject_fd = -1;
        if (lstat(GA_INJECT_PATH, &st) == 0 && (!S_ISFIFO(st.st_mode) || st.st_uid != 0))
                (void)unlink(GA_INJECT_PATH);
        if (mkfifo(GA_INJECT_PATH, 0600) < 0 && errno != EEXIST)
                return;
        /* O_RDWR: a FIFO with no writer left would poll POLLHUP forever. */
        a->inject_fd = open(GA_INJECT_PATH, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
}

void ga_inject_read(struct ga *a)
{
        uint8_t buf[GUEST_PROTO_CHUNK];
        ssize_t n;

        /* Appended after whole frames, so injected bytes start at a frame boundary (a frame
         * split over several reads may be interleaved with real replies: the host must cope). */
        n = read(a->inject_fd, buf, sizeof(buf));
        if (n > 0 && a->connected)
                (void)guest_buf_append(&a->out, buf, (size_t)n);
}
