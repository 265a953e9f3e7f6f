/* SPDX-License-Identifier: MIT */
/* Inside fk_vmm_agent: shared between agent-client.c (connection, reader thread, request table) and
 * agent-calls.c and agent-exec.c (exec, poweroff, files, identity): the host side of the agent
 * channel. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/guest/protocol.h"

/* How long the host waits for the guest to answer a request it has received. */
#define AGENT_REPLY_TIMEOUT_MS 30000
/* How long a call waits for the channel to come (back) up. */
#define AGENT_CONNECT_WAIT_MS 10000
/* Guest text (HELLO's version, ERROR messages) is cut to this many bytes, escapes included. */
#define AGENT_GUEST_TEXT_MAX 160
/* A frame begun must be finished within this: a guest that announces a length and stops
 * sending would otherwise swallow every later reply into that frame (the channel drops). */
#define AGENT_PARTIAL_FRAME_MS 30000
/* A hostile guest must not make the host buffer without bound for one request. */
#define AGENT_PENDING_MAX_BYTES (64u * 1024 * 1024)

struct agent_frame {
        struct agent_frame *next;
        uint16_t type;
        uint32_t size;
        uint8_t data[]; /* payload */
};

/* One in-flight request: the reader thread appends frames with its id. */
struct agent_pending {
        struct agent_pending *next;
        uint32_t id;
        unsigned generation; /* connection it was sent on */
        struct agent_frame *head, *tail;
        size_t queued;
        int error; /* -ECONNRESET, -EPROTO, -ENOBUFS: the request cannot finish */
};

struct vmm_agent {
        char *path;
        pthread_mutex_t lock;       /* everything below but fd writes */
        pthread_cond_t cond;        /* broadcast on any frame, connect or drop */
        pthread_mutex_t write_lock; /* held while writing to fd and when closing it */
        int fd;
        unsigned generation; /* bumped on every connect */
        bool hello;          /* HELLO seen on this connection */
        bool failing;        /* vmm_agent_fail_connection: no new requests until reconnected */
        struct guest_msg_hello info;
        struct agent_pending *pending;
        uint32_t next_id;
        pthread_t reader;
        int wake[2]; /* pipe: wakes the reader to stop */
        bool stop;
        uint8_t *rbuf; /* GUEST_PROTO_MAX_FRAME bytes */
        size_t rlen;
        uint64_t partial_since_ns; /* CLOCK_MONOTONIC when the incomplete frame in rbuf began */
        unsigned partial_frame_ms; /* AGENT_PARTIAL_FRAME_MS; unit tests shorten it */
};

/* Copies guest-chosen text into out (out_size >= 8, NUL-terminated) so it is safe to log, put in
 * an error message, a status or an API reply: printable ASCII as is, every other byte (control
 * characters, newlines, escapes, invalid UTF-8) as \xNN, and "..." when it was cut. */
void vmm_agent_guest_text(const char *in, char *out, size_t out_size);

/* Registers a request on the current connection, waiting up to wait_ms for one. Returns the
 * pending (owned by a's table until vmm_agent_pending_end) or NULL with *ret_error set. */
struct agent_pending *vmm_agent_pending_begin(struct vmm_agent *a, unsigned wait_ms,
                                              int *ret_error);
/* Unregisters and frees p. */
void vmm_agent_pending_end(struct vmm_agent *a, struct agent_pending *p);
/* Waits until p has a frame, an error, or deadline_ns (0: none) passes. Returns the frame
 * (caller frees) or NULL with *ret_error = p->error or -ETIMEDOUT. */
struct agent_frame *vmm_agent_pending_next(struct vmm_agent *a, struct agent_pending *p,
                                           uint64_t deadline_ns, int *ret_error);
/* Writes frames (b->data, b->size) on p's connection; -ECONNRESET if it has gone. */
int vmm_agent_send(struct vmm_agent *a, const struct agent_pending *p, const struct guest_buf *b);
/* The peer broke the protocol in a payload: close the connection (the reader reconnects). */
void vmm_agent_fail_connection(struct vmm_agent *a, unsigned generation);
