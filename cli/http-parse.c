/* SPDX-License-Identifier: MIT */
/* The CLI's HTTP/1.1 response parser: status line, header fields, and a body framed by
 * Content-Length, chunked transfer coding (extensions and trailers skipped) or the close of the
 * connection. Pure: bytes in, callbacks out, so tests feed it any split of a reply. */
#include "cli/http-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void cli_http_parser_init(struct cli_http_parser *p,
                          int (*on_header)(const char *name, const char *value, void *ud),
                          int (*on_body)(const char *data, size_t n, void *ud), void *ud,
                          bool head_request)
{
        *p = (struct cli_http_parser){.on_header = on_header,
                                      .on_body = on_body,
                                      .ud = ud,
                                      .head_request = head_request,
                                      .state = CLI_HTTP_HEAD};
}

/* Collects one line into p->line (NUL-terminated, without its CRLF or LF). Returns 1 with a
 * whole line, 0 when data ran out first; *used says how much of data it took. */
static int take_line(struct cli_http_parser *p, const char *data, size_t n, size_t *used)
{
        const char *nl = memchr(data, '\n', n);
        size_t k = nl ? (size_t)(nl - data) : n;

        *used = nl ? k + 1 : k;
        if (p->line_len + k >= sizeof(p->line))
                return -EMSGSIZE;
        p->head_bytes += *used;
        if (p->head_bytes > CLI_HTTP_HEAD_MAX)
                return -EMSGSIZE;
        memcpy(p->line + p->line_len, data, k);
        p->line_len += k;
        p->line[p->line_len] = '\0';
        if (!nl)
                return 0;
        if (p->line_len > 0 && p->line[p->line_len - 1] == '\r')
                p->line[--p->line_len] = '\0';
        p->line_len = 0;
        return 1;
}

static int parse_status_line(struct cli_http_parser *p, const char *l)
{
        if (strncmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
            l[9] < '1' || l[9] > '5' || l[10] < '0' || l[10] > '9' || l[11] < '0' || l[11] > '9' ||
            (l[12] != ' ' && l[12] != '\0'))
                return -EPROTO;
        p->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
        return 0;
}

/* "chunked" as the last transfer coding; any other coding leaves the body close-delimited. */
static bool chunked_last(const char *v)
{
        size_t n = strlen(v);

        return n >= 7 && strcasecmp(v + n - 7, "chunked") == 0 &&
               (n == 7 || v[n - 8] == ',' || v[n - 8] == ' ' || v[n - 8] == '\t');
}

static int parse_length(struct cli_http_parser *p, const char *v)
{
        uint64_t len = 0;

        if (!*v)
                return -EPROTO;
        for (; *v; v++) {
                if (*v < '0' || *v > '9' || len > (UINT64_MAX - 9) / 10)
                        return -EPROTO;
                len = len * 10 + (uint64_t)(*v - '0');
        }
        if (p->has_length && p->left != len)
                return -EPROTO; /* two lengths that disagree: a smuggling shape, refused */
        p->has_length = true;
        p->left = len;
        return 0;
}

static int parse_field(struct cli_http_parser *p, char *l)
{
        char *colon = strchr(l, ':'), *v, *end;

        /* no name, whitespace before the colon, or an obsolete folded line */
        if (!colon || colon == l || colon[-1] == ' ' || colon[-1] == '\t' || *l == ' ' ||
            *l == '\t')
                return -EPROTO;
        *colon = '\0';
        for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
                ;
        for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
                ;
        *end = '\0';
        if (strcasecmp(l, "Content-Length") == 0 && parse_length(p, v) < 0)
                return -EPROTO;
        if (strcasecmp(l, "Transfer-Encoding") == 0)
                p->chunked = chunked_last(v);
        return p->on_header ? p->on_header(l, v, p->ud) : 0;
}

/* The empty line after the fields: what frames the body. */
static void head_done(struct cli_http_parser *p)
{
        if (p->status < 200) {
                /* 100 Continue and other interim replies: a final head follows */
                bool head = p->head_request;
                void *ud = p->ud;

                cli_http_parser_init(p, p->on_header, p->on_body, ud, head);
                return;
        }
        if (p->head_request || p->status == 204 || p->status == 304)
                p->state = CLI_HTTP_DONE;
        else if (p->chunked)
                p->state = CLI_HTTP_CHUNK_SIZE;
        else if (p->has_length)
                p->state = p->left > 0 ? CLI_HTTP_BODY_LENGTH : CLI_HTTP_DONE;
        else
                p->state = CLI_HTTP_BODY_CLOSE;
}

static int head_line(struct cli_http_parser *p)
{
        if (p->status == 0)
                return parse_status_line(p, p->line);
        if (p->line[0] == '\0') {
                head_done(p);
                return 0;
        }
        return parse_field(p, p->line);
}

/* A chunk size line: hex digits, then optional whitespace and ";extensions" (ignored). */
static int chunk_size_line(struct cli_http_parser *p)
{
        const char *s = p->line;
        uint64_t size = 0;
        int digits = 0;

        for (; *s; s++, digits++) {
                int d = *s >= '0' && *s <= '9'   ? *s - '0'
                        : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
                        : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10
                                                 : -1;

                if (d < 0)
                        break;
                if (digits >= 15)
                        return -EPROTO;
                size = size * 16 + (uint64_t)d;
        }
        while (*s == ' ' || *s == '\t')
                s++;
        if (digits == 0 || (*s && *s != ';'))
                return -EPROTO;
        p->left = size;
        if (size > 0) {
                p->state = CLI_HTTP_CHUNK_DATA;
        } else {
                p->state = CLI_HTTP_TRAILER;
                p->head_bytes = 0;
        }
        return 0;
}

static int line_state(struct cli_http_parser *p)
{
        switch (p->state) {
        case CLI_HTTP_HEAD:
                return head_line(p);
        case CLI_HTTP_CHUNK_SIZE:
                return chunk_size_line(p);
        case CLI_HTTP_CHUNK_END:
                if (p->line[0] != '\0')
                        return -EPROTO;
                p->state = CLI_HTTP_CHUNK_SIZE;
                return 0;
        case CLI_HTTP_TRAILER:
                /* trailer fields carry nothing the CLI reads */
                if (p->line[0] == '\0')
                        p->state = CLI_HTTP_DONE;
                return 0;
        default:
                return -EPROTO;
        }
}

/* Body bytes of a length-framed body or a chunk: at most p->left of them. */
static int body_bytes(struct cli_http_parser *p, const char *data, size_t n, size_t *used)
{
        size_t k = p->state == CLI_HTTP_BODY_CLOSE ? n : (size_t)(p->left < n ? p->left : n);
        int r = p->on_body && k > 0 ? p->on_body(data, k, p->ud) : 0;

        *used = k;
        if (r != 0)
                return r;
        if (p->state == CLI_HTTP_BODY_CLOSE)
                return 0;
        p->left -= k;
        if (p->left == 0) {
                p->state = p->state == CLI_HTTP_CHUNK_DATA ? CLI_HTTP_CHUNK_END : CLI_HTTP_DONE;
                p->head_bytes = 0;
        }
        return 0;
}

int cli_http_parse(struct cli_http_parser *p, const char *data, size_t n)
{
        while (n > 0 && p->state != CLI_HTTP_DONE) {
                size_t used = 0;
                int r;

                if (p->state == CLI_HTTP_BODY_LENGTH || p->state == CLI_HTTP_BODY_CLOSE ||
                    p->state == CLI_HTTP_CHUNK_DATA) {
                        r = body_bytes(p, data, n, &used);
                } else {
                        r = take_line(p, data, n, &used);
                        if (r > 0)
                                r = line_state(p);
                }
                if (r != 0)
                        return r;
                data += used;
                n -= used;
        }
        return 0;
}

int cli_http_parse_eof(struct cli_http_parser *p)
{
        if (p->state == CLI_HTTP_BODY_CLOSE)
                p->state = CLI_HTTP_DONE;
        return p->state == CLI_HTTP_DONE ? 0 : -ECONNRESET;
}
