/* SPDX-License-Identifier: MIT */
/* nftables batch builder unit tests: each policy shape is built, the batch is parsed back with
 * libnftnl, checked structurally and compared with a golden dump in tests/data/net/. No root.
 * FORKLET_UPDATE_GOLDEN=1 rewrites the golden files. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <cmocka.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "common/util.h"
#include "net/net-internal.h"

/* The batch decoded back: one text line (or block) per message. */
struct decoded {
        char *text; /* whole dump */
        char **msgs;
        unsigned n_tables_new, n_tables_del, n_chains, n_sets, n_elems, n_rules;
        uint32_t out_policy;
        uint32_t set_flags_or;
};

static void push(struct decoded *d, const char *s)
{
        assert_int_equal(fk_strv_push(&d->msgs, s), 0);
}

static int elem_timeout_cb(struct nftnl_set_elem *e, void *data)
{
        *(uint64_t *)data = nftnl_set_elem_get_u64(e, NFTNL_SET_ELEM_TIMEOUT);
        return 0;
}

static uint64_t elem_timeout(struct nftnl_set *s)
{
        uint64_t t = 0;

        nftnl_set_elem_foreach(s, elem_timeout_cb, &t);
        return t;
}

static void decode_one(struct decoded *d, const struct nlmsghdr *nlh)
{
        char buf[8192];
        uint16_t type = nlh->nlmsg_type;

        if (type == NFNL_MSG_BATCH_BEGIN || type == NFNL_MSG_BATCH_END) {
                push(d, type == NFNL_MSG_BATCH_BEGIN ? "batch begin" : "batch end");
                return;
        }
        assert_int_equal(type >> 8, NFNL_SUBSYS_NFTABLES);
        switch (type & 0xff) {
        case NFT_MSG_NEWTABLE:
        case NFT_MSG_DELTABLE: {
                struct nftnl_table *t = nftnl_table_alloc();

                assert_int_equal(nftnl_table_nlmsg_parse(nlh, t), 0);
                snprintf(buf, sizeof(buf), "%s table inet %s",
                         (type & 0xff) == NFT_MSG_NEWTABLE ? "add" : "delete",
                         nftnl_table_get_str(t, NFTNL_TABLE_NAME));
                (type & 0xff) == NFT_MSG_NEWTABLE ? d->n_tables_new++ : d->n_tables_del++;
                nftnl_table_free(t);
                break;
        }
        case NFT_MSG_NEWCHAIN: {
                struct nftnl_chain *c = nftnl_chain_alloc();

                assert_int_equal(nftnl_chain_nlmsg_parse(nlh, c), 0);
                snprintf(buf, sizeof(buf), "add chain %s type %s hook %u prio %d policy %s",
                         nftnl_chain_get_str(c, NFTNL_CHAIN_NAME),
                         nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE),
                         nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
                         nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO),
                         nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) == NF_DROP ? "drop" : "accept");
                if (strcmp(nftnl_chain_get_str(c, NFTNL_CHAIN_NAME), "guest_out") == 0)
                        d->out_policy = nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY);
                d->n_chains++;
                nftnl_chain_free(c);
                break;
        }
        case NFT_MSG_NEWSET:
        case NFT_MSG_NEWSETELEM: {
                struct nftnl_set *s = nftnl_set_alloc();
                char body[4096];

                if ((type & 0xff) == NFT_MSG_NEWSET) {
                        assert_int_equal(nftnl_set_nlmsg_parse(nlh, s), 0);
                        d->set_flags_or |= nftnl_set_get_u32(s, NFTNL_SET_FLAGS);
                        d->n_sets++;
                } else {
                        assert_int_equal(nftnl_set_elems_nlmsg_parse(nlh, s), 0);
                        d->n_elems++;
                }
                nftnl_set_snprintf(body, sizeof(body), s, NFTNL_OUTPUT_DEFAULT, 0);
                if ((type & 0xff) == NFT_MSG_NEWSET)
                        snprintf(buf, sizeof(buf), "add set %s keytype %u keylen %u flags 0x%x",
                                 body, nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE),
                                 nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN),
                                 nftnl_set_get_u32(s, NFTNL_SET_FLAGS));
                else
                        snprintf(buf, sizeof(buf), "add element %s timeout %llu", body,
                                 (unsigned long long)elem_timeout(s));
                nftnl_set_free(s);
                break;
        }
        case NFT_MSG_NEWRULE: {
                struct nftnl_rule *r = nftnl_rule_alloc();
                char body[4096];

                assert_int_equal(nftnl_rule_nlmsg_parse(nlh, r), 0);
                nftnl_rule_snprintf(body, sizeof(body), r, NFTNL_OUTPUT_DEFAULT, 0);
                snprintf(buf, sizeof(buf), "add rule %s", body);
                d->n_rules++;
                nftnl_rule_free(r);
                break;
        }
        default:
                fail_msg("unexpected message type %u", type);
        }
        push(d, buf);
}

static void decode(struct net_nft_batch *b, struct decoded *d)
{
        int n_iov = nftnl_batch_iovec_len(b->batch);
        struct iovec *iov = calloc((size_t)n_iov, sizeof(*iov));
        size_t total = 0, off = 0;
        char *flat;
        const struct nlmsghdr *nlh;
        int left;
        unsigned seen = 0;

        *d = (struct decoded){};
        assert_non_null(iov);
        nftnl_batch_iovec(b->batch, iov, (uint32_t)n_iov);
        for (int i = 0; i < n_iov; i++)
                total += iov[i].iov_len;
        flat = malloc(total);
        assert_non_null(flat);
        for (int i = 0; i < n_iov; i++) {
                memcpy(flat + off, iov[i].iov_base, iov[i].iov_len);
                off += iov[i].iov_len;
        }
        left = (int)total;
        for (nlh = (const void *)flat; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
                decode_one(d, nlh);
                seen++;
        }
        assert_int_equal(left, 0);
        assert_int_equal(seen, b->n_msgs + 2); /* plus begin and end */
        d->text = calloc(1, 1);
        for (char **m = d->msgs; m && *m; m++) {
                char *n = NULL;

                assert_true(fk_asprintf(&n, "%s%s\n", d->text, *m) >= 0);
                free(d->text);
                d->text = n;
        }
        free(flat);
        free(iov);
}

static void decoded_done(struct decoded *d)
{
        free(d->text);
        fk_strv_free(d->msgs);
}

static void check_golden(const char *name, const char *text)
{
        const char *dir = getenv("FORKLET_TEST_DATA");
        char *path = NULL, *want = NULL;

        if (!dir)
                skip();
        assert_true(fk_asprintf(&path, "%s/net/%s", dir, name) > 0);
        if (getenv("FORKLET_UPDATE_GOLDEN"))
                assert_int_equal(fk_write_file_atomic(path, text, strlen(text), 0644), 0);
        assert_int_equal(fk_read_file(path, 1 << 20, &want, NULL), 0);
        if (strcmp(want, text) != 0) {
                print_error("%s differs; got:\n%s", path, text);
                fail();
        }
        free(want);
        free(path);
}

static struct net_egress_entry cidr_entry(const char *s, uint16_t port)
{
        struct net_egress_entry e = {.kind = NET_EGRESS_CIDR, .port = port};

        assert_int_equal(net_cidr_parse(s, &e.cidr), 0);
        return e;
}

static void build(const struct net_egress_policy *pol, const struct net_nft_elem *elems,
                  size_t n_elems, struct decoded *d)
{
        struct net_cidr pool, node_addr;
        struct net_egress_policy p = *pol;
        struct net_nft_session_params params;
        struct net_nft_batch b;

        assert_int_equal(net_cidr_parse("198.18.0.0/16", &pool), 0);
        assert_int_equal(net_cidr_parse("192.0.2.1", &node_addr), 0);
        p.deny = &node_addr;
        p.n_deny = 1;
        params = (struct net_nft_session_params){"forklet", &p, &pool, elems, n_elems};
        assert_int_equal(net_nft_build_session(&params, 100, &b), 0);
        assert_int_equal(b.seq_first, 100);
        decode(&b, d);
        net_nft_batch_done(&b);
        /* atomic replace: create-if-missing, delete, create, all inside one transaction */
        assert_string_equal(d->msgs[0], "batch begin");
        assert_string_equal(d->msgs[1], "add table inet forklet");
        assert_string_equal(d->msgs[2], "delete table inet forklet");
        assert_string_equal(d->msgs[3], "add table inet forklet");
        assert_string_equal(d->msgs[fk_strv_length(d->msgs) - 1], "batch end");
        assert_int_equal(d->n_chains, 3);
        /* always denied, whatever the policy */
        assert_non_null(strstr(d->text, "[ cmp eq reg 1 0x0000fea9 ]")); /* 169.254/16 */
        assert_non_null(strstr(d->text, "[ cmp eq reg 1 0x000012c6 ]")); /* 198.18/16 */
        assert_non_null(strstr(d->text, "[ cmp eq reg 1 0x010200c0 ]")); /* node 192.0.2.1 */
        assert_non_null(strstr(d->text, "[ cmp eq reg 1 0x00005503 ]")); /* dport 853 */
        assert_non_null(strstr(d->text, "[ masq ]"));
}

static void test_open(void **state)
{
        struct net_egress_policy pol = {};
        struct decoded d;

        (void)state;
        build(&pol, NULL, 0, &d);
        assert_int_equal(d.out_policy, NF_ACCEPT);
        assert_int_equal(d.n_sets, 0);
        assert_null(strstr(d.text, "lookup"));
        for (char **m = d.msgs; *m; m++) /* no DNS restriction: nothing to restrict */
                assert_false(strstr(*m, "guest_out") && strstr(*m, "0x00003500"));
        check_golden("batch-open.txt", d.text);
        decoded_done(&d);
}

static void test_names_only(void **state)
{
        struct net_egress_entry allow[] = {{.kind = NET_EGRESS_NAME}, {.kind = NET_EGRESS_NAME}};
        struct net_egress_policy pol = {.allow = allow, .n_allow = 2};
        struct decoded d;

        (void)state;
        build(&pol, NULL, 0, &d);
        assert_int_equal(d.out_policy, NF_DROP);
        assert_int_equal(d.n_sets, 1); /* one any-port v4 set, v6 is dropped */
        assert_true(d.set_flags_or & NFT_SET_TIMEOUT);
        assert_non_null(strstr(d.text, "add set allow4 forklet"));
        assert_non_null(strstr(d.text, "[ lookup reg 1 set allow4 ]"));
        assert_non_null(strstr(d.text, "[ cmp eq reg 1 0x0302000a ]")); /* resolver 10.0.2.3 */
        assert_non_null(strstr(d.text, "[ cmp eq reg 1 0x0000000a ]")); /* ipv6 dropped */
        check_golden("batch-names.txt", d.text);
        decoded_done(&d);
}

static void test_cidr_only(void **state)
{
        struct net_egress_entry allow[] = {cidr_entry("203.0.113.0/24", 0),
                                           cidr_entry("198.51.100.7", 0)};
        struct net_egress_policy pol = {.allow = allow, .n_allow = 2};
        struct decoded d;

        (void)state;
        build(&pol, NULL, 0, &d);
        assert_int_equal(d.out_policy, NF_DROP);
        assert_int_equal(d.n_sets, 0);
        assert_non_null(strstr(d.text, "& 0x00ffffff )")); /* /24 */
        assert_non_null(strstr(d.text, "[ cmp eq reg 1 0x007100cb ]"));
        assert_non_null(strstr(d.text, "[ cmp eq reg 1 0x076433c6 ]"));
        check_golden("batch-cidr.txt", d.text);
        decoded_done(&d);
}

static void test_ports(void **state)
{
        struct net_egress_entry allow[] = {cidr_entry("203.0.113.20", 8080),
                                           {.kind = NET_EGRESS_NAME, .port = 443}};
        struct net_egress_policy pol = {.allow = allow, .n_allow = 2};
        struct decoded d;
        unsigned port_rules = 0;

        (void)state;
        build(&pol, NULL, 0, &d);
        assert_int_equal(d.n_sets, 1);
        assert_non_null(strstr(d.text, "add set allow4_443 forklet"));
        for (char **m = d.msgs; *m; m++)
                if (strstr(*m, "0x0000901f") || strstr(*m, "0x0000bb01")) /* 8080, 443 */
                        port_rules++;
        assert_int_equal(port_rules, 4); /* tcp and udp for each */
        check_golden("batch-ports.txt", d.text);
        decoded_done(&d);
}

static void test_v6_enforced(void **state)
{
        struct net_egress_entry allow[] = {cidr_entry("2001:db8::/32", 0),
                                           cidr_entry("203.0.113.10", 0),
                                           {.kind = NET_EGRESS_NAME}};
        struct net_egress_policy pol = {.allow = allow, .n_allow = 3, .ipv6 = true};
        struct decoded d;

        (void)state;
        build(&pol, NULL, 0, &d);
        assert_int_equal(d.n_sets, 2);
        assert_non_null(strstr(d.text, "add set allow6 forklet"));
        assert_non_null(strstr(
                d.text,
                "[ cmp eq reg 1 0xb80d0120 0x00000000 0x00000000 0x00000000 ]")); /* 2001:db8:: */
        assert_non_null(strstr(
                d.text, "0xc20e00fd 0x00000000 0x00000000 0x54020000 ]")); /* fd00:ec2::254 */
        assert_null(strstr(d.msgs[7], "0x0000000a")); /* no blanket IPv6 drop first */
        check_golden("batch-v6.txt", d.text);
        decoded_done(&d);

        /* the same policy with IPv6 off: no v6 set, no v6 CIDR rule */
        pol.ipv6 = false;
        build(&pol, NULL, 0, &d);
        assert_int_equal(d.n_sets, 1);
        assert_null(strstr(d.text, "0xb80d0120"));
        decoded_done(&d);
}

static void test_elements_carried(void **state)
{
        struct net_egress_entry allow[] = {{.kind = NET_EGRESS_NAME},
                                           {.kind = NET_EGRESS_NAME, .port = 443}};
        struct net_egress_policy pol = {.allow = allow, .n_allow = 2};
        struct net_nft_elem elems[] = {
                {.family = AF_INET, .addr = {203, 0, 113, 10}, .timeout_ms = 30000},
                {.family = AF_INET, .addr = {203, 0, 113, 11}, .port = 443, .timeout_ms = 5000},
                {.family = AF_INET, .addr = {203, 0, 113, 12}, .port = 22, .timeout_ms = 5000},
                {.family = AF_INET6, .addr = {0x20, 0x01, 0x0d, 0xb8}, .timeout_ms = 5000},
        };
        struct decoded d;

        (void)state;
        build(&pol, elems, 4, &d);
        /* port 22 has no entry any more and IPv6 is off: only two survive */
        assert_int_equal(d.n_elems, 2);
        assert_non_null(strstr(d.text, "add element allow4 forklet"));
        assert_non_null(strstr(d.text, "add element allow4_443 forklet"));
        decoded_done(&d);
}

static void test_other_builders(void **state)
{
        struct net_cidr src;
        struct net_nft_batch b;
        struct net_nft_elem e = {
                .family = AF_INET, .addr = {203, 0, 113, 10}, .port = 443, .timeout_ms = 60000};
        struct decoded d;
        char name[32];

        (void)state;
        assert_int_equal(net_cidr_parse("198.18.0.2", &src), 0);
        assert_int_equal(net_nft_build_host_nat("forklet_s1", &src, "eth9", 1, &b), 0);
        decode(&b, &d);
        net_nft_batch_done(&b);
        assert_int_equal(d.n_rules, 1);
        assert_non_null(strstr(d.text, "add chain postrouting type nat hook 4 prio 100"));
        assert_non_null(strstr(d.text, "[ cmp eq reg 1 0x020012c6 ]"));
        assert_non_null(strstr(d.text, "[ masq ]"));
        check_golden("batch-host-nat.txt", d.text);
        decoded_done(&d);

        assert_int_equal(net_nft_build_delete("forklet_s1", 1, &b), 0);
        assert_int_equal(b.n_msgs, 2);
        net_nft_batch_done(&b);

        assert_int_equal(net_nft_build_elem("forklet", &e, 1, &b), 0);
        decode(&b, &d);
        net_nft_batch_done(&b);
        assert_int_equal(d.n_elems, 1);
        assert_non_null(strstr(d.text, "allow4_443"));
        assert_non_null(strstr(d.text, "timeout 60000"));
        decoded_done(&d);

        net_nft_set_name(AF_INET6, 0, name, sizeof(name));
        assert_string_equal(name, "allow6");
}

static void test_cidr_parse(void **state)
{
        struct net_cidr c;
        char buf[64];

        (void)state;
        assert_int_equal(net_cidr_parse("203.0.113.0/24", &c), 0);
        assert_string_equal(net_cidr_format(&c, buf, sizeof(buf)), "203.0.113.0/24");
        assert_int_equal(net_cidr_parse("fd00:ec2::254", &c), 0);
        assert_int_equal(c.prefix_len, 128);
        assert_int_equal(net_cidr_parse("203.0.113.1/24", &c), -EINVAL);
        assert_int_equal(net_cidr_parse("203.0.113.0/33", &c), -EINVAL);
        assert_int_equal(net_cidr_parse("203.0.113.0/", &c), -EINVAL);
        assert_int_equal(net_cidr_parse("example.com", &c), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_open),           cmocka_unit_test(test_names_only),
                cmocka_unit_test(test_cidr_only),      cmocka_unit_test(test_ports),
                cmocka_unit_test(test_v6_enforced),    cmocka_unit_test(test_elements_carried),
                cmocka_unit_test(test_other_builders), cmocka_unit_test(test_cidr_parse),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
