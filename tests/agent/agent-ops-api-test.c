/* SPDX-License-Identifier: MIT */
/* forkletd's operational API with the fake VM backend: /metrics, Idempotency-Key replays,
 * hostile requests that change nothing, the audit of API calls and transitions, the watch
 * stream, the bearer-token TCP listener, and journal/orphan recovery at start. */
#include "tests/lib/agent-harness.h"

#include <netinet/in.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>

struct raw {
        long status;
        char *body;
        size_t size;
        bool replayed;
        /* A stream read while it arrives (the watch): each write appends under mu and
         * broadcasts cv; the transfer ends once stop is set. NULL mu: a plain request. */
        pthread_mutex_t *mu;
        pthread_cond_t *cv;
        const atomic_bool *stop;
};

static size_t raw_write(char *p, size_t sz, size_t n, void *ud)
{
        struct raw *r = ud;
        char *b;

        if (r->mu)
                pthread_mutex_lock(r->mu);
        b = realloc(r->body, r->size + sz * n + 1);
        assert_non_null(b);
        memcpy(b + r->size, p, sz * n);
        r->size += sz * n;
        b[r->size] = '\0';
        r->body = b;
        if (r->mu) {
                pthread_cond_broadcast(r->cv);
                pthread_mutex_unlock(r->mu);
        }
        return sz * n;
}

/* Ends a streamed transfer once its reader is done (curl calls it about every second). */
static int raw_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
        const struct raw *r = ud;

        (void)a, (void)b, (void)c, (void)d;
        return r->stop && atomic_load(r->stop);
}

static size_t raw_header(char *p, size_t sz, size_t n, void *ud)
{
        struct raw *r = ud;

        if (strncasecmp(p, "Idempotency-Replayed: true", 26) == 0)
                r->replayed = true;
        return sz * n;
}

/* One request with extra headers over the unix socket (sock) or TCP (url host part) into
 * *ret, whose stream fields (mu, cv, stop) are set or NULL and the rest zero. */
static long raw_perform(const char *sock, const char *url, const char *method, const char *hdr1,
                        const char *body, size_t body_size, long timeout_ms, struct raw *ret)
{
        CURL *c = curl_easy_init();
        struct curl_slist *h = NULL;

        assert_non_null(c);
        if (ret->stop) {
                curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, raw_progress);
                curl_easy_setopt(c, CURLOPT_XFERINFODATA, ret);
        }
        if (sock)
                curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, raw_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, raw_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, ret);
        if (timeout_ms)
                curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
        if (hdr1)
                h = curl_slist_append(h, hdr1);
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_size);
        }
        (void)curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return ret->status;
}

static long raw_req(const char *sock, const char *url, const char *method, const char *hdr1,
                    const char *body, size_t body_size, long timeout_ms, struct raw *ret)
{
        *ret = (struct raw){0};
        return raw_perform(sock, url, method, hdr1, body, body_size, timeout_ms, ret);
}

static void raw_done(struct raw *r)
{
        free(r->body);
        *r = (struct raw){0};
}

static void test_metrics(void **state)
{
        struct env *e = *state;
        struct raw r;

        agent_metrics_reset();
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        agent_metrics_observe(AGENT_OP_CHECKPOINT, 0.3);
        agent_metrics_add_forks(3);
        agent_metrics_add_checkpoint_bytes(4096);
        assert_int_equal(raw_req(e->sock, "http://x/metrics", "GET", NULL, NULL, 0, 0, &r), 200);
        assert_non_null(strstr(r.body, "forklet_sessions{phase=\"Running\"} 1\n"));
        assert_non_null(strstr(r.body, "forklet_sessions{phase=\"Failed\"} 0\n"));
        assert_non_null(
                strstr(r.body, "forklet_operation_duration_seconds_count{op=\"boot\"} 1\n"));
        assert_non_null(strstr(
                r.body,
                "forklet_operation_duration_seconds_bucket{op=\"checkpoint\",le=\"0.25\"} 0\n"));
        assert_non_null(strstr(
                r.body,
                "forklet_operation_duration_seconds_bucket{op=\"checkpoint\",le=\"0.5\"} 1\n"));
        assert_non_null(strstr(r.body, "forklet_forks_total 3\n"));
        assert_non_null(strstr(r.body, "forklet_checkpoint_bytes_total 4096\n"));
        assert_non_null(strstr(r.body, "# TYPE process_open_fds gauge\n"));
        raw_done(&r);
}

static int fake_stats(void *ud, const char *key, struct agent_session_stats *ret)
{
        (void)ud;
        if (strcmp(key, "default.hello") != 0)
                return -ENOENT;
        *ret = (struct agent_session_stats){
                .cpu_usage_ns = 1500000000, .memory_bytes = 42, .pids = 7};
        return 0;
}

static void test_metrics_session_hook(void **state)
{
        struct env *e = *state;
        char *text = NULL;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        agent_metrics_set_session_stats_hook(fake_stats, NULL);
        assert_int_equal(agent_daemon_metrics_text(e->d, &text), 0);
        agent_metrics_set_session_stats_hook(NULL, NULL);
        assert_non_null(strstr(
                text,
                "forklet_session_cpu_seconds_total{namespace=\"default\",name=\"hello\"} 1.5\n"));
        assert_non_null(
                strstr(text, "forklet_session_pids{namespace=\"default\",name=\"hello\"} 7\n"));
        free(text);
}

static void test_idempotency_key(void **state)
{
        struct env *e = *state;
        const char *url = "http://x/api/v1alpha1/sessions";
        json_t *j = NULL;
        struct raw r;

        assert_int_equal(raw_req(e->sock, url, "POST", "Idempotency-Key: abc", hello_json,
                                 strlen(hello_json), 0, &r),
                         201);
        assert_false(r.replayed);
        raw_done(&r);
        reconcile(e);
        /* The repeat replays "201 created" and starts nothing new. */
        assert_int_equal(raw_req(e->sock, url, "POST", "Idempotency-Key: abc", hello_json,
                                 strlen(hello_json), 0, &r),
                         201);
        assert_true(r.replayed);
        raw_done(&r);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "metadata"), "generation")),
                1);
        json_decref(j);
        /* Same key, another body: refused. */
        assert_int_equal(raw_req(e->sock, url, "POST", "Idempotency-Key: abc", "{}", 2, 0, &r),
                         422);
        raw_done(&r);
        /* Without a key an apply of the same manifest is "unchanged" (attach before create). */
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 200);
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);
}

static size_t count_entries(const char *dir)
{
        DIR *dp = opendir(dir);
        struct dirent *de;
        size_t n = 0;

        while (dp && (de = readdir(dp)))
                n += de->d_name[0] != '.';
        if (dp)
                closedir(dp);
        return n;
}

static void test_hostile(void **state)
{
        struct env *e = *state;
        const char *url = "http://x/api/v1alpha1/sessions";
        cleanup_free char *big = malloc(CORE_API_MAX_BODY + 2), *sdir = NULL;
        json_t *j = NULL;
        struct raw r;

        assert_non_null(big);
        memset(big, '{', CORE_API_MAX_BODY + 1);
        big[CORE_API_MAX_BODY + 1] = '\0';
        assert_int_equal(raw_req(e->sock, url, "POST", NULL, big, CORE_API_MAX_BODY + 1, 0, &r),
                         413);
        raw_done(&r);
        assert_int_equal(raw_req(e->sock, url, "POST", NULL, "{\"a\":", 5, 0, &r), 400);
        raw_done(&r);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions",
                             "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                             "\"metadata\":{\"name\":\"../etc\"},\"spec\":{\"sizeClass\":"
                             "\"small\",\"image\":\"minimal\"}}",
                             NULL),
                         422);
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions",
                             "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                             "\"metadata\":{\"name\":\"x\"},\"spec\":{\"sizeClass\":\"small\","
                             "\"image\":\"minimal\",\"bogus\":1}}",
                             NULL),
                         422);
        assert_int_equal(raw_req(e->sock,
                                 "http://x/api/v1alpha1/namespaces/default/sessions/..%2f..", "PUT",
                                 NULL, hello_json, strlen(hello_json), 0, &r) /
                                 100,
                         4);
        raw_done(&r);
        /* A header block beyond the connection's memory limit. */
        big[40 * 1024] = '\0';
        memcpy(big, "X-Big: ", 7);
        memset(big + 7, 'a', 40 * 1024 - 7);
        assert_int_equal(raw_req(e->sock, url, "GET", big, NULL, 0, 0, &r) / 100, 4);
        raw_done(&r);
        /* Nothing changed. */
        assert_int_equal(req(e, "GET", "/api/v1alpha1/sessions", NULL, &j), 200);
        assert_int_equal(json_array_size(json_object_get(j, "items")), 0);
        json_decref(j);
        assert_true(fk_asprintf(&sdir, "%s/state/sessions", e->dir) > 0);
        assert_int_equal(count_entries(sdir), 0);
}

static void test_audit_api(void **state)
{
        struct env *e = *state;
        cleanup_free char *path = NULL, *log = NULL;
        char uid[32];
        json_t *j = NULL;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        reconcile(e);
        assert_int_equal(
                req(e, "DELETE", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, NULL),
                200);
        reconcile(e);
        reconcile(e);
        assert_true(fk_asprintf(&path, "%s/state/audit.log", e->dir) > 0);
        assert_int_equal(fk_read_file(path, 1 << 20, &log, NULL), 0);
        snprintf(uid, sizeof(uid), "\"caller\":\"uid:%u\"", (unsigned)getuid());
        assert_non_null(strstr(log, uid));
        assert_non_null(strstr(log, "\"action\":\"POST /api/v1alpha1/sessions\""));
        assert_non_null(strstr(log, "\"action\":\"DELETE "));
        assert_non_null(strstr(log, "Starting->Running"));
        assert_non_null(strstr(log, "\"action\":\"removed\""));
        assert_null(strstr(log, "\"GET ")); /* reads are not audited */
        /* every line carries the daemon's (injected) clock, not the system's */
        {
                size_t lines = 0, stamped = 0;

                for (const char *p = log; (p = strchr(p, '\n')); p++)
                        lines++;
                for (const char *p = log; (p = strstr(p, "\"time\":\"2026-11-29T")); p++)
                        stamped++;
                assert_true(lines >= 5);
                assert_int_equal(stamped, lines);
        }
        assert_int_equal(req(e, "GET", "/api/v1alpha1/audit/verify", NULL, &j), 200);
        assert_true(json_is_true(json_object_get(j, "ok")));
        assert_true(json_integer_value(json_object_get(j, "lines")) >= 5);
        json_decref(j);
}

struct watcher {
        const char *sock;
        struct raw r;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        atomic_bool stop;
};

static void *watch_thread(void *ud)
{
        struct watcher *w = ud;

        raw_perform(w->sock, "http://x/api/v1alpha1/sessions?watch=1", "GET", NULL, NULL, 0, 30000,
                    &w->r);
        return NULL;
}

/* Waits (up to 20 s) until the stream holds every string of want (NULL-terminated). */
static bool watch_saw(struct watcher *w, const char *const *want)
{
        struct timespec until;
        bool all = false;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 20;
        pthread_mutex_lock(&w->mu);
        for (;;) {
                all = true;
                for (size_t i = 0; want[i]; i++)
                        all = all && w->r.body && strstr(w->r.body, want[i]);
                if (all || pthread_cond_timedwait(&w->cv, &w->mu, &until) != 0)
                        break;
        }
        pthread_mutex_unlock(&w->mu);
        return all;
}

/* The session is made before the watch starts, so the watch's first event is its ADDED
 * (Pending); the reconcile passes after that event must come as a MODIFIED (Running). Each
 * step waits for the stream itself, not for a time. */
static void test_watch(void **state)
{
        struct env *e = *state;
        struct watcher w = {.sock = e->sock};
        pthread_t t;

        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        w.r.mu = &w.mu;
        w.r.cv = &w.cv;
        w.r.stop = &w.stop;
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        assert_int_equal(pthread_create(&t, NULL, watch_thread, &w), 0);
        assert_true(watch_saw(&w, (const char *const[]){"{\"type\":\"ADDED\",\"object\":{", NULL}));
        reconcile(e);
        reconcile(e);
        assert_true(watch_saw(&w, (const char *const[]){"{\"type\":\"MODIFIED\",\"object\":{",
                                                        "\"phase\":\"Running\"", NULL}));
        atomic_store(&w.stop, true);
        pthread_join(t, NULL);
        raw_done(&w.r);
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
}

static int restart_with_tcp(struct env *e, const char *token, unsigned port)
{
        struct fk_error err = {0};
        char path[128];

        env_stop(e);
        snprintf(path, sizeof(path), "%s/token", e->dir);
        assert_int_equal(fk_write_file_atomic(path, token, strlen(token), 0600), 0);
        free(e->cfg->api_token_file);
        free(e->cfg->api_listen);
        e->cfg->api_token_file = strdup(path);
        assert_true(fk_asprintf(&e->cfg->api_listen, "127.0.0.1:%u", port) > 0);
        assert_int_equal(agent_daemon_new(e->cfg, VMM_ACCEL_TCG, &e->ops, &e->aclock, &e->d), 0);
        return api_server_start(e->d, e->cfg, e->sock, &e->api, &err);
}

static void test_tcp_token(void **state)
{
        struct env *e = *state;
        const char *tok = "0123456789abcdef0123456789abcdef";
        unsigned port = 20000 + (unsigned)getpid() % 20000;
        char url[64], auth[128];
        struct raw r;

        assert_int_equal(restart_with_tcp(e, "too-short-token", port), -EINVAL);
        e->api = NULL;
        assert_int_equal(restart_with_tcp(e, tok, port), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/healthz", port);
        assert_int_equal(raw_req(NULL, url, "GET", NULL, NULL, 0, 0, &r), 401);
        raw_done(&r);
        assert_int_equal(raw_req(NULL, url, "GET",
                                 "Authorization: Bearer 0123456789abcdef0123456789abcdeX", NULL, 0,
                                 0, &r),
                         401);
        raw_done(&r);
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
        assert_int_equal(raw_req(NULL, url, "GET", auth, NULL, 0, 0, &r), 200);
        raw_done(&r);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1alpha1/sessions", port);
        assert_int_equal(raw_req(NULL, url, "POST", "Authorization: Bearer nope", hello_json,
                                 strlen(hello_json), 0, &r),
                         401);
        raw_done(&r);
        assert_int_equal(raw_req(NULL, url, "POST", auth, hello_json, strlen(hello_json), 0, &r),
                         201);
        raw_done(&r);
        /* The unix socket needs no token. */
        assert_int_equal(req(e, "GET", "/api/v1alpha1/sessions", NULL, NULL), 200);
}

static int recovered;
static int recover_ckpt(struct agent_daemon *d, const char *key, json_t *data)
{
        (void)d;
        assert_string_equal(key, "default.hello");
        assert_int_equal(json_integer_value(json_object_get(data, "step")), 2);
        recovered++;
        return 0;
}

static void test_recovery(void **state)
{
        struct env *e = *state;
        cleanup_free char *id = NULL, *id2 = NULL, *run = NULL, *ghost = NULL, *jdir = NULL,
                          *text = NULL;
        json_t *j = NULL;

        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        env_stop(e);
        /* A crash in the middle of a boot and of a checkpoint, and a leftover state dir. */
        assert_true(fk_asprintf(&run, "%s/run/sessions/default.hello", e->dir) > 0);
        assert_int_equal(fk_mkdir_p(run, 0700), 0);
        assert_int_equal(agent_journal_begin(e->cfg->state_dir, "boot", "default.hello",
                                             json_pack("{s:s}", "runDir", run), &id),
                         0);
        assert_int_equal(agent_journal_begin(e->cfg->state_dir, "checkpoint", "default.hello",
                                             json_pack("{s:i}", "step", 2), &id2),
                         0);
        assert_int_equal(agent_journal_register("checkpoint", recover_ckpt), 0);
        assert_true(fk_asprintf(&ghost, "%s/state/sessions/default.ghost", e->dir) > 0);
        assert_int_equal(fk_mkdir_p(ghost, 0700), 0);
        env_start(e);
        assert_int_equal(recovered, 1);
        assert_int_equal(access(run, F_OK), -1);
        assert_int_equal(access(ghost, F_OK), -1);
        assert_true(fk_asprintf(&jdir, "%s/state/journal", e->dir) > 0);
        assert_int_equal(count_entries(jdir), 0);
        assert_int_equal(req(e, "GET", "/api/v1alpha1/namespaces/default/sessions/hello", NULL, &j),
                         200);
        text = json_dumps(j, 0);
        json_decref(j);
        assert_non_null(strstr(text, "BootInterrupted"));
        reconcile(e);
        assert_int_equal(atomic_load(&e->fake.boots), 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
                cmocka_unit_test_setup_teardown(test_metrics_session_hook, setup, teardown),
                cmocka_unit_test_setup_teardown(test_idempotency_key, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
                cmocka_unit_test_setup_teardown(test_audit_api, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tcp_token, setup, teardown),
                cmocka_unit_test_setup_teardown(test_recovery, setup, teardown),
        };

        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
