/* SPDX-License-Identifier: MIT */
/* resourceVersion and uid of Session objects. The daemon keeps no version counter of its own,
 * so this remembers a content hash per object and gives it a new resourceVersion from one
 * counter whenever the content changes; a full list also notes deletions (tombstones) so a
 * watch can replay what happened after the resourceVersion it starts from. The counter starts
 * at the wall clock in microseconds: versions keep growing across daemon restarts. */
#include "agent/api/api-internal.h"
#include "common/util.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KUBE_RV_MAX 1024 /* objects and tombstones remembered; the oldest tombstones go first */

struct kube_obj {
        char key[2 * API_PATH_SEGMENT_MAX + 2]; /* ns/name */
        uint64_t hash, rv, created_rv;
        bool gone;
        json_t *last;  /* owned deep copy: the object as last seen (for DELETED) */
        uint64_t seen; /* list pass that saw it last */
};

static struct {
        pthread_mutex_t lock;
        uint64_t next, pass;
        struct kube_obj v[KUBE_RV_MAX];
        size_t n;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t fnv1a(const char *s)
{
        uint64_t h = 1469598103934665603ull;

        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 1099511628211ull;
        return h;
}

static uint64_t next_rv(void)
{
        if (cache.next == 0) {
                struct timespec ts;

                clock_gettime(CLOCK_REALTIME, &ts);
                cache.next = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
        }
        return ++cache.next;
}

void api_kube_uid(const char *ns, const char *name, const char *created, char out[37])
{
        struct fk_sha256 h;
        uint8_t d[FK_SHA256_SIZE];
        char hex[2 * FK_SHA256_SIZE + 1];

        fk_sha256_init(&h);
        fk_sha256_update(&h, ns, strlen(ns) + 1);
        fk_sha256_update(&h, name, strlen(name) + 1);
        fk_sha256_update(&h, created ? created : "", created ? strlen(created) : 0);
        fk_sha256_final(&h, d);
        d[6] = (uint8_t)((d[6] & 0x0f) | 0x50); /* a name-based UUID (version 5 layout) */
        d[8] = (uint8_t)((d[8] & 0x3f) | 0x80);
        fk_hex(d, 16, hex);
        snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

/* Drops the tombstone with the oldest resourceVersion to make room. */
static struct kube_obj *slot_new(void)
{
        size_t oldest = SIZE_MAX;

        if (cache.n < KUBE_RV_MAX)
                return &cache.v[cache.n++];
        for (size_t i = 0; i < cache.n; i++)
                if (cache.v[i].gone && (oldest == SIZE_MAX || cache.v[i].rv < cache.v[oldest].rv))
                        oldest = i;
        if (oldest == SIZE_MAX)
                return NULL;
        json_decref(cache.v[oldest].last);
        cache.v[oldest] = (struct kube_obj){0};
        return &cache.v[oldest];
}

static struct kube_obj *find(const char *key)
{
        for (size_t i = 0; i < cache.n; i++)
                if (strcmp(cache.v[i].key, key) == 0)
                        return &cache.v[i];
        return NULL;
}

/* Stamps obj (apiVersion, kind, uid, resourceVersion) and records it. Locked. */
static void observe(json_t *obj)
{
        json_t *meta = json_object_get(obj, "metadata");
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        char key[sizeof(cache.v[0].key)], uid[37], rv[24];
        struct kube_obj *o;
        char *text;
        uint64_t h;

        if (!ns || !name)
                return;
        json_object_set_new(obj, "apiVersion", json_string(MANIFEST_API_VERSION));
        json_object_set_new(obj, "kind", json_string("Session"));
        api_kube_uid(ns, name, json_string_value(json_object_get(meta, "creationTimestamp")), uid);
        json_object_set_new(meta, "uid", json_string(uid));
        json_object_del(meta, "resourceVersion");
        text = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
        h = text ? fnv1a(text) : 0;
        free(text);
        snprintf(key, sizeof(key), "%s/%s", ns, name);
        o = find(key);
        if (!o || o->gone || o->hash != h) {
                if (!o && (o = slot_new()))
                        snprintf(o->key, sizeof(o->key), "%s", key);
                if (o) {
                        o->rv = next_rv();
                        if (o->gone || !o->created_rv)
                                o->created_rv = o->rv;
                        o->gone = false;
                        o->hash = h;
                }
        }
        if (o) {
                o->seen = cache.pass;
                json_decref(o->last);
                o->last = json_deep_copy(obj);
                snprintf(rv, sizeof(rv), "%" PRIu64, o->rv);
        } else
                snprintf(rv, sizeof(rv), "%" PRIu64, cache.next);
        json_object_set_new(meta, "resourceVersion", json_string(rv));
}

uint64_t api_kube_observe_list(json_t *items)
{
        json_t *it;
        size_t i;
        uint64_t rv;

        pthread_mutex_lock(&cache.lock);
        cache.pass++;
        json_array_foreach(items, i, it) observe(it);
        for (i = 0; i < cache.n; i++) {
                struct kube_obj *o = &cache.v[i];

                if (!o->gone && o->seen != cache.pass) {
                        o->gone = true;
                        o->rv = next_rv();
                }
        }
        rv = cache.next ? cache.next : next_rv(); /* the newest version handed out */
        pthread_mutex_unlock(&cache.lock);
        return rv;
}

void api_kube_observe_one(json_t *obj)
{
        pthread_mutex_lock(&cache.lock);
        observe(obj);
        /* a single GET is not a list pass: keep it from looking unseen */
        {
                struct kube_obj *o = NULL;
                json_t *meta = json_object_get(obj, "metadata");
                char key[sizeof(cache.v[0].key)];

                snprintf(key, sizeof(key), "%s/%s",
                         json_string_value(json_object_get(meta, "namespace")),
                         json_string_value(json_object_get(meta, "name")));
                if ((o = find(key)))
                        o->seen = cache.pass;
        }
        pthread_mutex_unlock(&cache.lock);
}

static int by_rv(const void *a, const void *b)
{
        const struct kube_obj *x = *(struct kube_obj *const *)a, *y = *(struct kube_obj *const *)b;

        return x->rv < y->rv ? -1 : x->rv > y->rv;
}

uint64_t api_kube_changes_since(uint64_t rv,
                                int (*fn)(void *ud, const char *type, json_t *obj, uint64_t rv),
                                void *ud)
{
        struct kube_obj *sel[KUBE_RV_MAX];
        json_t *objs[KUBE_RV_MAX];
        const char *types[KUBE_RV_MAX];
        uint64_t rvs[KUBE_RV_MAX], newest = rv;
        size_t n = 0;

        pthread_mutex_lock(&cache.lock);
        for (size_t i = 0; i < cache.n; i++)
                if (cache.v[i].rv > rv && cache.v[i].last && !(rv == 0 && cache.v[i].gone))
                        sel[n++] = &cache.v[i];
        qsort(sel, n, sizeof(sel[0]), by_rv);
        for (size_t i = 0; i < n; i++) {
                types[i] = sel[i]->gone              ? "DELETED"
                           : sel[i]->created_rv > rv ? "ADDED"
                                                     : "MODIFIED";
                objs[i] = json_deep_copy(sel[i]->last);
                rvs[i] = sel[i]->rv;
                if (objs[i] && sel[i]->gone) {
                        char s[24];

                        snprintf(s, sizeof(s), "%" PRIu64, rvs[i]);
                        json_object_set_new(json_object_get(objs[i], "metadata"), "resourceVersion",
                                            json_string(s));
                }
        }
        pthread_mutex_unlock(&cache.lock);
        for (size_t i = 0; i < n; i++) {
                if (objs[i] && fn(ud, types[i], objs[i], rvs[i]) < 0) {
                        for (; i < n; i++)
                                json_decref(objs[i]);
                        return newest;
                }
                json_decref(objs[i]);
                newest = rvs[i];
        }
        return newest;
}
