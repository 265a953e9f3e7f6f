/* SPDX-License-Identifier: MIT */
/* Watches of the sessions collection (?watch=1): newline-delimited JSON events
 * {"type": ADDED|MODIFIED|DELETED|BOOKMARK, "object": ...} after the resourceVersion the client
 * starts from (none or 0: an ADDED for every object first), objects as Session or as a
 * one-row Table, BOOKMARKs when asked for, ending after timeoutSeconds. Changes are found by
 * listing after each reconcile pass (api-kube-rv.c stamps and remembers them). */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KWATCH_POLL_MS     1000
#define KWATCH_BOOKMARK_NS (10ull * 1000 * 1000 * 1000)

struct kwatch {
        struct agent_daemon *d;
        const atomic_bool *stopping;
        struct api_kube_watch_opts o;
        uint64_t rv, revision;
        uint64_t last_emit_ns, end_ns;
        bool sent_columns;
        char *out; /* owned pending bytes */
        size_t out_size, out_off;
};

static int push_event(struct kwatch *w, const char *type, json_t *obj)
{
        return api_watch_event_append(&w->out, &w->out_size, type, obj);
}

static bool wanted(const struct kwatch *w, const json_t *obj)
{
        const char *ns =
                json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));

        return (!w->o.ns[0] || (ns && strcmp(ns, w->o.ns) == 0)) &&
               api_kube_labels_match(&w->o.labels, obj) && api_kube_fields_match(&w->o.fields, obj);
}

static int on_change(void *ud, const char *type, json_t *obj, uint64_t rv)
{
        struct kwatch *w = ud;
        json_t *t;
        int r;

        (void)rv;
        if (!wanted(w, obj))
                return 0;
        if (!w->o.table)
                return push_event(w, type, obj);
        t = api_kube_table(&obj, 1, w->o.include[0] ? w->o.include : NULL, !w->sent_columns,
                           json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                             "resourceVersion")),
                           (int64_t)time(NULL));
        if (!t)
                return -ENOMEM;
        w->sent_columns = true;
        r = push_event(w, type, t);
        json_decref(t);
        return r;
}

static int poll_changes(struct kwatch *w)
{
        json_t *list = NULL;
        int r = agent_daemon_list_json(w->d, &list);

        if (r < 0)
                return r;
        (void)api_kube_observe_list(json_object_get(list, "items"));
        json_decref(list);
        w->rv = api_kube_changes_since(w->rv, on_change, w);
        return 0;
}

static int push_bookmark(struct kwatch *w)
{
        char rv[24];
        json_t *o;
        int r;

        snprintf(rv, sizeof(rv), "%" PRIu64, w->rv);
        o = json_pack("{s:s, s:s, s:{s:s}}", "kind", "Session", "apiVersion", MANIFEST_API_VERSION,
                      "metadata", "resourceVersion", rv);
        if (!o)
                return -ENOMEM;
        r = push_event(w, "BOOKMARK", o);
        json_decref(o);
        return r;
}

static ssize_t kwatch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct kwatch *w = cls;
        size_t n;

        (void)pos;
        while (w->out_off == w->out_size) {
                uint64_t now = fk_now_mono_ns();

                if (atomic_load(w->stopping) || (w->end_ns && now >= w->end_ns))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                free(w->out);
                w->out = NULL;
                w->out_size = w->out_off = 0;
                if (poll_changes(w) < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (w->out_size == 0 && w->o.bookmarks &&
                    now - w->last_emit_ns > KWATCH_BOOKMARK_NS && push_bookmark(w) < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (w->out_size == 0)
                        agent_daemon_wait_pass(w->d, &w->revision, KWATCH_POLL_MS);
                else
                        w->last_emit_ns = now;
        }
        n = FK_MIN(max, w->out_size - w->out_off);
        memcpy(buf, w->out + w->out_off, n);
        w->out_off += n;
        return (ssize_t)n;
}

static void kwatch_free(void *cls)
{
        struct kwatch *w = cls;

        free(w->out);
        free(w);
}

int api_kube_watch(struct MHD_Connection *c, struct api_request *req,
                   const struct api_kube_watch_opts *o, const atomic_bool *stopping)
{
        struct kwatch *w = calloc(1, sizeof(*w));
        struct MHD_Response *resp;
        int r;

        if (!w)
                return MHD_NO;
        w->d = req->d;
        w->stopping = stopping;
        w->o = *o;
        w->rv = o->since;
        w->last_emit_ns = fk_now_mono_ns();
        if (o->timeout_s)
                w->end_ns = w->last_emit_ns + (uint64_t)o->timeout_s * 1000000000ull;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, kwatch_read, w,
                                                 kwatch_free);
        if (!resp) {
                kwatch_free(w);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        api_capture_note(MHD_HTTP_OK, NULL, NULL);
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}
