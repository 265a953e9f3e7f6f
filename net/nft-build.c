/* SPDX-License-Identifier: MIT */
/* Pure builders of nftables transactions (libnftnl objects serialized into an nftnl_batch):
 * the session's egress table, the host NAT table, table deletion and resolver set elements. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "common/cleanup.h"
#include "net/net-internal.h"
#include "net/net.h"

#define BATCH_PAGE    (64 * 1024)
#define BATCH_OVERRUN (16 * 1024)
#define CT_EST_REL    (2u | 4u) /* NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | ...(IP_CT_RELATED) */
#define NFT_TYPE_IPV4 7         /* nft's datatype ids: ipv4_addr, ipv6_addr */
#define NFT_TYPE_IPV6 8

#define CHAIN_OUT "guest_out"
#define CHAIN_IN  "guest_in"
#define CHAIN_NAT "postrouting"
#define MAX_PORTS 64 /* distinct ports among name entries */

void net_nft_batch_done(struct net_nft_batch *b)
{
        if (b->batch)
                nftnl_batch_free(b->batch);
        *b = (struct net_nft_batch){};
}

static int batch_begin(struct net_nft_batch *b, uint32_t seq)
{
        *b = (struct net_nft_batch){.seq_first = seq, .seq_next = seq};
        b->batch = nftnl_batch_alloc(BATCH_PAGE, BATCH_OVERRUN);
        if (!b->batch)
                return -ENOMEM;
        nftnl_batch_begin(nftnl_batch_buffer(b->batch), b->seq_next++);
        return nftnl_batch_update(b->batch) < 0 ? -ENOMEM : 0;
}

static int batch_end(struct net_nft_batch *b)
{
        nftnl_batch_end(nftnl_batch_buffer(b->batch), b->seq_next++);
        return nftnl_batch_update(b->batch) < 0 ? -ENOMEM : 0;
}

static int batch_next(struct net_nft_batch *b)
{
        b->n_msgs++;
        return nftnl_batch_update(b->batch) < 0 ? -ENOMEM : 0;
}

static int emit_table(struct net_nft_batch *b, uint16_t type, const char *name)
{
        struct nftnl_table *t = nftnl_table_alloc();
        struct nlmsghdr *nlh;
        uint16_t flags = NLM_F_ACK | (type == NFT_MSG_NEWTABLE ? NLM_F_CREATE : 0);

        if (!t || nftnl_table_set_str(t, NFTNL_TABLE_NAME, name) < 0) {
                if (t)
                        nftnl_table_free(t);
                return -ENOMEM;
        }
        nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
        nlh = nftnl_table_nlmsg_build_hdr(nftnl_batch_buffer(b->batch), type, NFPROTO_INET, flags,
                                          b->seq_next++);
        nftnl_table_nlmsg_build_payload(nlh, t);
        nftnl_table_free(t);
        return batch_next(b);
}

/* Replace: create if missing, delete, create again - one transaction, no window. */
static int emit_table_replace(struct net_nft_batch *b, const char *name)
{
        int r = emit_table(b, NFT_MSG_NEWTABLE, name);

        if (r >= 0)
                r = emit_table(b, NFT_MSG_DELTABLE, name);
        if (r >= 0)
                r = emit_table(b, NFT_MSG_NEWTABLE, name);
        return r;
}

static int emit_chain(struct net_nft_batch *b, const char *table, const char *name,
                      const char *type, uint32_t hook, int32_t prio, uint32_t policy)
{
        struct nftnl_chain *c = nftnl_chain_alloc();
        struct nlmsghdr *nlh;

        if (!c)
                return -ENOMEM;
        if (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table) < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) < 0 ||
            nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type) < 0) {
                nftnl_chain_free(c);
                return -ENOMEM;
        }
        nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
        nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
        nlh = nftnl_chain_nlmsg_build_hdr(nftnl_batch_buffer(b->batch), NFT_MSG_NEWCHAIN,
                                          NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, b->seq_next++);
        nftnl_chain_nlmsg_build_payload(nlh, c);
        nftnl_chain_free(c);
        return batch_next(b);
}

static struct nftnl_set *set_new(const char *table, const char *name, int family)
{
        struct nftnl_set *s = nftnl_set_alloc();

        if (!s)
                return NULL;
        if (nftnl_set_set_str(s, NFTNL_SET_TABLE, table) < 0 ||
            nftnl_set_set_str(s, NFTNL_SET_NAME, name) < 0) {
                nftnl_set_free(s);
                return NULL;
        }
        nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, family == AF_INET ? NFT_TYPE_IPV4 : NFT_TYPE_IPV6);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, family == AF_INET ? 4 : 16);
        return s;
}

static int emit_set(struct net_nft_batch *b, const char *table, const char *name, int family,
                    uint32_t id)
{
        struct nftnl_set *s = set_new(table, name, family);
        struct nlmsghdr *nlh;

        if (!s)
                return -ENOMEM;
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_TIMEOUT);
        nftnl_set_set_u32(s, NFTNL_SET_ID, id);
        nlh = nftnl_set_nlmsg_build_hdr(nftnl_batch_buffer(b->batch), NFT_MSG_NEWSET, NFPROTO_INET,
                                        NLM_F_CREATE | NLM_F_ACK, b->seq_next++);
        nftnl_set_nlmsg_build_payload(nlh, s);
        nftnl_set_free(s);
        return batch_next(b);
}

/* The name that learned the element, as its comment (what `nft list set` shows). */
static int elem_tag(struct nftnl_set_elem *el, const char *name)
{
        size_t len = strnlen(name, NET_NFT_ELEM_NAME_MAX);
        struct nftnl_udata_buf *u;
        int r = 0;

        if (len == 0 || len >= NET_NFT_ELEM_NAME_MAX)
                return 0; /* untagged */
        u = nftnl_udata_buf_alloc((uint32_t)len + 3);
        if (!u)
                return -ENOMEM;
        if (!nftnl_udata_put_strz(u, NFTNL_UDATA_SET_ELEM_COMMENT, name) ||
            nftnl_set_elem_set(el, NFTNL_SET_ELEM_USERDATA, nftnl_udata_buf_data(u),
                               nftnl_udata_buf_len(u)) < 0)
                r = -ENOMEM;
        nftnl_udata_buf_free(u);
        return r;
}

static int emit_elem(struct net_nft_batch *b, const char *table, const struct net_nft_elem *e)
{
        char name[32];
        struct nftnl_set *s;
        struct nftnl_set_elem *el;
        struct nlmsghdr *nlh;

        net_nft_set_name(e->family, e->port, name, sizeof(name));
        s = set_new(table, name, e->family);
        el = nftnl_set_elem_alloc();
        if (!s || !el ||
            nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, e->addr, e->family == AF_INET ? 4 : 16) <
                    0) {
                if (el)
                        nftnl_set_elem_free(el);
                if (s)
                        nftnl_set_free(s);
                return -ENOMEM;
        }
        nftnl_set_elem_set_u64(el, NFTNL_SET_ELEM_TIMEOUT, e->timeout_ms);
        if (elem_tag(el, e->name) < 0) {
                nftnl_set_elem_free(el);
                nftnl_set_free(s);
                return -ENOMEM;
        }
        nftnl_set_elem_add(s, el);
        nlh = nftnl_set_nlmsg_build_hdr(nftnl_batch_buffer(b->batch), NFT_MSG_NEWSETELEM,
                                        NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, b->seq_next++);
        nftnl_set_elems_nlmsg_build_payload(nlh, s);
        nftnl_set_free(s);
        return batch_next(b);
}

/* Serializes and frees the rule. */
static int emit_rule(struct net_nft_batch *b, struct net_nft_rule *r)
{
        struct nlmsghdr *nlh;
        int err = r->err;

        if (err >= 0) {
                nlh = nftnl_rule_nlmsg_build_hdr(
                        nftnl_batch_buffer(b->batch), NFT_MSG_NEWRULE, NFPROTO_INET,
                        NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, b->seq_next++);
                nftnl_rule_nlmsg_build_payload(nlh, r->rule);
        }
        if (r->rule)
                nftnl_rule_free(r->rule);
        r->rule = NULL;
        return err < 0 ? err : batch_next(b);
}

void net_nft_set_name(int family, uint16_t port, char *buf, size_t size)
{
        if (port)
                snprintf(buf, size, "allow%c_%u", family == AF_INET ? '4' : '6', port);
        else
                snprintf(buf, size, "allow%c", family == AF_INET ? '4' : '6');
}

/* One rule in chain: [daddr in c] [l4proto proto [dport port]] verdict. */
static int rule_simple(struct net_nft_batch *b, const char *table, const char *chain,
                       const struct net_cidr *c, uint8_t proto, uint16_t port, int verdict)
{
        struct net_nft_rule r;

        net_nft_rule_init(&r, table, chain);
        if (c)
                net_nft_match_addr(&r, c, true);
        if (proto)
                net_nft_match_l4proto(&r, proto);
        if (port)
                net_nft_match_dport(&r, port);
        net_nft_verdict(&r, verdict);
        return emit_rule(b, &r);
}

/* Same, for tcp and udp when a port is given. */
static int rule_ports(struct net_nft_batch *b, const char *table, const char *chain,
                      const struct net_cidr *c, uint16_t port, int verdict)
{
        int r;

        if (!port)
                return rule_simple(b, table, chain, c, 0, 0, verdict);
        r = rule_simple(b, table, chain, c, IPPROTO_TCP, port, verdict);
        if (r >= 0)
                r = rule_simple(b, table, chain, c, IPPROTO_UDP, port, verdict);
        return r;
}

static int rule_set(struct net_nft_batch *b, const char *table, int family, uint16_t port,
                    uint32_t set_id)
{
        static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP};
        char name[32];
        int r = 0;

        net_nft_set_name(family, port, name, sizeof(name));
        for (size_t i = 0; i < (port ? ARRAY_SIZE(protos) : 1) && r >= 0; i++) {
                struct net_nft_rule rule;

                net_nft_rule_init(&rule, table, CHAIN_OUT);
                net_nft_match_daddr_set(&rule, family, name, set_id);
                if (port) {
                        net_nft_match_l4proto(&rule, protos[i]);
                        net_nft_match_dport(&rule, port);
                }
                net_nft_verdict(&rule, NF_ACCEPT);
                r = emit_rule(b, &rule);
        }
        return r;
}

/* Distinct ports of the name entries (0 = any port). */
static size_t name_ports(const struct net_egress_policy *p, uint16_t *ports, size_t max)
{
        size_t n = 0;

        for (size_t i = 0; i < p->n_allow; i++) {
                bool seen = false;

                if (p->allow[i].kind != NET_EGRESS_NAME)
                        continue;
                for (size_t j = 0; j < n; j++)
                        seen = seen || ports[j] == p->allow[i].port;
                if (!seen && n < max)
                        ports[n++] = p->allow[i].port;
        }
        return n;
}

static int build_deny(struct net_nft_batch *b, const struct net_nft_session_params *p)
{
        static const char *const always[] = {"169.254.0.0/16", "fe80::/10", "fd00:ec2::254"};
        const struct net_egress_policy *pol = p->policy;
        struct net_cidr c;
        int r = 0;

        if (!pol->ipv6) {
                struct net_nft_rule rule;

                net_nft_rule_init(&rule, p->table, CHAIN_OUT);
                net_nft_match_nfproto(&rule, NFPROTO_IPV6, true);
                net_nft_verdict(&rule, NF_DROP);
                r = emit_rule(b, &rule);
        }
        for (size_t i = 0; i < ARRAY_SIZE(always) && r >= 0; i++) {
                r = net_cidr_parse(always[i], &c);
                if (r >= 0 && (c.family == AF_INET || pol->ipv6))
                        r = rule_simple(b, p->table, CHAIN_OUT, &c, 0, 0, NF_DROP);
        }
        if (r >= 0 && p->pool)
                r = rule_simple(b, p->table, CHAIN_OUT, p->pool, 0, 0, NF_DROP);
        for (size_t i = 0; i < pol->n_deny && r >= 0; i++)
                if (pol->deny[i].family == AF_INET || pol->ipv6)
                        r = rule_simple(b, p->table, CHAIN_OUT, &pol->deny[i], 0, 0, NF_DROP);
        if (r >= 0) /* DNS over TLS would bypass the session resolver */
                r = rule_simple(b, p->table, CHAIN_OUT, NULL, IPPROTO_TCP, 853, NF_DROP);
        return r;
}

static int build_out(struct net_nft_batch *b, const struct net_nft_session_params *p,
                     const uint16_t *ports, size_t n_ports, const struct net_cidr *resolver)
{
        const struct net_egress_policy *pol = p->policy;
        struct net_nft_rule rule;
        int r;

        r = build_deny(b, p);
        if (r < 0)
                return r;
        net_nft_rule_init(&rule, p->table, CHAIN_OUT);
        net_nft_match_ct_state(&rule, CT_EST_REL);
        net_nft_verdict(&rule, NF_ACCEPT);
        r = emit_rule(b, &rule);
        if (r < 0)
                return r;
        /* only the guest starts connections through the session netns */
        net_nft_rule_init(&rule, p->table, CHAIN_OUT);
        net_nft_match_ifname(&rule, true, NET_BRIDGE_NAME, false);
        net_nft_verdict(&rule, NF_DROP);
        r = emit_rule(b, &rule);
        if (r < 0 || pol->n_allow == 0)
                return r;
        r = rule_ports(b, p->table, CHAIN_OUT, resolver, 53, NF_ACCEPT);
        if (r >= 0)
                r = rule_ports(b, p->table, CHAIN_OUT, NULL, 53, NF_DROP);
        for (size_t i = 0; i < pol->n_allow && r >= 0; i++) {
                const struct net_egress_entry *e = &pol->allow[i];

                if (e->kind == NET_EGRESS_CIDR && (e->cidr.family == AF_INET || pol->ipv6))
                        r = rule_ports(b, p->table, CHAIN_OUT, &e->cidr, e->port, NF_ACCEPT);
        }
        for (size_t i = 0; i < n_ports && r >= 0; i++) {
                r = rule_set(b, p->table, AF_INET, ports[i], (uint32_t)(2 * i + 1));
                if (r >= 0 && pol->ipv6)
                        r = rule_set(b, p->table, AF_INET6, ports[i], (uint32_t)(2 * i + 2));
        }
        return r;
}

static int build_in(struct net_nft_batch *b, const char *table, const struct net_cidr *resolver)
{
        static const uint8_t icmp[] = {IPPROTO_ICMP, IPPROTO_ICMPV6};
        static const uint8_t dns[] = {IPPROTO_TCP, IPPROTO_UDP};
        struct net_nft_rule rule;
        int r;

        net_nft_rule_init(&rule, table, CHAIN_IN);
        net_nft_match_ct_state(&rule, CT_EST_REL);
        net_nft_verdict(&rule, NF_ACCEPT);
        r = emit_rule(b, &rule);
        for (size_t i = 0; i < ARRAY_SIZE(dns) && r >= 0; i++) {
                net_nft_rule_init(&rule, table, CHAIN_IN);
                net_nft_match_ifname(&rule, true, NET_BRIDGE_NAME, true);
                net_nft_match_addr(&rule, resolver, true);
                net_nft_match_l4proto(&rule, dns[i]);
                net_nft_match_dport(&rule, 53);
                net_nft_verdict(&rule, NF_ACCEPT);
                r = emit_rule(b, &rule);
        }
        for (size_t i = 0; i < ARRAY_SIZE(icmp) && r >= 0; i++) {
                net_nft_rule_init(&rule, table, CHAIN_IN);
                net_nft_match_ifname(&rule, true, NET_BRIDGE_NAME, true);
                net_nft_match_l4proto(&rule, icmp[i]);
                net_nft_verdict(&rule, NF_ACCEPT);
                r = emit_rule(b, &rule);
        }
        if (r < 0)
                return r;
        /* nothing else in the session netns is the guest's business */
        net_nft_rule_init(&rule, table, CHAIN_IN);
        net_nft_match_ifname(&rule, true, NET_BRIDGE_NAME, true);
        net_nft_verdict(&rule, NF_DROP);
        return emit_rule(b, &rule);
}

static int build_nat(struct net_nft_batch *b, const char *table, const struct net_cidr *src,
                     const char *oifname)
{
        struct net_nft_rule rule;

        net_nft_rule_init(&rule, table, CHAIN_NAT);
        net_nft_match_addr(&rule, src, false);
        net_nft_match_ifname(&rule, false, oifname, true);
        net_nft_masquerade(&rule);
        return emit_rule(b, &rule);
}

static int build_sets(struct net_nft_batch *b, const struct net_nft_session_params *p,
                      const uint16_t *ports, size_t n_ports)
{
        char name[32];
        int r = 0;

        for (size_t i = 0; i < n_ports && r >= 0; i++) {
                net_nft_set_name(AF_INET, ports[i], name, sizeof(name));
                r = emit_set(b, p->table, name, AF_INET, (uint32_t)(2 * i + 1));
                if (r >= 0 && p->policy->ipv6) {
                        net_nft_set_name(AF_INET6, ports[i], name, sizeof(name));
                        r = emit_set(b, p->table, name, AF_INET6, (uint32_t)(2 * i + 2));
                }
        }
        /* carry over resolver-filled addresses whose set still exists */
        for (size_t i = 0; i < p->n_elems && r >= 0; i++) {
                const struct net_nft_elem *e = &p->elems[i];
                bool keep = e->family == AF_INET || p->policy->ipv6;
                bool found = false;

                for (size_t j = 0; j < n_ports; j++)
                        found = found || ports[j] == e->port;
                if (keep && found && e->timeout_ms > 0)
                        r = emit_elem(b, p->table, e);
        }
        return r;
}

int net_nft_build_session(const struct net_nft_session_params *p, uint32_t seq,
                          struct net_nft_batch *ret)
{
        const bool open = p->policy->n_allow == 0;
        struct net_nft_batch b;
        struct net_cidr resolver, guest;
        uint16_t ports[MAX_PORTS];
        size_t n_ports = open ? 0 : name_ports(p->policy, ports, ARRAY_SIZE(ports));
        int r;

        if (net_cidr_parse(NET_RESOLVER_IPV4, &resolver) < 0 ||
            net_cidr_parse(NET_GUEST_SUBNET, &guest) < 0)
                return -EINVAL;
        r = batch_begin(&b, seq);
        if (r >= 0)
                r = emit_table_replace(&b, p->table);
        if (r >= 0)
                r = emit_chain(&b, p->table, CHAIN_OUT, "filter", NF_INET_FORWARD, 0,
                               open ? NF_ACCEPT : NF_DROP);
        if (r >= 0)
                r = emit_chain(&b, p->table, CHAIN_IN, "filter", NF_INET_LOCAL_IN, 0, NF_ACCEPT);
        if (r >= 0)
                r = emit_chain(&b, p->table, CHAIN_NAT, "nat", NF_INET_POST_ROUTING, 100,
                               NF_ACCEPT);
        if (r >= 0)
                r = build_sets(&b, p, ports, n_ports);
        if (r >= 0)
                r = build_out(&b, p, ports, n_ports, &resolver);
        if (r >= 0)
                r = build_in(&b, p->table, &resolver);
        if (r >= 0)
                r = build_nat(&b, p->table, &guest, NET_UPLINK_NAME);
        if (r >= 0)
                r = batch_end(&b);
        if (r < 0) {
                net_nft_batch_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}

int net_nft_build_host_nat(const char *table, const struct net_cidr *src, const char *oifname,
                           uint32_t seq, struct net_nft_batch *ret)
{
        struct net_nft_batch b;
        int r;

        r = batch_begin(&b, seq);
        if (r >= 0)
                r = emit_table_replace(&b, table);
        if (r >= 0)
                r = emit_chain(&b, table, CHAIN_NAT, "nat", NF_INET_POST_ROUTING, 100, NF_ACCEPT);
        if (r >= 0)
                r = build_nat(&b, table, src, oifname);
        if (r >= 0)
                r = batch_end(&b);
        if (r < 0) {
                net_nft_batch_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}

int net_nft_build_delete(const char *table, uint32_t seq, struct net_nft_batch *ret)
{
        struct net_nft_batch b;
        int r;

        r = batch_begin(&b, seq);
        if (r >= 0)
                r = emit_table(&b, NFT_MSG_NEWTABLE, table);
        if (r >= 0)
                r = emit_table(&b, NFT_MSG_DELTABLE, table);
        if (r >= 0)
                r = batch_end(&b);
        if (r < 0) {
                net_nft_batch_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}

int net_nft_build_elem(const char *table, const struct net_nft_elem *e, uint32_t seq,
                       struct net_nft_batch *ret)
{
        struct net_nft_batch b;
        int r;

        r = batch_begin(&b, seq);
        if (r >= 0)
                r = emit_elem(&b, table, e);
        if (r >= 0)
                r = batch_end(&b);
        if (r < 0) {
                net_nft_batch_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}
