/* SPDX-License-Identifier: MIT */
/* The audit log's hash chain: sealing a line (pure) and checking a log read from a stream the
 * caller opened. forkletd appends and checks its own log with it (agent/obs/audit.c); forklet
 * checks a copy (audit verify --file). */
#include "core/core.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_FIELD ",\"hash\":\""

int core_audit_seal(const char *body, char **ret, char ret_head[CORE_AUDIT_HEX_SIZE])
{
        char hash[CORE_AUDIT_HEX_SIZE];
        char *line;
        int r;

        fk_sha256_hex(body, strlen(body), hash);
        r = fk_asprintf(&line, "%s" HASH_FIELD "%s\"}\n", body, hash);
        if (r < 0)
                return r;
        if (ret_head)
                fk_sha256_hex(line, strlen(line) - 1, ret_head);
        *ret = line;
        return 0;
}

/* The last HASH_FIELD in the n bytes at line, or NULL. */
static const char *last_hash_field(const char *line, size_t n)
{
        const char *hf = NULL, *end = line + n;

        for (const char *p = line; p < end; p++) {
                p = memmem(p, (size_t)(end - p), HASH_FIELD, strlen(HASH_FIELD));
                if (!p)
                        break;
                hf = p;
        }
        return hf;
}

/* Checks one line of n bytes (no newline) against prev; err says why (without the line number). */
static int check_line(const char *line, size_t n, const char *prev, struct fk_error *err)
{
        const char *hf = last_hash_field(line, n);
        const json_t *jprev, *jhash;
        char want[CORE_AUDIT_HEX_SIZE];
        json_t *j = json_loadb(line, n, 0, NULL);
        int r = 0;

        jprev = json_object_get(j, "prev");
        jhash = json_object_get(j, "hash");
        if (!j || !hf)
                r = fk_error_set(err, -EBADMSG, "not an audit record (invalid JSON or no hash)");
        else if (!json_is_string(jprev) || strcmp(json_string_value(jprev), prev) != 0)
                r = fk_error_set(err, -EBADMSG,
                                 "prev does not match the SHA-256 of the line before");
        else {
                fk_sha256_hex(line, (size_t)(hf - line), want);
                if (!json_is_string(jhash) || strcmp(json_string_value(jhash), want) != 0 ||
                    (size_t)(line + n - hf) != strlen(HASH_FIELD) + CORE_AUDIT_HEX_SIZE - 1 + 2)
                        r = fk_error_set(err, -EBADMSG,
                                         "hash does not match the line's content (edited)");
        }
        json_decref(j);
        return r;
}

int core_audit_verify(FILE *f, size_t *ret_lines, size_t *ret_bad_line, struct fk_error *err)
{
        cleanup_free char *line = NULL;
        char prev[CORE_AUDIT_HEX_SIZE];
        size_t cap = 0, n = 0;
        ssize_t len;
        int r;

        memset(prev, '0', CORE_AUDIT_HEX_SIZE - 1);
        prev[CORE_AUDIT_HEX_SIZE - 1] = '\0';
        while ((len = getline(&line, &cap, f)) >= 0) {
                n++;
                if (len == 0 || line[len - 1] != '\n')
                        r = fk_error_set(err, -EBADMSG, "torn (no newline)");
                else
                        r = check_line(line, (size_t)len - 1, prev, err);
                if (r < 0) {
                        char why[FK_ERROR_MSG_MAX];

                        snprintf(why, sizeof(why), "%s", err->msg);
                        *ret_bad_line = n;
                        return fk_error_set(err, r, "line %zu: %s", n, why);
                }
                fk_sha256_hex(line, (size_t)len - 1, prev);
        }
        if (ferror(f))
                return fk_error_set(err, -EIO, "read error after line %zu", n);
        *ret_lines = n;
        return 0;
}
