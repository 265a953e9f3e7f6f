/* SPDX-License-Identifier: MIT */
/* The CLI's native transport to forkletd's unix socket: one HTTP/1.1 request per connection
 * (Connection: close), the reply read through http-parse.c into the caller's sink. No libcurl,
 * so a local call loads none of the libraries libcurl pulls in. */
#include "cli/cli.h"
#include "cli/http-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_BLOCK (64u * 1024)

/* send() without SIGPIPE: a server that closed early is an error here, not a signal. */
static int send_all(int fd, const void *buf, size_t size)
{
        const char *p = buf;

        while (size > 0) {
                ssize_t k = send(fd, p, size, MSG_NOSIGNAL);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                p += k;
                size -= (size_t)k;
        }
        return 0;
}

static int send_request(int fd, const struct cli_http_request *rq)
{
        cleanup_free char *head = NULL;
        bool length = rq->body || strcmp(rq->method, "POST") == 0 ||
                      strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "PATCH") == 0;
        char len[48] = "";
        int r;

        if (length)
                snprintf(len, sizeof(len), "Content-Length: %zu\r\n", rq->body ? rq->body_size : 0);
        if (fk_asprintf(&head,
                        "%s %s HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n"
                        "Connection: close\r\nContent-Type: %s\r\n%s\r\n",
                        rq->method, rq->path,
                        rq->raw ? "application/octet-stream" : "application/json", len) < 0)
                return -ENOMEM;
        r = send_all(fd, head, strlen(head));
        if (r >= 0 && rq->body && rq->body_size > 0)
                r = send_all(fd, rq->body, rq->body_size);
        return r;
}

/* The parser's callbacks: the sink, and the status it reads before the first body byte. */
struct reading {
        struct cli_sink *s;
        const struct cli_http_parser *p;
};

static int on_header(const char *name, const char *value, void *ud)
{
        struct reading *x = ud;

        return cli_sink_header(x->s, name, value);
}

static int on_body(const char *data, size_t n, void *ud)
{
        struct reading *x = ud;

        x->s->resp->status = x->p->status;
        return cli_sink_body(x->s, data, n);
}

/* What the reply had reached when it stopped, for messages. */
static const char *where(const struct cli_http_parser *p)
{
        if (p->status == 0)
                return "before a reply";
        if (p->state == CLI_HTTP_HEAD)
                return "inside the reply's head";
        return "before the end of the reply's body";
}

static int read_reply(int fd, const struct cli_http_request *rq, struct cli_http_parser *p,
                      struct cli_sink *s, struct fk_error *err)
{
        char buf[READ_BLOCK];
        int r = 0;

        while (!cli_http_parse_done(p)) {
                ssize_t n = read(fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return fk_error_set(err, -errno, "%s %s: reading the reply: %s", rq->method,
                                            rq->path, strerror(errno));
                if (n == 0 && cli_http_parse_eof(p) < 0)
                        return fk_error_set(err, -ECONNRESET,
                                            "%s %s: forkletd closed the connection %s%s",
                                            rq->method, rq->path, where(p),
                                            p->status ? "" : " (did it stop or restart?)");
                if (n == 0)
                        break;
                r = cli_http_parse(p, buf, (size_t)n);
                if (r != 0)
                        break;
        }
        if (r == 0)
                return 0;
        if (s->error == -EFBIG)
                return fk_error_set(err, -EFBIG, "%s %s: the reply is larger than %u MiB",
                                    rq->method, rq->path, CLI_MAX_REPLY >> 20);
        if (s->error)
                return s->error < 0
                               ? fk_error_set(err, s->error, "%s %s: %s", rq->method, rq->path,
                                              strerror(-s->error))
                               : fk_error_set(err, -EIO, "%s %s: aborted", rq->method, rq->path);
        return fk_error_set(err, r < 0 ? r : -EPROTO, "%s %s: not an HTTP reply we can read: %s",
                            rq->method, rq->path,
                            r == -EMSGSIZE ? "a head or chunk line over its limit"
                                           : "malformed status line, header or chunk");
}

int cli_http_exchange(int fd, const struct cli_http_request *rq, struct cli_sink *s,
                      struct fk_error *err)
{
        struct cli_http_parser p;
        struct reading x = {.s = s, .p = &p};
        int r;

        cli_http_parser_init(&p, on_header, on_body, &x, strcmp(rq->method, "HEAD") == 0);
        r = send_request(fd, rq);
        if (r == -ENOMEM)
                return fk_error_set(err, r, "out of memory");
        /* A server that answers before reading all of the body (an error reply) and closes:
         * its reply, not the broken pipe, says what went wrong. */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                return fk_error_set(err, r, "%s %s: sending the request: %s", rq->method, rq->path,
                                    strerror(-r));
        r = read_reply(fd, rq, &p, s, err);
        if (r >= 0)
                s->resp->status = p.status;
        return r;
}

static int connect_socket(const char *path, struct fk_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = -1;
        const char *hint = "is forkletd running? --socket or FORKLET_SOCKET selects the socket";

        if (strlen(path) >= sizeof(sa.sun_path))
                return fk_error_set(err, -ECONNREFUSED,
                                    "--socket %s: longer than the %zu bytes a unix socket path "
                                    "may have",
                                    path, sizeof(sa.sun_path) - 1);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return fk_error_set(err, -errno, "socket: %s", strerror(errno));
        while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                if (errno == EINTR)
                        continue;
                if (errno == EACCES || errno == EPERM)
                        hint = "the socket is root's, mode 0600: run forklet as root, or reach "
                               "forkletd over --server";
                return fk_error_set(err, -ECONNREFUSED, "cannot reach forkletd at %s: %s (%s)",
                                    path, strerror(errno), hint);
        }
        return TAKE_FD(fd);
}

int cli_unix_perform(const struct cli *c, const struct cli_http_request *rq, struct cli_sink *s,
                     struct fk_error *err)
{
        cleanup_close int fd = connect_socket(c->socket, err);

        if (fd < 0)
                return fd;
        return cli_http_exchange(fd, rq, s, err);
}
