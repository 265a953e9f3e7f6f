/* SPDX-License-Identifier: MIT */
/* Session networking: named network namespaces, the per-session link setup (tap, bridge, veth
 * uplink, routes, NAT), uplink address management (IPAM) and the nftables egress policy. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Fixed guest link, identical in every session (forks keep the parent's IP and MAC; each
 * session's own netns keeps them apart). The resolver address is where a session DNS resolver
 * listens, inside the session netns. */
#define NET_TAP_NAME      "tap0"
#define NET_BRIDGE_NAME   "br0"
#define NET_UPLINK_NAME   "uplink0" /* netns end of the veth pair */
#define NET_GUEST_IPV4    "10.0.2.15"
#define NET_GATEWAY_IPV4  "10.0.2.2"
#define NET_RESOLVER_IPV4 "10.0.2.3"
#define NET_GUEST_PREFIX  24
#define NET_GUEST_SUBNET  "10.0.2.0/24"
#define NET_GUEST_MAC     "52:54:00:12:34:56"
#define NET_NFT_TABLE     "forklet" /* inet table in the session netns */
#define NET_NETNS_RUN_DIR "/run/netns"
#define NET_NAME_MAX      48 /* netns (session) name length limit */
#define NET_ADDRSTRLEN    46

/* ---- Named network namespaces (like `ip netns`) ---------------------------------------- */

/* Creates /run/netns/NAME bound to a new network namespace, made in a short-lived thread so the
 * caller's netns never changes. -EEXIST when NAME exists. Does not log. */
int net_netns_create(const char *name, struct fk_error *reterr);
/* Opens /run/netns/NAME; returns an O_CLOEXEC fd (caller closes) or -errno (-ENOENT). */
int net_netns_open(const char *name);
/* Unmounts and unlinks /run/netns/NAME. A missing NAME is success. */
int net_netns_delete(const char *name);
/* Lists names under /run/netns starting with prefix ("" = all) into a NULL-terminated strv the
 * caller frees with fk_strv_free(); sorted. */
int net_netns_list(const char *prefix, char ***ret);
/* Runs fn(userdata) in a dedicated thread that first joins the netns nsfd; the calling thread's
 * netns is untouched. Returns fn's return value, or -errno when the thread or setns failed. */
int net_netns_run(int nsfd, int (*fn)(void *userdata), void *userdata);
/* A socket (always O_CLOEXEC) that lives in the network namespace nsfd, made in a short-lived
 * thread; connect/bind then act inside that netns from any thread. Returns the fd or -errno. */
int net_netns_socket(int nsfd, int domain, int type, int protocol);
/* Joins the network namespace nsfd (setns). Async-signal-safe: meant as a pre-exec hook in a
 * forked child (QEMU then opens tap0 inside the session netns). Returns 0 or -errno. */
int net_join_netns(int nsfd);

/* ---- Policy and configuration (plain data, caller-owned) -------------------------------- */

struct net_cidr {
        int family;       /* AF_INET or AF_INET6 */
        uint8_t addr[16]; /* network byte order; v4 in the first 4 bytes */
        uint8_t prefix_len;
};

/* Parses "a.b.c.d[/n]" or "x::y[/n]" (a bare address is /32 or /128); host bits must be 0
 * unless it is a bare address. Returns 0 or -EINVAL. */
int net_cidr_parse(const char *s, struct net_cidr *ret);
/* Formats into buf (>= NET_ADDRSTRLEN + 4). */
char *net_cidr_format(const struct net_cidr *c, char *buf, size_t size);

enum net_egress_kind {
        NET_EGRESS_NAME, /* a host name or wildcard: its addresses come from the resolver */
        NET_EGRESS_CIDR, /* a literal network */
};

struct net_egress_entry {
        enum net_egress_kind kind;
        struct net_cidr cidr; /* CIDR only */
        uint16_t port;        /* 0: any port; else tcp and udp to that port only */
};

/* Egress policy. n_allow == 0: open egress (the always-denied targets are still dropped).
 * Any entry: forward policy drop; allowed are established/related, DNS to the session resolver,
 * the CIDRs and the resolver-filled sets. Always denied: 169.254.0.0/16, fe80::/10,
 * fd00:ec2::254, the uplink pool (host and other sessions), deny[] (the node's own addresses)
 * and DoT (tcp/853). ipv6: true enforces the same policy on IPv6, false drops all IPv6. */
struct net_egress_policy {
        const struct net_egress_entry *allow; /* array of n_allow, not owned */
        size_t n_allow;
        const struct net_cidr *deny; /* array of n_deny, not owned */
        size_t n_deny;
        bool ipv6;
};

/* Node-wide settings (from NodeConfig.network). Strings are not owned. */
struct net_node_config {
        const char *state_dir;        /* IPAM lives in <state_dir>/net/ipam */
        const char *uplink_pool;      /* IPv4 CIDR, e.g. "198.18.0.0/16"; one /30 per session */
        const char *uplink_interface; /* NULL or "": no NAT out of the host */
        const char *link_prefix;      /* host veth names "<prefix><slot>"; NULL: "fk"; <= 8 chars */
};

struct net_dns_rule;
struct net_session_config {
        const struct net_node_config *node; /* not owned */
        const char *name;                   /* netns name and IPAM owner, <= NET_NAME_MAX */
        struct net_egress_policy egress;    /* copied by setup */
        /* The resolver's names (array of n_names, not owned): on re-attach, the addresses the
         * resolver learned for names still on this list are kept with their remaining timeout. */
        const struct net_dns_rule *names;
        size_t n_names;
};

/* ---- Per-session network --------------------------------------------------------------- */

struct net_session;

/* Sets up (or re-attaches to, idempotently) the session network: netns NAME; inside it bridge
 * br0 (NET_GATEWAY_IPV4 and NET_RESOLVER_IPV4) with the persistent root-owned tap0 enslaved,
 * veth uplink0 with the netns address of a leased /30, default route via the host end, IPv4
 * forwarding, the egress table; on the host the veth "<prefix><slot>" with the host address
 * (its prefix route reaches the session) and, when uplink_interface is set, a table
 * "forklet_NAME" masquerading the session out of it (and IPv4 forwarding on). On failure
 * everything made by this call is removed. *ret is owned by the caller (net_session_free).
 * Re-attaching to an existing egress table (forkletd restarted under a running VM) reads the
 * resolver-learned elements back from the kernel and replaces the table in one transaction
 * with those of c->names still allowed, keeping their remaining timeouts; the resolver started
 * on s then knows them again (net_dns_start). Does not log. */
int net_session_setup(const struct net_session_config *c, struct net_session **ret,
                      struct fk_error *reterr);
/* Removes the session's netns, host veth, host table and IPAM lease. Idempotent. The object
 * stays valid for net_session_free only. */
int net_session_teardown(struct net_session *s, struct fk_error *reterr);
/* Frees the object and closes its fds; the kernel state stays. Accepts NULL; returns NULL. */
struct net_session *net_session_free(struct net_session *s);

/* Borrowed views, valid while s lives. The fd is O_CLOEXEC: dup it (without CLOEXEC) or pass it
 * to net_join_netns() in a pre-exec hook. */
int net_session_netns_fd(const struct net_session *s);
const char *net_session_name(const struct net_session *s);
const char *net_session_host_ifname(const struct net_session *s);
/* Uplink addresses as text: the host end and the netns end. */
const char *net_session_uplink_host(const struct net_session *s);
const char *net_session_uplink_netns(const struct net_session *s);

/* Re-attach (see net_session_setup): *ret_n = how many resolver-learned addresses were kept;
 * returns 0, or the -errno that made reading them back fail (none were kept then). */
int net_session_restored(const struct net_session *s, size_t *ret_n);

/* Replaces the egress policy atomically (one nftables transaction deletes and recreates the
 * table, so there is never a moment without policy). Resolver-filled addresses still in their
 * timeout are carried over. Does not log. */
int net_egress_update(struct net_session *s, const struct net_egress_policy *p,
                      struct fk_error *reterr);
/* Allows addr (4 or 16 bytes, family AF_INET/AF_INET6) for ttl_s seconds (>= 1) for the name
 * entries without a port. -ENOENT when the policy has no such entries (open policy: nothing to
 * do, returns 0). */
int net_egress_allow_addr(struct net_session *s, int family, const void *addr, uint32_t ttl_s);
/* Same for name entries restricted to port. */
int net_egress_allow_addr_port(struct net_session *s, int family, const void *addr, uint16_t port,
                               uint32_t ttl_s);

/* Removes leftovers of sessions whose netns names start with prefix and are not in keep
 * (NULL-terminated, may be NULL): netns, host veth, host table, IPAM lease; also leases of
 * such names whose netns is already gone. Returns the number removed or -errno. */
int net_cleanup_orphans(const struct net_node_config *node, const char *prefix, char *const *keep,
                        struct fk_error *reterr);

/* ---- Per-session DNS resolver (dns.c) ----------------------------------------------------- */

/* One allowed name: "example.com" exactly, or with wildcard its subdomains only. */
struct net_dns_rule {
        const char *name; /* lowercase, no "*.", not owned (copied by set_policy) */
        bool wildcard;
        uint16_t port; /* 0: any; else the learned addresses are allowed on this port only */
};

struct net_dns_config {
        char *const *upstreams; /* NULL-terminated "IP[:PORT]" list, copied; may be empty */
        uint32_t ttl_floor_s;   /* minimum nft timeout for learned addresses; 0: 30 s */
        unsigned timeout_ms;    /* per upstream attempt; 0: 2000 */
};

struct net_dns;

/* Starts the resolver of session s: udp and tcp on NET_RESOLVER_IPV4:53 inside the session netns,
 * served by a thread of the caller's process; queries go to the upstreams from the caller's
 * netns. Until net_dns_set_policy it serves the policy s was set up with, with no names (so with
 * a closed policy everything is refused). The addresses s kept at a re-attach become its learned
 * addresses again (by their name tag), so set_policy keeps or drops them like its own. s must
 * outlive the resolver; while it runs, change the policy only through net_dns_set_policy. -EINVAL
 * with reterr for a bad upstream. Does not log. */
int net_dns_start(struct net_session *s, const struct net_dns_config *c, struct net_dns **ret,
                  struct fk_error *reterr);
/* Replaces the allowed names and the egress policy p (as net_egress_update) together: names
 * that are no longer allowed stop resolving and the addresses learned only for them leave the
 * nft sets in the same transaction; addresses of names still allowed are kept. */
int net_dns_set_policy(struct net_dns *d, const struct net_dns_rule *rules, size_t n_rules,
                       const struct net_egress_policy *p, struct fk_error *reterr);
/* Counters since start (for status and tests). */
struct net_dns_stats {
        uint64_t queries, refused, forwarded, failed, learned;
};
void net_dns_get_stats(struct net_dns *d, struct net_dns_stats *ret);
/* Stops serving (waits for queries in flight) and frees; accepts NULL; returns NULL. */
struct net_dns *net_dns_stop(struct net_dns *d);
