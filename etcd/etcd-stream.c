/* SPDX-License-Identifier: MIT */
/* The watch stream: splits the gateway's chunked body into JSON objects whatever the chunking,
 * and parses one watch response into events. Pure; no I/O. */
#include "etcd/etcd-internal.h"
#include "common/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void etcd_stream_init(struct etcd_stream *s, size_t max)
{
        *s = (struct etcd_stream){.max = max};
}

void etcd_stream_reset(struct etcd_stream *s)
{
        s->len = s->scanned = 0;
        s->depth = 0;
        s->in_string = s->escape = false;
}

void etcd_stream_done(struct etcd_stream *s)
{
        free(s->buf);
        etcd_stream_init(s, s->max);
}

int etcd_stream_feed(struct etcd_stream *s, const void *data, size_t len)
{
        if (len == 0)
                return 0;
        if (s->len + len > s->max + 64)
                return -EMSGSIZE;
        if (s->len + len + 1 > s->alloc) {
                size_t n = s->alloc ? s->alloc : 4096;
                char *p;

                while (n < s->len + len + 1)
                        n *= 2;
                p = realloc(s->buf, n);
                if (!p)
                        return -ENOMEM;
                s->buf = p;
                s->alloc = n;
        }
        memcpy(s->buf + s->len, data, len);
        s->len += len;
        return 0;
}

static void stream_consume(struct etcd_stream *s, size_t n)
{
        /* memmove with a NULL buffer is undefined even for 0 bytes */
        if (s->len > n)
                memmove(s->buf, s->buf + n, s->len - n);
        s->len -= n;
        s->scanned = 0;
}

/* Scans on from s->scanned; returns the length of the first complete object or 0. */
static size_t stream_scan(struct etcd_stream *s)
{
        for (size_t i = s->scanned; i < s->len; i++) {
                char ch = s->buf[i];

                if (s->in_string) {
                        if (s->escape)
                                s->escape = false;
                        else if (ch == '\\')
                                s->escape = true;
                        else if (ch == '"')
                                s->in_string = false;
                        continue;
                }
                if (ch == '"') {
                        s->in_string = true;
                } else if (ch == '{' || ch == '[') {
                        s->depth++;
                } else if (ch == '}' || ch == ']') {
                        if (--s->depth == 0)
                                return i + 1;
                }
        }
        s->scanned = s->len;
        return 0;
}

int etcd_stream_next(struct etcd_stream *s, json_t **ret)
{
        json_error_t jerr;
        size_t skip = 0, n;
        json_t *o;

        if (s->scanned == 0) {
                while (skip < s->len && strchr(" \t\r\n", s->buf[skip]) && s->buf[skip] != '\0')
                        skip++;
                stream_consume(s, skip);
                if (s->len == 0)
                        return 0;
                if (s->buf[0] != '{')
                        return -EPROTO;
        }
        n = stream_scan(s);
        if (n == 0)
                return s->len > s->max ? -EMSGSIZE : 0;
        o = json_loadb(s->buf, n, JSON_ALLOW_NUL, &jerr);
        stream_consume(s, n);
        s->depth = 0;
        if (!o)
                return -EPROTO;
        *ret = o;
        return 1;
}

void etcd_watch_reply_done(struct etcd_watch_reply *r)
{
        for (size_t i = 0; i < r->n_events; i++)
                etcd_kv_done(&r->events[i].kv);
        free(r->events);
        *r = (struct etcd_watch_reply){};
}

static int parse_events(const json_t *arr, struct etcd_watch_reply *r)
{
        size_t n = json_array_size(arr);

        if (!arr)
                return 0;
        if (!json_is_array(arr))
                return -EPROTO;
        if (n == 0)
                return 0;
        r->events = calloc(n, sizeof(*r->events));
        if (!r->events)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const json_t *ev = json_array_get(arr, i);
                const char *type = json_string_value(json_object_get(ev, "type"));
                int k;

                r->n_events++;
                if (!type || strcmp(type, "PUT") == 0)
                        r->events[i].type = ETCD_EVENT_PUT;
                else if (strcmp(type, "DELETE") == 0)
                        r->events[i].type = ETCD_EVENT_DELETE;
                else
                        return -EPROTO;
                k = etcd_parse_kv(json_object_get(ev, "kv"), &r->events[i].kv);
                if (k < 0)
                        return k;
        }
        return 0;
}

int etcd_parse_watch_reply(const json_t *o, struct etcd_watch_reply *ret)
{
        struct etcd_watch_reply r = {};
        const json_t *res = json_object_get(o, "result");
        struct fk_error err = {};
        int k;

        r.error = etcd_reply_error(o, &err);
        if (r.error < 0) {
                snprintf(r.message, sizeof(r.message), "%s", err.msg);
                *ret = r;
                return 0;
        }
        if (!json_is_object(res))
                return -EPROTO;
        r.created = json_is_true(json_object_get(res, "created"));
        r.canceled = json_is_true(json_object_get(res, "canceled"));
        snprintf(r.message, sizeof(r.message), "%s",
                 json_string_value(json_object_get(res, "cancel_reason")) ?: "");
        k = etcd_parse_header_revision(res, &r.header_revision);
        if (k >= 0)
                k = etcd_json_int64(json_object_get(res, "compact_revision"), &r.compact_revision);
        if (k >= 0)
                k = parse_events(json_object_get(res, "events"), &r);
        if (k < 0) {
                etcd_watch_reply_done(&r);
                return k;
        }
        *ret = r;
        return 0;
}
