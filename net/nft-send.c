/* SPDX-License-Identifier: MIT */
/* The nftables transport: sends a built batch on a netfilter netlink socket opened inside a
 * netns and collects the kernel's acknowledgements. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "common/cleanup.h"
#include "net/net-internal.h"
#include "net/net.h"

#define ACK_TIMEOUT_MS 5000

DEFINE_CLEANUP_FUNC(struct mnl_socket *, mnl_socket_close)

static int mnl_open_here(void *userdata)
{
        struct mnl_socket **ret = userdata;
        struct mnl_socket *nl;

        nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!nl)
                return -errno;
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                int r = -errno;

                mnl_socket_close(nl);
                return r;
        }
        *ret = nl;
        return 0;
}

static int batch_sendmsg(struct mnl_socket *nl, struct nftnl_batch *batch)
{
        struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
        int n_iov = nftnl_batch_iovec_len(batch);
        cleanup_free struct iovec *iov = calloc((size_t)n_iov, sizeof(*iov));
        struct msghdr msg = {.msg_name = &snl, .msg_namelen = sizeof(snl)};
        size_t total = 0;
        int size;

        if (!iov)
                return -ENOMEM;
        nftnl_batch_iovec(batch, iov, (uint32_t)n_iov);
        for (int i = 0; i < n_iov; i++)
                total += iov[i].iov_len;
        /* the whole transaction goes in one datagram: make room for it */
        size = (int)FK_MIN(total + 4096, (size_t)INT32_MAX);
        (void)setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size));
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)n_iov;
        if (sendmsg(mnl_socket_get_fd(nl), &msg, 0) < 0)
                return -errno;
        return 0;
}

/* Every message is acknowledged: keep acks small (header only) and make room for all of them
 * (each ack is its own skb, about 1 KiB of truesize),
 * or a large transaction overruns the receive buffer (ENOBUFS). */
static int ack_room(struct mnl_socket *nl, uint32_t n_msgs)
{
        int one = 1;
        int size = (int)FK_MIN((uint64_t)n_msgs * 1024 + 65536, (uint64_t)INT32_MAX);

        if (setsockopt(mnl_socket_get_fd(nl), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one)) < 0)
                return -errno;
        (void)setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
        return 0;
}

/* Counts acks in one datagram; records the first error. */
static void acks_parse(const void *buf, size_t len, uint32_t portid, uint32_t *acks, int *err)
{
        const struct nlmsghdr *nlh = buf;
        int left = (int)len;

        for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
                const struct nlmsgerr *e;

                if (nlh->nlmsg_pid != portid || nlh->nlmsg_type != NLMSG_ERROR)
                        continue;
                if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e))) {
                        *err = *err ? *err : -EBADMSG;
                        continue;
                }
                e = mnl_nlmsg_get_payload(nlh);
                (*acks)++;
                if (e->error < 0 && *err == 0)
                        *err = e->error;
        }
}

int net_nft_open(int nsfd, struct mnl_socket **ret)
{
        return nsfd < 0 ? mnl_open_here(ret) : net_netns_run(nsfd, mnl_open_here, ret);
}

int net_nft_send(int nsfd, struct net_nft_batch *b)
{
        _cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;
        cleanup_free char *buf = NULL;
        uint32_t acks = 0;
        int r, err = 0;

        r = net_nft_open(nsfd, &nl);
        if (r < 0)
                return r;
        r = ack_room(nl, b->n_msgs);
        if (r < 0)
                return r;
        r = batch_sendmsg(nl, b->batch);
        if (r < 0)
                return r;
        buf = malloc(MNL_SOCKET_BUFFER_SIZE);
        if (!buf)
                return -ENOMEM;
        /* after an error the kernel aborts the transaction; stop waiting at the first one */
        while (acks < b->n_msgs && err == 0) {
                struct pollfd pfd = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};
                ssize_t n;

                r = poll(&pfd, 1, ACK_TIMEOUT_MS);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : -ETIMEDOUT;
                n = mnl_socket_recvfrom(nl, buf, MNL_SOCKET_BUFFER_SIZE);
                if (n < 0)
                        return -errno;
                acks_parse(buf, (size_t)n, mnl_socket_get_portid(nl), &acks, &err);
        }
        return err;
}
