/* SPDX-License-Identifier: MIT */
/* Framing and encoders of the guest agent protocol (see protocol.h); the decoders are in
 * protocol-decode.c. Pure: no I/O, no logging. */
#include "vmm/guest/protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[_GUEST_MSG_MAX] = {
        [GUEST_MSG_HELLO] = "HELLO",
        [GUEST_MSG_PING] = "PING",
        [GUEST_MSG_PONG] = "PONG",
        [GUEST_MSG_EXEC] = "EXEC",
        [GUEST_MSG_STDIN] = "STDIN",
        [GUEST_MSG_STDIN_EOF] = "STDIN_EOF",
        [GUEST_MSG_STARTED] = "STARTED",
        [GUEST_MSG_STDOUT] = "STDOUT",
        [GUEST_MSG_STDERR] = "STDERR",
        [GUEST_MSG_EXIT] = "EXIT",
        [GUEST_MSG_ERROR] = "ERROR",
        [GUEST_MSG_OK] = "OK",
        [GUEST_MSG_POWEROFF] = "POWEROFF",
        [GUEST_MSG_FILE_WRITE] = "FILE_WRITE",
        [GUEST_MSG_FILE_READ] = "FILE_READ",
        [GUEST_MSG_FILE_DATA] = "FILE_DATA",
        [GUEST_MSG_SET_IDENTITY] = "SET_IDENTITY",
        [GUEST_MSG_FSFREEZE] = "FSFREEZE",
        [GUEST_MSG_FSTHAW] = "FSTHAW",
        [GUEST_MSG_SIGNAL] = "SIGNAL",
        [GUEST_MSG_SET_TIME] = "SET_TIME",
        [GUEST_MSG_ADD_ENTROPY] = "ADD_ENTROPY",
};

const char *guest_msg_type_to_string(uint16_t type)
{
        if (type >= _GUEST_MSG_MAX || !type_names[type])
                return "?";
        return type_names[type];
}

/* ---- buffer --------------------------------------------------------------------------- */

void guest_buf_free(struct guest_buf *b)
{
        free(b->data);
        *b = (struct guest_buf){0};
}

void guest_buf_consume(struct guest_buf *b, size_t n)
{
        if (n >= b->size) {
                b->size = 0;
                return;
        }
        memmove(b->data, b->data + n, b->size - n);
        b->size -= n;
}

static int buf_reserve(struct guest_buf *b, size_t extra)
{
        size_t want, n;
        uint8_t *d;

        if (extra > SIZE_MAX / 2 - b->size)
                return -ENOMEM;
        want = b->size + extra;
        if (want <= b->alloc)
                return 0;
        n = b->alloc ? b->alloc : 256;
        while (n < want)
                n *= 2;
        d = realloc(b->data, n);
        if (!d)
                return -ENOMEM;
        b->data = d;
        b->alloc = n;
        return 0;
}

int guest_buf_append(struct guest_buf *b, const void *p, size_t n)
{
        int r = buf_reserve(b, n);

        if (r < 0)
                return r;
        if (n)
                memcpy(b->data + b->size, p, n);
        b->size += n;
        return 0;
}

static void le16(uint8_t *p, uint16_t v)
{
        p[0] = v & 0xff;
        p[1] = v >> 8;
}

static void le32(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (v >> (8 * i)) & 0xff;
}

static uint16_t rd16(const uint8_t *p)
{
        return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t rd32(const uint8_t *p)
{
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
               ((uint32_t)p[3] << 24);
}

/* ---- payload writer: collects errors so encoders stay linear ------------------------------ */

struct writer {
        struct guest_buf *b;
        size_t start; /* frame start, to roll back */
        int error;
};

static void w_bytes(struct writer *w, const void *p, size_t n)
{
        if (w->error)
                return;
        if (buf_reserve(w->b, n) < 0) {
                w->error = -ENOMEM;
                return;
        }
        if (n)
                memcpy(w->b->data + w->b->size, p, n);
        w->b->size += n;
}

static void w_u32(struct writer *w, uint32_t v)
{
        uint8_t p[4];

        le32(p, v);
        w_bytes(w, p, 4);
}

static void w_u64(struct writer *w, uint64_t v)
{
        w_u32(w, (uint32_t)v);
        w_u32(w, (uint32_t)(v >> 32));
}

static void w_blob(struct writer *w, const void *p, size_t n)
{
        if (n > GUEST_PROTO_MAX_PAYLOAD) {
                if (!w->error)
                        w->error = -EMSGSIZE;
                return;
        }
        w_u32(w, (uint32_t)n);
        w_bytes(w, p, n);
}

static void w_str(struct writer *w, const char *s)
{
        w_blob(w, s ? s : "", s ? strlen(s) : 0);
}

static void w_strv(struct writer *w, char *const *v)
{
        size_t n = 0;

        while (v && v[n])
                n++;
        if (n > GUEST_PROTO_MAX_STRV) {
                if (!w->error)
                        w->error = -E2BIG;
                return;
        }
        w_u32(w, (uint32_t)n);
        for (size_t i = 0; i < n; i++)
                w_str(w, v[i]);
}

static void w_begin(struct writer *w, struct guest_buf *b, uint16_t type, uint32_t id)
{
        uint8_t h[GUEST_PROTO_HEADER_SIZE];

        *w = (struct writer){.b = b, .start = b->size};
        le32(h, GUEST_PROTO_MAGIC);
        le16(h + 4, GUEST_PROTO_VERSION);
        le16(h + 6, type);
        le32(h + 8, 0);
        le32(h + 12, id);
        le32(h + 16, 0);
        w_bytes(w, h, sizeof(h));
}

static int w_end(struct writer *w)
{
        size_t len;

        if (!w->error) {
                len = w->b->size - w->start - GUEST_PROTO_HEADER_SIZE;
                if (len > GUEST_PROTO_MAX_PAYLOAD)
                        w->error = -EMSGSIZE;
                else
                        le32(w->b->data + w->start + 16, (uint32_t)len);
        }
        if (w->error)
                w->b->size = w->start;
        return w->error;
}

/* ---- framing -------------------------------------------------------------------------- */

int guest_proto_frame_check(const void *buf, size_t size, struct guest_proto_header *ret)
{
        const uint8_t *p = buf;
        struct guest_proto_header h;

        /* Check the magic as soon as 4 bytes are there, so garbage fails fast. */
        if (size >= 4 && rd32(p) != GUEST_PROTO_MAGIC)
                return -EBADMSG;
        if (size < GUEST_PROTO_HEADER_SIZE)
                return 0;
        h = (struct guest_proto_header){
                .magic = rd32(p),
                .version = rd16(p + 4),
                .type = rd16(p + 6),
                .flags = rd32(p + 8),
                .id = rd32(p + 12),
                .length = rd32(p + 16),
        };
        if (h.version != GUEST_PROTO_VERSION)
                return -EPROTONOSUPPORT;
        if (h.length > GUEST_PROTO_MAX_PAYLOAD)
                return -EMSGSIZE;
        if (size < GUEST_PROTO_HEADER_SIZE + (size_t)h.length)
                return 0;
        *ret = h;
        return GUEST_PROTO_HEADER_SIZE + (int)h.length;
}

int guest_proto_put_raw(struct guest_buf *b, uint16_t type, uint32_t id, const void *payload,
                        size_t size)
{
        struct writer w;

        if (size > GUEST_PROTO_MAX_PAYLOAD)
                return -EMSGSIZE;
        w_begin(&w, b, type, id);
        w_bytes(&w, payload, size);
        return w_end(&w);
}

/* ---- encoders ------------------------------------------------------------------------- */

static bool strv_valid(char *const *v)
{
        return v != NULL;
}

int guest_proto_put_hello(struct guest_buf *b, const struct guest_msg_hello *m)
{
        struct writer w;

        w_begin(&w, b, GUEST_MSG_HELLO, 0);
        w_u32(&w, m->proto_version);
        w_u32(&w, m->capabilities);
        w_str(&w, m->agent_version);
        return w_end(&w);
}

int guest_proto_put_exec(struct guest_buf *b, uint32_t id, const struct guest_msg_exec *m)
{
        struct writer w;

        if (!strv_valid(m->argv) || !m->argv[0])
                return -EINVAL;
        w_begin(&w, b, GUEST_MSG_EXEC, id);
        w_u32(&w, m->flags);
        w_u32(&w, m->timeout_ms);
        w_u64(&w, m->output_cap);
        w_str(&w, m->cwd);
        w_strv(&w, m->argv);
        w_strv(&w, m->env);
        if (m->user)
                w_str(&w, m->user);
        return w_end(&w);
}

int guest_proto_put_u32(struct guest_buf *b, uint16_t type, uint32_t id, uint32_t v)
{
        struct writer w;

        w_begin(&w, b, type, id);
        w_u32(&w, v);
        return w_end(&w);
}

int guest_proto_put_u64(struct guest_buf *b, uint16_t type, uint32_t id, uint64_t v)
{
        struct writer w;

        w_begin(&w, b, type, id);
        w_u64(&w, v);
        return w_end(&w);
}

int guest_proto_put_exit(struct guest_buf *b, uint32_t id, const struct guest_msg_exit *m)
{
        struct writer w;

        w_begin(&w, b, GUEST_MSG_EXIT, id);
        w_u32(&w, (uint32_t)m->exit_code);
        w_u32(&w, (uint32_t)m->signal);
        w_u32(&w, m->flags);
        return w_end(&w);
}

int guest_proto_put_error(struct guest_buf *b, uint32_t id, int32_t error, const char *message)
{
        struct writer w;

        w_begin(&w, b, GUEST_MSG_ERROR, id);
        w_u32(&w, (uint32_t)error);
        w_str(&w, message);
        return w_end(&w);
}

int guest_proto_put_file_write(struct guest_buf *b, uint32_t id,
                               const struct guest_msg_file_write *m)
{
        struct writer w;

        if (!m->path)
                return -EINVAL;
        w_begin(&w, b, GUEST_MSG_FILE_WRITE, id);
        w_u32(&w, m->mode);
        w_u32(&w, m->flags);
        w_u64(&w, m->offset);
        w_str(&w, m->path);
        w_blob(&w, m->data, m->size);
        return w_end(&w);
}

int guest_proto_put_file_read(struct guest_buf *b, uint32_t id, const struct guest_msg_file_read *m)
{
        struct writer w;

        if (!m->path)
                return -EINVAL;
        w_begin(&w, b, GUEST_MSG_FILE_READ, id);
        w_u64(&w, m->offset);
        w_u32(&w, m->max);
        w_str(&w, m->path);
        return w_end(&w);
}

int guest_proto_put_file_data(struct guest_buf *b, uint32_t id, const struct guest_msg_file_data *m)
{
        struct writer w;

        w_begin(&w, b, GUEST_MSG_FILE_DATA, id);
        w_u32(&w, m->flags);
        w_blob(&w, m->data, m->size);
        return w_end(&w);
}

int guest_proto_put_identity(struct guest_buf *b, uint32_t id, const struct guest_msg_identity *m)
{
        struct writer w;

        w_begin(&w, b, GUEST_MSG_SET_IDENTITY, id);
        w_str(&w, m->fork_id);
        w_str(&w, m->hostname);
        w_blob(&w, m->entropy, m->entropy_size);
        return w_end(&w);
}

int guest_proto_put_path(struct guest_buf *b, uint16_t type, uint32_t id, const char *path)
{
        struct writer w;

        if (!path)
                return -EINVAL;
        w_begin(&w, b, type, id);
        w_str(&w, path);
        return w_end(&w);
}
