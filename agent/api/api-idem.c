/* SPDX-License-Identifier: MIT */
/* Idempotency-Key for POST: the first reply to (caller, key) is kept (in memory, 24 h, at most
 * API_IDEM_MAX entries) and replayed to every repeat with the same request; a concurrent
 * repeat waits for the first to finish; the same key with another request is refused. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <pthread.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#define API_IDEM_MAX    1024
#define API_IDEM_TTL_NS (24ull * 3600 * 1000 * 1000 * 1000)

struct idem_entry {
        char *key; /* owned "<caller> <Idempotency-Key>" */
        char fingerprint[2 * FK_SHA256_SIZE + 1];
        bool done;
        struct api_capture result; /* owned strings */
        uint64_t created_ns;
};

struct api_idem {
        pthread_mutex_t lock;
        pthread_cond_t done;
        struct idem_entry e[API_IDEM_MAX];
        size_t n;
};

static __thread struct api_capture *tls_capture;

struct api_idem *api_idem_new(void)
{
        struct api_idem *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        pthread_mutex_init(&m->lock, NULL);
        pthread_cond_init(&m->done, NULL);
        return m;
}

void api_capture_done(struct api_capture *c)
{
        free(c->body);
        free(c->apply);
        *c = (struct api_capture){0};
}

struct api_idem *api_idem_free(struct api_idem *m)
{
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n; i++) {
                free(m->e[i].key);
                api_capture_done(&m->e[i].result);
        }
        pthread_cond_destroy(&m->done);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

void api_capture_begin(struct api_capture *c)
{
        *c = (struct api_capture){0};
        tls_capture = c;
}

void api_capture_end(void)
{
        tls_capture = NULL;
}

void api_capture_note(unsigned status, const char *text, const char *apply)
{
        struct api_capture *c = tls_capture;

        if (!c)
                return;
        api_capture_done(c);
        c->status = status;
        c->body = text ? strdup(text) : NULL;
        c->apply = apply ? strdup(apply) : NULL;
}

static void drop(struct api_idem *m, size_t i)
{
        free(m->e[i].key);
        api_capture_done(&m->e[i].result);
        m->e[i] = m->e[--m->n];
}

static void expire(struct api_idem *m, uint64_t now)
{
        for (size_t i = m->n; i-- > 0;)
                if (m->e[i].done && now - m->e[i].created_ns > API_IDEM_TTL_NS)
                        drop(m, i);
        /* Full: forget the oldest finished entry. */
        while (m->n == API_IDEM_MAX) {
                size_t oldest = SIZE_MAX;

                for (size_t i = 0; i < m->n; i++)
                        if (m->e[i].done &&
                            (oldest == SIZE_MAX || m->e[i].created_ns < m->e[oldest].created_ns))
                                oldest = i;
                if (oldest == SIZE_MAX)
                        break;
                drop(m, oldest);
        }
}

static struct idem_entry *find(struct api_idem *m, const char *key)
{
        for (size_t i = 0; i < m->n; i++)
                if (strcmp(m->e[i].key, key) == 0)
                        return &m->e[i];
        return NULL;
}

int api_idem_begin(struct api_idem *m, const char *key, const char *fingerprint,
                   struct api_capture *ret_replay)
{
        struct idem_entry *e;
        int r = 0;

        pthread_mutex_lock(&m->lock);
        expire(m, fk_now_mono_ns());
        while ((e = find(m, key)) && !e->done && strcmp(e->fingerprint, fingerprint) == 0)
                pthread_cond_wait(&m->done, &m->lock);
        if (e && strcmp(e->fingerprint, fingerprint) != 0)
                r = -EINVAL;
        else if (e) {
                *ret_replay = (struct api_capture){
                        .status = e->result.status,
                        .body = e->result.body ? strdup(e->result.body) : NULL,
                        .apply = e->result.apply ? strdup(e->result.apply) : NULL,
                };
                r = 1;
        } else if (m->n == API_IDEM_MAX)
                r = -ENOSPC;
        else {
                e = &m->e[m->n];
                *e = (struct idem_entry){.key = strdup(key), .created_ns = fk_now_mono_ns()};
                if (!e->key)
                        r = -ENOMEM;
                else {
                        snprintf(e->fingerprint, sizeof(e->fingerprint), "%s", fingerprint);
                        m->n++;
                }
        }
        pthread_mutex_unlock(&m->lock);
        return r;
}

void api_idem_finish(struct api_idem *m, const char *key, struct api_capture *result)
{
        struct idem_entry *e;

        pthread_mutex_lock(&m->lock);
        e = find(m, key);
        if (e && !e->done) {
                /* Streamed or failed-to-render replies cannot be replayed: forget the key. */
                if (result->status == 0 || !result->body)
                        drop(m, (size_t)(e - m->e));
                else {
                        e->result = *result;
                        *result = (struct api_capture){0};
                        e->done = true;
                }
        }
        pthread_cond_broadcast(&m->done);
        pthread_mutex_unlock(&m->lock);
}

int api_reply_capture(struct MHD_Connection *c, const struct api_capture *cap)
{
        struct MHD_Response *resp;
        int r;

        api_capture_note(cap->status, cap->body, cap->apply);
        resp = MHD_create_response_from_buffer(strlen(cap->body), cap->body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Idempotency-Replayed", "true");
        if (cap->apply)
                MHD_add_response_header(resp, "X-Forklet-Apply", cap->apply);
        r = MHD_queue_response(c, cap->status, resp);
        MHD_destroy_response(resp);
        return r;
}
