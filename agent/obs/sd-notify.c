/* SPDX-License-Identifier: MIT */
/* The systemd readiness protocol without libsystemd: one datagram to $NOTIFY_SOCKET (a path,
 * or an abstract name when it starts with '@'). */
#include "agent/obs/obs.h"
#include "common/cleanup.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

int agent_sd_notify(const char *state)
{
        const char *path = getenv("NOTIFY_SOCKET");
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = -1;
        size_t n;

        if (!path || !*path)
                return 0;
        n = strlen(path);
        if (n >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
                return -EINVAL;
        memcpy(sa.sun_path, path, n);
        if (path[0] == '@')
                sa.sun_path[0] = '\0';
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
                   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
                return -errno;
        return 1;
}
