/* SPDX-License-Identifier: MIT */
/* IPAM unit tests: lease file parsing, persistence across "restarts", exhaustion, no reuse of
 * leased or in-use addresses, release; all in a mkdtemp() directory, no root. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "net/net-internal.h"

static int setup_dir(void **state)
{
        char *dir = strdup("/tmp/net-ipam-XXXXXX");

        if (!dir || !mkdtemp(dir))
                return -1;
        *state = dir;
        return 0;
}

static int teardown_dir(void **state)
{
        fk_rm_rf(*state);
        free(*state);
        return 0;
}

static uint32_t ip4(const char *s)
{
        struct in_addr a;

        assert_int_equal(inet_pton(AF_INET, s, &a), 1);
        return ntohl(a.s_addr);
}

static void test_pool_parse(void **state)
{
        struct net_ipam_pool p;
        uint32_t host, ns;

        (void)state;
        assert_int_equal(net_ipam_pool_parse("198.18.0.0/16", &p), 0);
        assert_int_equal(p.base, ip4("198.18.0.0"));
        assert_int_equal(p.n_slots, 16384);
        net_ipam_slot_addrs(&p, 0, &host, &ns);
        assert_int_equal(host, ip4("198.18.0.1"));
        assert_int_equal(ns, ip4("198.18.0.2"));
        net_ipam_slot_addrs(&p, 300, &host, &ns);
        assert_int_equal(host, ip4("198.18.4.177"));
        assert_int_equal(ns, ip4("198.18.4.178"));
        assert_int_equal(net_ipam_pool_parse("198.18.0.0/30", &p), 0);
        assert_int_equal(p.n_slots, 1);
        assert_int_equal(net_ipam_pool_parse("198.18.0.0/31", &p), -EINVAL);
        assert_int_equal(net_ipam_pool_parse("198.18.0.1/16", &p), -EINVAL); /* host bits */
        assert_int_equal(net_ipam_pool_parse("2001:db8::/64", &p), -EINVAL);
        assert_int_equal(net_ipam_pool_parse("garbage", &p), -EINVAL);
}

static void test_parse_format(void **state)
{
        struct net_ipam_lease *l = NULL;
        size_t n = 0;
        char *text = NULL;

        (void)state;
        assert_int_equal(net_ipam_parse("# c\n3 fk-a\n\n0 fk-b\n", &l, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(l[0].slot, 3);
        assert_string_equal(l[0].owner, "fk-a");
        assert_int_equal(net_ipam_format(l, n, &text), 0);
        assert_non_null(strstr(text, "\n3 fk-a\n0 fk-b\n"));
        free(text);
        free(l);
        /* duplicates, junk and bad names are corruption, never silently accepted */
        assert_int_equal(net_ipam_parse("1 a\n1 b\n", &l, &n), -EBADMSG);
        assert_int_equal(net_ipam_parse("1 a\n2 a\n", &l, &n), -EBADMSG);
        assert_int_equal(net_ipam_parse("1 a extra\n", &l, &n), -EBADMSG);
        assert_int_equal(net_ipam_parse("x a\n", &l, &n), -EBADMSG);
        assert_int_equal(net_ipam_parse("1 ../a\n", &l, &n), -EBADMSG);
}

static void test_persistence(void **state)
{
        const char *dir = *state;
        struct net_ipam_pool p;
        uint32_t a, b, again;
        char *text = NULL;

        assert_int_equal(net_ipam_pool_parse("198.18.0.0/16", &p), 0);
        assert_int_equal(net_ipam_acquire(dir, &p, "fk-a", NULL, 0, &a), 0);
        assert_int_equal(net_ipam_acquire(dir, &p, "fk-b", NULL, 0, &b), 0);
        assert_int_not_equal(a, b);
        /* a "restart": nothing in memory, the file answers */
        assert_int_equal(net_ipam_lookup(dir, "fk-a", &again), 0);
        assert_int_equal(again, a);
        assert_int_equal(net_ipam_acquire(dir, &p, "fk-b", NULL, 0, &again), 0);
        assert_int_equal(again, b);
        assert_int_equal(net_ipam_lookup(dir, "fk-none", &again), -ENOENT);
        {
                char *path = NULL;

                assert_true(fk_asprintf(&path, "%s/ipam", dir) > 0);
                assert_int_equal(fk_read_file(path, 4096, &text, NULL), 0);
                free(path);
        }
        assert_non_null(strstr(text, "fk-a"));
        assert_non_null(strstr(text, "fk-b"));
        free(text);
}

static void test_exhaustion_and_release(void **state)
{
        const char *dir = *state;
        struct net_ipam_pool p;
        uint32_t slot, seen = 0;
        char owner[16];

        assert_int_equal(net_ipam_pool_parse("198.18.0.0/28", &p), 0); /* 4 slots */
        for (int i = 0; i < 4; i++) {
                snprintf(owner, sizeof(owner), "s%d", i);
                assert_int_equal(net_ipam_acquire(dir, &p, owner, NULL, 0, &slot), 0);
                assert_true(slot < 4);
                assert_false(seen & (1u << slot));
                seen |= 1u << slot;
        }
        assert_int_equal(net_ipam_acquire(dir, &p, "s4", NULL, 0, &slot), -ENOSPC);
        assert_int_equal(net_ipam_release(dir, "s2"), 0);
        assert_int_equal(net_ipam_release(dir, "s2"), 0); /* twice: no-op */
        assert_int_equal(net_ipam_acquire(dir, &p, "s4", NULL, 0, &slot), 0);
        assert_int_equal(slot, 2);
        assert_int_equal(net_ipam_lookup(dir, "s2", &slot), -ENOENT);
}

static void test_in_use_not_handed_out(void **state)
{
        const char *dir = *state;
        struct net_ipam_pool p;
        uint32_t in_use[] = {ip4("10.0.0.1"), ip4("198.18.0.2"), ip4("198.18.0.5")};
        uint32_t slot;

        assert_int_equal(net_ipam_pool_parse("198.18.0.0/16", &p), 0);
        /* slots 0 (198.18.0.0/30) and 1 (198.18.0.4/30) hold addresses someone uses */
        assert_int_equal(net_ipam_acquire(dir, &p, "fk-x", in_use, 3, &slot), 0);
        assert_int_equal(slot, 2);
        assert_int_equal(net_ipam_acquire(dir, &p, "fk-y", in_use, 3, &slot), 0);
        assert_int_equal(slot, 3);
        /* fully in use pool */
        assert_int_equal(net_ipam_pool_parse("198.18.0.0/30", &p), 0);
        assert_int_equal(net_ipam_acquire(dir, &p, "fk-z", in_use, 3, &slot), -ENOSPC);
        assert_int_equal(net_ipam_acquire(dir, &p, "bad/name", NULL, 0, &slot), -EINVAL);
}

static void test_corrupt_file(void **state)
{
        const char *dir = *state;
        char *path = NULL;
        struct net_ipam_pool p;
        uint32_t slot;

        assert_true(fk_asprintf(&path, "%s/ipam", dir) > 0);
        assert_int_equal(fk_write_file_atomic(path, "0 a\n0 b\n", 8, 0600), 0);
        assert_int_equal(net_ipam_pool_parse("198.18.0.0/16", &p), 0);
        /* never guesses: a corrupt file stops allocation instead of double-leasing */
        assert_int_equal(net_ipam_acquire(dir, &p, "c", NULL, 0, &slot), -EBADMSG);
        free(path);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pool_parse),
                cmocka_unit_test(test_parse_format),
                cmocka_unit_test_setup_teardown(test_persistence, setup_dir, teardown_dir),
                cmocka_unit_test_setup_teardown(test_exhaustion_and_release, setup_dir,
                                                teardown_dir),
                cmocka_unit_test_setup_teardown(test_in_use_not_handed_out, setup_dir,
                                                teardown_dir),
                cmocka_unit_test_setup_teardown(test_corrupt_file, setup_dir, teardown_dir),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
