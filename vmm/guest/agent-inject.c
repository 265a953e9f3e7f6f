/* SPDX-License-Identifier: MIT */
/* /run/forklet/inject: a root-only FIFO; each line written to it names a guest file whose bytes
 * the agent writes verbatim onto the agent port, in one piece between its own frames. It lets a
 * test play a compromised guest (tests/agent/agent-hostile.sh). */
#include "vmm/guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INJECT_FILE_MAX (16u * 1024 * 1024)

static char line[4096];
static size_t line_len;

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

/* Appends the whole file at path to a->out (a->out always ends on a frame boundary, so the
 * injected bytes start at one, and nothing of ours lands inside them). */
static void inject_file(struct ga *a, const char *path)
{
        uint8_t buf[GUEST_PROTO_CHUNK];
        size_t total = 0;
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return;
        while (total < INJECT_FILE_MAX && (n = read(fd, buf, sizeof(buf))) > 0) {
                if (guest_buf_append(&a->out, buf, (size_t)n) < 0)
                        break;
                total += (size_t)n;
        }
        close(fd);
}

void ga_inject_read(struct ga *a)
{
        ssize_t n = read(a->inject_fd, line + line_len, sizeof(line) - 1 - line_len);
        char *start = line, *nl;

        if (n <= 0)
                return;
        line_len += (size_t)n;
        line[line_len] = 0;
        while ((nl = memchr(start, '\n', line_len - (size_t)(start - line)))) {
                *nl = 0;
                if (a->connected && start[0] == '/')
                        inject_file(a, start);
                start = nl + 1;
        }
        line_len -= (size_t)(start - line);
        memmove(line, start, line_len);
        if (line_len == sizeof(line) - 1) /* no newline in a full buffer: not a path */
                line_len = 0;
}
