/* SPDX-License-Identifier: MIT */
/* Links, addresses and routes through libnl-route-3, on rtnetlink sockets bound to a chosen
 * netns; plus the two things rtnetlink cannot do: tap creation and sysctls. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

DEFINE_CLEANUP_FUNC(struct rtnl_link *, rtnl_link_put)
DEFINE_CLEANUP_FUNC(struct rtnl_addr *, rtnl_addr_put)
DEFINE_CLEANUP_FUNC(struct rtnl_route *, rtnl_route_put)
DEFINE_CLEANUP_FUNC(struct nl_addr *, nl_addr_put)
DEFINE_CLEANUP_FUNC(struct nl_cache *, nl_cache_free)

int net_nl_errno(int nlerr)
{
        static const struct {
                int nle, err;
        } map[] = {
                {NLE_EXIST, EEXIST},         {NLE_NOMEM, ENOMEM},
                {NLE_OBJ_NOTFOUND, ENOENT},  {NLE_NODEV, ENODEV},
                {NLE_PERM, EPERM},           {NLE_BUSY, EBUSY},
                {NLE_INVAL, EINVAL},         {NLE_RANGE, ERANGE},
                {NLE_OPNOTSUPP, EOPNOTSUPP}, {NLE_AGAIN, EAGAIN},
                {NLE_NOACCESS, EACCES},      {NLE_AF_NOSUPPORT, EAFNOSUPPORT},
                {NLE_NOADDR, EADDRNOTAVAIL}, {NLE_INTR, EINTR},
        };
        int e = nlerr < 0 ? -nlerr : nlerr;

        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (map[i].nle == e)
                        return -map[i].err;
        return -EIO;
}

static int nl_open_here(void *userdata)
{
        struct nl_sock **ret = userdata;
        struct nl_sock *sk;
        int r;

        sk = nl_socket_alloc();
        if (!sk)
                return -ENOMEM;
        r = nl_connect(sk, NETLINK_ROUTE);
        if (r < 0) {
                nl_socket_free(sk);
                return net_nl_errno(r);
        }
        *ret = sk;
        return 0;
}

int net_nl_open(int nsfd, struct nl_sock **ret)
{
        if (nsfd < 0)
                return nl_open_here(ret);
        return net_netns_run(nsfd, nl_open_here, ret);
}

int net_link_ifindex(struct nl_sock *sk, const char *name)
{
        _cleanup_(rtnl_link_putp) struct rtnl_link *link = NULL;
        int r;

        r = rtnl_link_get_kernel(sk, 0, name, &link);
        if (r < 0)
                return r == -NLE_OBJ_NOTFOUND || r == -NLE_NODEV ? -ENODEV : net_nl_errno(r);
        return rtnl_link_get_ifindex(link);
}

int net_link_add_veth(struct nl_sock *sk, const char *name, const char *peer, int peer_nsfd)
{
        struct rtnl_link *link, *p;
        int r;

        link = rtnl_link_veth_alloc();
        if (!link)
                return -ENOMEM;
        rtnl_link_set_name(link, name);
        p = rtnl_link_veth_get_peer(link);
        rtnl_link_set_name(p, peer);
        if (peer_nsfd >= 0)
                rtnl_link_set_ns_fd(p, peer_nsfd);
        rtnl_link_put(p);
        r = rtnl_link_add(sk, link, NLM_F_CREATE | NLM_F_EXCL);
        rtnl_link_veth_release(link);
        return r < 0 ? net_nl_errno(r) : 0;
}

int net_link_add_bridge(struct nl_sock *sk, const char *name)
{
        int r = rtnl_link_bridge_add(sk, name);

        return r < 0 ? net_nl_errno(r) : 0;
}

int net_link_set_up(struct nl_sock *sk, const char *name)
{
        _cleanup_(rtnl_link_putp) struct rtnl_link *link = NULL, *change = NULL;
        int r;

        r = rtnl_link_get_kernel(sk, 0, name, &link);
        if (r < 0)
                return net_nl_errno(r);
        change = rtnl_link_alloc();
        if (!change)
                return -ENOMEM;
        rtnl_link_set_flags(change, IFF_UP);
        r = rtnl_link_change(sk, link, change, 0);
        return r < 0 ? net_nl_errno(r) : 0;
}

int net_link_set_master(struct nl_sock *sk, const char *name, const char *master)
{
        int slave_idx, master_idx, r;

        slave_idx = net_link_ifindex(sk, name);
        if (slave_idx < 0)
                return slave_idx;
        master_idx = net_link_ifindex(sk, master);
        if (master_idx < 0)
                return master_idx;
        r = rtnl_link_enslave_ifindex(sk, master_idx, slave_idx);
        return r < 0 ? net_nl_errno(r) : 0;
}

int net_link_delete(struct nl_sock *sk, const char *name)
{
        _cleanup_(rtnl_link_putp) struct rtnl_link *link = NULL;
        int r;

        link = rtnl_link_alloc();
        if (!link)
                return -ENOMEM;
        rtnl_link_set_name(link, name);
        r = rtnl_link_delete(sk, link);
        if (r == -NLE_NODEV || r == -NLE_OBJ_NOTFOUND)
                return 0;
        return r < 0 ? net_nl_errno(r) : 0;
}

int net_addr_add4(struct nl_sock *sk, const char *ifname, uint32_t addr_be, uint8_t prefix)
{
        _cleanup_(rtnl_addr_putp) struct rtnl_addr *a = NULL;
        _cleanup_(nl_addr_putp) struct nl_addr *local = NULL;
        int ifindex, r;

        ifindex = net_link_ifindex(sk, ifname);
        if (ifindex < 0)
                return ifindex;
        a = rtnl_addr_alloc();
        local = nl_addr_build(AF_INET, &addr_be, sizeof(addr_be));
        if (!a || !local)
                return -ENOMEM;
        nl_addr_set_prefixlen(local, prefix);
        rtnl_addr_set_ifindex(a, ifindex);
        r = rtnl_addr_set_local(a, local);
        if (r < 0)
                return net_nl_errno(r);
        rtnl_addr_set_prefixlen(a, prefix);
        r = rtnl_addr_add(sk, a, 0);
        if (r == -NLE_EXIST)
                return 0;
        return r < 0 ? net_nl_errno(r) : 0;
}

int net_route_default4(struct nl_sock *sk, uint32_t gw_be)
{
        _cleanup_(rtnl_route_putp) struct rtnl_route *route = NULL;
        _cleanup_(nl_addr_putp) struct nl_addr *dst = NULL, *gw = NULL;
        struct rtnl_nexthop *nh;
        uint32_t any = 0;
        int r;

        route = rtnl_route_alloc();
        dst = nl_addr_build(AF_INET, &any, sizeof(any));
        gw = nl_addr_build(AF_INET, &gw_be, sizeof(gw_be));
        nh = rtnl_route_nh_alloc();
        if (!route || !dst || !gw || !nh) {
                if (nh)
                        rtnl_route_nh_free(nh);
                return -ENOMEM;
        }
        nl_addr_set_prefixlen(dst, 0);
        rtnl_route_set_family(route, AF_INET);
        rtnl_route_set_table(route, RT_TABLE_MAIN);
        rtnl_route_set_protocol(route, RTPROT_STATIC);
        rtnl_route_set_scope(route, RT_SCOPE_UNIVERSE);
        rtnl_route_set_type(route, RTN_UNICAST);
        r = rtnl_route_set_dst(route, dst);
        if (r < 0) {
                rtnl_route_nh_free(nh);
                return net_nl_errno(r);
        }
        rtnl_route_nh_set_gateway(nh, gw);
        rtnl_route_add_nexthop(route, nh);
        r = rtnl_route_add(sk, route, NLM_F_CREATE | NLM_F_REPLACE);
        return r < 0 ? net_nl_errno(r) : 0;
}

struct addr_list {
        uint32_t *v;
        size_t n;
        int r;
};

static void addr_list_add(struct nl_object *obj, void *userdata)
{
        struct addr_list *l = userdata;
        struct nl_addr *local = rtnl_addr_get_local((struct rtnl_addr *)obj);
        uint32_t a, *nv;

        if (l->r < 0 || !local || nl_addr_get_family(local) != AF_INET ||
            nl_addr_get_len(local) != sizeof(a))
                return;
        memcpy(&a, nl_addr_get_binary_addr(local), sizeof(a));
        nv = realloc(l->v, (l->n + 1) * sizeof(*nv));
        if (!nv) {
                l->r = -ENOMEM;
                return;
        }
        l->v = nv;
        l->v[l->n++] = ntohl(a);
}

int net_addr_list4(struct nl_sock *sk, uint32_t **ret, size_t *ret_n)
{
        _cleanup_(nl_cache_freep) struct nl_cache *cache = NULL;
        struct addr_list l = {};
        int r;

        r = rtnl_addr_alloc_cache(sk, &cache);
        if (r < 0)
                return net_nl_errno(r);
        nl_cache_foreach(cache, addr_list_add, &l);
        if (l.r < 0) {
                free(l.v);
                return l.r;
        }
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}

/* System calls only: runs in a child on this process's memory (fk_clone_vfork). */
static int tap_create(const char *name)
{
        struct ifreq ifr;
        int fd, r = 0;

        fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        memset(&ifr, 0, sizeof(ifr));
        ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
        strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
        if (ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETOWNER, 0UL) < 0 ||
            ioctl(fd, TUNSETGROUP, 0UL) < 0 || ioctl(fd, TUNSETPERSIST, 1UL) < 0)
                r = -errno;
        close(fd);
        return r;
}

static int tap_child(void *name)
{
        int r = tap_create(name);

        _exit(r < 0 ? (-r & 0xff) : 0);
}

int net_tap_create_here(const char *name)
{
        int status;
        pid_t pid;

        if (if_nametoindex(name) > 0)
                return 0;
        /* The tun fd is attached to the tap while it is open. Opened in this (threaded)
         * process, a QEMU spawned meanwhile by another thread inherits it until its exec, and
         * the tap's own QEMU then gets EBUSY from TUNSETIFF (a non-multi-queue tap takes one
         * attached file). So the fd lives only in a child, which nothing else inherits from
         * (fk_clone_vfork: no copy of forkletd's page tables). */
        pid = fk_clone_vfork(tap_child, (void *)name);
        if (pid < 0)
                return pid;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -EIO;
        return -WEXITSTATUS(status);
}

int net_sysctl_write_here(const char *path, const char *value)
{
        cleanup_close int fd = -1;

        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fk_write_all(fd, value, strlen(value));
}
