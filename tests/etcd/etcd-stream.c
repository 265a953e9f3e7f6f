/* SPDX-License-Identifier: MIT */
/* Watch stream splitting (every chunk boundary, byte by byte, objects without newlines, braces
 * inside strings, garbage, size limit) and watch reply parsing (created, events, compaction,
 * cancel, errors), on replies recorded from etcd 3.4.23. No etcd. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/etcd-internal.h"

#define CREATED                                                                                    \
        "{\"result\":{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":"          \
        "\"13668033151171901709\",\"revision\":\"5\",\"raft_term\":\"2\"},\"created\":true}}\n"
#define PUT6                                                                                       \
        "{\"result\":{\"header\":{\"revision\":\"6\"},\"events\":[{\"kv\":{\"key\":\"YXg=\","      \
        "\"create_revision\":\"6\",\"mod_revision\":\"6\",\"version\":\"1\",\"value\":"            \
        "\"djE=\"}}]}}\n"
#define DEL8                                                                                       \
        "{\"result\":{\"header\":{\"revision\":\"8\"},\"events\":[{\"type\":\"DELETE\",\"kv\":"    \
        "{\"key\":\"YXg=\",\"mod_revision\":\"8\"}}]}}\n"
#define TRICKY "{\"result\":{\"cancel_reason\":\"a } \\\" { ] [\",\"header\":{}}}"

static const char stream_text[] = CREATED PUT6 DEL8;

/* Feeds text in chunks of the given sizes (cycled) and collects the "revision" of each object. */
static size_t split_all(const char *text, size_t len, size_t chunk, int64_t *revs, size_t max)
{
        struct etcd_stream s;
        size_t n = 0;

        etcd_stream_init(&s, 1 << 20);
        for (size_t off = 0; off < len; off += chunk) {
                json_t *o;
                int r;

                assert_int_equal(etcd_stream_feed(&s, text + off, FK_MIN(chunk, len - off)), 0);
                while ((r = etcd_stream_next(&s, &o)) == 1) {
                        assert_true(n < max);
                        assert_int_equal(etcd_parse_header_revision(json_object_get(o, "result"),
                                                                    &revs[n++]),
                                         0);
                        json_decref(o);
                }
                assert_int_equal(r, 0);
        }
        etcd_stream_done(&s);
        return n;
}

static void test_split_every_chunk_size(void **state)
{
        size_t len = strlen(stream_text);

        (void)state;
        for (size_t chunk = 1; chunk <= len; chunk++) {
                int64_t revs[4] = {};

                assert_int_equal(split_all(stream_text, len, chunk, revs, 4), 3);
                assert_int_equal(revs[0], 5);
                assert_int_equal(revs[1], 6);
                assert_int_equal(revs[2], 8);
        }
}

static void test_split_every_boundary(void **state)
{
        size_t len = strlen(stream_text);

        (void)state;
        /* Two chunks, cut at every position. */
        for (size_t cut = 0; cut <= len; cut++) {
                struct etcd_stream s;
                size_t n = 0;
                json_t *o;

                etcd_stream_init(&s, 1 << 20);
                assert_int_equal(etcd_stream_feed(&s, stream_text, cut), 0);
                while (etcd_stream_next(&s, &o) == 1)
                        n++, json_decref(o);
                assert_int_equal(etcd_stream_feed(&s, stream_text + cut, len - cut), 0);
                while (etcd_stream_next(&s, &o) == 1)
                        n++, json_decref(o);
                assert_int_equal(n, 3);
                assert_int_equal(s.len, 0);
                etcd_stream_done(&s);
        }
}

static void test_split_no_newlines_and_strings(void **state)
{
        static const char text[] = " \r\n" TRICKY TRICKY "\n\n" TRICKY;
        struct etcd_stream s;
        json_t *o;

        (void)state;
        for (size_t chunk = 1; chunk < sizeof(text); chunk++) {
                size_t n = 0;

                etcd_stream_init(&s, 1 << 20);
                for (size_t off = 0; off < sizeof(text) - 1; off += chunk) {
                        etcd_stream_feed(&s, text + off, FK_MIN(chunk, sizeof(text) - 1 - off));
                        while (etcd_stream_next(&s, &o) == 1) {
                                const json_t *res = json_object_get(o, "result");

                                assert_string_equal(
                                        json_string_value(json_object_get(res, "cancel_reason")),
                                        "a } \" { ] [");
                                n++;
                                json_decref(o);
                        }
                }
                assert_int_equal(n, 3);
                etcd_stream_done(&s);
        }
}

static void test_split_garbage_and_limit(void **state)
{
        struct etcd_stream s;
        char big[300];
        json_t *o = NULL;

        (void)state;
        etcd_stream_init(&s, 1 << 20);
        etcd_stream_feed(&s, "\nhello{}", 8);
        assert_int_equal(etcd_stream_next(&s, &o), -EPROTO);
        etcd_stream_done(&s);

        /* Balanced but not JSON. */
        etcd_stream_init(&s, 1 << 20);
        etcd_stream_feed(&s, "{nope}", 6);
        assert_int_equal(etcd_stream_next(&s, &o), -EPROTO);
        etcd_stream_done(&s);

        /* An object that never ends stops at the limit instead of growing forever. */
        etcd_stream_init(&s, 100);
        memset(big, ' ', sizeof(big));
        big[0] = '{';
        assert_int_equal(etcd_stream_feed(&s, big, 150), 0);
        assert_int_equal(etcd_stream_next(&s, &o), -EMSGSIZE);
        assert_int_equal(etcd_stream_feed(&s, big, sizeof(big)), -EMSGSIZE);
        etcd_stream_done(&s);
        assert_null(o);
}

static void parse_one(const char *text, struct etcd_watch_reply *r)
{
        json_t *o = json_loads(text, 0, NULL);

        assert_non_null(o);
        assert_int_equal(etcd_parse_watch_reply(o, r), 0);
        json_decref(o);
}

static void test_watch_reply(void **state)
{
        struct etcd_watch_reply r;

        (void)state;
        parse_one(CREATED, &r);
        assert_true(r.created);
        assert_false(r.canceled);
        assert_int_equal(r.header_revision, 5);
        assert_int_equal(r.n_events, 0);
        etcd_watch_reply_done(&r);

        parse_one(PUT6, &r);
        assert_int_equal(r.n_events, 1);
        assert_int_equal(r.events[0].type, ETCD_EVENT_PUT);
        assert_string_equal(r.events[0].kv.key, "ax");
        assert_string_equal(r.events[0].kv.value, "v1");
        assert_int_equal(r.events[0].kv.mod_revision, 6);
        etcd_watch_reply_done(&r);

        parse_one(DEL8, &r);
        assert_int_equal(r.events[0].type, ETCD_EVENT_DELETE);
        assert_int_equal(r.events[0].kv.value_len, 0);
        assert_int_equal(r.events[0].kv.mod_revision, 8);
        etcd_watch_reply_done(&r);

        parse_one("{\"result\":{\"header\":{\"raft_term\":\"2\"},\"canceled\":true,"
                  "\"compact_revision\":\"4\"}}",
                  &r);
        assert_true(r.canceled);
        assert_int_equal(r.compact_revision, 4);
        etcd_watch_reply_done(&r);

        parse_one("{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"etcdserver: no "
                  "leader\",\"http_status\":\"Service Unavailable\"}}",
                  &r);
        assert_int_equal(r.error, -EAGAIN);
        assert_non_null(strstr(r.message, "no leader"));
        etcd_watch_reply_done(&r);
}

static void test_watch_reply_bad(void **state)
{
        static const char *const bad[] = {
                "{\"header\":{}}",
                "{\"result\":{\"events\":{}}}",
                "{\"result\":{\"events\":[{\"type\":\"FROB\",\"kv\":{}}]}}",
                "{\"result\":{\"events\":[{\"kv\":{\"key\":\"%%%\"}}]}}",
                "{\"result\":{\"header\":{\"revision\":\"x\"}}}",
        };
        struct etcd_watch_reply r;

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                json_t *o = json_loads(bad[i], 0, NULL);

                assert_non_null(o);
                assert_int_equal(etcd_parse_watch_reply(o, &r), -EPROTO);
                json_decref(o);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_split_every_chunk_size),
                cmocka_unit_test(test_split_every_boundary),
                cmocka_unit_test(test_split_no_newlines_and_strings),
                cmocka_unit_test(test_split_garbage_and_limit),
                cmocka_unit_test(test_watch_reply),
                cmocka_unit_test(test_watch_reply_bad),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
