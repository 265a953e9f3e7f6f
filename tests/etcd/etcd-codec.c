/* SPDX-License-Identifier: MIT */
/* etcd codec unit tests: prefix range ends, string
 * int64s, gRPC error mapping, gateway error objects and jittered backoff bounds. No etcd. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/etcd-internal.h"
#include "common/error.h"

static void check_prefix(const char *key, size_t len, const char *want, size_t want_len)
{
        char *end = NULL;
        size_t n = 0;

        assert_int_equal(etcd_prefix_range_end(key, len, &end, &n), 0);
        assert_int_equal(n, want_len);
        assert_memory_equal(end, want, n);
        free(end);
}

static void test_prefix_range_end(void **state)
{
        (void)state;
        check_prefix("/forklet/", 9, "/forklet0", 9);
        check_prefix("a", 1, "b", 1);
        check_prefix("a\xff", 2, "b", 1);
        check_prefix("a\xfe", 2, "a\xff", 2);
        check_prefix("ab\xff\xff", 4, "ac", 2);
        /* Nothing is bigger: "\0" means "to the end of the keyspace". */
        check_prefix("\xff\xff", 2, "\0", 1);
        check_prefix("", 0, "\0", 1);
}

static void test_json_int64(void **state)
{
        json_t *v;
        int64_t x = 7;

        (void)state;
        assert_int_equal(etcd_json_int64(NULL, &x), 0);
        assert_int_equal(x, 0);
        v = json_string("9223372036854775807");
        assert_int_equal(etcd_json_int64(v, &x), 0);
        assert_true(x == INT64_MAX);
        json_decref(v);
        v = json_string("-42");
        assert_int_equal(etcd_json_int64(v, &x), 0);
        assert_int_equal(x, -42);
        json_decref(v);
        v = json_integer(12);
        assert_int_equal(etcd_json_int64(v, &x), 0);
        assert_int_equal(x, 12);
        json_decref(v);
        v = json_string("12x");
        assert_int_equal(etcd_json_int64(v, &x), -EPROTO);
        json_decref(v);
        v = json_string("99999999999999999999");
        assert_int_equal(etcd_json_int64(v, &x), -EPROTO);
        json_decref(v);
        v = json_true();
        assert_int_equal(etcd_json_int64(v, &x), -EPROTO);
        json_decref(v);
}

static void test_reply_error(void **state)
{
        struct fk_error err = {};
        json_t *o;

        (void)state;
        assert_int_equal(etcd_grpc_to_errno(5), -ENOENT);
        assert_int_equal(etcd_grpc_to_errno(11), -ESTALE);
        assert_int_equal(etcd_grpc_to_errno(14), -EAGAIN);
        assert_int_equal(etcd_grpc_to_errno(2), -EIO);
        assert_int_equal(etcd_grpc_to_errno(999), -EIO);
        assert_int_equal(etcd_grpc_to_errno(-1), -EIO);

        o = json_loads("{\"error\":\"etcdserver: requested lease not found\",\"message\":"
                       "\"etcdserver: requested lease not found\",\"code\":5}",
                       0, NULL);
        assert_int_equal(etcd_reply_error(o, &err), -ENOENT);
        assert_int_equal(err.code, -ENOENT);
        assert_non_null(strstr(err.msg, "requested lease not found"));
        json_decref(o);
        /* The streaming form. */
        o = json_loads("{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"no leader\"}}",
                       0, NULL);
        assert_int_equal(etcd_reply_error(o, &err), -EAGAIN);
        assert_non_null(strstr(err.msg, "no leader"));
        json_decref(o);
        o = json_loads("{\"header\":{\"revision\":\"3\"}}", 0, NULL);
        assert_int_equal(etcd_reply_error(o, NULL), 0);
        json_decref(o);
}

static void test_backoff(void **state)
{
        (void)state;
        /* The cap doubles per round up to max; the value is uniform in [0, cap]. */
        assert_int_equal(etcd_backoff_ms(0, 50, 2000, 50), 50);
        assert_int_equal(etcd_backoff_ms(0, 50, 2000, 51), 0);
        assert_int_equal(etcd_backoff_ms(1, 50, 2000, 100), 100);
        assert_int_equal(etcd_backoff_ms(3, 50, 2000, 400), 400);
        assert_int_equal(etcd_backoff_ms(3, 50, 2000, 401), 0);
        assert_int_equal(etcd_backoff_ms(40, 50, 2000, 2000), 2000);
        for (uint32_t rnd = 0; rnd < 100000; rnd += 997)
                assert_true(etcd_backoff_ms(100, 50, 2000, rnd * 7919u) <= 2000);
        /* Jitter actually spreads. */
        assert_int_not_equal(etcd_backoff_ms(5, 50, 2000, 1), etcd_backoff_ms(5, 50, 2000, 2));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_prefix_range_end),
                cmocka_unit_test(test_json_int64),
                cmocka_unit_test(test_reply_error),
                cmocka_unit_test(test_backoff),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
