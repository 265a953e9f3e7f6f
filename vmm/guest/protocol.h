/* SPDX-License-Identifier: MIT */
/* The host<->guest agent wire protocol: framing, message layouts, and a pure encoder/decoder
 * (no I/O, no logging) compiled into both the static guest agent and fk_vmm. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Name of the virtio-serial port (virtserialport name=...) the agent serves. */
#define GUEST_PROTO_PORT_NAME "org.forklet.agent.0"

/* Frame: a 20-byte little-endian header, then `length` payload bytes.
 *   u32 magic  u16 version  u16 type  u32 flags  u32 id  u32 length
 * id ties replies and streamed frames to the host request (0: not tied, e.g. HELLO).
 * Payload fields are little-endian; strings and byte blobs are u32 length + bytes (strings
 * carry no NUL); a string vector is u32 count + strings. A decoder ignores bytes after the
 * fields it knows, so a later version may append fields to any message. */
#define GUEST_PROTO_MAGIC       0x464b4741u /* "AGKF" on the wire */
#define GUEST_PROTO_VERSION     1
#define GUEST_PROTO_HEADER_SIZE 20
#define GUEST_PROTO_MAX_PAYLOAD (1u << 20)
#define GUEST_PROTO_MAX_FRAME   (GUEST_PROTO_HEADER_SIZE + GUEST_PROTO_MAX_PAYLOAD)
#define GUEST_PROTO_MAX_STRV    4096         /* argv/env entries */
#define GUEST_PROTO_CHUNK       (64u * 1024) /* data chunk size both sides send */

enum guest_msg_type {
        GUEST_MSG_HELLO = 1,         /* g->h: struct guest_msg_hello, id 0, on every (re)connect */
        GUEST_MSG_PING = 2,          /* h->g: opaque bytes */
        GUEST_MSG_PONG = 3,          /* g->h: the PING's bytes */
        GUEST_MSG_EXEC = 4,          /* h->g: struct guest_msg_exec */
        GUEST_MSG_STDIN = 5,         /* h->g: bytes for the exec with this id */
        GUEST_MSG_STDIN_EOF = 6,     /* h->g: empty; closes the exec's stdin */
        GUEST_MSG_STARTED = 7,       /* g->h: u32 pid */
        GUEST_MSG_STDOUT = 8,        /* g->h: bytes */
        GUEST_MSG_STDERR = 9,        /* g->h: bytes */
        GUEST_MSG_EXIT = 10,         /* g->h: struct guest_msg_exit; last frame of an exec */
        GUEST_MSG_ERROR = 11,        /* g->h: struct guest_msg_error; ends the request */
        GUEST_MSG_OK = 12,           /* g->h: empty success reply (POWEROFF, FILE_WRITE, ...) */
        GUEST_MSG_POWEROFF = 13,     /* h->g: empty; OK, sync, power off */
        GUEST_MSG_FILE_WRITE = 14,   /* h->g: struct guest_msg_file_write; OK */
        GUEST_MSG_FILE_READ = 15,    /* h->g: struct guest_msg_file_read; FILE_DATA */
        GUEST_MSG_FILE_DATA = 16,    /* g->h: struct guest_msg_file_data */
        GUEST_MSG_SET_IDENTITY = 17, /* h->g: struct guest_msg_identity; OK */
        GUEST_MSG_FSFREEZE = 18,     /* h->g: struct guest_msg_path; OK */
        GUEST_MSG_FSTHAW = 19,       /* h->g: struct guest_msg_path; OK */
        GUEST_MSG_SIGNAL = 20,       /* h->g: u32 signal for the exec with this id; no reply */
        GUEST_MSG_SET_TIME = 21,     /* h->g: u64 CLOCK_REALTIME ns (after resume/restore); OK */
        GUEST_MSG_ADD_ENTROPY = 22,  /* h->g: 1..GUEST_ENTROPY_MAX raw bytes (cold boot); OK */
        _GUEST_MSG_MAX,
};

const char *guest_msg_type_to_string(uint16_t type); /* "?" when unknown */

struct guest_proto_header {
        uint32_t magic;
        uint16_t version;
        uint16_t type;
        uint32_t flags;
        uint32_t id;
        uint32_t length;
};

/* ---- growable output buffer ---------------------------------------------------------- */

struct guest_buf {
        uint8_t *data; /* owned */
        size_t size;
        size_t alloc;
};
void guest_buf_free(struct guest_buf *b); /* frees data, resets to empty */
/* Appends n bytes; -ENOMEM (b unchanged). */
int guest_buf_append(struct guest_buf *b, const void *p, size_t n);
/* Drops the first n bytes (after they were written out). */
void guest_buf_consume(struct guest_buf *b, size_t n);

/* ---- framing ------------------------------------------------------------------------ */

/* Examines the start of a receive buffer. Returns 0 when more bytes are needed, the full
 * frame size (header + payload) when a whole frame is there (header in *ret), or -EBADMSG
 * (bad magic), -EPROTONOSUPPORT (version), -EMSGSIZE (payload > max). Unknown types are not
 * an error here: the receiver answers them (forward compatibility). */
int guest_proto_frame_check(const void *buf, size_t size, struct guest_proto_header *ret);

/* Appends a frame with a raw payload (may be NULL/0). -EMSGSIZE if size > max payload,
 * -ENOMEM. On failure b is unchanged. */
int guest_proto_put_raw(struct guest_buf *b, uint16_t type, uint32_t id, const void *payload,
                        size_t size);

/* ---- messages ----------------------------------------------------------------------- */

#define GUEST_CAP_EXEC     (1u << 0)
#define GUEST_CAP_FILE     (1u << 1)
#define GUEST_CAP_IDENTITY (1u << 2)
#define GUEST_CAP_FREEZE   (1u << 3)

struct guest_msg_hello {
        uint32_t proto_version;
        uint32_t capabilities; /* GUEST_CAP_* */
        char *agent_version;   /* owned */
};

#define GUEST_EXEC_DETACH    (1u << 0) /* background process, STARTED at once, no EXIT */
#define GUEST_EXEC_HAS_STDIN (1u << 1) /* STDIN frames follow, then STDIN_EOF */

struct guest_msg_exec {
        uint32_t flags;
        uint32_t timeout_ms; /* 0: none */
        uint64_t output_cap; /* 0: the agent's default */
        char *cwd;           /* owned, NULL: "/" */
        char **argv;         /* owned strv, at least one element */
        char **env;          /* owned strv, may be empty, each "K=V" */
        /* owned, NULL: root. Appended last, only when set (older agents ignore it): USER,
         * UID, USER:GROUP or UID:GID, resolved in the guest's /etc/passwd and /etc/group. */
        char *user;
};

#define GUEST_EXIT_SIGNALED      (1u << 0)
#define GUEST_EXIT_TIMED_OUT     (1u << 1)
#define GUEST_EXIT_OUTPUT_CAPPED (1u << 2)

struct guest_msg_exit {
        int32_t exit_code; /* valid unless SIGNALED */
        int32_t signal;    /* valid when SIGNALED */
        uint32_t flags;    /* GUEST_EXIT_* */
};

struct guest_msg_error {
        int32_t error; /* positive errno */
        char *message; /* owned */
};

#define GUEST_FILE_TRUNCATE (1u << 0) /* FILE_WRITE: truncate the file first */
#define GUEST_FILE_EOF      (1u << 0) /* FILE_DATA: end of file reached */

struct guest_msg_file_write {
        char *path; /* owned, absolute */
        uint32_t mode;
        uint32_t flags;
        uint64_t offset;
        const uint8_t *data; /* borrowed from the frame */
        size_t size;
};

struct guest_msg_file_read {
        char *path; /* owned */
        uint64_t offset;
        uint32_t max; /* at most this many bytes in the FILE_DATA reply */
};

struct guest_msg_file_data {
        uint32_t flags;
        const uint8_t *data; /* borrowed */
        size_t size;
};

/* ADD_ENTROPY: the bytes are credited to the guest's pool and its CRNG reseeded. */
#define GUEST_ENTROPY_MAX 256

struct guest_msg_identity {
        char *fork_id;          /* owned */
        char *hostname;         /* owned, may be empty: keep */
        const uint8_t *entropy; /* borrowed */
        size_t entropy_size;
};

struct guest_msg_path {
        char *path; /* owned */
};

/* Encoders append one frame to b; -EMSGSIZE when the payload would exceed the max, -EINVAL
 * on an invalid message (NULL argv, string with NUL, ...), -ENOMEM. b unchanged on error. */
int guest_proto_put_hello(struct guest_buf *b, const struct guest_msg_hello *m);
int guest_proto_put_exec(struct guest_buf *b, uint32_t id, const struct guest_msg_exec *m);
int guest_proto_put_u32(struct guest_buf *b, uint16_t type, uint32_t id, uint32_t v);
int guest_proto_put_u64(struct guest_buf *b, uint16_t type, uint32_t id, uint64_t v);
int guest_proto_put_exit(struct guest_buf *b, uint32_t id, const struct guest_msg_exit *m);
int guest_proto_put_error(struct guest_buf *b, uint32_t id, int32_t error, const char *message);
int guest_proto_put_file_write(struct guest_buf *b, uint32_t id,
                               const struct guest_msg_file_write *m);
int guest_proto_put_file_read(struct guest_buf *b, uint32_t id,
                              const struct guest_msg_file_read *m);
int guest_proto_put_file_data(struct guest_buf *b, uint32_t id,
                              const struct guest_msg_file_data *m);
int guest_proto_put_identity(struct guest_buf *b, uint32_t id, const struct guest_msg_identity *m);
int guest_proto_put_path(struct guest_buf *b, uint16_t type, uint32_t id, const char *path);

/* Decoders parse a payload (p, size) as returned by frame_check. On success the owned fields
 * are heap copies (free with the matching _done) and borrowed fields point into p. On
 * malformed input they return -EBADMSG and leave *ret zeroed. Never read outside p. */
int guest_proto_get_hello(const void *p, size_t size, struct guest_msg_hello *ret);
void guest_msg_hello_done(struct guest_msg_hello *m);
int guest_proto_get_exec(const void *p, size_t size, struct guest_msg_exec *ret);
void guest_msg_exec_done(struct guest_msg_exec *m);
int guest_proto_get_u32(const void *p, size_t size, uint32_t *ret);
int guest_proto_get_u64(const void *p, size_t size, uint64_t *ret);
int guest_proto_get_exit(const void *p, size_t size, struct guest_msg_exit *ret);
int guest_proto_get_error(const void *p, size_t size, struct guest_msg_error *ret);
void guest_msg_error_done(struct guest_msg_error *m);
int guest_proto_get_file_write(const void *p, size_t size, struct guest_msg_file_write *ret);
int guest_proto_get_file_read(const void *p, size_t size, struct guest_msg_file_read *ret);
int guest_proto_get_file_data(const void *p, size_t size, struct guest_msg_file_data *ret);
int guest_proto_get_identity(const void *p, size_t size, struct guest_msg_identity *ret);
void guest_msg_identity_done(struct guest_msg_identity *m);
int guest_proto_get_path(const void *p, size_t size, struct guest_msg_path *ret);
/* Frees path of a file_write, file_read or path message. */
void guest_msg_path_done(char **path);

/* Frees a NULL-terminated strv (decoders' argv/env). Accepts NULL. */
void guest_strv_free(char **v);
