/* SPDX-License-Identifier: MIT */
/* Pure helpers for the etcd JSON gateway: prefix range ends, string int64s, gRPC error
 * mapping and jittered backoff. No I/O. */
#include "etcd/etcd-internal.h"
#include "common/cleanup.h"
#include "common/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int etcd_prefix_range_end(const void *key, size_t len, char **ret, size_t *ret_len)
{
        const unsigned char *k = key;
        char *end;

        for (size_t i = len; i > 0; i--) {
                if (k[i - 1] == 0xff)
                        continue;
                end = malloc(i + 1);
                if (!end)
                        return -ENOMEM;
                memcpy(end, k, i);
                end[i - 1] = (char)(k[i - 1] + 1);
                end[i] = '\0';
                *ret = end;
                *ret_len = i;
                return 0;
        }
        /* Empty or all 0xff: no key bigger with that prefix exists; "\0" means "to the end". */
        end = calloc(2, 1);
        if (!end)
                return -ENOMEM;
        *ret = end;
        *ret_len = 1;
        return 0;
}

int etcd_json_int64(const json_t *v, int64_t *ret)
{
        if (!v || json_is_null(v)) {
                *ret = 0;
                return 0;
        }
        if (json_is_integer(v)) {
                *ret = json_integer_value(v);
                return 0;
        }
        if (json_is_string(v)) {
                const char *s = json_string_value(v);
                char *endp;
                long long x;

                errno = 0;
                x = strtoll(s, &endp, 10);
                if (errno != 0 || endp == s || *endp != '\0')
                        return -EPROTO;
                *ret = x;
                return 0;
        }
        return -EPROTO;
}

int etcd_grpc_to_errno(int code)
{
        static const int map[] = {
                [1] = -ECANCELED, /* CANCELLED */
                [3] = -EINVAL,    /* INVALID_ARGUMENT */
                [4] = -ETIMEDOUT, /* DEADLINE_EXCEEDED */
                [5] = -ENOENT,    /* NOT_FOUND */
                [6] = -EEXIST,    /* ALREADY_EXISTS */
                [7] = -EACCES,    /* PERMISSION_DENIED */
                [8] = -ENOSPC,    /* RESOURCE_EXHAUSTED */
                [9] = -EBUSY,     /* FAILED_PRECONDITION */
                [10] = -EAGAIN,   /* ABORTED */
                [11] = -ESTALE,   /* OUT_OF_RANGE: "required revision has been compacted" */
                [12] = -ENOTSUP,  /* UNIMPLEMENTED */
                [14] = -EAGAIN,   /* UNAVAILABLE: no leader, stopping, ... */
                [16] = -EACCES,   /* UNAUTHENTICATED */
        };

        if (code > 0 && (size_t)code < ARRAY_SIZE(map) && map[code] != 0)
                return map[code];
        return -EIO;
}

int etcd_reply_error(const json_t *reply, struct fk_error *reterr)
{
        const json_t *e = json_object_get(reply, "error");
        const char *msg = NULL;
        json_int_t code = 2; /* UNKNOWN */

        if (!e)
                return 0;
        if (json_is_object(e)) {
                /* Streaming endpoints wrap it: {"error":{"grpc_code":..,"message":..}}. */
                msg = json_string_value(json_object_get(e, "message"));
                if (json_is_integer(json_object_get(e, "grpc_code")))
                        code = json_integer_value(json_object_get(e, "grpc_code"));
        } else {
                msg = json_string_value(json_object_get(reply, "message"));
                if (!msg)
                        msg = json_string_value(e);
                if (json_is_integer(json_object_get(reply, "code")))
                        code = json_integer_value(json_object_get(reply, "code"));
        }
        return fk_error_set(reterr, etcd_grpc_to_errno((int)code), "etcd: %s (code %lld)",
                            msg ? msg : "unknown error", (long long)code);
}

unsigned etcd_backoff_ms(unsigned round, unsigned base_ms, unsigned max_ms, uint32_t rnd)
{
        uint64_t cap = base_ms;

        for (unsigned i = 0; i < round && cap < max_ms; i++)
                cap *= 2;
        if (cap > max_ms)
                cap = max_ms;
        return (unsigned)(rnd % (cap + 1));
}
