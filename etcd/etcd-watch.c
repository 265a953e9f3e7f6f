/* SPDX-License-Identifier: MIT */
/* A watch on its own thread: one streaming POST /v3/watch at a time over a curl multi handle (so
 * etcd_watch_free() can wake it), reconnecting with failover and jittered backoff, resuming at the
 * last delivered revision + 1 so no event is missed or delivered twice. */
#include "etcd/etcd-internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WATCH_MSG_MAX (64u << 20)

struct etcd_watch {
        struct etcd_client *c;
        char *key;
        unsigned flags;
        etcd_watch_fn fn;
        void *userdata;
        CURLM *multi;
        pthread_t thread;
        bool thread_started;
        atomic_bool stop;
        _Atomic int64_t next_rev; /* 0 until etcd said where "now" is */
        atomic_uint connects;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool ready, compacted;     /* under lock */
        struct etcd_stream stream; /* the watch thread's only */
        bool created;              /* this connection got its "created" reply */
        int conn_error;            /* why the write callback aborted the transfer */
};

const char *etcd_event_type_to_string(enum etcd_event_type t)
{
        static const char *const names[] = {
                [ETCD_EVENT_PUT] = "PUT",
                [ETCD_EVENT_DELETE] = "DELETE",
                [ETCD_EVENT_COMPACTED] = "COMPACTED",
        };

        return (size_t)t < ARRAY_SIZE(names) ? names[t] : NULL;
}

static void watch_signal(struct etcd_watch *w, bool ready, bool compacted)
{
        pthread_mutex_lock(&w->lock);
        w->ready |= ready;
        w->compacted |= compacted;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

/* Delivers the events of one reply that are not older than next_rev (a resumed watch may repeat
 * what we saw), then moves next_rev past them. A revision is never split across replies. */
static void watch_deliver(struct etcd_watch *w, const struct etcd_watch_reply *r)
{
        int64_t from = atomic_load(&w->next_rev), last = 0;

        for (size_t i = 0; i < r->n_events; i++) {
                const struct etcd_watch_event *ev = &r->events[i];

                if (ev->kv.mod_revision < from)
                        continue;
                w->fn(ev->type, &ev->kv, ev->kv.mod_revision, w->userdata);
                last = FK_MAX(last, ev->kv.mod_revision);
        }
        if (last > 0)
                atomic_store(&w->next_rev, last + 1);
        else if (r->n_events == 0 && !r->created && r->header_revision >= from && from > 0)
                /* Progress notification: everything up to header_revision was sent. */
                atomic_store(&w->next_rev, r->header_revision + 1);
}

/* Handles one reply; returns < 0 to end the connection. */
static int watch_handle(struct etcd_watch *w, const struct etcd_watch_reply *r)
{
        if (r->error < 0) {
                log_debug("etcd watch %s: %s", w->key, r->message);
                return r->error;
        }
        if (r->compact_revision > 0) {
                w->fn(ETCD_EVENT_COMPACTED, NULL, r->compact_revision, w->userdata);
                watch_signal(w, false, true);
                return -ESTALE;
        }
        if (r->canceled) {
                log_debug("etcd watch %s: canceled: %s", w->key, r->message);
                return -ECANCELED;
        }
        if (r->created) {
                int64_t zero = 0;

                /* From "now": the reply's header revision is what we have seen. */
                atomic_compare_exchange_strong(&w->next_rev, &zero, r->header_revision + 1);
                w->created = true;
                watch_signal(w, true, false);
        }
        watch_deliver(w, r);
        return 0;
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct etcd_watch *w = userdata;
        size_t n = size * nmemb;
        int r;

        r = etcd_stream_feed(&w->stream, ptr, n);
        while (r >= 0) {
                _cleanup_(json_decrefp) json_t *o = NULL;
                struct etcd_watch_reply reply;

                r = etcd_stream_next(&w->stream, &o);
                if (r <= 0)
                        break;
                r = etcd_parse_watch_reply(o, &reply);
                if (r < 0)
                        break;
                r = watch_handle(w, &reply);
                etcd_watch_reply_done(&reply);
        }
        if (r < 0) {
                w->conn_error = r;
                return 0; /* aborts the transfer */
        }
        return n;
}

static CURL *watch_easy(struct etcd_watch *w, size_t idx, const char *body, struct curl_slist *hdr,
                        char **url)
{
        CURL *h;

        if (fk_asprintf(url, "%s/v3/watch", w->c->endpoints[idx]) < 0)
                return NULL;
        h = curl_easy_init();
        if (!h)
                return NULL;
        etcd_curl_setup(w->c, h, false);
        curl_easy_setopt(h, CURLOPT_URL, *url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, watch_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
        return h;
}

/* Runs one streaming connection to endpoint idx until it ends or we are stopped. */
static int watch_connection(struct etcd_watch *w, size_t idx)
{
        struct curl_slist hdr = {.data = (char *)"Content-Type: application/json"};
        _cleanup_(json_decrefp) json_t *req = NULL;
        cleanup_free char *body = NULL, *url = NULL;
        CURLcode rc = CURLE_OK;
        int running = 1;
        CURLMsg *msg;
        CURL *h;

        req = etcd_req_watch_create(w->key, w->flags, atomic_load(&w->next_rev));
        if (!req || json_object_set_new(json_object_get(req, "create_request"), "progress_notify",
                                        json_true()) < 0)
                return -ENOMEM;
        body = json_dumps(req, JSON_COMPACT);
        h = body ? watch_easy(w, idx, body, &hdr, &url) : NULL;
        if (!h)
                return -ENOMEM;
        etcd_stream_reset(&w->stream);
        w->created = false;
        w->conn_error = 0;
        atomic_fetch_add(&w->connects, 1);
        curl_multi_add_handle(w->multi, h);
        while (running && !atomic_load(&w->stop)) {
                if (curl_multi_perform(w->multi, &running) != CURLM_OK)
                        break;
                if (running)
                        curl_multi_poll(w->multi, NULL, 0, 1000, NULL);
        }
        while ((msg = curl_multi_info_read(w->multi, &running)))
                if (msg->msg == CURLMSG_DONE)
                        rc = msg->data.result;
        curl_multi_remove_handle(w->multi, h);
        curl_easy_cleanup(h);
        if (atomic_load(&w->stop))
                return -ECANCELED;
        if (w->conn_error < 0)
                return w->conn_error;
        log_debug("etcd watch %s: connection ended: %s", url, curl_easy_strerror(rc));
        return rc == CURLE_OK ? -ECONNRESET : etcd_curl_to_errno(rc);
}

/* Sleeps ms, returning early when etcd_watch_free() wakes the multi handle. */
static void watch_sleep(struct etcd_watch *w, unsigned ms)
{
        uint64_t end = fk_now_mono_ns() + (uint64_t)ms * 1000000u;

        while (!atomic_load(&w->stop)) {
                uint64_t now = fk_now_mono_ns();

                if (now >= end)
                        break;
                curl_multi_poll(w->multi, NULL, 0, (int)((end - now) / 1000000u) + 1, NULL);
        }
}

static void *watch_thread(void *arg)
{
        struct etcd_watch *w = arg;
        size_t idx = atomic_load(&w->c->preferred) % w->c->n_endpoints, failed = 0;
        unsigned round = 0;

        while (!atomic_load(&w->stop)) {
                int r = watch_connection(w, idx);

                if (r == -ECANCELED && atomic_load(&w->stop))
                        break;
                if (r == -ESTALE)
                        break;
                if (w->created)
                        round = 0, failed = 0;
                idx = (idx + 1) % w->c->n_endpoints;
                /* Back off once every endpoint failed in a row. */
                if (++failed >= w->c->n_endpoints) {
                        failed = 0;
                        watch_sleep(w, etcd_backoff_ms(round++, w->c->opts.backoff_base_ms,
                                                       w->c->opts.backoff_max_ms, etcd_random32()));
                }
        }
        return NULL;
}

int etcd_watch_new(struct etcd_client *c, const char *key, unsigned flags, int64_t start_revision,
                   etcd_watch_fn fn, void *userdata, struct etcd_watch **ret,
                   struct fk_error *reterr)
{
        struct etcd_watch *w;
        int r;

        if (!fn || start_revision < 0)
                return fk_error_set(reterr, -EINVAL, "etcd watch: bad arguments");
        w = calloc(1, sizeof(*w));
        if (!w)
                return fk_error_set(reterr, -ENOMEM, "etcd watch: out of memory");
        *w = (struct etcd_watch){.c = c, .flags = flags, .fn = fn, .userdata = userdata};
        atomic_store(&w->next_rev, start_revision);
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        etcd_stream_init(&w->stream, WATCH_MSG_MAX);
        w->key = strdup(key);
        w->multi = curl_multi_init();
        if (!w->key || !w->multi) {
                etcd_watch_free(w);
                return fk_error_set(reterr, -ENOMEM, "etcd watch: out of memory");
        }
        r = -pthread_create(&w->thread, NULL, watch_thread, w);
        if (r < 0) {
                etcd_watch_free(w);
                return fk_error_set(reterr, r, "etcd watch: cannot start thread: %s", strerror(-r));
        }
        w->thread_started = true;
        *ret = w;
        return 0;
}

int etcd_watch_wait_ready(struct etcd_watch *w, unsigned timeout_ms)
{
        struct timespec ts;
        int r = 0;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L)
                ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&w->lock);
        while (!w->ready && !w->compacted && r == 0)
                r = pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        r = w->compacted ? -ESTALE : w->ready ? 0 : -ETIMEDOUT;
        pthread_mutex_unlock(&w->lock);
        return r;
}

int64_t etcd_watch_next_revision(struct etcd_watch *w)
{
        return atomic_load(&w->next_rev);
}

unsigned etcd_watch_connects(struct etcd_watch *w)
{
        return atomic_load(&w->connects);
}

struct etcd_watch *etcd_watch_free(struct etcd_watch *w)
{
        if (!w)
                return NULL;
        if (w->thread_started) {
                atomic_store(&w->stop, true);
                curl_multi_wakeup(w->multi);
                pthread_join(w->thread, NULL);
        }
        if (w->multi)
                curl_multi_cleanup(w->multi);
        etcd_stream_done(&w->stream);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w->key);
        free(w);
        return NULL;
}
