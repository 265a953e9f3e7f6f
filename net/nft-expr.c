/* SPDX-License-Identifier: MIT */
/* nftables rule building blocks: the expression sequences nft itself emits for the matches the
 * egress policy needs (address, protocol, port, ct state, interface, set lookup, verdicts). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include "net/net-internal.h"
#include "net/net.h"

void net_nft_rule_init(struct net_nft_rule *r, const char *table, const char *chain)
{
        r->err = 0;
        r->rule = nftnl_rule_alloc();
        if (!r->rule) {
                r->err = -ENOMEM;
                return;
        }
        if (nftnl_rule_set_str(r->rule, NFTNL_RULE_TABLE, table) < 0 ||
            nftnl_rule_set_str(r->rule, NFTNL_RULE_CHAIN, chain) < 0)
                r->err = -ENOMEM;
        nftnl_rule_set_u32(r->rule, NFTNL_RULE_FAMILY, NFPROTO_INET);
}

static struct nftnl_expr *expr_new(struct net_nft_rule *r, const char *name)
{
        struct nftnl_expr *e;

        if (r->err < 0)
                return NULL;
        e = nftnl_expr_alloc(name);
        if (!e) {
                r->err = -ENOMEM;
                return NULL;
        }
        nftnl_rule_add_expr(r->rule, e);
        return e;
}

static void expr_meta(struct net_nft_rule *r, uint32_t key)
{
        struct nftnl_expr *e = expr_new(r, "meta");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
}

static void expr_cmp(struct net_nft_rule *r, uint32_t op, const void *data, uint32_t len)
{
        struct nftnl_expr *e = expr_new(r, "cmp");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        if (nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len) < 0)
                r->err = -ENOMEM;
}

static void expr_payload(struct net_nft_rule *r, uint32_t base, uint32_t offset, uint32_t len)
{
        struct nftnl_expr *e = expr_new(r, "payload");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
}

static void expr_bitwise(struct net_nft_rule *r, const void *mask, uint32_t len)
{
        static const uint8_t zero[16];
        struct nftnl_expr *e = expr_new(r, "bitwise");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
        if (nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len) < 0 ||
            nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len) < 0)
                r->err = -ENOMEM;
}

void net_nft_match_nfproto(struct net_nft_rule *r, uint8_t nfproto, bool eq)
{
        expr_meta(r, NFT_META_NFPROTO);
        expr_cmp(r, eq ? NFT_CMP_EQ : NFT_CMP_NEQ, &nfproto, sizeof(nfproto));
}

void net_nft_match_addr(struct net_nft_rule *r, const struct net_cidr *c, bool dst)
{
        bool v4 = c->family == AF_INET;
        uint32_t len = v4 ? 4 : 16;
        uint32_t offset = v4 ? (dst ? 16 : 12) : (dst ? 24 : 8);
        uint8_t mask[16] = {};

        net_nft_match_nfproto(r, v4 ? NFPROTO_IPV4 : NFPROTO_IPV6, true);
        expr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, offset, len);
        if (c->prefix_len < len * 8) {
                for (unsigned i = 0; i < c->prefix_len; i++)
                        mask[i / 8] |= (uint8_t)(0x80 >> (i % 8));
                expr_bitwise(r, mask, len);
        }
        expr_cmp(r, NFT_CMP_EQ, c->addr, len);
}

void net_nft_match_l4proto(struct net_nft_rule *r, uint8_t proto)
{
        expr_meta(r, NFT_META_L4PROTO);
        expr_cmp(r, NFT_CMP_EQ, &proto, sizeof(proto));
}

void net_nft_match_dport(struct net_nft_rule *r, uint16_t port)
{
        uint16_t be = htons(port);

        expr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, sizeof(be));
        expr_cmp(r, NFT_CMP_EQ, &be, sizeof(be));
}

void net_nft_match_ct_state(struct net_nft_rule *r, uint32_t mask)
{
        struct nftnl_expr *e = expr_new(r, "ct");
        uint32_t zero = 0;

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
        expr_bitwise(r, &mask, sizeof(mask));
        expr_cmp(r, NFT_CMP_NEQ, &zero, sizeof(zero));
}

void net_nft_match_ifname(struct net_nft_rule *r, bool in, const char *name, bool eq)
{
        char buf[IFNAMSIZ] = {};

        strncpy(buf, name, IFNAMSIZ - 1);
        expr_meta(r, in ? NFT_META_IIFNAME : NFT_META_OIFNAME);
        expr_cmp(r, eq ? NFT_CMP_EQ : NFT_CMP_NEQ, buf, sizeof(buf));
}

void net_nft_match_daddr_set(struct net_nft_rule *r, int family, const char *set, uint32_t set_id)
{
        bool v4 = family == AF_INET;
        struct nftnl_expr *e;

        net_nft_match_nfproto(r, v4 ? NFPROTO_IPV4 : NFPROTO_IPV6, true);
        expr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 16 : 24, v4 ? 4 : 16);
        e = expr_new(r, "lookup");
        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
        if (nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set) < 0)
                r->err = -ENOMEM;
        if (set_id)
                nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
}

void net_nft_verdict(struct net_nft_rule *r, int verdict)
{
        struct nftnl_expr *e = expr_new(r, "immediate");

        if (!e)
                return;
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
}

void net_nft_masquerade(struct net_nft_rule *r)
{
        (void)expr_new(r, "masq");
}
