/* SPDX-License-Identifier: MIT */
/* A bidirectional byte relay between two stream sockets with half-close, used by port-forward
 * on both ends (forkletd: API connection <-> guest; the CLI: local client <-> API). */
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_BUF 65536

/* Moves what is readable on from into to. 0 on EOF of from, 1 when data moved, -errno. */
static int pump(int from, int to, char *buf)
{
        ssize_t n = read(from, buf, RELAY_BUF);
        size_t off = 0;

        if (n == 0)
                return 0;
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 1 : -errno;
        while (off < (size_t)n) {
                ssize_t w = send(to, buf + off, (size_t)n - off, MSG_NOSIGNAL);

                if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                        struct pollfd p = {.fd = to, .events = POLLOUT};

                        if (poll(&p, 1, 30000) <= 0)
                                return -ETIMEDOUT;
                        continue;
                }
                if (w < 0)
                        return -errno;
                off += (size_t)w;
        }
        return 1;
}

int fk_relay(int a, int b)
{
        cleanup_free char *buf = malloc(RELAY_BUF);
        bool a_open = true, b_open = true; /* reading side still open */
        int r = 0;

        if (!buf)
                return -ENOMEM;
        while (a_open || b_open) {
                struct pollfd p[2] = {
                        {.fd = a_open ? a : -1, .events = POLLIN},
                        {.fd = b_open ? b : -1, .events = POLLIN},
                };

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (a_open && p[0].revents) {
                        r = pump(a, b, buf);
                        if (r <= 0) {
                                a_open = false;
                                (void)shutdown(b, SHUT_WR);
                        }
                }
                if (r < 0)
                        break;
                if (b_open && p[1].revents) {
                        r = pump(b, a, buf);
                        if (r <= 0) {
                                b_open = false;
                                (void)shutdown(a, SHUT_WR);
                        }
                }
                if (r < 0)
                        break;
        }
        return r < 0 ? r : 0;
}
