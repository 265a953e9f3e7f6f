/* SPDX-License-Identifier: MIT */
/* Pure JSON request builders and reply parsers for the etcd v3 gateway: keys and values travel
 * base64-encoded, int64 fields as decimal strings, default (zero) fields are omitted. */
#include "etcd/etcd-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_b64(json_t *o, const char *field, const void *data, size_t len)
{
        cleanup_free char *s = NULL;

        if (fk_base64_encode(data, len, &s) < 0)
                return -ENOMEM;
        return json_object_set_new(o, field, json_string(s)) < 0 ? -ENOMEM : 0;
}

static int set_i64(json_t *o, const char *field, int64_t v)
{
        char buf[32];

        snprintf(buf, sizeof(buf), "%" PRId64, v);
        return json_object_set_new(o, field, json_string(buf)) < 0 ? -ENOMEM : 0;
}

/* Sets "key" and, for a prefix, "range_end". The empty key stands for "\0" as etcd wants. */
static int set_key_range(json_t *o, const char *key, const char *range_end, unsigned flags)
{
        size_t klen = strlen(key);
        int r;

        if ((flags & ETCD_PREFIX) && range_end)
                return -EINVAL;
        r = klen ? set_b64(o, "key", key, klen) : set_b64(o, "key", "", 1);
        if (r < 0)
                return r;
        if (flags & ETCD_PREFIX) {
                cleanup_free char *end = NULL;
                size_t elen;

                r = etcd_prefix_range_end(key, klen, &end, &elen);
                if (r < 0)
                        return r;
                return set_b64(o, "range_end", end, elen);
        }
        if (range_end)
                return set_b64(o, "range_end", range_end, strlen(range_end));
        return 0;
}

json_t *etcd_req_range(const char *key, const char *range_end, unsigned flags)
{
        json_t *o = json_object();

        if (!o || set_key_range(o, key, range_end, flags) < 0)
                return json_decref(o), NULL;
        return o;
}

json_t *etcd_req_put(const char *key, const void *value, size_t len, int64_t lease)
{
        json_t *o = json_object();

        if (!o || set_b64(o, "key", key, strlen(key)) < 0 || set_b64(o, "value", value, len) < 0 ||
            (lease != 0 && set_i64(o, "lease", lease) < 0))
                return json_decref(o), NULL;
        return o;
}

json_t *etcd_req_delete(const char *key, unsigned flags)
{
        return etcd_req_range(key, NULL, flags);
}

/* compare: [{target MOD|CREATE, result EQUAL, key, <mod|create>_revision}], success: [put],
 * failure: [range key] so a loser learns the current mod_revision in the same round trip. */
/* A txn: if key's revision (create: 0, or mod) equals expected then op (taken) else get it. */
static json_t *txn_req(const char *key, int64_t expected_mod_revision, const char *op_name,
                       json_t *op)
{
        json_t *cmp = json_object(), *get = etcd_req_range(key, NULL, 0), *o = json_object();
        bool create = expected_mod_revision == 0;
        int r = -ENOMEM;

        if (cmp && op && get && o) {
                r = set_b64(cmp, "key", key, strlen(key));
                if (r >= 0)
                        r = json_object_set_new(cmp, "target",
                                                json_string(create ? "CREATE" : "MOD"));
                if (r >= 0)
                        r = json_object_set_new(cmp, "result", json_string("EQUAL"));
                if (r >= 0)
                        r = set_i64(cmp, create ? "create_revision" : "mod_revision",
                                    expected_mod_revision);
                if (r >= 0)
                        r = json_object_set_new(o, "compare", json_pack("[O]", cmp));
                if (r >= 0)
                        r = json_object_set_new(o, "success", json_pack("[{s:O}]", op_name, op));
                if (r >= 0)
                        r = json_object_set_new(o, "failure",
                                                json_pack("[{s:O}]", "request_range", get));
        }
        json_decref(cmp);
        json_decref(op);
        json_decref(get);
        if (r < 0)
                return json_decref(o), NULL;
        return o;
}

json_t *etcd_req_txn_cas(const char *key, int64_t expected_mod_revision, const void *value,
                         size_t len, int64_t lease)
{
        return txn_req(key, expected_mod_revision, "request_put",
                       etcd_req_put(key, value, len, lease));
}

json_t *etcd_req_txn_delete(const char *key, int64_t expected_mod_revision)
{
        return txn_req(key, expected_mod_revision, "request_delete_range", etcd_req_delete(key, 0));
}

json_t *etcd_req_watch_create(const char *key, unsigned flags, int64_t start_revision)
{
        json_t *cr = etcd_req_range(key, NULL, flags);

        if (!cr)
                return NULL;
        if (start_revision > 0 && set_i64(cr, "start_revision", start_revision) < 0)
                return json_decref(cr), NULL;
        return json_pack("{s:o}", "create_request", cr);
}

void etcd_kv_done(struct etcd_kv *kv)
{
        free(kv->key);
        free(kv->value);
        *kv = (struct etcd_kv){};
}

static int parse_b64_field(const json_t *o, const char *field, char **ret, size_t *ret_len)
{
        const json_t *v = json_object_get(o, field);
        void *data = NULL;
        int r;

        if (v && !json_is_string(v))
                return -EPROTO;
        r = fk_base64_decode(v ? json_string_value(v) : "", v ? json_string_length(v) : 0, &data,
                             ret_len);
        if (r < 0)
                return r == -EINVAL ? -EPROTO : r;
        *ret = data;
        return 0;
}

int etcd_parse_kv(const json_t *o, struct etcd_kv *kv)
{
        int r;

        *kv = (struct etcd_kv){};
        if (!json_is_object(o))
                return -EPROTO;
        r = parse_b64_field(o, "key", &kv->key, &kv->key_len);
        if (r >= 0)
                r = parse_b64_field(o, "value", &kv->value, &kv->value_len);
        if (r >= 0)
                r = etcd_json_int64(json_object_get(o, "create_revision"), &kv->create_revision);
        if (r >= 0)
                r = etcd_json_int64(json_object_get(o, "mod_revision"), &kv->mod_revision);
        if (r >= 0)
                r = etcd_json_int64(json_object_get(o, "version"), &kv->version);
        if (r >= 0)
                r = etcd_json_int64(json_object_get(o, "lease"), &kv->lease);
        return r;
}

struct etcd_kvs *etcd_kvs_free(struct etcd_kvs *kvs)
{
        if (!kvs)
                return NULL;
        for (size_t i = 0; i < kvs->n; i++)
                etcd_kv_done(&kvs->kvs[i]);
        free(kvs->kvs);
        free(kvs);
        return NULL;
}

int etcd_parse_header_revision(const json_t *reply, int64_t *ret)
{
        return etcd_json_int64(json_object_get(json_object_get(reply, "header"), "revision"), ret);
}

int etcd_parse_range(const json_t *reply, struct etcd_kvs **ret, int64_t *ret_revision)
{
        _cleanup_(etcd_kvs_freep) struct etcd_kvs *kvs = calloc(1, sizeof(*kvs));
        const json_t *arr = json_object_get(reply, "kvs");
        int64_t rev;
        int r;

        if (!kvs)
                return -ENOMEM;
        if (arr && !json_is_array(arr))
                return -EPROTO;
        r = etcd_parse_header_revision(reply, &rev);
        if (r >= 0)
                r = etcd_json_int64(json_object_get(reply, "count"), &kvs->count);
        if (r < 0)
                return r;
        kvs->more = json_is_true(json_object_get(reply, "more"));
        if (arr && json_array_size(arr) > 0) {
                kvs->kvs = calloc(json_array_size(arr), sizeof(*kvs->kvs));
                if (!kvs->kvs)
                        return -ENOMEM;
                for (size_t i = 0; i < json_array_size(arr); i++) {
                        kvs->n++;
                        r = etcd_parse_kv(json_array_get(arr, i), &kvs->kvs[i]);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(kvs);
        if (ret_revision)
                *ret_revision = rev;
        return 0;
}

int etcd_parse_txn_cas(const json_t *reply, bool *ret_succeeded, int64_t *ret_revision)
{
        bool ok = json_is_true(json_object_get(reply, "succeeded"));
        const json_t *resp0 = json_array_get(json_object_get(reply, "responses"), 0);
        _cleanup_(etcd_kvs_freep) struct etcd_kvs *kvs = NULL;
        int64_t rev = 0;
        int r;

        if (ok) {
                r = etcd_parse_header_revision(reply, &rev);
                if (r < 0)
                        return r;
        } else {
                const json_t *range = json_object_get(resp0, "response_range");

                if (!range)
                        return -EPROTO;
                r = etcd_parse_range(range, &kvs, NULL);
                if (r < 0)
                        return r;
                rev = kvs->n > 0 ? kvs->kvs[0].mod_revision : 0;
        }
        *ret_succeeded = ok;
        if (ret_revision)
                *ret_revision = rev;
        return 0;
}
