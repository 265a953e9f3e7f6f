/* SPDX-License-Identifier: MIT */
/* The resolver's side towards the node's upstream servers: parse "IP[:PORT]" addresses and
 * send one query over UDP (TCP when the answer is truncated), from forkletd's own netns. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"

int net_dns_upstream_parse(const char *text, struct sockaddr_storage *ret, unsigned *ret_len)
{
        char host[NET_ADDRSTRLEN + 8];
        const char *port_text = NULL;
        struct sockaddr_in *v4 = (struct sockaddr_in *)ret;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ret;
        unsigned long port = 53;
        char *end;

        if (!text || strlen(text) >= sizeof(host))
                return -EINVAL;
        if (text[0] == '[') { /* [v6]:port */
                const char *close = strchr(text, ']');

                if (!close || (close[1] && close[1] != ':'))
                        return -EINVAL;
                snprintf(host, sizeof(host), "%.*s", (int)(close - text - 1), text + 1);
                port_text = close[1] ? close + 2 : NULL;
        } else if (strchr(text, '.') && strchr(text, ':')) { /* v4:port */
                snprintf(host, sizeof(host), "%.*s", (int)(strchr(text, ':') - text), text);
                port_text = strchr(text, ':') + 1;
        } else
                snprintf(host, sizeof(host), "%s", text);
        if (port_text) {
                errno = 0;
                port = strtoul(port_text, &end, 10);
                if (errno || *end || port == 0 || port > 65535)
                        return -EINVAL;
        }
        memset(ret, 0, sizeof(*ret));
        if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
                v4->sin_family = AF_INET;
                v4->sin_port = htons((uint16_t)port);
                *ret_len = sizeof(*v4);
                return 0;
        }
        if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
                v6->sin6_family = AF_INET6;
                v6->sin6_port = htons((uint16_t)port);
                *ret_len = sizeof(*v6);
                return 0;
        }
        return -EINVAL;
}

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
        for (;;) {
                uint64_t now = fk_now_mono_ns();
                struct pollfd p = {.fd = fd, .events = events};
                int r;

                if (now >= deadline_ns)
                        return -ETIMEDOUT;
                r = poll(&p, 1, (int)((deadline_ns - now) / 1000000) + 1);
                if (r > 0)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
}

static int read_full(int fd, uint8_t *buf, size_t n, uint64_t deadline_ns)
{
        size_t got = 0;

        while (got < n) {
                ssize_t k;
                int r = wait_fd(fd, POLLIN, deadline_ns);

                if (r < 0)
                        return r;
                k = read(fd, buf + got, n - got);
                if (k == 0)
                        return -ECONNRESET;
                if (k < 0 && errno != EINTR && errno != EAGAIN)
                        return -errno;
                if (k > 0)
                        got += (size_t)k;
        }
        return 0;
}

static int query_tcp(const struct sockaddr_storage *sa, unsigned len, const uint8_t *q,
                     size_t q_size, uint8_t *out, size_t out_size, size_t *ret_size,
                     uint64_t deadline_ns)
{
        cleanup_close int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        uint8_t hdr[2] = {(uint8_t)(q_size >> 8), (uint8_t)q_size};
        size_t n;
        int r;

        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *)sa, len) < 0 && errno != EINPROGRESS)
                return -errno;
        r = wait_fd(fd, POLLOUT, deadline_ns);
        if (r < 0)
                return r;
        if (send(fd, hdr, 2, MSG_NOSIGNAL | MSG_MORE) != 2 ||
            send(fd, q, q_size, MSG_NOSIGNAL) != (ssize_t)q_size)
                return -EIO;
        r = read_full(fd, hdr, 2, deadline_ns);
        if (r < 0)
                return r;
        n = (size_t)hdr[0] << 8 | hdr[1];
        if (n > out_size || n < 12)
                return -EBADMSG;
        r = read_full(fd, out, n, deadline_ns);
        if (r < 0)
                return r;
        *ret_size = n;
        return 0;
}

/* One exchange with one upstream: the reply must carry our id. */
static int query_one(const struct sockaddr_storage *sa, unsigned len, const uint8_t *q,
                     size_t q_size, uint8_t *out, size_t out_size, size_t *ret_size,
                     unsigned timeout_ms)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000;
        cleanup_close int fd = socket(sa->ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ssize_t k;
        int r;

        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *)sa, len) < 0 ||
            send(fd, q, q_size, MSG_NOSIGNAL) != (ssize_t)q_size)
                return -errno;
        for (;;) {
                r = wait_fd(fd, POLLIN, deadline);
                if (r < 0)
                        return r;
                k = recv(fd, out, out_size, 0);
                if (k < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno; /* ECONNREFUSED: nothing listens there */
                }
                if (k >= 12 && memcmp(out, q, 2) == 0)
                        break; /* else a stray datagram: keep waiting */
        }
        if (out[2] & 0x02) /* TC: the answer did not fit; ask again over TCP */
                return query_tcp(sa, len, q, q_size, out, out_size, ret_size, deadline);
        *ret_size = (size_t)k;
        return 0;
}

int net_dns_upstream_query(const struct net_dns_upstreams *u, const uint8_t *q, size_t q_size,
                           uint8_t *out, size_t out_size, size_t *ret_size)
{
        cleanup_free uint8_t *copy = malloc(q_size);
        uint8_t id[2];
        int r = -ENOENT;

        if (!copy)
                return -ENOMEM;
        if (q_size < 12)
                return -EBADMSG;
        /* our own random id towards the upstream, so a guest cannot predict it */
        r = fk_random_bytes(id, sizeof(id));
        if (r < 0)
                return r;
        memcpy(copy, q, q_size);
        memcpy(copy, id, 2);
        r = -ENOENT;
        for (size_t i = 0; i < u->n; i++) {
                r = query_one(&u->addrs[i], u->lens[i], copy, q_size, out, out_size, ret_size,
                              u->timeout_ms);
                if (r >= 0) {
                        memcpy(out, q, 2); /* the guest's id back */
                        return 0;
                }
        }
        return r;
}

int net_dns_upstreams_init(struct net_dns_upstreams *u, const struct net_dns_config *c,
                           struct fk_error *reterr)
{
        size_t n = c->upstreams ? fk_strv_length(c->upstreams) : 0;

        u->timeout_ms = c->timeout_ms ? c->timeout_ms : 2000;
        u->addrs = calloc(n + 1, sizeof(*u->addrs));
        u->lens = calloc(n + 1, sizeof(*u->lens));
        if (!u->addrs || !u->lens)
                return fk_error_set(reterr, -ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
                if (net_dns_upstream_parse(c->upstreams[i], &u->addrs[i], &u->lens[i]) < 0)
                        return fk_error_set(reterr, -EINVAL,
                                            "network.dns: \"%s\" is not an IP[:PORT]",
                                            c->upstreams[i]);
        u->n = n;
        return 0;
}
