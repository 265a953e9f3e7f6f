/* SPDX-License-Identifier: MIT */
/* Per-session network lifecycle: setup (netns, bridge + tap, veth uplink from IPAM, routes,
 * forwarding, egress table, host NAT), teardown, and cleanup of orphans. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

DEFINE_CLEANUP_FUNC(struct nl_sock *, nl_socket_free)

int net_node_info_resolve(const struct net_node_config *node, struct net_node_info *ret,
                          struct fk_error *reterr)
{
        struct net_node_info n = {};
        const char *prefix = node->link_prefix ? node->link_prefix : "fk";
        int r;

        if (!node->state_dir || node->state_dir[0] != '/')
                return fk_error_set(reterr, -EINVAL, "network: stateDir must be absolute");
        r = net_ipam_pool_parse(node->uplink_pool ? node->uplink_pool : "", &n.pool);
        if (r >= 0)
                r = net_cidr_parse(node->uplink_pool, &n.pool_cidr);
        if (r < 0)
                return fk_error_set(reterr, -EINVAL,
                                    "network.uplinkPool \"%s\": want an IPv4 CIDR of /8 to /30",
                                    node->uplink_pool ? node->uplink_pool : "");
        if (strlen(prefix) >= sizeof(n.link_prefix) || !net_name_valid(prefix))
                return fk_error_set(reterr, -EINVAL, "network: link prefix \"%s\" too long",
                                    prefix);
        strcpy(n.link_prefix, prefix);
        n.uplink_if =
                node->uplink_interface && node->uplink_interface[0] ? node->uplink_interface : NULL;
        if (fk_asprintf(&n.ipam_dir, "%s/net", node->state_dir) < 0)
                return fk_error_set(reterr, -ENOMEM, "out of memory");
        *ret = n;
        return 0;
}

void net_node_info_done(struct net_node_info *n)
{
        free(n->ipam_dir);
        n->ipam_dir = NULL;
}

static void host_ifname(const struct net_node_info *n, uint32_t slot, char buf[16])
{
        snprintf(buf, 16, "%s%u", n->link_prefix, slot);
}

static void addr4_format(uint32_t host_order, char *buf, size_t size)
{
        uint32_t be = htonl(host_order);

        inet_ntop(AF_INET, &be, buf, (socklen_t)size);
}

/* Removes what a session named name may have left: host veth, host table, netns, lease. */
static int teardown_by_name(const struct net_node_info *n, const char *name)
{
        _cleanup_(nl_socket_freep) struct nl_sock *sk = NULL;
        cleanup_free char *table = NULL;
        struct net_nft_batch b;
        uint32_t slot;
        int r, ret = 0;

        if (net_ipam_lookup(n->ipam_dir, name, &slot) >= 0) {
                char ifname[16];

                host_ifname(n, slot, ifname);
                r = net_nl_open(-1, &sk);
                if (r >= 0)
                        r = net_link_delete(sk, ifname);
                ret = ret < 0 ? ret : FK_MIN(r, 0);
        }
        if (fk_asprintf(&table, NET_HOST_TABLE_PREFIX "%s", name) < 0)
                return -ENOMEM;
        r = net_nft_build_delete(table, 1, &b);
        if (r >= 0) {
                r = net_nft_send(-1, &b);
                net_nft_batch_done(&b);
        }
        ret = ret < 0 ? ret : FK_MIN(r, 0);
        r = net_netns_delete(name);
        ret = ret < 0 ? ret : FK_MIN(r, 0);
        r = net_ipam_release(n->ipam_dir, name);
        return ret < 0 ? ret : FK_MIN(r, 0);
}

/* Runs inside the session netns, before its links are made: what rtnetlink cannot do.
 * IPv4 forwarding: a link takes its settings from conf/default when it is made, and a write
 * there takes no lock. net.ipv4.ip_forward (conf/all) switches every link under the rtnl lock,
 * which the kernel only tries: while another thread holds it (the other sessions of a fan-out
 * making their links) the write is restarted at once, again and again (one thread spent 0.29 s
 * in write(2) during a fork of 30). Turning conf/all on also stops ICMP redirects from being
 * accepted, so that is written too. A netns an earlier start made (*created false) has its links
 * already: there ip_forward is written as before. */
static int ns_prepare(void *userdata)
{
        const bool *created = userdata;
        int r;

        if (*created) {
                r = net_sysctl_write_here("/proc/sys/net/ipv4/conf/default/forwarding", "1");
                if (r >= 0)
                        r = net_sysctl_write_here("/proc/sys/net/ipv4/conf/all/accept_redirects",
                                                  "0");
        } else
                r = net_sysctl_write_here("/proc/sys/net/ipv4/ip_forward", "1");
        return r < 0 ? r : net_tap_create_here(NET_TAP_NAME);
}

static int set_bridge_mac(struct nl_sock *sk)
{
        struct rtnl_link *link = NULL, *change = NULL;
        struct nl_addr *mac = NULL;
        int r;

        r = rtnl_link_get_kernel(sk, 0, NET_BRIDGE_NAME, &link);
        if (r < 0)
                return net_nl_errno(r);
        change = rtnl_link_alloc();
        r = nl_addr_parse(NET_GATEWAY_MAC, AF_LLC, &mac);
        if (change && r >= 0) {
                rtnl_link_set_addr(change, mac);
                r = rtnl_link_change(sk, link, change, 0);
        }
        r = !change ? -ENOMEM : r < 0 ? net_nl_errno(r) : 0;
        if (mac)
                nl_addr_put(mac);
        if (change)
                rtnl_link_put(change);
        rtnl_link_put(link);
        return r;
}

static int setup_netns_links(struct net_session *s, struct nl_sock *ns, uint32_t ns_addr,
                             uint32_t host_addr, struct fk_error *reterr)
{
        struct in_addr gw, resolver;
        int r;

        inet_pton(AF_INET, NET_GATEWAY_IPV4, &gw);
        inet_pton(AF_INET, NET_RESOLVER_IPV4, &resolver);
        r = net_link_ifindex(ns, NET_BRIDGE_NAME);
        if (r == -ENODEV)
                r = net_link_add_bridge(ns, NET_BRIDGE_NAME);
        if (r >= 0)
                r = set_bridge_mac(ns);
        if (r >= 0)
                r = net_link_set_master(ns, NET_TAP_NAME, NET_BRIDGE_NAME);
        if (r >= 0)
                r = net_addr_add4(ns, NET_BRIDGE_NAME, gw.s_addr, NET_GUEST_PREFIX);
        if (r >= 0)
                r = net_addr_add4(ns, NET_BRIDGE_NAME, resolver.s_addr, 32);
        for (const char *const *l = (const char *const[]){"lo", NET_TAP_NAME, NET_BRIDGE_NAME,
                                                          NET_UPLINK_NAME, NULL};
             *l && r >= 0; l++)
                r = net_link_set_up(ns, *l);
        if (r >= 0)
                r = net_addr_add4(ns, NET_UPLINK_NAME, htonl(ns_addr), 32 - NET_IPAM_SLOT_BITS);
        if (r >= 0)
                r = net_route_default4(ns, htonl(host_addr));
        if (r < 0)
                return fk_error_set(reterr, r, "%s: links in the session netns: %s", s->name,
                                    strerror(-r));
        return 0;
}

static int setup_uplink(struct net_session *s, struct nl_sock *host, struct nl_sock *ns,
                        bool created, struct fk_error *reterr)
{
        cleanup_free uint32_t *in_use = NULL;
        size_t n_in_use = 0;
        uint32_t host_addr, ns_addr;
        int r;

        r = net_netns_run(s->nsfd, ns_prepare, &created);
        if (r < 0)
                return fk_error_set(reterr, r, "%s: forwarding and %s in the netns: %s", s->name,
                                    NET_TAP_NAME, strerror(-r));
        r = net_addr_list4(host, &in_use, &n_in_use);
        if (r >= 0)
                r = net_ipam_acquire(s->node.ipam_dir, &s->node.pool, s->name, in_use, n_in_use,
                                     &s->slot);
        if (r < 0)
                return fk_error_set(reterr, r, "%s: lease an uplink from %s: %s", s->name,
                                    s->node.ipam_dir,
                                    r == -ENOSPC ? "pool exhausted" : strerror(-r));
        net_ipam_slot_addrs(&s->node.pool, s->slot, &host_addr, &ns_addr);
        addr4_format(host_addr, s->uplink_host, sizeof(s->uplink_host));
        addr4_format(ns_addr, s->uplink_netns, sizeof(s->uplink_netns));
        host_ifname(&s->node, s->slot, s->host_ifname);
        r = net_link_ifindex(host, s->host_ifname);
        if (r == -ENODEV) {
                (void)net_link_delete(ns, NET_UPLINK_NAME);
                r = net_link_add_veth(host, s->host_ifname, NET_UPLINK_NAME, s->nsfd);
        }
        if (r >= 0)
                r = net_addr_add4(host, s->host_ifname, htonl(host_addr), 32 - NET_IPAM_SLOT_BITS);
        if (r >= 0)
                r = net_link_set_up(host, s->host_ifname);
        if (r < 0)
                return fk_error_set(reterr, r, "%s: host veth %s: %s", s->name, s->host_ifname,
                                    strerror(-r));
        return setup_netns_links(s, ns, ns_addr, host_addr, reterr);
}

static int setup_host_nat(struct net_session *s, struct fk_error *reterr)
{
        struct net_nft_batch b;
        struct net_cidr src;
        int r;

        if (!s->uplink_if)
                return 0;
        r = net_cidr_parse(s->uplink_netns, &src);
        if (r >= 0)
                r = net_nft_build_host_nat(s->host_table, &src, s->uplink_if, ++s->seq, &b);
        if (r >= 0) {
                r = net_nft_send(-1, &b);
                net_nft_batch_done(&b);
        }
        if (r >= 0)
                r = net_sysctl_write_here("/proc/sys/net/ipv4/ip_forward", "1");
        if (r < 0)
                return fk_error_set(reterr, r, "%s: host NAT table %s out of %s: %s", s->name,
                                    s->host_table, s->uplink_if, strerror(-r));
        return 0;
}

static int session_new(const struct net_session_config *c, struct net_session **ret,
                       struct fk_error *reterr)
{
        struct net_session *s;
        int r;

        if (!c || !c->node || !net_name_valid(c->name))
                return fk_error_set(reterr, -EINVAL, "network: session name \"%s\" is not valid",
                                    c && c->name ? c->name : "");
        s = calloc(1, sizeof(*s));
        if (!s)
                return fk_error_set(reterr, -ENOMEM, "out of memory");
        s->nsfd = -1;
        r = net_node_info_resolve(c->node, &s->node, reterr);
        if (r < 0) {
                net_session_free(s);
                return r;
        }
        s->name = strdup(c->name);
        s->uplink_if = s->node.uplink_if ? strdup(s->node.uplink_if) : NULL;
        s->node.uplink_if = s->uplink_if;
        r = fk_asprintf(&s->host_table, NET_HOST_TABLE_PREFIX "%s", c->name);
        if (r < 0 || !s->name || (s->node.uplink_if && !s->uplink_if) ||
            net_session_set_policy(s, &c->egress) < 0) {
                net_session_free(s);
                return fk_error_set(reterr, -ENOMEM, "out of memory");
        }
        *ret = s;
        return 0;
}

/* Re-attach: the resolver-learned elements of the table in place, those of names still
 * allowed, go into the new table with their remaining timeouts. On any error none are kept
 * (fail closed: the guest resolves again). */
static void restore_learned(struct net_session *s, const struct net_session_config *c)
{
        cleanup_free struct net_nft_elem *v = NULL;
        size_t n = 0;
        int r;

        if (s->n_allow == 0)
                return;
        r = net_nft_dump_elems(s->nsfd, NET_NFT_TABLE, &v, &n);
        if (r >= 0) {
                n = net_restore_filter(v, n, c->names, c->n_names);
                r = net_session_remember(s, v, n);
        }
        if (r < 0)
                s->n_elems = 0;
        s->restore_err = r < 0 ? r : 0;
        s->n_restored = r < 0 ? 0 : n;
}

int net_session_setup(const struct net_session_config *c, struct net_session **ret,
                      struct fk_error *reterr)
{
        _cleanup_(nl_socket_freep) struct nl_sock *host = NULL, *ns = NULL;
        struct net_session *s = NULL;
        bool created;
        int r;

        r = session_new(c, &s, reterr);
        if (r < 0)
                return r;
        r = net_netns_create(s->name, reterr);
        created = r >= 0;
        if (r < 0 && r != -EEXIST)
                goto fail;
        s->nsfd = r = net_netns_open(s->name);
        if (r < 0) {
                fk_error_set(reterr, r, "open netns %s: %s", s->name, strerror(-r));
                goto fail;
        }
        r = net_nl_open(-1, &host);
        if (r >= 0)
                r = net_nl_open(s->nsfd, &ns);
        if (r < 0) {
                fk_error_set(reterr, r, "%s: rtnetlink: %s", s->name, strerror(-r));
                goto fail;
        }
        r = setup_uplink(s, host, ns, created, reterr);
        if (r >= 0 && !created)
                restore_learned(s, c);
        if (r >= 0) {
                r = net_session_apply_egress(s);
                if (r < 0)
                        fk_error_set(reterr, r, "%s: egress table: %s", s->name, strerror(-r));
        }
        if (r >= 0)
                r = setup_host_nat(s, reterr);
        if (r < 0)
                goto fail;
        *ret = s;
        return 0;
fail:
        if (created)
                (void)teardown_by_name(&s->node, s->name);
        net_session_free(s);
        return r;
}

int net_session_teardown(struct net_session *s, struct fk_error *reterr)
{
        int r;

        if (s->nsfd >= 0) {
                close(s->nsfd);
                s->nsfd = -1;
        }
        r = teardown_by_name(&s->node, s->name);
        if (r < 0)
                return fk_error_set(reterr, r, "tear down network of %s: %s", s->name,
                                    strerror(-r));
        return 0;
}

struct net_session *net_session_free(struct net_session *s)
{
        if (!s)
                return NULL;
        if (s->nsfd >= 0)
                close(s->nsfd);
        net_node_info_done(&s->node);
        free(s->name);
        free(s->uplink_if);
        free(s->host_table);
        free(s->allow);
        free(s->deny);
        free(s->elems);
        free(s);
        return NULL;
}

int net_session_netns_fd(const struct net_session *s)
{
        return s->nsfd;
}

const char *net_session_name(const struct net_session *s)
{
        return s->name;
}

const char *net_session_host_ifname(const struct net_session *s)
{
        return s->host_ifname;
}

const char *net_session_uplink_host(const struct net_session *s)
{
        return s->uplink_host;
}

const char *net_session_uplink_netns(const struct net_session *s)
{
        return s->uplink_netns;
}

int net_session_restored(const struct net_session *s, size_t *ret_n)
{
        *ret_n = s->n_restored;
        return s->restore_err;
}

static bool strv_contains(char *const *v, const char *s)
{
        for (; v && *v; v++)
                if (strcmp(*v, s) == 0)
                        return true;
        return false;
}

int net_cleanup_orphans(const struct net_node_config *node, const char *prefix, char *const *keep,
                        struct fk_error *reterr)
{
        struct net_node_info n;
        char **names = NULL;
        cleanup_free struct net_ipam_lease *leases = NULL;
        size_t n_leases = 0, plen = prefix ? strlen(prefix) : 0;
        bool reported = false;
        int r, removed = 0;

        r = net_node_info_resolve(node, &n, reterr);
        if (r < 0)
                return r;
        r = net_netns_list(prefix, &names);
        if (r >= 0)
                r = net_ipam_list(n.ipam_dir, &leases, &n_leases);
        for (size_t i = 0; i < n_leases && r >= 0; i++)
                if (strncmp(leases[i].owner, prefix ? prefix : "", plen) == 0 &&
                    !strv_contains(names, leases[i].owner))
                        r = fk_strv_push(&names, leases[i].owner);
        for (char **p = names; r >= 0 && p && *p; p++) {
                if (strv_contains(keep, *p))
                        continue;
                r = teardown_by_name(&n, *p);
                if (r >= 0)
                        removed++;
                else
                        fk_error_set(reterr, r, "remove leftover network %s: %s", *p, strerror(-r));
                reported = r < 0;
        }
        if (r < 0 && !reported)
                fk_error_set(reterr, r, "list leftover networks: %s", strerror(-r));
        fk_strv_free(names);
        net_node_info_done(&n);
        return r < 0 ? r : removed;
}
