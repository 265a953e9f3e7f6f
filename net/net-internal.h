/* SPDX-License-Identifier: MIT */
/* Inside the net module (and its unit tests): IPAM, libnl link helpers, the pure nftables batch
 * builders and the batch transport. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"

struct nl_sock;
struct nlmsghdr;
struct nftnl_batch;
struct net_cidr;
struct net_egress_policy;
struct net_node_config;
struct fk_error;

bool net_name_valid(const char *name);
/* Converts a libnl NLE_* code (negative or positive) into a negative errno. */
int net_nl_errno(int nlerr);

/* ---- IPAM: one /30 per session out of the uplink pool, leases in a file ------------------ */

#define NET_IPAM_SLOT_BITS 2 /* /30 */

struct net_ipam_pool {
        uint32_t base; /* host byte order, aligned */
        uint8_t prefix_len;
        uint32_t n_slots;
};

struct net_ipam_lease {
        uint32_t slot;
        char owner[64];
};

/* Parses an IPv4 pool CIDR (prefix 8..30). */
int net_ipam_pool_parse(const char *cidr, struct net_ipam_pool *ret);
/* Host and netns addresses (host byte order) of slot: base + 4*slot + 1 and + 2. */
void net_ipam_slot_addrs(const struct net_ipam_pool *pool, uint32_t slot, uint32_t *ret_host,
                         uint32_t *ret_netns);
/* Pure: parse the lease file text / format leases into a heap string (caller frees). */
int net_ipam_parse(const char *text, struct net_ipam_lease **ret, size_t *ret_n);
int net_ipam_format(const struct net_ipam_lease *l, size_t n, char **ret);

/* The lease file is <dir>/ipam, guarded by flock on <dir>/ipam.lock, written atomically.
 * acquire returns owner's existing slot, or the lowest slot that is neither leased nor holds an
 * address listed in in_use (host byte order, e.g. every IPv4 address on the host); -ENOSPC when
 * the pool is exhausted. */
int net_ipam_acquire(const char *dir, const struct net_ipam_pool *pool, const char *owner,
                     const uint32_t *in_use, size_t n_in_use, uint32_t *ret_slot);
/* -ENOENT when owner holds no lease. */
int net_ipam_lookup(const char *dir, const char *owner, uint32_t *ret_slot);
/* Releasing a missing lease is success. */
int net_ipam_release(const char *dir, const char *owner);
/* All leases (caller frees *ret). */
int net_ipam_list(const char *dir, struct net_ipam_lease **ret, size_t *ret_n);

/* ---- Links, addresses, routes (libnl-route-3) -------------------------------------------- */

/* A rtnetlink socket bound to netns nsfd (-1: the caller's). Free with nl_socket_free. */
int net_nl_open(int nsfd, struct nl_sock **ret);
int net_link_ifindex(struct nl_sock *sk, const char *name);
/* veth name <-> peer; peer is created directly inside peer_nsfd. -EEXIST if name exists. */
int net_link_add_veth(struct nl_sock *sk, const char *name, const char *peer, int peer_nsfd);
int net_link_add_bridge(struct nl_sock *sk, const char *name);
int net_link_set_up(struct nl_sock *sk, const char *name);
int net_link_set_master(struct nl_sock *sk, const char *name, const char *master);
/* Missing link is success. */
int net_link_delete(struct nl_sock *sk, const char *name);
/* Adds addr/prefix (v4, network byte order); an existing equal address is success. */
int net_addr_add4(struct nl_sock *sk, const char *ifname, uint32_t addr_be, uint8_t prefix);
/* Default IPv4 route via gw (network byte order); an existing one is replaced. */
int net_route_default4(struct nl_sock *sk, uint32_t gw_be);
/* Every IPv4 address in the socket's netns, host byte order (caller frees). */
int net_addr_list4(struct nl_sock *sk, uint32_t **ret, size_t *ret_n);
/* In the current thread's netns: a persistent root-owned tap (existing: success). */
int net_tap_create_here(const char *name);
/* Writes value to a /proc/sys path in the current thread's netns. */
int net_sysctl_write_here(const char *path, const char *value);

/* ---- nftables ---------------------------------------------------------------------------- */

/* An address the resolver allowed, carried over across policy updates. The allowed name that
 * learned it travels with the element in the kernel (the element's comment), so a restarted
 * forkletd can tell which name an element belongs to. 253 characters + NUL: with the 2-byte
 * udata header that is the kernel's 256-byte userdata limit. */
#define NET_NFT_ELEM_NAME_MAX 254
struct net_nft_elem {
        int family;
        uint8_t addr[16];
        uint16_t port;                    /* 0: the any-port set */
        uint64_t timeout_ms;              /* remaining */
        char name[NET_NFT_ELEM_NAME_MAX]; /* "" : untagged (no comment) */
};

struct net_nft_session_params {
        const char *table;                      /* NET_NFT_TABLE */
        const struct net_egress_policy *policy; /* not owned */
        const struct net_cidr *pool;            /* the uplink pool: always denied */
        const struct net_nft_elem *elems;       /* may be NULL */
        size_t n_elems;
};

/* A built batch: messages between BATCH_BEGIN and BATCH_END; n_msgs counts those that will be
 * acknowledged (all but begin/end). */
struct net_nft_batch {
        struct nftnl_batch *batch;
        uint32_t n_msgs;
        uint32_t seq_first;
        uint32_t seq_next;
};
void net_nft_batch_done(struct net_nft_batch *b);

/* Rule building with a sticky error: each helper appends expressions to r->rule and records
 * -ENOMEM in r->err instead of returning it, so a rule reads as a list of matches. */
struct nftnl_rule;
struct net_nft_rule {
        struct nftnl_rule *rule;
        int err;
};
void net_nft_rule_init(struct net_nft_rule *r, const char *table, const char *chain);
void net_nft_match_nfproto(struct net_nft_rule *r, uint8_t nfproto, bool eq);
/* ip/ip6 saddr or daddr within c (adds the nfproto dependency). */
void net_nft_match_addr(struct net_nft_rule *r, const struct net_cidr *c, bool dst);
void net_nft_match_l4proto(struct net_nft_rule *r, uint8_t proto);
void net_nft_match_dport(struct net_nft_rule *r, uint16_t port);
/* ct state & mask != 0 */
void net_nft_match_ct_state(struct net_nft_rule *r, uint32_t mask);
void net_nft_match_ifname(struct net_nft_rule *r, bool in, const char *name, bool eq);
void net_nft_match_daddr_set(struct net_nft_rule *r, int family, const char *set, uint32_t set_id);
void net_nft_verdict(struct net_nft_rule *r, int verdict);
void net_nft_masquerade(struct net_nft_rule *r);

/* Pure builders. All of them start with NEWTABLE+DELTABLE+NEWTABLE when replacing, so applying
 * never fails for a missing table and never leaves a moment without the table. */
int net_nft_build_session(const struct net_nft_session_params *p, uint32_t seq,
                          struct net_nft_batch *ret);
/* Host side: table inet <table> masquerading src out of oifname. */
int net_nft_build_host_nat(const char *table, const struct net_cidr *src, const char *oifname,
                           uint32_t seq, struct net_nft_batch *ret);
/* Deletes table inet <table> (missing is fine). */
int net_nft_build_delete(const char *table, uint32_t seq, struct net_nft_batch *ret);
/* Adds addr to the set that serves (family, port) with a timeout. */
int net_nft_build_elem(const char *table, const struct net_nft_elem *e, uint32_t seq,
                       struct net_nft_batch *ret);
/* Set name for name-entries of (family, port): "allow4", "allow6", "allow4_443". */
void net_nft_set_name(int family, uint16_t port, char *buf, size_t size);

/* Set name -> (family, port) for the resolver sets ("allow4", "allow6_443"); -EINVAL for any
 * other name. */
int net_nft_set_parse_name(const char *name, int *ret_family, uint16_t *ret_port);
/* Appends the elements of one NEWSETELEM message (the kernel's answer to a GETSETELEM dump)
 * of a resolver set to *v / *n (realloc'd; caller frees): address, port from the set name,
 * timeout_ms = the remaining time (expiration, else the timeout), name from the comment.
 * Elements without a timeout or of other sets are skipped. Pure. */
int net_nft_elems_from_msg(const struct nlmsghdr *nlh, struct net_nft_elem **v, size_t *n);
/* Reads every element of the resolver sets of inet table in the netns nsfd, with their
 * remaining timeouts. A missing table is 0 elements. Caller frees *ret. */
int net_nft_dump_elems(int nsfd, const char *table, struct net_nft_elem **ret, size_t *ret_n);

/* A netfilter netlink socket bound inside the netns nsfd (-1: the caller's). */
struct mnl_socket;
int net_nft_open(int nsfd, struct mnl_socket **ret);
/* Sends the batch on a netfilter socket opened in nsfd (-1: current) and waits for every
 * acknowledgement; returns the first kernel error. */
int net_nft_send(int nsfd, struct net_nft_batch *b);

/* ---- Sessions (session.c, egress.c) ------------------------------------------------------ */

#define NET_GATEWAY_MAC       "52:54:00:12:34:02" /* br0: fixed, so a fork's ARP cache stays right */
#define NET_HOST_TABLE_PREFIX "forklet_"

/* Node settings resolved once per call. */
struct net_node_info {
        char *ipam_dir; /* owned: <state_dir>/net */
        struct net_ipam_pool pool;
        struct net_cidr pool_cidr;
        char link_prefix[9];
        const char *uplink_if; /* borrowed, NULL when unset */
};

struct net_resolved_elem {
        struct net_nft_elem e;
        uint64_t expire_ns; /* CLOCK_MONOTONIC */
};

struct net_session {
        char *name;
        struct net_node_info node;
        char *uplink_if; /* owned copy or NULL */
        char host_ifname[16];
        char *host_table;
        uint32_t slot;
        char uplink_host[NET_ADDRSTRLEN];
        char uplink_netns[NET_ADDRSTRLEN];
        int nsfd;
        /* the applied policy (owned copies) */
        struct net_egress_entry *allow;
        size_t n_allow;
        struct net_cidr *deny;
        size_t n_deny;
        bool ipv6;
        struct net_resolved_elem *elems;
        size_t n_elems;
        size_t n_restored; /* elements carried over from the kernel at re-attach */
        int restore_err;   /* reading them back failed: none were kept */
        uint32_t seq;
};

int net_node_info_resolve(const struct net_node_config *node, struct net_node_info *ret,
                          struct fk_error *reterr);
void net_node_info_done(struct net_node_info *n);
void net_session_policy(const struct net_session *s, struct net_egress_policy *ret);
/* Copies p into s (replacing the old copy only on success). */
int net_session_set_policy(struct net_session *s, const struct net_egress_policy *p);
/* Builds and sends the egress table for s's current policy, carrying over live elements. */
int net_session_apply_egress(struct net_session *s);
/* Re-attach after a restart: which elements read back from the kernel to carry over. Tagged
 * ones when a rule with their port still matches their name; untagged ones (written by a
 * forkletd before names were tagged) when a name rule with their port exists. Keeps them in
 * place in v and returns the new count. Pure. */
size_t net_restore_filter(struct net_nft_elem *v, size_t n, const struct net_dns_rule *rules,
                          size_t n_rules);
/* Remembers the elements as live in s (expiring after their timeout_ms from now). */
int net_session_remember(struct net_session *s, const struct net_nft_elem *v, size_t n);
/* net_egress_allow_addr_port, tagging the element with the allowed name that learned it. */
int net_egress_allow_addr_named(struct net_session *s, const char *name, int family,
                                const void *addr, uint16_t port, uint32_t ttl_s);

/* ---- DNS messages (dns-msg.c, pure) ------------------------------------------------------- */

#define NET_DNS_NAME_MAX       256 /* text form, without the trailing dot, NUL included */
#define NET_DNS_CHAIN_MAX      9   /* the question name plus up to 8 CNAMEs */
#define NET_DNS_MSG_MAX        65535
#define NET_DNS_TYPE_A         1
#define NET_DNS_TYPE_CNAME     5
#define NET_DNS_TYPE_AAAA      28
#define NET_DNS_CLASS_IN       1
#define NET_DNS_RCODE_SERVFAIL 2
#define NET_DNS_RCODE_REFUSED  5

struct net_dns_question {
        uint16_t id, flags;
        char name[NET_DNS_NAME_MAX]; /* lowercased, no trailing dot */
        uint16_t qtype, qclass;
        size_t end; /* offset just past the question */
};

struct net_dns_answer {
        int family; /* AF_INET or AF_INET6 */
        uint8_t addr[16];
        uint32_t ttl;
};

/* Parses a standard query with exactly one question. -EBADMSG otherwise. */
int net_dns_parse_query(const uint8_t *msg, size_t size, struct net_dns_question *ret);
/* A reply to query with only its question and rcode (REFUSED, SERVFAIL) into out. */
int net_dns_build_error(const uint8_t *query, const struct net_dns_question *q, uint8_t rcode,
                        uint8_t *out, size_t out_size, size_t *ret_size);
/* A recursive query for name (text form) into out. */
int net_dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out,
                        size_t out_size, size_t *ret_size);
/* The A/AAAA answers owned by qname or a name reached from it through the CNAMEs of the answer
 * section (any order), up to max. ret_chain (may be NULL) receives the chain, qname first. */
int net_dns_parse_answers(const uint8_t *msg, size_t size, const char *qname,
                          struct net_dns_answer *ret, size_t max, size_t *ret_n,
                          char (*ret_chain)[NET_DNS_NAME_MAX], size_t *ret_n_chain);
/* The rcode of a message, 0xff when too short. */
uint8_t net_dns_rcode(const uint8_t *msg, size_t size);
/* pattern "example.com": wildcard false matches exactly that name, true matches its subdomains
 * only ("a.example.com", not "example.com"). Case-insensitive. */
bool net_dns_name_matches(const char *pattern, bool wildcard, const char *name);

/* ---- DNS upstreams (dns-upstream.c) -------------------------------------------------------- */

struct sockaddr_storage;
#define NET_DNS_UPSTREAM_MAX 4

struct net_dns_upstreams {
        struct sockaddr_storage *addrs; /* owned array of n */
        unsigned *lens;                 /* socklen_t each, owned array of n */
        size_t n;
        unsigned timeout_ms; /* per attempt */
};

/* "IP", "IP:PORT" or "[IPv6]:PORT" (port 53 by default). -EINVAL otherwise. */
int net_dns_upstream_parse(const char *text, struct sockaddr_storage *ret, unsigned *ret_len);
/* Parses c->upstreams (and the timeout) into u; -EINVAL with reterr for a bad one. The arrays
 * are u's (free them with free()). */
int net_dns_upstreams_init(struct net_dns_upstreams *u, const struct net_dns_config *c,
                           struct fk_error *reterr);
/* Sends query q to each upstream in turn (our own random id, UDP then TCP on truncation) until
 * one answers; the reply in out carries q's id. -ENOENT without upstreams, else the last error. */
int net_dns_upstream_query(const struct net_dns_upstreams *u, const uint8_t *q, size_t q_size,
                           uint8_t *out, size_t out_size, size_t *ret_size);
/* net_egress_update, carrying over only the learned elements keep() accepts (NULL: all). */
/* keep() may retag the element (a still-allowed name that learned the same address). */
int net_egress_update_keep(struct net_session *s, const struct net_egress_policy *p,
                           bool (*keep)(struct net_nft_elem *e, void *ud), void *ud,
                           struct fk_error *reterr);

/* A name reached through a CNAME from an allowed name: queries for it count as queries for the
 * origin until expire (a stub resolver may chase the chain itself). */
struct net_dns_derived {
        char name[NET_DNS_NAME_MAX];
        char origin[NET_DNS_NAME_MAX];
        uint64_t expire_ns; /* CLOCK_MONOTONIC */
};
/* The allowed name a query for qname counts as: qname when a rule matches it, else the origin
 * of a live derived entry for qname that a rule still matches; NULL when refused. Pure. */
const char *net_dns_effective_name(const struct net_dns_rule *rules, size_t n_rules,
                                   const struct net_dns_derived *derived, size_t n_derived,
                                   const char *qname, uint64_t now_ns);
