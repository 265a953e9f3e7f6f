/* SPDX-License-Identifier: MIT */
/* Test harness: a cuttable loopback TCP proxy (one poll() thread, a few connection pairs). */
#include "tests/etcd/etcd-proxy.h"
#include "tests/etcd/etcd-server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAIRS 16

struct etcd_proxy {
        int port, target_port;
        int listen_fd;
        int pairs[PAIRS][2]; /* client side, etcd side; -1 = free */
        int wake[2];
        atomic_int want_up, is_up, stop;
        pthread_t thread;
        char url[64];
};

static int tcp_socket(int port, bool listen_on)
{
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (listen_on ? bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0
                      : connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

static void close_pair(struct etcd_proxy *p, int i)
{
        for (int k = 0; k < 2; k++) {
                if (p->pairs[i][k] >= 0)
                        close(p->pairs[i][k]);
                p->pairs[i][k] = -1;
        }
}

static void apply_state(struct etcd_proxy *p)
{
        int up = atomic_load(&p->want_up);

        if (!up && p->listen_fd >= 0) {
                for (int i = 0; i < PAIRS; i++)
                        close_pair(p, i);
                close(p->listen_fd);
                p->listen_fd = -1;
        } else if (up && p->listen_fd < 0) {
                p->listen_fd = tcp_socket(p->port, true);
        }
        atomic_store(&p->is_up, up);
}

static void accept_one(struct etcd_proxy *p)
{
        int c = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC), e;

        if (c < 0)
                return;
        e = tcp_socket(p->target_port, false);
        for (int i = 0; i < PAIRS && e >= 0; i++) {
                if (p->pairs[i][0] < 0) {
                        p->pairs[i][0] = c;
                        p->pairs[i][1] = e;
                        return;
                }
        }
        close(c);
        if (e >= 0)
                close(e);
}

/* Copies what is readable on side k of pair i to the other side; closes the pair on EOF. */
static void forward(struct etcd_proxy *p, int i, int k)
{
        char buf[16384];
        ssize_t n = read(p->pairs[i][k], buf, sizeof(buf));

        if (n <= 0) {
                close_pair(p, i);
                return;
        }
        for (ssize_t off = 0; off < n;) {
                ssize_t w = write(p->pairs[i][!k], buf + off, (size_t)(n - off));

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        close_pair(p, i);
                        return;
                }
                off += w;
        }
}

static void *proxy_thread(void *arg)
{
        struct etcd_proxy *p = arg;

        while (!atomic_load(&p->stop)) {
                struct pollfd fds[2 + 2 * PAIRS];
                int n = 0, who[2 + 2 * PAIRS];
                char b[64];

                fds[n] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
                who[n++] = -1;
                fds[n] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
                who[n++] = -2;
                for (int i = 0; i < PAIRS; i++)
                        for (int k = 0; k < 2 && p->pairs[i][0] >= 0; k++) {
                                fds[n] = (struct pollfd){.fd = p->pairs[i][k], .events = POLLIN};
                                who[n++] = i * 2 + k;
                        }
                if (poll(fds, (nfds_t)n, 1000) <= 0)
                        continue;
                if (fds[0].revents && read(p->wake[0], b, sizeof(b)) >= 0)
                        apply_state(p);
                else if (fds[1].revents && p->listen_fd >= 0)
                        accept_one(p);
                for (int j = 2; j < n && atomic_load(&p->is_up); j++)
                        if (fds[j].revents && p->pairs[who[j] / 2][0] >= 0)
                                forward(p, who[j] / 2, who[j] % 2);
        }
        return NULL;
}

int etcd_proxy_new(int target_port, struct etcd_proxy **ret)
{
        struct etcd_proxy *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        memset(p->pairs, -1, sizeof(p->pairs));
        p->target_port = target_port;
        p->port = etcd_server_free_port();
        p->listen_fd = p->port > 0 ? tcp_socket(p->port, true) : -1;
        atomic_store(&p->want_up, 1);
        atomic_store(&p->is_up, 1);
        if (p->listen_fd < 0 || pipe2(p->wake, O_CLOEXEC) < 0 ||
            pthread_create(&p->thread, NULL, proxy_thread, p) != 0) {
                if (p->listen_fd >= 0)
                        close(p->listen_fd);
                free(p);
                return -EIO;
        }
        snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%d", p->port);
        *ret = p;
        return 0;
}

const char *etcd_proxy_url(struct etcd_proxy *p)
{
        return p->url;
}

void etcd_proxy_set_up(struct etcd_proxy *p, int up)
{
        atomic_store(&p->want_up, up);
        if (write(p->wake[1], "x", 1) < 0)
                return;
        for (int i = 0; i < 5000 && atomic_load(&p->is_up) != up; i++)
                usleep(1000);
}

void etcd_proxy_free(struct etcd_proxy *p)
{
        if (!p)
                return;
        atomic_store(&p->stop, 1);
        if (write(p->wake[1], "x", 1) < 0) {
                /* the thread still ends within its 1 s poll timeout */
        }
        pthread_join(p->thread, NULL);
        for (int i = 0; i < PAIRS; i++)
                close_pair(p, i);
        if (p->listen_fd >= 0)
                close(p->listen_fd);
        close(p->wake[0]);
        close(p->wake[1]);
        free(p);
}
