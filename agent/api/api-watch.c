/* SPDX-License-Identifier: MIT */
/* Operational endpoints: GET /metrics, GET /api/v1alpha1/audit/verify, and the watch of
 * session changes (GET .../sessions?watch=1): a chunked stream of JSON lines
 * {"type": ADDED|MODIFIED|DELETED, "object": Session}, diffed after each reconcile pass. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WATCH_POLL_MS     1000
#define WATCH_BOOKMARK_NS (30ull * 1000 * 1000 * 1000)

int api_handle_metrics(struct MHD_Connection *c, struct api_request *req)
{
        struct MHD_Response *resp;
        char *text = NULL;
        int r;

        if (strcmp(req->method, "GET") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "%s not allowed here", req->method);
        r = agent_daemon_metrics_text(req->d, &text);
        if (r < 0)
                return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError", NULL,
                                       "%s", strerror(-r));
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}

int api_handle_audit_verify(struct MHD_Connection *c, struct api_request *req)
{
        cleanup_free char *path = NULL;
        struct fk_error err = {0};
        size_t lines = 0, bad = 0;
        int r;

        if (strcmp(req->method, "GET") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "%s not allowed here", req->method);
        if (fk_asprintf(&path, "%s/audit.log", req->cfg->state_dir) < 0)
                return MHD_NO;
        r = agent_audit_verify(path, &lines, &bad, &err);
        if (r < 0 && r != -EBADMSG)
                return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError", NULL,
                                       "%s", err.msg);
        return api_reply_json(c, MHD_HTTP_OK,
                              json_pack("{s:s, s:s, s:b, s:I, s:I, s:s}", "kind", "AuditVerify",
                                        "path", path, "ok", r >= 0, "lines", (json_int_t)lines,
                                        "badLine", (json_int_t)bad, "message",
                                        r >= 0 ? "chain intact" : err.msg),
                              NULL);
}

struct watch {
        struct agent_daemon *d;
        const atomic_bool *stopping;
        char ns[API_PATH_SEGMENT_MAX]; /* "" = all namespaces */
        json_t *last;                  /* owned: key -> dumped Session */
        uint64_t revision;
        uint64_t last_emit_ns; /* a BOOKMARK after 30 s of silence finds gone clients */
        char *out;             /* owned pending bytes */
        size_t out_size, out_off;
};

static void watch_free(void *cls)
{
        struct watch *w = cls;

        json_decref(w->last);
        free(w->out);
        free(w);
}

int api_watch_event_append(char **out, size_t *out_size, const char *type, json_t *obj)
{
        json_t *ev = json_pack("{s:s, s:O}", "type", type, "object", obj);
        char *line = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
        size_t n = line ? strlen(line) : 0;
        char *p;

        json_decref(ev);
        if (!line)
                return -ENOMEM;
        p = realloc(*out, *out_size + n + 1);
        if (!p) {
                free(line);
                return -ENOMEM;
        }
        memcpy(p + *out_size, line, n);
        p[*out_size + n] = '\n';
        *out = p;
        *out_size += n + 1;
        free(line);
        return 0;
}

static int emit(struct watch *w, const char *type, json_t *obj)
{
        return api_watch_event_append(&w->out, &w->out_size, type, obj);
}

/* Compares the current list with the last one and queues the events. */
static int watch_diff(struct watch *w)
{
        json_t *list = NULL, *now = json_object(), *it, *v;
        const char *key;
        size_t i;
        int r;

        r = agent_daemon_list_json(w->d, &list);
        if (r < 0 || !now) {
                json_decref(now);
                return r < 0 ? r : -ENOMEM;
        }
        json_array_foreach(json_object_get(list, "items"), i, it)
        {
                json_t *meta = json_object_get(it, "metadata");
                const char *ns = json_string_value(json_object_get(meta, "namespace"));
                const char *name = json_string_value(json_object_get(meta, "name"));
                char k[2 * API_PATH_SEGMENT_MAX + 2];
                json_t *old;

                if (!ns || !name || (w->ns[0] && strcmp(ns, w->ns) != 0))
                        continue;
                snprintf(k, sizeof(k), "%s/%s", ns, name);
                old = json_object_get(w->last, k);
                if (!old || !json_equal(old, it))
                        r = emit(w, old ? "MODIFIED" : "ADDED", it);
                json_object_set(now, k, it);
        }
        json_object_foreach(w->last, key, v)
        {
                if (!json_object_get(now, key))
                        r = emit(w, "DELETED", v);
        }
        json_decref(w->last);
        w->last = now;
        json_decref(list);
        return r;
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct watch *w = cls;
        size_t n;

        (void)pos;
        while (w->out_off == w->out_size) {
                if (atomic_load(w->stopping))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                free(w->out);
                w->out = NULL;
                w->out_size = w->out_off = 0;
                if (watch_diff(w) < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (w->out_size == 0 && fk_now_mono_ns() - w->last_emit_ns > WATCH_BOOKMARK_NS) {
                        json_t *o = json_pack("{s:s, s:I}", "kind", "Bookmark", "revision",
                                              (json_int_t)w->revision);

                        if (!o || emit(w, "BOOKMARK", o) < 0) {
                                json_decref(o);
                                return MHD_CONTENT_READER_END_WITH_ERROR;
                        }
                        json_decref(o);
                }
                if (w->out_size == 0)
                        agent_daemon_wait_pass(w->d, &w->revision, WATCH_POLL_MS);
                else
                        w->last_emit_ns = fk_now_mono_ns();
        }
        n = FK_MIN(max, w->out_size - w->out_off);
        memcpy(buf, w->out + w->out_off, n);
        w->out_off += n;
        return (ssize_t)n;
}

int api_handle_watch(struct MHD_Connection *c, struct api_request *req, const atomic_bool *stopping)
{
        struct MHD_Response *resp;
        struct watch *w = calloc(1, sizeof(*w));
        int r;

        if (!w || !(w->last = json_object())) {
                free(w);
                return MHD_NO;
        }
        w->d = req->d;
        w->last_emit_ns = fk_now_mono_ns();
        w->stopping = stopping;
        if (req->route.kind == API_ROUTE_NS_SESSIONS)
                snprintf(w->ns, sizeof(w->ns), "%s", req->route.ns);
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, watch_read, w,
                                                 watch_free);
        if (!resp) {
                watch_free(w);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json-seq");
        api_capture_note(MHD_HTTP_OK, NULL, NULL);
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}
