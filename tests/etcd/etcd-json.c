/* SPDX-License-Identifier: MIT */
/* etcd request builders and reply parsers against the JSON the etcd 3.4 gateway speaks (replies
 * recorded from a real etcd 3.4.23): base64 keys/values, string int64s, omitted zero fields. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/etcd-internal.h"

/* Compares a built request with the expected JSON text (key order independent). */
static void assert_json(json_t *got, const char *want_text)
{
        json_t *want = json_loads(want_text, 0, NULL);

        assert_non_null(got);
        assert_non_null(want);
        if (!json_equal(got, want)) {
                char *s = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);

                fail_msg("got %s\nwant %s", s, want_text);
        }
        json_decref(want);
        json_decref(got);
}

static void test_req_range(void **state)
{
        (void)state;
        assert_json(etcd_req_range("foo", NULL, 0), "{\"key\":\"Zm9v\"}");
        assert_json(etcd_req_range("a", "c", 0), "{\"key\":\"YQ==\",\"range_end\":\"Yw==\"}");
        /* /forklet/ -> /forklet0 */
        assert_json(etcd_req_range("/forklet/", NULL, ETCD_PREFIX),
                    "{\"key\":\"L2ZvcmtsZXQv\",\"range_end\":\"L2ZvcmtsZXQw\"}");
        /* Every key: key "\0", range_end "\0". */
        assert_json(etcd_req_range("", NULL, ETCD_PREFIX),
                    "{\"key\":\"AA==\",\"range_end\":\"AA==\"}");
        assert_null(etcd_req_range("a", "b", ETCD_PREFIX));
        assert_json(etcd_req_delete("foo", ETCD_PREFIX),
                    "{\"key\":\"Zm9v\",\"range_end\":\"Zm9w\"}");
}

static void test_req_put(void **state)
{
        (void)state;
        assert_json(etcd_req_put("foo", "bar", 3, 0), "{\"key\":\"Zm9v\",\"value\":\"YmFy\"}");
        assert_json(etcd_req_put("k", "\0\xff", 2, 7587869112313386249),
                    "{\"key\":\"aw==\",\"value\":\"AP8=\",\"lease\":\"7587869112313386249\"}");
        assert_json(etcd_req_put("k", NULL, 0, 0), "{\"key\":\"aw==\",\"value\":\"\"}");
}

static void test_req_txn_cas(void **state)
{
        (void)state;
        assert_json(etcd_req_txn_cas("s", 0, "x", 1, 0),
                    "{\"compare\":[{\"key\":\"cw==\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                    "\"create_revision\":\"0\"}],"
                    "\"success\":[{\"request_put\":{\"key\":\"cw==\",\"value\":\"eA==\"}}],"
                    "\"failure\":[{\"request_range\":{\"key\":\"cw==\"}}]}");
        assert_json(etcd_req_txn_cas("s", 42, "x", 1, 5),
                    "{\"compare\":[{\"key\":\"cw==\",\"target\":\"MOD\",\"result\":\"EQUAL\","
                    "\"mod_revision\":\"42\"}],"
                    "\"success\":[{\"request_put\":{\"key\":\"cw==\",\"value\":\"eA==\","
                    "\"lease\":\"5\"}}],"
                    "\"failure\":[{\"request_range\":{\"key\":\"cw==\"}}]}");
        assert_json(etcd_req_txn_delete("s", 7),
                    "{\"compare\":[{\"key\":\"cw==\",\"target\":\"MOD\",\"result\":\"EQUAL\","
                    "\"mod_revision\":\"7\"}],"
                    "\"success\":[{\"request_delete_range\":{\"key\":\"cw==\"}}],"
                    "\"failure\":[{\"request_range\":{\"key\":\"cw==\"}}]}");
}

static void test_req_watch(void **state)
{
        (void)state;
        assert_json(etcd_req_watch_create("a", ETCD_PREFIX, 0),
                    "{\"create_request\":{\"key\":\"YQ==\",\"range_end\":\"Yg==\"}}");
        assert_json(etcd_req_watch_create("a", 0, 17),
                    "{\"create_request\":{\"key\":\"YQ==\",\"start_revision\":\"17\"}}");
}

static void test_parse_range(void **state)
{
        json_t *o = json_loads(
                "{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":"
                "\"13668033151171901709\",\"revision\":\"9\",\"raft_term\":\"2\"},"
                "\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\",\"mod_revision\":\"3\","
                "\"version\":\"2\",\"value\":\"AP8A\"},{\"key\":\"Zm9w\",\"create_revision\":\"4\","
                "\"mod_revision\":\"4\",\"version\":\"1\",\"lease\":\"77\"}],\"count\":\"2\"}",
                0, NULL);
        struct etcd_kvs *kvs = NULL;
        int64_t rev = 0;

        (void)state;
        assert_int_equal(etcd_parse_range(o, &kvs, &rev), 0);
        assert_int_equal(rev, 9);
        assert_int_equal(kvs->n, 2);
        assert_int_equal(kvs->count, 2);
        assert_false(kvs->more);
        assert_string_equal(kvs->kvs[0].key, "foo");
        assert_int_equal(kvs->kvs[0].value_len, 3);
        assert_memory_equal(kvs->kvs[0].value, "\0\xff\0", 3);
        assert_int_equal(kvs->kvs[0].create_revision, 2);
        assert_int_equal(kvs->kvs[0].mod_revision, 3);
        assert_int_equal(kvs->kvs[0].version, 2);
        assert_int_equal(kvs->kvs[0].lease, 0);
        /* An empty value is omitted by the gateway. */
        assert_string_equal(kvs->kvs[1].value, "");
        assert_int_equal(kvs->kvs[1].value_len, 0);
        assert_int_equal(kvs->kvs[1].lease, 77);
        etcd_kvs_free(kvs);
        json_decref(o);

        /* No key: no "kvs", no "count". */
        o = json_loads("{\"header\":{\"revision\":\"2\"}}", 0, NULL);
        assert_int_equal(etcd_parse_range(o, &kvs, NULL), 0);
        assert_int_equal(kvs->n, 0);
        assert_int_equal(kvs->count, 0);
        etcd_kvs_free(kvs);
        json_decref(o);

        kvs = NULL;
        o = json_loads("{\"header\":{\"revision\":\"2\"},\"kvs\":[{\"key\":\"!!\"}]}", 0, NULL);
        assert_int_equal(etcd_parse_range(o, &kvs, NULL), -EPROTO);
        assert_null(kvs);
        json_decref(o);
}

static void test_parse_txn(void **state)
{
        json_t *ok = json_loads("{\"header\":{\"revision\":\"3\"},\"succeeded\":true,\"responses\":"
                                "[{\"response_put\":{\"header\":{\"revision\":\"3\"}}}]}",
                                0, NULL);
        json_t *lost = json_loads(
                "{\"header\":{\"revision\":\"3\"},\"responses\":[{\"response_range\":{\"header\":"
                "{\"revision\":\"3\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\","
                "\"mod_revision\":\"3\",\"version\":\"2\",\"value\":\"YmF6\"}],\"count\":\"1\"}}]}",
                0, NULL);
        json_t *gone = json_loads("{\"header\":{\"revision\":\"5\"},\"responses\":[{"
                                  "\"response_range\":{\"header\":{\"revision\":\"5\"}}}]}",
                                  0, NULL);
        bool won = false;
        int64_t rev = 0;

        (void)state;
        assert_int_equal(etcd_parse_txn_cas(ok, &won, &rev), 0);
        assert_true(won);
        assert_int_equal(rev, 3);
        assert_int_equal(etcd_parse_txn_cas(lost, &won, &rev), 0);
        assert_false(won);
        assert_int_equal(rev, 3);
        assert_int_equal(etcd_parse_txn_cas(gone, &won, &rev), 0);
        assert_false(won);
        assert_int_equal(rev, 0);
        json_decref(ok);
        json_decref(lost);
        json_decref(gone);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_req_range),   cmocka_unit_test(test_req_put),
                cmocka_unit_test(test_req_txn_cas), cmocka_unit_test(test_req_watch),
                cmocka_unit_test(test_parse_range), cmocka_unit_test(test_parse_txn),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
