/* SPDX-License-Identifier: MIT */
/* The client and its HTTP transport: endpoint list with failover, per-request timeouts, jittered
 * backoff between rounds, a pool of libcurl handles so connections are reused across threads. */
#include "etcd/etcd-internal.h"
#include "common/cleanup.h"
#include "common/curl-load.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_MAX            8
#define REPLY_MAX           (64u << 20)
#define ETCD_DEFAULTS(v, d) ((v) ? (v) : (d))

uint32_t etcd_random32(void)
{
        uint32_t v;

        if (fk_random_bytes(&v, sizeof(v)) < 0)
                v = (uint32_t)(fk_now_mono_ns() * 2654435761u);
        return v;
}

static int normalize_endpoint(const char *e, char **ret)
{
        size_t n = strlen(e);
        int r;

        while (n > 0 && e[n - 1] == '/')
                n--;
        if (n == 0)
                return -EINVAL;
        if (strstr(e, "://"))
                r = fk_asprintf(ret, "%.*s", (int)n, e);
        else
                r = fk_asprintf(ret, "http://%.*s", (int)n, e);
        return r < 0 ? -ENOMEM : 0;
}

static int client_copy_opts(struct etcd_client *c, const struct etcd_options *o)
{
        struct etcd_options d = o ? *o : (struct etcd_options){};

        c->opts.connect_timeout_ms = ETCD_DEFAULTS(d.connect_timeout_ms, 1000);
        c->opts.request_timeout_ms = ETCD_DEFAULTS(d.request_timeout_ms, 5000);
        c->opts.attempts = ETCD_DEFAULTS(d.attempts, 3);
        c->opts.backoff_base_ms = ETCD_DEFAULTS(d.backoff_base_ms, 50);
        c->opts.backoff_max_ms = ETCD_DEFAULTS(d.backoff_max_ms, 2000);
        if ((d.ca_file && !(c->ca_file = strdup(d.ca_file))) ||
            (d.cert_file && !(c->cert_file = strdup(d.cert_file))) ||
            (d.key_file && !(c->key_file = strdup(d.key_file))))
                return -ENOMEM;
        return 0;
}

int etcd_client_new(const char *const *endpoints, const struct etcd_options *opts,
                    struct etcd_client **ret, struct fk_error *reterr)
{
        _cleanup_(etcd_client_freep) struct etcd_client *c = NULL;
        size_t n = 0;
        int r;

        while (endpoints && endpoints[n])
                n++;
        if (n == 0)
                return fk_error_set(reterr, -EINVAL, "etcd: no endpoints given");
        r = fk_curl_load(reterr);
        if (r < 0)
                return r;
        c = calloc(1, sizeof(*c));
        if (!c)
                return fk_error_set(reterr, -ENOMEM, "etcd: out of memory");
        pthread_mutex_init(&c->lock, NULL);
        c->endpoints = calloc(n, sizeof(char *));
        if (!c->endpoints || client_copy_opts(c, opts) < 0)
                return fk_error_set(reterr, -ENOMEM, "etcd: out of memory");
        for (size_t i = 0; i < n; i++) {
                r = normalize_endpoint(endpoints[i], &c->endpoints[i]);
                if (r < 0)
                        return fk_error_set(reterr, r, "etcd: bad endpoint \"%s\"", endpoints[i]);
                c->n_endpoints++;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

struct etcd_client *etcd_client_free(struct etcd_client *c)
{
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_pool; i++)
                curl_easy_cleanup(c->pool[i]);
        free(c->pool);
        for (size_t i = 0; i < c->n_endpoints; i++)
                free(c->endpoints[i]);
        free(c->endpoints);
        free(c->ca_file);
        free(c->cert_file);
        free(c->key_file);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

static CURL *pool_get(struct etcd_client *c)
{
        CURL *h = NULL;

        pthread_mutex_lock(&c->lock);
        if (c->n_pool > 0)
                h = c->pool[--c->n_pool];
        pthread_mutex_unlock(&c->lock);
        return h ? h : curl_easy_init();
}

static void pool_put(struct etcd_client *c, CURL *h)
{
        pthread_mutex_lock(&c->lock);
        if (!c->pool)
                c->pool = calloc(POOL_MAX, sizeof(void *));
        if (c->pool && c->n_pool < POOL_MAX) {
                c->pool[c->n_pool++] = h;
                h = NULL;
        }
        pthread_mutex_unlock(&c->lock);
        if (h)
                curl_easy_cleanup(h);
}

void etcd_curl_setup(struct etcd_client *c, void *curl, bool total)
{
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
        if (total)
                curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)c->opts.request_timeout_ms);
        /* A watch idles for long: keepalive notices a peer that vanished without a FIN. */
        curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, 5L);
        curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, 5L);
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        if (c->ca_file)
                curl_easy_setopt(curl, CURLOPT_CAINFO, c->ca_file);
        if (c->cert_file)
                curl_easy_setopt(curl, CURLOPT_SSLCERT, c->cert_file);
        if (c->key_file)
                curl_easy_setopt(curl, CURLOPT_SSLKEY, c->key_file);
}

int etcd_curl_to_errno(int code)
{
        switch (code) {
        case CURLE_OK:
                return 0;
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
                return -EHOSTUNREACH;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CACERT_BADFILE:
                return -EPROTO;
        case CURLE_ABORTED_BY_CALLBACK:
                return -ECANCELED;
        default:
                return -EIO;
        }
}

struct reply_buf {
        char *data;
        size_t len;
};

static size_t reply_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct reply_buf *b = userdata;
        size_t n = size * nmemb;
        char *p;

        if (b->len + n > REPLY_MAX)
                return 0;
        p = realloc(b->data, b->len + n + 1);
        if (!p)
                return 0;
        memcpy(p + b->len, ptr, n);
        b->data = p;
        b->len += n;
        b->data[b->len] = '\0';
        return n;
}

/* One POST to one endpoint. *ret_sent tells whether the request may have reached etcd. */
static int post_once(struct etcd_client *c, size_t idx, const char *path, const char *body,
                     json_t **ret, bool *ret_sent, struct fk_error *reterr)
{
        struct curl_slist hdr = {.data = (char *)"Content-Type: application/json"};
        cleanup_free char *url = NULL;
        struct reply_buf b = {};
        curl_off_t connect_us = 0;
        long status = 0;
        json_error_t jerr;
        CURLcode rc;
        CURL *h;

        if (fk_asprintf(&url, "%s%s", c->endpoints[idx], path) < 0 || !(h = pool_get(c)))
                return fk_error_set(reterr, -ENOMEM, "etcd: out of memory");
        curl_easy_reset(h);
        etcd_curl_setup(c, h, true);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, &hdr);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, reply_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us);
        pool_put(c, h);
        *ret_sent = rc != CURLE_COULDNT_CONNECT && rc != CURLE_COULDNT_RESOLVE_HOST &&
                    (rc != CURLE_OPERATION_TIMEDOUT || connect_us > 0);
        if (rc != CURLE_OK) {
                free(b.data);
                return fk_error_set(reterr, etcd_curl_to_errno(rc), "etcd %s%s: %s",
                                    c->endpoints[idx], path, curl_easy_strerror(rc));
        }
        *ret = b.data ? json_loadb(b.data, b.len, 0, &jerr) : NULL;
        if (!*ret) {
                int r = fk_error_set(reterr, -EPROTO, "etcd %s%s: HTTP %ld, reply is not JSON",
                                     c->endpoints[idx], path, status);
                free(b.data);
                return r;
        }
        free(b.data);
        return 0;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int call_endpoints(struct etcd_client *c, const char *path, const char *body,
                          bool idempotent, json_t **ret, struct fk_error *e)
{
        int r = -EIO;

        for (unsigned round = 0; round < c->opts.attempts; round++) {
                unsigned start = atomic_load(&c->preferred);

                if (round > 0)
                        sleep_ms(etcd_backoff_ms(round - 1, c->opts.backoff_base_ms,
                                                 c->opts.backoff_max_ms, etcd_random32()));
                for (size_t k = 0; k < c->n_endpoints; k++) {
                        size_t i = (start + k) % c->n_endpoints;
                        _cleanup_(json_decrefp) json_t *reply = NULL;
                        bool sent = false;

                        r = post_once(c, i, path, body, &reply, &sent, e);
                        if (r < 0) {
                                log_debug("%s", e->msg);
                                if (sent && !idempotent)
                                        return r;
                                continue;
                        }
                        atomic_store(&c->preferred, (unsigned)i);
                        r = etcd_reply_error(reply, e);
                        if (r == -EAGAIN && idempotent)
                                continue;
                        if (r < 0)
                                return r;
                        *ret = TAKE_PTR(reply);
                        return 0;
                }
        }
        return r;
}

int etcd_call(struct etcd_client *c, const char *path, json_t *req, bool idempotent, json_t **ret,
              struct fk_error *reterr)
{
        cleanup_free char *body = json_dumps(req, JSON_COMPACT);
        struct fk_error e = {};
        int r;

        if (!body)
                return fk_error_set(reterr, -ENOMEM, "etcd: out of memory");
        r = call_endpoints(c, path, body, idempotent, ret, &e);
        if (r < 0 && reterr)
                *reterr = e;
        return r;
}
