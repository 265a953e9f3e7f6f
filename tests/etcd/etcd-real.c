/* SPDX-License-Identifier: MIT */
/* The etcd client against a real etcd 3.4 started by the test: binary round trip, racing CAS,
 * lease expiry and keepalive, ordered watch, watch across an etcd restart (exactly once),
 * compaction report, endpoint failover. Skips (77) when the etcd binary is missing. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd/etcd.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "tests/etcd/etcd-proxy.h"
#include "tests/etcd/etcd-server.h"

static struct etcd_server server;

static struct etcd_client *client(void)
{
        const char *eps[] = {server.url, NULL};
        struct etcd_options o = {.request_timeout_ms = 5000, .attempts = 5};
        struct etcd_client *c = NULL;
        struct fk_error err = {};

        assert_int_equal(etcd_client_new(eps, &o, &c, &err), 0);
        return c;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

/* ---- watch event log ---- */

struct ev {
        enum etcd_event_type type;
        char key[64], value[64];
        int64_t rev;
};

struct evlog {
        pthread_mutex_t lock;
        struct ev evs[512];
        size_t n;
};

static void record(enum etcd_event_type type, const struct etcd_kv *kv, int64_t rev, void *ud)
{
        struct evlog *l = ud;

        pthread_mutex_lock(&l->lock);
        if (l->n < ARRAY_SIZE(l->evs)) {
                struct ev *e = &l->evs[l->n++];

                *e = (struct ev){.type = type, .rev = rev};
                if (kv) {
                        snprintf(e->key, sizeof(e->key), "%.*s", (int)kv->key_len, kv->key);
                        snprintf(e->value, sizeof(e->value), "%.*s", (int)kv->value_len, kv->value);
                }
        }
        pthread_mutex_unlock(&l->lock);
}

static size_t evlog_wait(struct evlog *l, size_t want, unsigned timeout_ms)
{
        size_t n = 0;

        for (unsigned t = 0; t <= timeout_ms; t += 10) {
                pthread_mutex_lock(&l->lock);
                n = l->n;
                pthread_mutex_unlock(&l->lock);
                if (n >= want)
                        break;
                sleep_ms(10);
        }
        return n;
}

static void check_ev(struct evlog *l, size_t i, enum etcd_event_type type, const char *key,
                     const char *value)
{
        assert_true(i < l->n);
        assert_int_equal(l->evs[i].type, type);
        assert_string_equal(l->evs[i].key, key);
        if (value)
                assert_string_equal(l->evs[i].value, value);
        if (i > 0)
                assert_true(l->evs[i].rev > l->evs[i - 1].rev);
}

/* ---- tests ---- */

static void test_roundtrip_binary(void **state)
{
        struct etcd_client *c = client();
        struct etcd_kvs *kvs = NULL;
        unsigned char bin[256];
        int64_t rev = 0, rev2 = 0, deleted = 0;

        (void)state;
        for (size_t i = 0; i < sizeof(bin); i++)
                bin[i] = (unsigned char)i;
        assert_int_equal(etcd_put(c, "/rt/bin", bin, sizeof(bin), 0, &rev, NULL), 0);
        assert_true(rev > 0);
        assert_int_equal(etcd_put(c, "/rt/empty", "", 0, 0, NULL, NULL), 0);
        assert_int_equal(etcd_put(c, "/rt/text", "hello", 5, 0, &rev2, NULL), 0);
        assert_int_equal(etcd_put(c, "/rt0", "outside", 7, 0, NULL, NULL), 0);

        assert_int_equal(etcd_range(c, "/rt/bin", NULL, 0, &kvs, &rev, NULL), 0);
        assert_int_equal(kvs->n, 1);
        assert_int_equal(kvs->kvs[0].value_len, sizeof(bin));
        assert_memory_equal(kvs->kvs[0].value, bin, sizeof(bin));
        assert_int_equal(kvs->kvs[0].version, 1);
        assert_true(rev >= rev2);
        kvs = etcd_kvs_free(kvs);

        assert_int_equal(etcd_range(c, "/rt/", NULL, ETCD_PREFIX, &kvs, NULL, NULL), 0);
        assert_int_equal(kvs->n, 3);
        assert_string_equal(kvs->kvs[0].key, "/rt/bin");
        assert_string_equal(kvs->kvs[1].key, "/rt/empty");
        assert_int_equal(kvs->kvs[1].value_len, 0);
        assert_string_equal(kvs->kvs[2].key, "/rt/text");
        assert_int_equal(kvs->kvs[2].mod_revision, rev2);
        kvs = etcd_kvs_free(kvs);

        assert_int_equal(etcd_delete(c, "/rt/text", 0, &deleted, NULL), 0);
        assert_int_equal(deleted, 1);
        assert_int_equal(etcd_delete(c, "/rt/", ETCD_PREFIX, &deleted, NULL), 0);
        assert_int_equal(deleted, 2);
        assert_int_equal(etcd_range(c, "/rt/", NULL, ETCD_PREFIX, &kvs, NULL, NULL), 0);
        assert_int_equal(kvs->n, 0);
        kvs = etcd_kvs_free(kvs);
        /* The neighbour outside the prefix survived. */
        assert_int_equal(etcd_range(c, "/rt0", NULL, 0, &kvs, NULL, NULL), 0);
        assert_int_equal(kvs->n, 1);
        etcd_kvs_free(kvs);
        assert_int_equal(etcd_delete(c, "/rt0", 0, NULL, NULL), 0);
        etcd_client_free(c);
}

struct racer {
        struct etcd_client *c;
        pthread_barrier_t *go;
        char key[64], me[16];
        bool won;
        int r;
};

static void *race(void *arg)
{
        struct racer *x = arg;

        pthread_barrier_wait(x->go);
        x->r = etcd_txn_cas(x->c, x->key, 0, x->me, strlen(x->me), 0, &x->won, NULL, NULL);
        return NULL;
}

static void test_cas_race(void **state)
{
        struct etcd_client *c = client();

        (void)state;
        for (int round = 0; round < 25; round++) {
                struct racer x[2] = {};
                pthread_barrier_t go;
                pthread_t t[2];
                struct etcd_kvs *kvs = NULL;

                pthread_barrier_init(&go, NULL, 2);
                for (int i = 0; i < 2; i++) {
                        x[i] = (struct racer){.c = c, .go = &go};
                        snprintf(x[i].key, sizeof(x[i].key), "/cas/session-%d", round);
                        snprintf(x[i].me, sizeof(x[i].me), "sched-%d", i);
                        assert_int_equal(pthread_create(&t[i], NULL, race, &x[i]), 0);
                }
                for (int i = 0; i < 2; i++)
                        pthread_join(t[i], NULL);
                pthread_barrier_destroy(&go);
                assert_int_equal(x[0].r, 0);
                assert_int_equal(x[1].r, 0);
                assert_true(x[0].won != x[1].won);
                assert_int_equal(etcd_range(c, x[0].key, NULL, 0, &kvs, NULL, NULL), 0);
                assert_int_equal(kvs->n, 1);
                assert_string_equal(kvs->kvs[0].value, x[0].won ? "sched-0" : "sched-1");
                etcd_kvs_free(kvs);
        }
        etcd_delete(c, "/cas/", ETCD_PREFIX, NULL, NULL);
        etcd_client_free(c);
}

static size_t count_keys(struct etcd_client *c, const char *key)
{
        struct etcd_kvs *kvs = NULL;
        size_t n;

        assert_int_equal(etcd_range(c, key, NULL, 0, &kvs, NULL, NULL), 0);
        n = kvs->n;
        etcd_kvs_free(kvs);
        return n;
}

static void test_cas_update(void **state)
{
        struct etcd_client *c = client();
        int64_t rev = 0, cur = 0;
        bool won = false;

        (void)state;
        assert_int_equal(etcd_txn_cas(c, "/casu", 0, "a", 1, 0, &won, &rev, NULL), 0);
        assert_true(won);
        /* Creating again fails and reports the current mod revision. */
        assert_int_equal(etcd_txn_cas(c, "/casu", 0, "b", 1, 0, &won, &cur, NULL), 0);
        assert_false(won);
        assert_int_equal(cur, rev);
        assert_int_equal(etcd_txn_cas(c, "/casu", rev, "c", 1, 0, &won, &cur, NULL), 0);
        assert_true(won);
        assert_true(cur > rev);
        /* The old revision is stale now. */
        assert_int_equal(etcd_txn_cas(c, "/casu", rev, "d", 1, 0, &won, &rev, NULL), 0);
        assert_false(won);
        assert_int_equal(rev, cur);
        /* Compare-and-delete: a stale revision leaves the key, the current one deletes it. */
        assert_int_equal(etcd_txn_delete(c, "/casu", cur - 1, &won, NULL), 0);
        assert_false(won);
        assert_int_equal(count_keys(c, "/casu"), 1);
        assert_int_equal(etcd_txn_delete(c, "/casu", cur, &won, NULL), 0);
        assert_true(won);
        assert_int_equal(count_keys(c, "/casu"), 0);
        assert_int_equal(etcd_txn_delete(c, "/casu", cur, &won, NULL), 0);
        assert_false(won);
        etcd_client_free(c);
}

static void test_lease(void **state)
{
        struct etcd_client *c = client();
        int64_t dying = 0, kept = 0, ttl = 0;
        struct fk_error err = {};
        bool gone = false;

        (void)state;
        assert_int_equal(etcd_lease_grant(c, 2, &dying, NULL), 0);
        assert_int_equal(etcd_lease_grant(c, 2, &kept, NULL), 0);
        assert_int_equal(etcd_put(c, "/lease/dying", "x", 1, dying, NULL, NULL), 0);
        assert_int_equal(etcd_put(c, "/lease/kept", "y", 1, kept, NULL, NULL), 0);
        /* Keep one alive for ~6 s (3 TTLs); the other must vanish meanwhile. */
        for (int i = 0; i < 12; i++) {
                assert_int_equal(etcd_lease_keepalive(c, kept, &ttl, NULL), 0);
                assert_true(ttl > 0 && ttl <= 2);
                sleep_ms(500);
                gone = gone || count_keys(c, "/lease/dying") == 0;
        }
        assert_true(gone);
        assert_int_equal(count_keys(c, "/lease/kept"), 1);
        assert_int_equal(etcd_lease_keepalive(c, dying, &ttl, &err), -ENOENT);

        assert_int_equal(etcd_lease_revoke(c, kept, NULL), 0);
        assert_int_equal(count_keys(c, "/lease/kept"), 0);
        assert_int_equal(etcd_lease_revoke(c, kept, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "lease not found"));
        assert_int_equal(etcd_put(c, "/lease/x", "z", 1, kept, NULL, &err), -ENOENT);
        etcd_client_free(c);
}

static void test_watch_order(void **state)
{
        struct etcd_client *c = client();
        struct evlog *l = calloc(1, sizeof(*l));
        struct etcd_watch *w = NULL;
        struct etcd_kvs *kvs = NULL;
        int64_t rev = 0;

        (void)state;
        pthread_mutex_init(&l->lock, NULL);
        assert_int_equal(etcd_put(c, "/w/before", "old", 3, 0, NULL, NULL), 0);
        assert_int_equal(etcd_range(c, "/w/", NULL, ETCD_PREFIX, &kvs, &rev, NULL), 0);
        etcd_kvs_free(kvs);
        assert_int_equal(etcd_watch_new(c, "/w/", ETCD_PREFIX, rev + 1, record, l, &w, NULL), 0);
        assert_int_equal(etcd_put(c, "/w/a", "1", 1, 0, NULL, NULL), 0);
        assert_int_equal(etcd_put(c, "/x", "outside", 7, 0, NULL, NULL), 0);
        assert_int_equal(etcd_put(c, "/w/b", "2", 1, 0, NULL, NULL), 0);
        assert_int_equal(etcd_delete(c, "/w/a", 0, NULL, NULL), 0);
        assert_int_equal(etcd_put(c, "/w/a", "3", 1, 0, NULL, NULL), 0);
        assert_int_equal(etcd_delete(c, "/w/", ETCD_PREFIX, NULL, NULL), 0);
        assert_int_equal(etcd_watch_wait_ready(w, 5000), 0);
        assert_int_equal(evlog_wait(l, 7, 5000), 7);
        sleep_ms(200); /* nothing more may come */
        w = etcd_watch_free(w);
        assert_int_equal(l->n, 7);
        check_ev(l, 0, ETCD_EVENT_PUT, "/w/a", "1");
        check_ev(l, 1, ETCD_EVENT_PUT, "/w/b", "2");
        check_ev(l, 2, ETCD_EVENT_DELETE, "/w/a", "");
        check_ev(l, 3, ETCD_EVENT_PUT, "/w/a", "3");
        /* One deleterange of three keys: one revision, three events, key order. */
        assert_string_equal(l->evs[4].key, "/w/a");
        assert_string_equal(l->evs[5].key, "/w/b");
        assert_string_equal(l->evs[6].key, "/w/before");
        for (int i = 4; i < 7; i++) {
                assert_int_equal(l->evs[i].type, ETCD_EVENT_DELETE);
                assert_int_equal(l->evs[i].rev, l->evs[4].rev);
        }
        etcd_delete(c, "/x", 0, NULL, NULL);
        free(l);
        etcd_client_free(c);
}

static void test_watch_restart(void **state)
{
        struct etcd_client *c = client();
        struct evlog *l = calloc(1, sizeof(*l));
        struct etcd_watch *w = NULL;
        char key[32];

        (void)state;
        pthread_mutex_init(&l->lock, NULL);
        assert_int_equal(etcd_watch_new(c, "/r/", ETCD_PREFIX, 0, record, l, &w, NULL), 0);
        assert_int_equal(etcd_watch_wait_ready(w, 5000), 0);
        for (int i = 0; i < 3; i++) {
                snprintf(key, sizeof(key), "/r/%02d", i);
                assert_int_equal(etcd_put(c, key, key, strlen(key), 0, NULL, NULL), 0);
        }
        assert_int_equal(evlog_wait(l, 3, 5000), 3);

        /* Crash etcd; restart it on the same data dir; write right away (the watch is still in
         * backoff or reconnecting), then more after it is surely back. */
        etcd_server_stop(&server, SIGKILL);
        sleep_ms(300);
        assert_int_equal(etcd_server_start(&server), 0);
        for (int i = 3; i < 13; i++) {
                snprintf(key, sizeof(key), "/r/%02d", i);
                assert_int_equal(etcd_put(c, key, key, strlen(key), 0, NULL, NULL), 0);
        }
        assert_int_equal(evlog_wait(l, 13, 10000), 13);
        for (int i = 13; i < 20; i++) {
                snprintf(key, sizeof(key), "/r/%02d", i);
                assert_int_equal(etcd_put(c, key, key, strlen(key), 0, NULL, NULL), 0);
        }
        assert_int_equal(evlog_wait(l, 20, 10000), 20);
        sleep_ms(300);
        assert_true(etcd_watch_connects(w) >= 2);
        w = etcd_watch_free(w);
        assert_int_equal(l->n, 20);
        for (int i = 0; i < 20; i++) {
                snprintf(key, sizeof(key), "/r/%02d", i);
                check_ev(l, (size_t)i, ETCD_EVENT_PUT, key, key);
        }
        etcd_delete(c, "/r/", ETCD_PREFIX, NULL, NULL);
        free(l);
        etcd_client_free(c);
}

/* The watch loses its connection (a proxy in between is cut) while etcd stays up and takes
 * writes: after the proxy is back the watch resumes from the last delivered revision + 1, so the
 * writes made while it was away arrive, each exactly once. */
static void test_watch_disconnect(void **state)
{
        struct etcd_client *c = client(), *via = NULL;
        struct evlog *l = calloc(1, sizeof(*l));
        struct etcd_proxy *p = NULL;
        struct etcd_watch *w = NULL;
        const char *eps[1 + 1] = {};
        struct etcd_options o = {.backoff_base_ms = 20, .backoff_max_ms = 200};
        char key[32];

        (void)state;
        pthread_mutex_init(&l->lock, NULL);
        assert_int_equal(etcd_proxy_new(server.client_port, &p), 0);
        eps[0] = etcd_proxy_url(p);
        assert_int_equal(etcd_client_new(eps, &o, &via, NULL), 0);
        assert_int_equal(etcd_watch_new(via, "/d/", ETCD_PREFIX, 0, record, l, &w, NULL), 0);
        assert_int_equal(etcd_watch_wait_ready(w, 5000), 0);
        for (int i = 0; i < 3; i++) {
                snprintf(key, sizeof(key), "/d/%02d", i);
                assert_int_equal(etcd_put(c, key, key, strlen(key), 0, NULL, NULL), 0);
        }
        assert_int_equal(evlog_wait(l, 3, 5000), 3);
        etcd_proxy_set_up(p, 0);
        for (int i = 3; i < 10; i++) {
                snprintf(key, sizeof(key), "/d/%02d", i);
                assert_int_equal(etcd_put(c, key, key, strlen(key), 0, NULL, NULL), 0);
        }
        sleep_ms(500);
        assert_int_equal(evlog_wait(l, 4, 0), 3); /* cut off: nothing arrived */
        etcd_proxy_set_up(p, 1);
        assert_int_equal(evlog_wait(l, 10, 10000), 10);
        sleep_ms(300);
        assert_true(etcd_watch_connects(w) >= 2);
        w = etcd_watch_free(w);
        assert_int_equal(l->n, 10);
        for (int i = 0; i < 10; i++) {
                snprintf(key, sizeof(key), "/d/%02d", i);
                check_ev(l, (size_t)i, ETCD_EVENT_PUT, key, key);
        }
        etcd_delete(c, "/d/", ETCD_PREFIX, NULL, NULL);
        etcd_client_free(via);
        etcd_proxy_free(p);
        free(l);
        etcd_client_free(c);
}

static void test_watch_compacted(void **state)
{
        struct etcd_client *c = client();
        struct evlog *l = calloc(1, sizeof(*l));
        struct etcd_watch *w = NULL;
        int64_t old = 0, now = 0;
        char body[64];

        (void)state;
        pthread_mutex_init(&l->lock, NULL);
        assert_int_equal(etcd_put(c, "/cmp/a", "1", 1, 0, &old, NULL), 0);
        assert_int_equal(etcd_put(c, "/cmp/a", "2", 1, 0, NULL, NULL), 0);
        assert_int_equal(etcd_put(c, "/cmp/a", "3", 1, 0, &now, NULL), 0);
        snprintf(body, sizeof(body), "{\"revision\":\"%" PRId64 "\"}", now);
        assert_int_equal(etcd_server_post(&server, "/v3/kv/compaction", body), 0);
        assert_int_equal(etcd_watch_new(c, "/cmp/", ETCD_PREFIX, old, record, l, &w, NULL), 0);
        assert_int_equal(evlog_wait(l, 1, 5000), 1);
        assert_int_equal(etcd_watch_wait_ready(w, 5000), -ESTALE);
        w = etcd_watch_free(w);
        assert_int_equal(l->n, 1);
        assert_int_equal(l->evs[0].type, ETCD_EVENT_COMPACTED);
        assert_int_equal(l->evs[0].rev, now);
        etcd_delete(c, "/cmp/", ETCD_PREFIX, NULL, NULL);
        free(l);
        etcd_client_free(c);
}

static void test_failover(void **state)
{
        char dead[64], dead2[64];
        const char *eps[] = {dead, server.url, NULL}, *none[] = {dead, dead2, NULL};
        struct etcd_options o = {.connect_timeout_ms = 500, .attempts = 2};
        struct etcd_client *c = NULL, *n = NULL;
        struct evlog *l = calloc(1, sizeof(*l));
        struct etcd_watch *w = NULL;
        struct etcd_kvs *kvs = NULL;
        struct fk_error err = {};
        uint64_t t0;

        (void)state;
        pthread_mutex_init(&l->lock, NULL);
        snprintf(dead, sizeof(dead), "127.0.0.1:%d", etcd_server_free_port());
        snprintf(dead2, sizeof(dead2), "http://127.0.0.1:%d/", etcd_server_free_port());
        assert_int_equal(etcd_client_new(eps, &o, &c, NULL), 0);
        assert_int_equal(etcd_watch_new(c, "/fo", 0, 0, record, l, &w, NULL), 0);
        assert_int_equal(etcd_watch_wait_ready(w, 5000), 0);
        assert_int_equal(etcd_put(c, "/fo", "v", 1, 0, NULL, NULL), 0);
        assert_int_equal(etcd_range(c, "/fo", NULL, 0, &kvs, NULL, NULL), 0);
        assert_int_equal(kvs->n, 1);
        etcd_kvs_free(kvs);
        assert_int_equal(evlog_wait(l, 1, 5000), 1);
        w = etcd_watch_free(w);
        assert_int_equal(etcd_delete(c, "/fo", 0, NULL, NULL), 0);

        /* Nothing reachable: fails, bounded, saying which endpoint. */
        assert_int_equal(etcd_client_new(none, &o, &n, NULL), 0);
        t0 = fk_now_mono_ns();
        assert_int_equal(etcd_put(n, "/fo", "v", 1, 0, NULL, &err), -ECONNREFUSED);
        assert_true(fk_now_mono_ns() - t0 < 5000000000ull);
        assert_non_null(strstr(err.msg, "127.0.0.1"));
        etcd_client_free(n);
        etcd_client_free(c);
        free(l);
}

static int group_setup(void **state)
{
        (void)state;
        if (etcd_server_init(&server) < 0 || etcd_server_start(&server) < 0) {
                etcd_server_cleanup(&server);
                return -1;
        }
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        etcd_server_cleanup(&server);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip_binary), cmocka_unit_test(test_cas_race),
                cmocka_unit_test(test_cas_update),       cmocka_unit_test(test_lease),
                cmocka_unit_test(test_watch_order),      cmocka_unit_test(test_watch_restart),
                cmocka_unit_test(test_watch_disconnect), cmocka_unit_test(test_watch_compacted),
                cmocka_unit_test(test_failover),
        };

        if (!etcd_server_binary()) {
                fprintf(stderr, "etcd-real: SKIP: no etcd binary (install etcd-server)\n");
                return 77;
        }
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
