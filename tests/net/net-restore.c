/* SPDX-License-Identifier: MIT */
/* Re-attach after a forkletd restart, the pure parts: resolver elements carry their name as a
 * comment, are parsed back from a set-element message (as the kernel dumps them, remaining
 * time preferred over the timeout), and are filtered by the names still allowed. No root. */
#include <arpa/inet.h>
#include <endian.h>
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
#include <sys/socket.h>
#include <sys/uio.h>

#include <cmocka.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/common.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>

#include "net/net-internal.h"

/* The batch flattened; returns its first NEWSETELEM message (in *flat, caller frees). */
static const struct nlmsghdr *first_setelem(struct net_nft_batch *b, char **flat)
{
        int n_iov = nftnl_batch_iovec_len(b->batch);
        struct iovec iov[16];
        size_t total = 0;
        const struct nlmsghdr *nlh;
        int left;

        assert_true(n_iov <= 16);
        nftnl_batch_iovec(b->batch, iov, (uint32_t)n_iov);
        for (int i = 0; i < n_iov; i++)
                total += iov[i].iov_len;
        *flat = malloc(total);
        assert_non_null(*flat);
        total = 0;
        for (int i = 0; i < n_iov; i++) {
                memcpy(*flat + total, iov[i].iov_base, iov[i].iov_len);
                total += iov[i].iov_len;
        }
        left = (int)total;
        for (nlh = (const void *)*flat; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left))
                if (nlh->nlmsg_type == (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWSETELEM))
                        return nlh;
        fail_msg("no NEWSETELEM in the batch");
        return NULL;
}

static void test_tag_roundtrip(void **state)
{
        struct net_nft_elem e = {.family = AF_INET,
                                 .addr = {203, 0, 113, 10},
                                 .port = 443,
                                 .timeout_ms = 45000,
                                 .name = "api.example.com"};
        struct net_nft_elem *v = NULL;
        struct net_nft_batch b;
        size_t n = 0;
        char *flat = NULL;

        (void)state;
        assert_int_equal(net_nft_build_elem("forklet", &e, 1, &b), 0);
        assert_int_equal(net_nft_elems_from_msg(first_setelem(&b, &flat), &v, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(v[0].family, AF_INET);
        assert_int_equal(v[0].port, 443);
        assert_memory_equal(v[0].addr, e.addr, 4);
        assert_int_equal(v[0].timeout_ms, 45000);
        assert_string_equal(v[0].name, "api.example.com");
        net_nft_batch_done(&b);
        free(flat);

        /* untagged (no name): parsed back untagged, and appended after the first */
        e = (struct net_nft_elem){.family = AF_INET6,
                                  .addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 1},
                                  .timeout_ms = 30000};
        assert_int_equal(net_nft_build_elem("forklet", &e, 1, &b), 0);
        assert_int_equal(net_nft_elems_from_msg(first_setelem(&b, &flat), &v, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(v[1].family, AF_INET6);
        assert_int_equal(v[1].port, 0);
        assert_memory_equal(v[1].addr, e.addr, 16);
        assert_string_equal(v[1].name, "");
        net_nft_batch_done(&b);
        free(flat);
        free(v);
}

/* One element as the kernel dumps it (libnftnl's builder numbers nested elements 1, 2, ...
 * while the kernel writes NFTA_LIST_ELEM for each, which is what the parser expects). */
static void put_elem(struct nlmsghdr *nlh, const uint8_t addr[4], uint64_t timeout,
                     uint64_t expiration, const void *udata, size_t ulen)
{
        struct nlattr *e = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM), *k;

        k = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_KEY);
        mnl_attr_put(nlh, NFTA_DATA_VALUE, 4, addr);
        mnl_attr_nest_end(nlh, k);
        if (timeout)
                mnl_attr_put_u64(nlh, NFTA_SET_ELEM_TIMEOUT, htobe64(timeout));
        if (expiration)
                mnl_attr_put_u64(nlh, NFTA_SET_ELEM_EXPIRATION, htobe64(expiration));
        if (udata)
                mnl_attr_put(nlh, NFTA_SET_ELEM_USERDATA, ulen, udata);
        mnl_attr_nest_end(nlh, e);
}

static struct nlmsghdr *dump_msg(char *buf, const char *set)
{
        struct nlmsghdr *nlh =
                nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWSETELEM, NFPROTO_INET, NLM_F_MULTI, 7);
        const uint8_t a1[4] = {203, 0, 113, 10}, a2[4] = {203, 0, 113, 11}, a3[4] = {9, 9, 9, 9};
        struct nftnl_udata_buf *c = nftnl_udata_buf_alloc(64), *f = nftnl_udata_buf_alloc(64);
        struct nlattr *list;

        assert_true(nftnl_udata_put_strz(c, NFTNL_UDATA_SET_ELEM_COMMENT, "other.test"));
        assert_true(nftnl_udata_put_u32(f, NFTNL_UDATA_SET_ELEM_FLAGS, 1));
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, "forklet");
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set);
        list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        put_elem(nlh, a1, 60000, 21500, nftnl_udata_buf_data(c), nftnl_udata_buf_len(c));
        /* a flags udata, not a comment: stays untagged */
        put_elem(nlh, a2, 5000, 0, nftnl_udata_buf_data(f), nftnl_udata_buf_len(f));
        put_elem(nlh, a3, 0, 0, NULL, 0); /* no timeout: not a resolver element */
        mnl_attr_nest_end(nlh, list);
        nftnl_udata_buf_free(c);
        nftnl_udata_buf_free(f);
        return nlh;
}

static void test_dump_message(void **state)
{
        char buf[4096];
        const uint8_t a1[4] = {203, 0, 113, 10}, a2[4] = {203, 0, 113, 11};
        struct net_nft_elem *v = NULL;
        size_t n = 0;

        (void)state;
        assert_int_equal(net_nft_elems_from_msg(dump_msg(buf, "allow4_8080"), &v, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(v[0].family, AF_INET);
        assert_int_equal(v[0].port, 8080);
        assert_memory_equal(v[0].addr, a1, 4);
        assert_int_equal(v[0].timeout_ms, 21500); /* what is left, not the original 60 s */
        assert_string_equal(v[0].name, "other.test");
        assert_memory_equal(v[1].addr, a2, 4);
        assert_int_equal(v[1].timeout_ms, 5000);
        assert_string_equal(v[1].name, "");
        free(v);
        v = NULL;
        n = 0;
        /* a set that is not a resolver set contributes nothing */
        assert_int_equal(net_nft_elems_from_msg(dump_msg(buf, "blocklist"), &v, &n), 0);
        assert_int_equal(n, 0);
        free(v);
}

static void test_set_names(void **state)
{
        int family = 0;
        uint16_t port = 1;

        (void)state;
        assert_int_equal(net_nft_set_parse_name("allow4", &family, &port), 0);
        assert_int_equal(family, AF_INET);
        assert_int_equal(port, 0);
        assert_int_equal(net_nft_set_parse_name("allow6_443", &family, &port), 0);
        assert_int_equal(family, AF_INET6);
        assert_int_equal(port, 443);
        for (const char *const *bad =
                     (const char *const[]){"allow", "allow5", "allow4_", "allow4_0", "allow4_65536",
                                           "allow4_44x", "allow4x", "deny4", NULL};
             *bad; bad++)
                assert_int_equal(net_nft_set_parse_name(*bad, &family, &port), -EINVAL);
}

static struct net_nft_elem elem(uint8_t last, uint16_t port, uint64_t ms, const char *name)
{
        struct net_nft_elem e = {
                .family = AF_INET, .addr = {203, 0, 113, last}, .port = port, .timeout_ms = ms};

        snprintf(e.name, sizeof(e.name), "%s", name);
        return e;
}

static void test_filter(void **state)
{
        const struct net_dns_rule rules[] = {
                {.name = "api.example.com"},
                {.name = "example.org", .wildcard = true},
                {.name = "db.example.net", .port = 5432},
        };
        struct net_nft_elem v[] = {
                elem(1, 0, 30000, "api.example.com"),   /* kept */
                elem(2, 0, 30000, "gone.example.com"),  /* name off the list */
                elem(3, 0, 30000, "www.example.org"),   /* wildcard match */
                elem(4, 0, 30000, "example.org"),       /* wildcard: subdomains only */
                elem(5, 443, 30000, "api.example.com"), /* its port has no rule now */
                elem(6, 5432, 30000, "db.example.net"), /* kept, on its port */
                elem(7, 0, 30000, ""),                  /* untagged, port 0 has names: kept */
                elem(8, 22, 30000, ""),                 /* untagged, no rule on 22 */
                elem(1, 0, 20000, "api.example.com"),   /* duplicate of the first */
                elem(9, 0, 0, "api.example.com"),       /* no time left */
        };
        size_t n;

        (void)state;
        n = net_restore_filter(v, sizeof(v) / sizeof(v[0]), rules, 3);
        assert_int_equal(n, 4);
        assert_int_equal(v[0].addr[3], 1);
        assert_int_equal(v[0].timeout_ms, 30000);
        assert_int_equal(v[1].addr[3], 3);
        assert_int_equal(v[2].addr[3], 6);
        assert_int_equal(v[3].addr[3], 7);
        /* no names allowed any more (open or CIDR-only): nothing is kept */
        v[0] = elem(1, 0, 30000, "api.example.com");
        v[1] = elem(7, 0, 30000, "");
        assert_int_equal(net_restore_filter(v, 2, NULL, 0), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tag_roundtrip),
                cmocka_unit_test(test_dump_message),
                cmocka_unit_test(test_set_names),
                cmocka_unit_test(test_filter),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
