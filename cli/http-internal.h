/* SPDX-License-Identifier: MIT */
/* Inside the CLI's HTTP client only: the reply sink both transports fill (client.c), the pure
 * HTTP/1.1 response parser (http-parse.c), the native unix-socket transport (http-unix.c) and
 * the libcurl HTTPS transport (remote.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cli;
struct cli_response;
struct fk_error;

#define CLI_MAX_REPLY     (64u * 1024 * 1024) /* a whole reply, or one streamed line */
#define CLI_HTTP_HEAD_MAX (64u * 1024)        /* a reply's head, and again its trailers */
#define CLI_HTTP_LINE_MAX 8192                /* one line of a head, a chunk size or a trailer */

/* One request as a transport sends it. Strings and body are borrowed. */
struct cli_http_request {
        const char *method;
        const char *path; /* absolute, e.g. /api/v1alpha1/sessions */
        const void *body; /* NULL: no body */
        size_t body_size;
        bool raw; /* Content-Type application/octet-stream, else application/json */
};

/* Where a reply goes: whole into resp, or, with line_fn and a 2xx status, line by line (only
 * an unfinished line is kept in resp->body). The transport sets resp->status before the body. */
struct cli_sink {
        struct cli_response *resp; /* borrowed */
        int (*line_fn)(const char *line, void *ud);
        void *ud;
        int error; /* the first failure of line_fn (nonzero) or of the sink (-ENOMEM, -EFBIG) */
};
/* Keeps what the CLI reads from a reply header (X-Forklet-Apply). 0 or -ENOMEM. */
int cli_sink_header(struct cli_sink *s, const char *name, const char *value);
/* Appends body bytes and, in line mode with a 2xx status, hands complete lines to line_fn.
 * Returns 0, or s->error once something failed (the transport stops reading). */
int cli_sink_body(struct cli_sink *s, const char *data, size_t n);

enum cli_http_state {
        CLI_HTTP_HEAD,        /* the status line and headers */
        CLI_HTTP_BODY_LENGTH, /* Content-Length bytes */
        CLI_HTTP_BODY_CLOSE,  /* everything until the server closes */
        CLI_HTTP_CHUNK_SIZE,  /* a chunk's size line (hex, maybe ";extensions") */
        CLI_HTTP_CHUNK_DATA,
        CLI_HTTP_CHUNK_END, /* the CRLF after a chunk's data */
        CLI_HTTP_TRAILER,   /* trailer fields after the last chunk, up to an empty line */
        CLI_HTTP_DONE,
};

/* A response parser: plain data, no I/O and no allocation. Set the callbacks and head_request,
 * zero the rest (cli_http_parser_init). */
struct cli_http_parser {
        /* every header field of the head (not the trailers), value trimmed; nonzero stops */
        int (*on_header)(const char *name, const char *value, void *ud);
        /* body bytes, de-chunked; nonzero stops */
        int (*on_body)(const char *data, size_t n, void *ud);
        void *ud;
        bool head_request; /* a reply to HEAD has no body whatever its headers say */
        int status;        /* the final status, 0 until its status line */
        enum cli_http_state state;
        bool chunked, has_length;
        uint64_t left;     /* bytes left of the body (Content-Length) or of this chunk */
        size_t head_bytes; /* bytes of the head (or of the trailers) so far */
        size_t line_len;
        char line[CLI_HTTP_LINE_MAX];
};
void cli_http_parser_init(struct cli_http_parser *p,
                          int (*on_header)(const char *name, const char *value, void *ud),
                          int (*on_body)(const char *data, size_t n, void *ud), void *ud,
                          bool head_request);
/* Feeds n bytes of the reply. Returns 0; -EPROTO for a malformed reply; -EMSGSIZE for a head,
 * a line or trailers over the limits above; a callback's nonzero return as it is. Bytes after
 * the end of the reply are ignored. */
int cli_http_parse(struct cli_http_parser *p, const char *data, size_t n);
/* The server closed the connection: 0 when the reply is complete (a close-delimited body ends
 * here), -ECONNRESET when it ended early (no or a partial head, a partial body or chunk). */
int cli_http_parse_eof(struct cli_http_parser *p);
static inline bool cli_http_parse_done(const struct cli_http_parser *p)
{
        return p->state == CLI_HTTP_DONE;
}

/* One exchange over fd, a connected stream socket (not closed here): sends rq with Host
 * localhost and Connection: close and reads the reply into s until its end. Returns 0, or
 * -errno with err saying what failed and where in the reply (a server that closed early is
 * -ECONNRESET, never a short reply). Does not log. */
int cli_http_exchange(int fd, const struct cli_http_request *rq, struct cli_sink *s,
                      struct fk_error *err);
/* Connects to c->socket and runs cli_http_exchange. Connection failures are -ECONNREFUSED
 * with err naming the socket and what to do. Does not log. */
int cli_unix_perform(const struct cli *c, const struct cli_http_request *rq, struct cli_sink *s,
                     struct fk_error *err);
/* The same over HTTPS to c->server with libcurl, loaded on first use (remote.c). */
int cli_tls_perform(const struct cli *c, const struct cli_http_request *rq, struct cli_sink *s,
                    struct fk_error *err);
