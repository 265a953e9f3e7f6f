/* SPDX-License-Identifier: MIT */
/* KV and lease operations: build the request, call the gateway, parse the reply. */
#include "etcd/etcd-internal.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

static int oom(struct fk_error *reterr)
{
        return fk_error_set(reterr, -ENOMEM, "etcd: out of memory");
}

static int bad_reply(struct fk_error *reterr, const char *path, int r)
{
        return fk_error_set(reterr, r == -ENOMEM ? r : -EPROTO, "etcd %s: unexpected reply", path);
}

int etcd_range(struct etcd_client *c, const char *key, const char *range_end, unsigned flags,
               struct etcd_kvs **ret, int64_t *ret_revision, struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = NULL, *reply = NULL;
        int r;

        if ((flags & ETCD_PREFIX) && range_end)
                return fk_error_set(reterr, -EINVAL, "etcd: range_end with ETCD_PREFIX");
        req = etcd_req_range(key, range_end, flags);
        if (!req)
                return oom(reterr);
        r = etcd_call(c, "/v3/kv/range", req, true, &reply, reterr);
        if (r < 0)
                return r;
        r = etcd_parse_range(reply, ret, ret_revision);
        return r < 0 ? bad_reply(reterr, "/v3/kv/range", r) : 0;
}

int etcd_put(struct etcd_client *c, const char *key, const void *value, size_t len, int64_t lease,
             int64_t *ret_revision, struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = etcd_req_put(key, value, len, lease);
        _cleanup_(json_decrefp) json_t *reply = NULL;
        int64_t rev;
        int r;

        if (!req)
                return oom(reterr);
        /* A repeated put writes the same value again: safe to retry. */
        r = etcd_call(c, "/v3/kv/put", req, true, &reply, reterr);
        if (r < 0)
                return r;
        r = etcd_parse_header_revision(reply, &rev);
        if (r < 0)
                return bad_reply(reterr, "/v3/kv/put", r);
        if (ret_revision)
                *ret_revision = rev;
        return 0;
}

int etcd_delete(struct etcd_client *c, const char *key, unsigned flags, int64_t *ret_deleted,
                struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = etcd_req_delete(key, flags);
        _cleanup_(json_decrefp) json_t *reply = NULL;
        int64_t n;
        int r;

        if (!req)
                return oom(reterr);
        r = etcd_call(c, "/v3/kv/deleterange", req, true, &reply, reterr);
        if (r < 0)
                return r;
        r = etcd_json_int64(json_object_get(reply, "deleted"), &n);
        if (r < 0)
                return bad_reply(reterr, "/v3/kv/deleterange", r);
        if (ret_deleted)
                *ret_deleted = n;
        return 0;
}

int etcd_txn_cas(struct etcd_client *c, const char *key, int64_t expected_mod_revision,
                 const void *value, size_t len, int64_t lease, bool *ret_succeeded,
                 int64_t *ret_revision, struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = NULL, *reply = NULL;
        int r;

        if (expected_mod_revision < 0)
                return fk_error_set(reterr, -EINVAL, "etcd: negative expected revision");
        req = etcd_req_txn_cas(key, expected_mod_revision, value, len, lease);
        if (!req)
                return oom(reterr);
        /* Not idempotent: a retry after our own success would report failure. */
        r = etcd_call(c, "/v3/kv/txn", req, false, &reply, reterr);
        if (r < 0)
                return r;
        r = etcd_parse_txn_cas(reply, ret_succeeded, ret_revision);
        return r < 0 ? bad_reply(reterr, "/v3/kv/txn", r) : 0;
}

int etcd_txn_delete(struct etcd_client *c, const char *key, int64_t expected_mod_revision,
                    bool *ret_succeeded, struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = NULL, *reply = NULL;
        int r;

        if (expected_mod_revision <= 0)
                return fk_error_set(reterr, -EINVAL, "etcd: expected revision must be positive");
        req = etcd_req_txn_delete(key, expected_mod_revision);
        if (!req)
                return oom(reterr);
        r = etcd_call(c, "/v3/kv/txn", req, false, &reply, reterr);
        if (r < 0)
                return r;
        r = etcd_parse_txn_cas(reply, ret_succeeded, NULL);
        return r < 0 ? bad_reply(reterr, "/v3/kv/txn", r) : 0;
}

static int lease_req(int64_t id, const char *field, json_t **ret)
{
        char buf[32];

        snprintf(buf, sizeof(buf), "%" PRId64, id);
        *ret = json_pack("{s:s}", field, buf);
        return *ret ? 0 : -ENOMEM;
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *ret_id, struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = NULL, *reply = NULL;
        int64_t id;
        int r;

        if (ttl_s <= 0)
                return fk_error_set(reterr, -EINVAL, "etcd: lease TTL must be positive");
        if (lease_req(ttl_s, "TTL", &req) < 0)
                return oom(reterr);
        r = etcd_call(c, "/v3/lease/grant", req, false, &reply, reterr);
        if (r < 0)
                return r;
        r = etcd_json_int64(json_object_get(reply, "ID"), &id);
        if (r < 0 || id == 0)
                return bad_reply(reterr, "/v3/lease/grant", r);
        *ret_id = id;
        return 0;
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ret_ttl,
                         struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = NULL, *reply = NULL;
        int64_t ttl;
        int r;

        if (lease_req(id, "ID", &req) < 0)
                return oom(reterr);
        r = etcd_call(c, "/v3/lease/keepalive", req, true, &reply, reterr);
        if (r < 0)
                return r;
        /* A streaming endpoint: the reply is wrapped in "result"; an expired lease has no TTL. */
        r = etcd_json_int64(json_object_get(json_object_get(reply, "result"), "TTL"), &ttl);
        if (r < 0)
                return bad_reply(reterr, "/v3/lease/keepalive", r);
        if (ttl <= 0)
                return fk_error_set(reterr, -ENOENT, "etcd: lease %" PRId64 " expired", id);
        if (ret_ttl)
                *ret_ttl = ttl;
        return 0;
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id, struct fk_error *reterr)
{
        _cleanup_(json_decrefp) json_t *req = NULL, *reply = NULL;

        if (lease_req(id, "ID", &req) < 0)
                return oom(reterr);
        return etcd_call(c, "/v3/lease/revoke", req, true, &reply, reterr);
}
