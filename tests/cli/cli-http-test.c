/* SPDX-License-Identifier: MIT */
/* The CLI's native HTTP client: the response parser fed every split of a reply (Content-Length,
 * chunked with extensions and trailers, close-delimited, interim 100, malformed and truncated
 * replies), then cli_request, cli_request_raw and cli_request_lines against a scripted server
 * on a unix socket (the request as sent, the Apply header, a 4xx, streamed lines across chunk
 * boundaries, a server that closes early, a reply over the limit, no server at all). */
#include "cli/cli.h"
#include "cli/http-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- the parser ------------------------------------------------------------------------------ */

struct got {
        char body[4096];
        size_t size;
        char headers[1024]; /* "name=value;" for each field */
};

static int got_header(const char *name, const char *value, void *ud)
{
        struct got *g = ud;
        size_t n = strlen(g->headers);

        snprintf(g->headers + n, sizeof(g->headers) - n, "%s=%s;", name, value);
        return 0;
}

static int got_body(const char *data, size_t n, void *ud)
{
        struct got *g = ud;

        assert_true(g->size + n < sizeof(g->body));
        memcpy(g->body + g->size, data, n);
        g->size += n;
        return 0;
}

/* Feeds reply in pieces of step bytes, then (if eof) the close. Returns the first error. */
static int feed(const char *reply, size_t len, size_t step, bool eof, struct cli_http_parser *p,
                struct got *g)
{
        int r = 0;

        *g = (struct got){0};
        cli_http_parser_init(p, got_header, got_body, g, false);
        for (size_t off = 0; off < len && r == 0; off += step)
                r = cli_http_parse(p, reply + off, FK_MIN(step, len - off));
        if (r == 0 && eof)
                r = cli_http_parse_eof(p);
        return r;
}

/* Every split size gives the same status, body and headers; done without the close. */
static void expect_reply(const char *reply, bool need_eof, int status, const char *body,
                         const char *headers)
{
        struct cli_http_parser p;
        struct got g;

        for (size_t step = 1; step <= strlen(reply); step++) {
                assert_int_equal(feed(reply, strlen(reply), step, need_eof, &p, &g), 0);
                assert_true(cli_http_parse_done(&p));
                assert_int_equal(p.status, status);
                assert_int_equal(g.size, strlen(body));
                assert_memory_equal(g.body, body, g.size);
                assert_string_equal(g.headers, headers);
        }
}

/* Every split size fails with want, from the bytes or at the close. */
static void expect_error(const char *reply, int want)
{
        struct cli_http_parser p;
        struct got g;

        for (size_t step = 1; step <= strlen(reply); step++)
                assert_int_equal(feed(reply, strlen(reply), step, true, &p, &g), want);
}

static void test_parse_length(void **state)
{
        (void)state;
        /* the bytes after the body (a second reply) are not part of it */
        expect_reply("HTTP/1.1 201 Created\r\nContent-Length: 5\r\n"
                     "X-Forklet-Apply:  configured \r\n\r\nhelloHTTP/1.1 500 X\r\n\r\n",
                     false, 201, "hello", "Content-Length=5;X-Forklet-Apply=configured;");
        expect_reply("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, 200, "",
                     "Content-Length=0;");
        /* bare LF line ends, and a status line without a reason */
        expect_reply("HTTP/1.0 404\nContent-Length: 2\n\n{}", false, 404, "{}",
                     "Content-Length=2;");
}

static void test_parse_chunked(void **state)
{
        (void)state;
        expect_reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5;name=value\r\nhello\r\n"
                     "1B \r\n, the chunk size is hex: 27\r\n"
                     "1\r\n\n\r\n"
                     "0;last\r\nX-Trailer: ignored\r\nChecksum: 1\r\n\r\n",
                     false, 200, "hello, the chunk size is hex: 27\n",
                     "Transfer-Encoding=chunked;");
        /* Transfer-Encoding wins over Content-Length */
        expect_reply("HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: gzip, chunked"
                     "\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                     false, 200, "ok", "Content-Length=99;Transfer-Encoding=gzip, chunked;");
}

static void test_parse_close_delimited(void **state)
{
        struct cli_http_parser p;
        struct got g;
        const char *r = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end";

        (void)state;
        /* not done until the close */
        assert_int_equal(feed(r, strlen(r), 7, false, &p, &g), 0);
        assert_false(cli_http_parse_done(&p));
        expect_reply(r, true, 200, "until the end", "Content-Type=text/plain;");
}

static void test_parse_interim_and_empty(void **state)
{
        (void)state;
        expect_reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                     false, 200, "ok", "Content-Length=2;");
        /* 204 and 304 have no body whatever else the head says */
        expect_reply("HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", false, 204,
                     "", "Transfer-Encoding=chunked;");
}

static void test_parse_truncated(void **state)
{
        (void)state;
        expect_error("", -ECONNRESET);
        expect_error("HTTP/1.1 200 OK\r\nContent-Le", -ECONNRESET);
        expect_error("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", -ECONNRESET);
        expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", -ECONNRESET);
        /* every chunk whole, but not the last (empty) one */
        expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
                     -ECONNRESET);
        expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nTrailer: x\r\n",
                     -ECONNRESET);
}

static void test_parse_malformed(void **state)
{
        char big[CLI_HTTP_LINE_MAX + 64];

        (void)state;
        expect_error("SSH-2.0-OpenSSH\r\n\r\n", -EPROTO);
        expect_error("HTTP/1.1 20 OK\r\n\r\n", -EPROTO);
        expect_error("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", -EPROTO);
        expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", -EPROTO);
        expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                     -EPROTO);
        expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -EPROTO);
        expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n", -EPROTO);
        snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nX: %0*d\r\n\r\n", CLI_HTTP_LINE_MAX, 0);
        expect_error(big, -EMSGSIZE);
}

/* ---- the client against a scripted server ------------------------------------------------ */

struct server {
        char path[108];
        int lfd;
        const char *const *pieces; /* written one by one, a pause between them */
        size_t flood;              /* then this many bytes of 'x' (0: none) */
        pthread_t thread;
        atomic_bool finished; /* the last piece is being sent */
        char request[8192];   /* the request as received, head and body */
        size_t request_size;
};

/* Reads the request head and its Content-Length body. */
static void read_request(struct server *s, int fd)
{
        char *end = NULL;
        size_t want = SIZE_MAX;

        while (s->request_size < want && s->request_size < sizeof(s->request) - 1) {
                ssize_t n = read(fd, s->request + s->request_size,
                                 sizeof(s->request) - 1 - s->request_size);
                const char *cl;

                if (n <= 0)
                        break;
                s->request_size += (size_t)n;
                s->request[s->request_size] = '\0';
                if (!end && (end = strstr(s->request, "\r\n\r\n"))) {
                        cl = strcasestr(s->request, "\r\nContent-Length: ");
                        want = (size_t)(end + 4 - s->request) +
                               (cl && cl < end ? strtoul(cl + 18, NULL, 10) : 0);
                }
        }
}

static void *serve(void *ud)
{
        struct server *s = ud;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        static char xs[65536];

        if (fd < 0)
                return NULL;
        read_request(s, fd);
        for (size_t i = 0; s->pieces && s->pieces[i]; i++) {
                if (!s->pieces[i + 1])
                        atomic_store(&s->finished, true);
                if (send(fd, s->pieces[i], strlen(s->pieces[i]), MSG_NOSIGNAL) < 0)
                        break;
                usleep(5000); /* the client reads each piece on its own */
        }
        memset(xs, 'x', sizeof(xs));
        for (size_t sent = 0; sent < s->flood;) {
                ssize_t n = send(fd, xs, FK_MIN(sizeof(xs), s->flood - sent), MSG_NOSIGNAL);

                if (n <= 0)
                        break;
                sent += (size_t)n;
        }
        close(fd);
        return NULL;
}

static void server_start(struct server *s, const char *const *pieces, size_t flood)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        memset(s, 0, sizeof(*s));
        snprintf(s->path, sizeof(s->path), "/tmp/cli-http-test.%d.sock", (int)getpid());
        unlink(s->path);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->path);
        s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s->lfd >= 0);
        assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(s->lfd, 4), 0);
        s->pieces = pieces;
        s->flood = flood;
        assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
        pthread_join(s->thread, NULL);
        close(s->lfd);
        unlink(s->path);
}

static struct cli client_of(const struct server *s)
{
        return (struct cli){.socket = s->path, .namespace = "default"};
}

static void test_client_length_and_apply(void **state)
{
        static const char *const reply[] = {"HTTP/1.1 200 OK\r\nContent-", "Length: 11\r\nX-Fork",
                                            "let-Apply: configured\r\n\r\n{\"a\":", "true}\n",
                                            NULL};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        struct server s;
        struct cli c;

        (void)state;
        server_start(&s, reply, 0);
        c = client_of(&s);
        assert_int_equal(cli_request(&c, "POST", "/api/x?y=1", "{\"k\":1}", &resp, &err), 0);
        server_stop(&s);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "{\"a\":true}\n");
        assert_string_equal(resp.apply, "configured");
        assert_non_null(strstr(s.request, "POST /api/x?y=1 HTTP/1.1\r\n"));
        assert_non_null(strstr(s.request, "\r\nHost: localhost\r\n"));
        assert_non_null(strstr(s.request, "\r\nConnection: close\r\n"));
        assert_non_null(strstr(s.request, "\r\nContent-Type: application/json\r\n"));
        assert_non_null(strstr(s.request, "\r\nContent-Length: 7\r\n\r\n{\"k\":1}"));
        cli_response_done(&resp);
}

static void test_client_raw_body(void **state)
{
        static const char *const reply[] = {"HTTP/1.1 204 No Content\r\n\r\n", NULL};
        static const char bytes[] = {'a', 0, 'b', '\n', (char)0xff};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        const char *body;
        struct server s;
        struct cli c;

        (void)state;
        server_start(&s, reply, 0);
        c = client_of(&s);
        assert_int_equal(cli_request_raw(&c, "PUT", "/f", bytes, sizeof(bytes), &resp, &err), 0);
        server_stop(&s);
        assert_int_equal(resp.status, 204);
        assert_non_null(strstr(s.request, "\r\nContent-Type: application/octet-stream\r\n"));
        assert_non_null(strstr(s.request, "\r\nContent-Length: 5\r\n"));
        body = strstr(s.request, "\r\n\r\n") + 4;
        assert_int_equal(s.request_size - (size_t)(body - s.request), sizeof(bytes));
        assert_memory_equal(body, bytes, sizeof(bytes));
        cli_response_done(&resp);
}

struct lines {
        char all[256];
        const struct server *s;
        int early; /* lines handed out before the server sent its last piece */
};

static int collect_line(const char *line, void *ud)
{
        struct lines *l = ud;

        strcat(l->all, line);
        strcat(l->all, "|");
        l->early += !atomic_load(&l->s->finished);
        return 0;
}

static void test_client_lines_chunked(void **state)
{
        /* lines cut inside chunks and chunk heads cut between reads; the last line has no LF */
        static const char *const reply[] = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: "
                                            "chunked\r\n\r\n8\r\n{\"a\":1}\n\r\n6;x=y\r\n",
                                            "{\"b\":2\r\n", "3\r\n}\n{\r\n6\r\n\"c\":3}\r\n0\r\n",
                                            "\r\n", NULL};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        struct server s;
        struct lines l = {.s = &s};
        struct cli c;

        (void)state;
        server_start(&s, reply, 0);
        c = client_of(&s);
        assert_int_equal(
                cli_request_lines(&c, "POST", "/exec", "{}", collect_line, &l, &resp, &err), 0);
        server_stop(&s);
        assert_int_equal(resp.status, 200);
        assert_string_equal(l.all, "{\"a\":1}|{\"b\":2}|{\"c\":3}|");
        /* a stream: lines as they come, not at the end */
        assert_int_equal(l.early, 2);
        cli_response_done(&resp);
}

static void test_client_error_reply(void **state)
{
        /* close-delimited: no length, no chunks, the server closes */
        static const char *const reply[] = {"HTTP/1.1 404 Not Found\r\n\r\n",
                                            "{\"message\":\"session default/x not found\"}\n",
                                            NULL};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        char lines[256] = "";
        struct server s;
        struct cli c;

        (void)state;
        server_start(&s, reply, 0);
        c = client_of(&s);
        /* a 4xx to a stream is collected whole, not handed out as lines */
        assert_int_equal(
                cli_request_lines(&c, "POST", "/exec", "{}", collect_line, lines, &resp, &err), 0);
        server_stop(&s);
        assert_string_equal(lines, "");
        assert_int_equal(resp.status, 404);
        assert_string_equal(resp.body, "{\"message\":\"session default/x not found\"}\n");
        cli_response_done(&resp);
}

/* A request that must fail with want and a message containing what. */
static void expect_client_error(const char *const *reply, size_t flood, int want, const char *what)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        struct server s;
        struct cli c;

        server_start(&s, reply, flood);
        c = client_of(&s);
        assert_int_equal(cli_request(&c, "GET", "/api/v1alpha1/sessions", NULL, &resp, &err), want);
        server_stop(&s);
        assert_null(resp.body);
        if (!strstr(err.msg, what))
                fail_msg("\"%s\" does not say \"%s\"", err.msg, what);
}

static void test_client_closes_early(void **state)
{
        static const char *const mid_body[] = {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
                                               "{\"items\":[", NULL};
        static const char *const mid_chunks[] = {
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "3\r\nabc\r\n", NULL};
        static const char *const nothing[] = {NULL};

        (void)state;
        expect_client_error(mid_body, 0, -ECONNRESET, "before the end of the reply's body");
        expect_client_error(mid_chunks, 0, -ECONNRESET, "before the end of the reply's body");
        expect_client_error(nothing, 0, -ECONNRESET, "closed the connection before a reply");
}

static void test_client_over_limit(void **state)
{
        static const char *const head[] = {"HTTP/1.1 200 OK\r\n\r\n", NULL};

        (void)state;
        expect_client_error(head, CLI_MAX_REPLY + 1, -EFBIG, "larger than 64 MiB");
}

static void test_client_no_server(void **state)
{
        struct cli c = {.socket = "/tmp/cli-http-test.nonexistent.sock"};
        struct cli_response resp = {0};
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cli_request(&c, "GET", "/", NULL, &resp, &err), -ECONNREFUSED);
        assert_non_null(strstr(err.msg, "cannot reach forkletd at "
                                        "/tmp/cli-http-test.nonexistent.sock: No such file"));
        assert_non_null(strstr(err.msg, "is forkletd running?"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_length),
                cmocka_unit_test(test_parse_chunked),
                cmocka_unit_test(test_parse_close_delimited),
                cmocka_unit_test(test_parse_interim_and_empty),
                cmocka_unit_test(test_parse_truncated),
                cmocka_unit_test(test_parse_malformed),
                cmocka_unit_test(test_client_length_and_apply),
                cmocka_unit_test(test_client_raw_body),
                cmocka_unit_test(test_client_lines_chunked),
                cmocka_unit_test(test_client_error_reply),
                cmocka_unit_test(test_client_closes_early),
                cmocka_unit_test(test_client_over_limit),
                cmocka_unit_test(test_client_no_server),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
