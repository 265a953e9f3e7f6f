/* SPDX-License-Identifier: MIT */
/* DNS message unit tests for the session resolver: query parsing, REFUSED replies, answers
 * followed through CNAME chains (any order, compressed names), malformed input, name matching
 * and upstream address parsing. No root, no sockets. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "net/net-internal.h"

/* A tiny message writer for test inputs. */
struct w {
        uint8_t b[1024];
        size_t n;
};

static void w16(struct w *w, uint16_t v)
{
        w->b[w->n++] = (uint8_t)(v >> 8);
        w->b[w->n++] = (uint8_t)v;
}

static void w32(struct w *w, uint32_t v)
{
        w16(w, (uint16_t)(v >> 16));
        w16(w, (uint16_t)v);
}

static size_t wname(struct w *w, const char *name)
{
        size_t at = w->n;
        uint8_t q[300];
        size_t n = 0;

        assert_int_equal(net_dns_build_query(0, name, 1, q, sizeof(q), &n), 0);
        memcpy(w->b + w->n, q + 12, n - 12 - 4); /* the encoded name only */
        w->n += n - 12 - 4;
        return at;
}

static void wptr(struct w *w, size_t off)
{
        w16(w, (uint16_t)(0xc000 | off));
}

static void header(struct w *w, uint16_t flags, uint16_t qd, uint16_t an)
{
        w->n = 0;
        w16(w, 0x1234);
        w16(w, flags);
        w16(w, qd);
        w16(w, an);
        w16(w, 0);
        w16(w, 0);
}

static void rr_a(struct w *w, size_t owner, uint32_t ttl, const char *ip)
{
        struct in_addr a;

        wptr(w, owner);
        w16(w, NET_DNS_TYPE_A);
        w16(w, NET_DNS_CLASS_IN);
        w32(w, ttl);
        w16(w, 4);
        inet_pton(AF_INET, ip, &a);
        memcpy(w->b + w->n, &a, 4);
        w->n += 4;
}

static size_t rr_cname(struct w *w, size_t owner, const char *target)
{
        size_t len_at, at;

        wptr(w, owner);
        w16(w, NET_DNS_TYPE_CNAME);
        w16(w, NET_DNS_CLASS_IN);
        w32(w, 60);
        len_at = w->n;
        w16(w, 0);
        at = wname(w, target);
        w->b[len_at] = (uint8_t)((w->n - at) >> 8);
        w->b[len_at + 1] = (uint8_t)(w->n - at);
        return at;
}

static void test_query_roundtrip(void **state)
{
        struct net_dns_question q;
        uint8_t msg[512], out[512];
        size_t n = 0, m = 0;

        (void)state;
        assert_int_equal(net_dns_build_query(0xbeef, "Api.GitHub.test", NET_DNS_TYPE_AAAA, msg,
                                             sizeof(msg), &n),
                         0);
        assert_int_equal(net_dns_parse_query(msg, n, &q), 0);
        assert_int_equal(q.id, 0xbeef);
        assert_string_equal(q.name, "api.github.test");
        assert_int_equal(q.qtype, NET_DNS_TYPE_AAAA);
        assert_int_equal(q.qclass, NET_DNS_CLASS_IN);
        assert_int_equal(q.end, n);

        assert_int_equal(net_dns_build_error(msg, &q, NET_DNS_RCODE_REFUSED, out, sizeof(out), &m),
                         0);
        assert_int_equal(m, n);
        assert_int_equal(out[0] << 8 | out[1], 0xbeef);
        assert_true(out[2] & 0x80);                 /* QR */
        assert_true(out[2] & 0x01);                 /* RD copied */
        assert_int_equal(net_dns_rcode(out, m), 5); /* REFUSED */
        assert_int_equal(out[5], 1);                /* the question stays */
        assert_memory_equal(out + 12, msg + 12, n - 12);
        /* a response is not a query */
        assert_int_equal(net_dns_parse_query(out, m, &q), -EBADMSG);
}

static void test_query_malformed(void **state)
{
        struct net_dns_question q;
        struct w w;

        (void)state;
        assert_int_equal(net_dns_parse_query((const uint8_t *)"short", 5, &q), -EBADMSG);
        header(&w, 0x0100, 2, 0); /* two questions */
        wname(&w, "a.test");
        w16(&w, 1);
        w16(&w, 1);
        assert_int_equal(net_dns_parse_query(w.b, w.n, &q), -EBADMSG);
        header(&w, 0x0100, 1, 0); /* a pointer pointing at itself */
        wptr(&w, 12);
        w16(&w, 1);
        w16(&w, 1);
        assert_int_equal(net_dns_parse_query(w.b, w.n, &q), -EBADMSG);
        header(&w, 0x0100, 1, 0); /* truncated label */
        w.b[w.n++] = 10;
        w.b[w.n++] = 'a';
        assert_int_equal(net_dns_parse_query(w.b, w.n, &q), -EBADMSG);
}

static void test_answers_cname_chain(void **state)
{
        struct net_dns_answer a[8];
        char chain[NET_DNS_CHAIN_MAX][NET_DNS_NAME_MAX];
        size_t n = 0, n_chain = 0, qn, c1, c2, other;
        struct w w;

        (void)state;
        header(&w, 0x8180, 1, 5);
        qn = wname(&w, "www.example.test");
        w16(&w, 1);
        w16(&w, 1);
        /* out of order: the final A first, then the chain, plus an unrelated A */
        other = wname(&w, "unrelated.test");
        w16(&w, NET_DNS_TYPE_A);
        w16(&w, 1);
        w32(&w, 5);
        w16(&w, 4);
        memcpy(w.b + w.n, "\x0a\x00\x00\x01", 4);
        w.n += 4;
        (void)other;
        c1 = rr_cname(&w, qn, "edge.cdn.test");
        c2 = rr_cname(&w, c1, "node7.cdn.test");
        rr_a(&w, c2, 300, "203.0.113.10");
        rr_a(&w, c2, 10, "203.0.113.11");
        w.b[7] = 5;
        assert_int_equal(
                net_dns_parse_answers(w.b, w.n, "www.example.test", a, 8, &n, chain, &n_chain), 0);
        assert_int_equal(n_chain, 3);
        assert_string_equal(chain[1], "edge.cdn.test");
        assert_string_equal(chain[2], "node7.cdn.test");
        assert_int_equal(n, 2);
        assert_int_equal(a[0].family, AF_INET);
        assert_memory_equal(a[0].addr, "\xcb\x00\x71\x0a", 4);
        assert_int_equal(a[0].ttl, 300);
        assert_memory_equal(a[1].addr, "\xcb\x00\x71\x0b", 4);
        assert_int_equal(a[1].ttl, 10);
        /* asked for another name, nothing of this chain is learned */
        assert_int_equal(net_dns_parse_answers(w.b, w.n, "other.test", a, 8, &n, NULL, NULL), 0);
        assert_int_equal(n, 0);
        /* cut short: malformed */
        assert_int_equal(
                net_dns_parse_answers(w.b, w.n - 3, "www.example.test", a, 8, &n, NULL, NULL),
                -EBADMSG);
}

static void test_answers_cname_loop(void **state)
{
        struct net_dns_answer a[4];
        size_t n = 9, qn, c1;
        struct w w;

        (void)state;
        header(&w, 0x8180, 1, 2);
        qn = wname(&w, "a.test");
        w16(&w, 1);
        w16(&w, 1);
        c1 = rr_cname(&w, qn, "b.test");
        rr_cname(&w, c1, "a.test"); /* back to the start: must terminate */
        assert_int_equal(net_dns_parse_answers(w.b, w.n, "a.test", a, 4, &n, NULL, NULL), 0);
        assert_int_equal(n, 0);
}

static void test_name_matching(void **state)
{
        (void)state;
        assert_true(net_dns_name_matches("api.github.test", false, "api.github.test"));
        assert_true(net_dns_name_matches("api.github.test", false, "API.github.TEST"));
        assert_false(net_dns_name_matches("api.github.test", false, "x.api.github.test"));
        assert_false(net_dns_name_matches("api.github.test", false, "github.test"));
        assert_true(net_dns_name_matches("example.test", true, "a.example.test"));
        assert_true(net_dns_name_matches("example.test", true, "a.b.example.test"));
        assert_false(net_dns_name_matches("example.test", true, "example.test"));
        assert_false(net_dns_name_matches("example.test", true, "badexample.test"));
        assert_false(net_dns_name_matches("example.test", true, "example.test.evil"));
}

static void test_effective_name(void **state)
{
        const struct net_dns_rule rules[] = {
                {.name = "www.github.test"},
                {.name = "example.test", .wildcard = true, .port = 443},
        };
        struct net_dns_derived derived[3] = {
                {.name = "edge.cdn.test", .origin = "www.github.test", .expire_ns = 100},
                {.name = "old.cdn.test", .origin = "www.github.test", .expire_ns = 10},
                {.name = "x.cdn.test", .origin = "gone.test", .expire_ns = 100},
        };

        (void)state;
        assert_string_equal(net_dns_effective_name(rules, 2, derived, 3, "www.github.test", 50),
                            "www.github.test");
        assert_string_equal(net_dns_effective_name(rules, 2, derived, 3, "a.example.test", 50),
                            "a.example.test");
        assert_null(net_dns_effective_name(rules, 2, derived, 3, "example.test", 50));
        assert_null(net_dns_effective_name(rules, 2, derived, 3, "other.test", 50));
        /* a CNAME target of an allowed name counts as that name while it lives */
        assert_string_equal(net_dns_effective_name(rules, 2, derived, 3, "edge.cdn.test", 50),
                            "www.github.test");
        assert_null(net_dns_effective_name(rules, 2, derived, 3, "edge.cdn.test", 100));
        assert_null(net_dns_effective_name(rules, 2, derived, 3, "old.cdn.test", 50));
        /* ... and only while its origin is still listed */
        assert_null(net_dns_effective_name(rules, 2, derived, 3, "x.cdn.test", 50));
        assert_null(net_dns_effective_name(rules, 1, derived, 0, "edge.cdn.test", 50));
}

static void test_upstream_parse(void **state)
{
        struct sockaddr_storage sa;
        unsigned len = 0;

        (void)state;
        assert_int_equal(net_dns_upstream_parse("192.0.2.53", &sa, &len), 0);
        assert_int_equal(sa.ss_family, AF_INET);
        assert_int_equal(ntohs(((struct sockaddr_in *)&sa)->sin_port), 53);
        assert_int_equal(net_dns_upstream_parse("192.0.2.53:5353", &sa, &len), 0);
        assert_int_equal(ntohs(((struct sockaddr_in *)&sa)->sin_port), 5353);
        assert_int_equal(net_dns_upstream_parse("2001:db8::53", &sa, &len), 0);
        assert_int_equal(sa.ss_family, AF_INET6);
        assert_int_equal(net_dns_upstream_parse("[2001:db8::53]:54", &sa, &len), 0);
        assert_int_equal(ntohs(((struct sockaddr_in6 *)&sa)->sin6_port), 54);
        assert_int_equal(net_dns_upstream_parse("dns.example", &sa, &len), -EINVAL);
        assert_int_equal(net_dns_upstream_parse("192.0.2.53:0", &sa, &len), -EINVAL);
        assert_int_equal(net_dns_upstream_parse("192.0.2.53:x", &sa, &len), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_query_roundtrip),
                cmocka_unit_test(test_query_malformed),
                cmocka_unit_test(test_answers_cname_chain),
                cmocka_unit_test(test_answers_cname_loop),
                cmocka_unit_test(test_name_matching),
                cmocka_unit_test(test_effective_name),
                cmocka_unit_test(test_upstream_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
