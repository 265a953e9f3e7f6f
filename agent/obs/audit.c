/* SPDX-License-Identifier: MIT */
/* The audit log: append-only, fsynced JSON lines chained by SHA-256 ("prev" is the digest of
 * the whole previous line, "hash" the digest of the line up to its own hash field); the chain
 * itself (sealing and checking a line) is core/audit-chain.c. */
#include "agent/obs/obs.h"
#include "core/core.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEX_SIZE       CORE_AUDIT_HEX_SIZE
#define AUDIT_LINE_MAX (64 * 1024)

struct agent_audit {
        pthread_mutex_t lock;
        int fd;
        char head[HEX_SIZE]; /* SHA-256 of the last line */
};

/* Digest of the file's last line (zeros for an empty file). */
static int read_head(int fd, char out[HEX_SIZE])
{
        struct stat st;
        off_t start;
        cleanup_free char *buf = NULL;
        ssize_t n;
        char *nl;

        memset(out, '0', HEX_SIZE - 1); /* the first line's prev: 64 zeros */
        out[HEX_SIZE - 1] = '\0';
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
        fk_sha256_hex(nl, strlen(nl), out);
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

        fk_format_rfc3339(e->time_ns ? e->time_ns : fk_now_real_ns(), ts, sizeof(ts));
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
        char head[HEX_SIZE];
        int r;

        pthread_mutex_lock(&a->lock);
        body = audit_body(e, a->head);
        r = body ? core_audit_seal(body, &line, head) : -ENOMEM;
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
                memcpy(a->head, head, HEX_SIZE);
        pthread_mutex_unlock(&a->lock);
        return r < 0 ? r : 0;
}

int agent_audit_verify(const char *path, size_t *ret_lines, size_t *ret_bad_line,
                       struct fk_error *err)
{
        cleanup_fclose FILE *f = NULL;

        f = fopen(path, "re");
        if (!f)
                return fk_error_set(err, -errno, "open %s: %m", path);
        return core_audit_verify(f, ret_lines, ret_bad_line, err);
}
