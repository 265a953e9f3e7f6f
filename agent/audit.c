/* SPDX-License-Identifier: MIT */
/* The audit log: append-only, fsynced JSON lines chained by SHA-256 ("prev" is the digest of
 * the whole previous line, "hash" the digest of the line up to its own hash field). */
#include "agent/agent-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEX_SIZE       (2 * AGENT_SHA256_SIZE + 1)
#define HASH_FIELD     ",\"hash\":\""
#define AUDIT_LINE_MAX (64 * 1024)

struct agent_audit {
        pthread_mutex_t lock;
        int fd;
        char head[HEX_SIZE]; /* SHA-256 of the last line */
};

static const char zero_hash[HEX_SIZE] =
        "0000000000000000000000000000000000000000000000000000000000000000";

/* Digest of the file's last line (zeros for an empty file). */
static int read_head(int fd, char out[HEX_SIZE])
{
        struct stat st;
        off_t start;
        cleanup_free char *buf = NULL;
        ssize_t n;
        char *nl;

        memcpy(out, zero_hash, HEX_SIZE);
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size == 0)
                return 0;
        start = st.st_size > AUDIT_LINE_MAX ? st.st_size - AUDIT_LINE_MAX : 0;
        buf = malloc((size_t)(st.st_size - start) + 1);
        if (!buf)
                return -ENOMEM;
        n = pread(fd, buf, (size_t)(st.st_size - start), start);
        if (n != st.st_size - start)
                return n < 0 ? -errno : -EIO;
        buf[n] = '\0';
        if (n == 0 || buf[n - 1] != '\n')
                return -EBADMSG; /* a torn last line: refuse to extend a broken chain */
        buf[n - 1] = '\0';
        nl = strrchr(buf, '\n');
        nl = nl ? nl + 1 : buf;
        agent_sha256_hex(nl, strlen(nl), out);
        return 0;
}

int agent_audit_open(const char *path, struct agent_audit **ret)
{
        struct agent_audit *a;
        int fd, r;

        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        a = calloc(1, sizeof(*a));
        if (!a) {
                close(fd);
                return -ENOMEM;
        }
        a->fd = fd;
        r = open(path, O_RDONLY | O_CLOEXEC);
        if (r >= 0) {
                int rfd = r;

                r = read_head(rfd, a->head);
                close(rfd);
        } else
                r = -errno;
        if (r < 0) {
                close(fd);
                free(a);
                return r;
        }
        pthread_mutex_init(&a->lock, NULL);
        *ret = a;
        return 0;
}

struct agent_audit *agent_audit_close(struct agent_audit *a)
{
        if (!a)
                return NULL;
        close(a->fd);
        pthread_mutex_destroy(&a->lock);
        free(a);
        return NULL;
}

/* The line without its hash field and closing brace: {"time":..,"prev":"..." */
static char *audit_body(const struct agent_audit_entry *e, const char *prev)
{
        char ts[64];
        json_t *j;
        char *text, *body = NULL;
        size_t n;

        fk_format_rfc3339(fk_now_real_ns(), ts, sizeof(ts));
        j = json_pack("{s:s, s:s, s:s?, s:s, s:s, s:I, s:s}", "time", ts, "caller",
                      e->caller ? e->caller : "unknown", "session", e->session, "action",
                      e->action ? e->action : "", "result", e->result ? e->result : "", "latencyUs",
                      (json_int_t)(e->latency_s * 1e6), "prev", prev);
        if (!j)
                return NULL;
        text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (!text)
                return NULL;
        n = strlen(text);
        if (n > 0 && text[n - 1] == '}') {
                text[n - 1] = '\0';
                body = text;
        } else
                free(text);
        return body;
}

int agent_audit_append(struct agent_audit *a, const struct agent_audit_entry *e)
{
        cleanup_free char *body = NULL, *line = NULL;
        struct stat st = {.st_size = -1};
        char hash[HEX_SIZE];
        int r;

        pthread_mutex_lock(&a->lock);
        body = audit_body(e, a->head);
        if (!body) {
                pthread_mutex_unlock(&a->lock);
                return -ENOMEM;
        }
        agent_sha256_hex(body, strlen(body), hash);
        r = fk_asprintf(&line, "%s" HASH_FIELD "%s\"}\n", body, hash);
        if (r >= 0 && fstat(a->fd, &st) < 0)
                r = -errno;
        if (r >= 0)
                r = fk_write_all(a->fd, line, strlen(line));
        if (r >= 0 && fdatasync(a->fd) < 0)
                r = -errno;
        /* a torn line (ENOSPC half-way) would make the next start refuse the whole log */
        if (r < 0 && st.st_size >= 0)
                (void)!ftruncate(a->fd, st.st_size);
        if (r >= 0)
                agent_sha256_hex(line, strlen(line) - 1, a->head);
        pthread_mutex_unlock(&a->lock);
        return r < 0 ? r : 0;
}

/* Checks one line (NUL-terminated, no newline) against the previous digest. */
static int verify_line(const char *line, const char *prev, struct fk_error *err)
{
        const char *hf = NULL, *p;
        char want[HEX_SIZE];
        json_t *j;
        int r = 0;

        for (p = strstr(line, HASH_FIELD); p; p = strstr(p + 1, HASH_FIELD))
                hf = p;
        j = json_loads(line, 0, NULL);
        if (!j || !hf)
                r = fk_error_set(err, -EBADMSG, "not an audit record (invalid JSON or no hash)");
        else if (!json_is_string(json_object_get(j, "prev")) ||
                 strcmp(json_string_value(json_object_get(j, "prev")), prev) != 0)
                r = fk_error_set(err, -EBADMSG,
                                 "prev does not match the SHA-256 of the line before");
        else {
                agent_sha256_hex(line, (size_t)(hf - line), want);
                if (!json_is_string(json_object_get(j, "hash")) ||
                    strcmp(json_string_value(json_object_get(j, "hash")), want) != 0 ||
                    strlen(hf) != strlen(HASH_FIELD) + HEX_SIZE - 1 + 2)
                        r = fk_error_set(err, -EBADMSG,
                                         "hash does not match the line's content (edited)");
        }
        json_decref(j);
        return r;
}

int agent_audit_verify(const char *path, size_t *ret_lines, size_t *ret_bad_line,
                       struct fk_error *err)
{
        cleanup_fclose FILE *f = NULL;
        cleanup_free char *line = NULL;
        char prev[HEX_SIZE];
        size_t cap = 0, n = 0;
        ssize_t len;
        int r;

        f = fopen(path, "re");
        if (!f)
                return fk_error_set(err, -errno, "open %s: %m", path);
        memcpy(prev, zero_hash, HEX_SIZE);
        while ((len = getline(&line, &cap, f)) >= 0) {
                n++;
                if (len == 0 || line[len - 1] != '\n') {
                        *ret_bad_line = n;
                        return fk_error_set(err, -EBADMSG, "line %zu: torn (no newline)", n);
                }
                line[len - 1] = '\0';
                r = verify_line(line, prev, err);
                if (r < 0) {
                        char why[FK_ERROR_MSG_MAX];

                        snprintf(why, sizeof(why), "%s", err->msg);
                        *ret_bad_line = n;
                        return fk_error_set(err, r, "line %zu: %s", n, why);
                }
                agent_sha256_hex(line, (size_t)len - 1, prev);
        }
        *ret_lines = n;
        return 0;
}
