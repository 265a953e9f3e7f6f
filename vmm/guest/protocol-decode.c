/* SPDX-License-Identifier: MIT */
/* Decoders of the guest agent protocol payloads (see protocol.h). Everything the peer sent is
 * untrusted: every length is checked against what is left before it is used. */
#include "vmm/guest/protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rd32(const uint8_t *p)
{
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
               ((uint32_t)p[3] << 24);
}

/* ---- payload reader ------------------------------------------------------------------- */

struct reader {
        const uint8_t *p;
        size_t left;
        int error;
};

static bool r_take(struct reader *r, size_t n, const uint8_t **ret)
{
        if (r->error || n > r->left) {
                r->error = -EBADMSG;
                return false;
        }
        *ret = r->p;
        r->p += n;
        r->left -= n;
        return true;
}

static uint32_t r_u32(struct reader *r)
{
        const uint8_t *p;

        return r_take(r, 4, &p) ? rd32(p) : 0;
}

static uint64_t r_u64(struct reader *r)
{
        uint64_t lo = r_u32(r);

        return lo | ((uint64_t)r_u32(r) << 32);
}

static const uint8_t *r_blob(struct reader *r, size_t *ret_size)
{
        uint32_t n = r_u32(r);
        const uint8_t *p = NULL;

        *ret_size = 0;
        if (!r_take(r, n, &p))
                return NULL;
        *ret_size = n;
        return p;
}

/* A heap copy of a string field; embedded NULs are malformed. */
static char *r_str(struct reader *r)
{
        size_t n;
        const uint8_t *p = r_blob(r, &n);
        char *s;

        if (!p)
                return NULL;
        if (memchr(p, 0, n)) {
                r->error = -EBADMSG;
                return NULL;
        }
        s = malloc(n + 1);
        if (!s) {
                r->error = -ENOMEM;
                return NULL;
        }
        memcpy(s, p, n);
        s[n] = 0;
        return s;
}

void guest_strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

static char **r_strv(struct reader *r)
{
        uint32_t n = r_u32(r);
        char **v;

        /* Each entry takes at least 4 bytes, which bounds n by what is left. */
        if (r->error || n > GUEST_PROTO_MAX_STRV || n > r->left / 4) {
                r->error = r->error ? r->error : -EBADMSG;
                return NULL;
        }
        v = calloc(n + 1, sizeof(char *));
        if (!v) {
                r->error = -ENOMEM;
                return NULL;
        }
        for (uint32_t i = 0; i < n; i++) {
                v[i] = r_str(r);
                if (!v[i]) {
                        guest_strv_free(v);
                        return NULL;
                }
        }
        return v;
}

static void r_init(struct reader *r, const void *p, size_t size)
{
        *r = (struct reader){.p = p, .left = p ? size : 0};
}

/* ---- decoders ------------------------------------------------------------------------- */

void guest_msg_hello_done(struct guest_msg_hello *m)
{
        free(m->agent_version);
        *m = (struct guest_msg_hello){0};
}

int guest_proto_get_hello(const void *p, size_t size, struct guest_msg_hello *ret)
{
        struct reader r;
        struct guest_msg_hello m = {0};

        r_init(&r, p, size);
        m.proto_version = r_u32(&r);
        m.capabilities = r_u32(&r);
        m.agent_version = r_str(&r);
        if (r.error) {
                guest_msg_hello_done(&m);
                *ret = (struct guest_msg_hello){0};
                return r.error;
        }
        *ret = m;
        return 0;
}

void guest_msg_exec_done(struct guest_msg_exec *m)
{
        free(m->cwd);
        free(m->user);
        guest_strv_free(m->argv);
        guest_strv_free(m->env);
        *m = (struct guest_msg_exec){0};
}

int guest_proto_get_exec(const void *p, size_t size, struct guest_msg_exec *ret)
{
        struct reader r;
        struct guest_msg_exec m = {0};

        r_init(&r, p, size);
        m.flags = r_u32(&r);
        m.timeout_ms = r_u32(&r);
        m.output_cap = r_u64(&r);
        m.cwd = r_str(&r);
        m.argv = r_strv(&r);
        m.env = r_strv(&r);
        if (!r.error && r.left) /* appended field: absent from older hosts */
                m.user = r_str(&r);
        if (!r.error && (!m.argv || !m.argv[0] || !m.argv[0][0]))
                r.error = -EBADMSG;
        for (size_t i = 0; !r.error && m.env && m.env[i]; i++)
                if (!strchr(m.env[i], '=') || m.env[i][0] == '=')
                        r.error = -EBADMSG;
        if (r.error) {
                guest_msg_exec_done(&m);
                *ret = (struct guest_msg_exec){0};
                return r.error;
        }
        if (m.cwd && !m.cwd[0]) {
                free(m.cwd);
                m.cwd = NULL;
        }
        if (m.user && !m.user[0]) {
                free(m.user);
                m.user = NULL;
        }
        *ret = m;
        return 0;
}

int guest_proto_get_u64(const void *p, size_t size, uint64_t *ret)
{
        struct reader r;
        uint64_t v;

        r_init(&r, p, size);
        v = r_u64(&r);
        if (r.error)
                return r.error;
        *ret = v;
        return 0;
}

int guest_proto_get_u32(const void *p, size_t size, uint32_t *ret)
{
        struct reader r;
        uint32_t v;

        r_init(&r, p, size);
        v = r_u32(&r);
        if (r.error)
                return r.error;
        *ret = v;
        return 0;
}

int guest_proto_get_exit(const void *p, size_t size, struct guest_msg_exit *ret)
{
        struct reader r;
        struct guest_msg_exit m;

        r_init(&r, p, size);
        m.exit_code = (int32_t)r_u32(&r);
        m.signal = (int32_t)r_u32(&r);
        m.flags = r_u32(&r);
        if (r.error)
                return r.error;
        *ret = m;
        return 0;
}

void guest_msg_error_done(struct guest_msg_error *m)
{
        free(m->message);
        *m = (struct guest_msg_error){0};
}

int guest_proto_get_error(const void *p, size_t size, struct guest_msg_error *ret)
{
        struct reader r;
        struct guest_msg_error m = {0};

        r_init(&r, p, size);
        m.error = (int32_t)r_u32(&r);
        m.message = r_str(&r);
        /* A positive errno only: a hostile peer must not smuggle "success" or INT_MIN. */
        if (!r.error && (m.error <= 0 || m.error > 4095))
                r.error = -EBADMSG;
        if (r.error) {
                guest_msg_error_done(&m);
                *ret = (struct guest_msg_error){0};
                return r.error;
        }
        *ret = m;
        return 0;
}

void guest_msg_path_done(char **path)
{
        free(*path);
        *path = NULL;
}

int guest_proto_get_file_write(const void *p, size_t size, struct guest_msg_file_write *ret)
{
        struct reader r;
        struct guest_msg_file_write m = {0};

        r_init(&r, p, size);
        m.mode = r_u32(&r);
        m.flags = r_u32(&r);
        m.offset = r_u64(&r);
        m.path = r_str(&r);
        m.data = r_blob(&r, &m.size);
        if (!r.error && (m.path[0] != '/' || m.offset > INT64_MAX))
                r.error = -EBADMSG;
        if (r.error) {
                free(m.path);
                *ret = (struct guest_msg_file_write){0};
                return r.error;
        }
        *ret = m;
        return 0;
}

int guest_proto_get_file_read(const void *p, size_t size, struct guest_msg_file_read *ret)
{
        struct reader r;
        struct guest_msg_file_read m = {0};

        r_init(&r, p, size);
        m.offset = r_u64(&r);
        m.max = r_u32(&r);
        m.path = r_str(&r);
        if (!r.error && (m.path[0] != '/' || m.offset > INT64_MAX))
                r.error = -EBADMSG;
        if (r.error) {
                free(m.path);
                *ret = (struct guest_msg_file_read){0};
                return r.error;
        }
        *ret = m;
        return 0;
}

int guest_proto_get_file_data(const void *p, size_t size, struct guest_msg_file_data *ret)
{
        struct reader r;
        struct guest_msg_file_data m = {0};

        r_init(&r, p, size);
        m.flags = r_u32(&r);
        m.data = r_blob(&r, &m.size);
        if (r.error)
                return r.error;
        *ret = m;
        return 0;
}

void guest_msg_identity_done(struct guest_msg_identity *m)
{
        free(m->fork_id);
        free(m->hostname);
        *m = (struct guest_msg_identity){0};
}

int guest_proto_get_identity(const void *p, size_t size, struct guest_msg_identity *ret)
{
        struct reader r;
        struct guest_msg_identity m = {0};

        r_init(&r, p, size);
        m.fork_id = r_str(&r);
        m.hostname = r_str(&r);
        m.entropy = r_blob(&r, &m.entropy_size);
        if (!r.error && strlen(m.hostname) > 64)
                r.error = -EBADMSG;
        if (r.error) {
                guest_msg_identity_done(&m);
                *ret = (struct guest_msg_identity){0};
                return r.error;
        }
        *ret = m;
        return 0;
}

int guest_proto_get_path(const void *p, size_t size, struct guest_msg_path *ret)
{
        struct reader r;
        char *path;

        r_init(&r, p, size);
        path = r_str(&r);
        if (!r.error && path[0] != '/')
                r.error = -EBADMSG;
        if (r.error) {
                free(path);
                return r.error;
        }
        ret->path = path;
        return 0;
}
