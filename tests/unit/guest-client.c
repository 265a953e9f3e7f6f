/* SPDX-License-Identifier: MIT */
/* The host agent client against a fake guest on a unix socket: streamed exec output, exit
 * codes, concurrent execs demultiplexed by id, guest errors, the host-side output cap, and
 * hostile guests (garbage, oversized frame, bad payload) -> an error, a reconnect, no crash. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "vmm/guest/client-internal.h"
#include "vmm/guest/protocol.h"
#include "vmm/vmm.h"

#define S(x) ((char *)(x))

/* One accepted connection is served by a handler; it returns true to accept another. */
typedef bool (*fake_handler)(int fd, int conn);

struct fake {
        char dir[64];
        char path[128];
        int lfd;
        pthread_t thread;
        fake_handler handler;
};

/* Write errors are ignored: a client may hang up mid-scenario (that is what the hostile
 * cases provoke); the client-side assertions judge the outcome. */
static void send_buf(int fd, struct guest_buf *b)
{
        (void)fk_write_all(fd, b->data, b->size);
        guest_buf_free(b);
}

static void send_hello(int fd)
{
        struct guest_msg_hello h = {.proto_version = 1, .agent_version = S("fake")};
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_hello(&b, &h), 0);
        send_buf(fd, &b);
}

static void send_raw(int fd, uint16_t type, uint32_t id, const void *p, size_t n)
{
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_raw(&b, type, id, p, n), 0);
        send_buf(fd, &b);
}

static void send_u32(int fd, uint16_t type, uint32_t id, uint32_t v)
{
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_u32(&b, type, id, v), 0);
        send_buf(fd, &b);
}

static void send_exit(int fd, uint32_t id, int code)
{
        struct guest_msg_exit x = {.exit_code = code};
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_exit(&b, id, &x), 0);
        send_buf(fd, &b);
}

/* Reads one frame; returns false on EOF. *ret is the whole frame (caller frees). */
static bool read_frame(int fd, struct guest_proto_header *h, uint8_t **ret)
{
        uint8_t hdr[GUEST_PROTO_HEADER_SIZE];
        uint32_t len;
        uint8_t *p;

        if (fk_read_all(fd, hdr, sizeof(hdr)) < 0)
                return false;
        memcpy(&len, hdr + 16, sizeof(len)); /* x86: little-endian like the wire */
        assert_true(len <= GUEST_PROTO_MAX_PAYLOAD);
        p = malloc(sizeof(hdr) + len);
        assert_non_null(p);
        memcpy(p, hdr, sizeof(hdr));
        if (fk_read_all(fd, p + sizeof(hdr), len) < 0) {
                free(p);
                return false;
        }
        assert_int_equal(guest_proto_frame_check(p, sizeof(hdr) + len, h),
                         (int)(sizeof(hdr) + len));
        *ret = p;
        return true;
}

/* Reads frames until an EXEC arrives; returns its id and decoded message. */
static bool read_exec(int fd, uint32_t *id, struct guest_msg_exec *m)
{
        struct guest_proto_header h = {0};
        uint8_t *p;

        while (read_frame(fd, &h, &p)) {
                const uint8_t *payload = p + GUEST_PROTO_HEADER_SIZE;

                if (h.type == GUEST_MSG_EXEC) {
                        assert_int_equal(guest_proto_get_exec(payload, h.length, m), 0);
                        *id = h.id;
                        free(p);
                        return true;
                }
                if (h.type == GUEST_MSG_PING)
                        send_raw(fd, GUEST_MSG_PONG, h.id, payload, h.length);
                free(p);
        }
        return false;
}

static void *fake_main(void *userdata)
{
        struct fake *f = userdata;

        for (int conn = 0;; conn++) {
                int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
                bool again;

                if (fd < 0)
                        return NULL;
                again = f->handler(fd, conn);
                close(fd);
                if (!again)
                        return NULL;
        }
}

static struct fake *fake_start(fake_handler handler)
{
        struct fake *f = calloc(1, sizeof(*f));
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        assert_non_null(f);
        strcpy(f->dir, "/tmp/guest-client-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->path, sizeof(f->path), "%s/agent.sock", f->dir);
        strcpy(sa.sun_path, f->path);
        f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(f->lfd >= 0);
        assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(f->lfd, 4), 0);
        f->handler = handler;
        assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
        return f;
}

static void fake_stop(struct fake *f)
{
        shutdown(f->lfd, SHUT_RDWR); /* unblocks accept */
        pthread_join(f->thread, NULL);
        close(f->lfd);
        unlink(f->path);
        rmdir(f->dir);
        free(f);
}

struct out {
        char data[2][4096];
        size_t size[2];
};

static int collect(int stream, const void *data, size_t size, void *userdata)
{
        struct out *o = userdata;
        int i = stream == 1 ? 0 : 1;

        assert_true(o->size[i] + size < sizeof(o->data[i]));
        memcpy(o->data[i] + o->size[i], data, size);
        o->size[i] += size;
        return 0;
}

static int exec_argv(struct vmm_agent *a, const char *arg0, const char *arg1, size_t cap,
                     struct out *o, struct vmm_exec_result *res, struct fk_error *err)
{
        char *argv[] = {S(arg0), S(arg1), NULL};
        struct vmm_exec_request req = {.argv = argv, .output_cap = cap};

        memset(o, 0, sizeof(*o));
        return vmm_agent_exec(a, &req, collect, o, res, err);
}

/* ---- streamed exec ------------------------------------------------------------------------ */

static bool serve_stream(int fd, int conn)
{
        struct guest_msg_exec m;
        uint32_t id;

        (void)conn;
        send_hello(fd);
        if (!read_exec(fd, &id, &m))
                return false;
        assert_string_equal(m.argv[0], "echo");
        guest_msg_exec_done(&m);
        send_u32(fd, GUEST_MSG_STARTED, id, 42);
        send_raw(fd, GUEST_MSG_STDOUT, id, "hel", 3);
        send_raw(fd, GUEST_MSG_STDERR, id, "oops", 4);
        send_raw(fd, GUEST_MSG_STDOUT, id, "lo", 2);
        send_raw(fd, GUEST_MSG_STDOUT, 9999, "stray", 5); /* unknown id: ignored */
        send_exit(fd, id, 3);
        /* Then a request the host does not wait for: the ERROR path. */
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        struct guest_buf b = {0};
        assert_int_equal(guest_proto_put_error(&b, id, ENOENT, "nope: not found"), 0);
        send_buf(fd, &b);
        /* Host-side cap: send more than asked. */
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        send_u32(fd, GUEST_MSG_STARTED, id, 43);
        char big[1000];
        memset(big, 'x', sizeof(big));
        send_raw(fd, GUEST_MSG_STDOUT, id, big, sizeof(big));
        send_exit(fd, id, 0);
        char tmp;
        (void)!read(fd, &tmp, 1); /* until the client hangs up */
        return false;
}

static void test_exec_stream(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_stream);
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;
        struct out o;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(a, 2000, &err), 0);
        assert_string_equal(vmm_agent_guest_version(a), "fake");
        assert_int_equal(exec_argv(a, "echo", "x", 0, &o, &res, &err), 0);
        assert_int_equal(res.pid, 42);
        assert_int_equal(res.exit_code, 3);
        assert_false(res.signaled);
        assert_int_equal(o.size[0], 5);
        assert_memory_equal(o.data[0], "hello", 5);
        assert_memory_equal(o.data[1], "oops", 4);

        assert_int_equal(exec_argv(a, "nope", NULL, 0, &o, &res, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "not found"));

        assert_int_equal(exec_argv(a, "yes", NULL, 100, &o, &res, &err), 0);
        assert_int_equal(o.size[0], 100);
        assert_true(res.output_capped);
        vmm_agent_free(a);
        fake_stop(f);
}

/* ---- concurrent execs --------------------------------------------------------------------- */

#define NCONC 4

static bool serve_concurrent(int fd, int conn)
{
        struct guest_msg_exec m[NCONC];
        uint32_t id[NCONC];

        (void)conn;
        send_hello(fd);
        for (int i = 0; i < NCONC; i++)
                if (!read_exec(fd, &id[i], &m[i]))
                        return false;
        /* Answer in reverse order, interleaved, so only the ids route the frames. */
        for (int i = NCONC - 1; i >= 0; i--)
                send_u32(fd, GUEST_MSG_STARTED, id[i], 100 + (uint32_t)i);
        for (int i = NCONC - 1; i >= 0; i--)
                send_raw(fd, GUEST_MSG_STDOUT, id[i], m[i].argv[1], strlen(m[i].argv[1]));
        for (int i = 0; i < NCONC; i++) {
                send_exit(fd, id[i], atoi(m[i].argv[1]));
                guest_msg_exec_done(&m[i]);
        }
        char tmp;
        (void)!read(fd, &tmp, 1);
        return false;
}

struct worker {
        struct vmm_agent *a;
        int n;
        int r;
        struct out o;
        struct vmm_exec_result res;
};

static void *worker_main(void *userdata)
{
        struct worker *w = userdata;
        struct fk_error err = {0};
        char arg[16];

        snprintf(arg, sizeof(arg), "%d", w->n);
        w->r = exec_argv(w->a, "job", arg, 0, &w->o, &w->res, &err);
        return NULL;
}

static void test_exec_concurrent(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_concurrent);
        struct worker w[NCONC];
        pthread_t t[NCONC];
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(a, 2000, &err), 0);
        for (int i = 0; i < NCONC; i++) {
                w[i] = (struct worker){.a = a, .n = 10 + i};
                assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
        }
        for (int i = 0; i < NCONC; i++) {
                char want[16];

                pthread_join(t[i], NULL);
                snprintf(want, sizeof(want), "%d", w[i].n);
                assert_int_equal(w[i].r, 0);
                assert_int_equal(w[i].res.exit_code, w[i].n);
                assert_int_equal(w[i].o.size[0], strlen(want));
                assert_memory_equal(w[i].o.data[0], want, strlen(want));
        }
        vmm_agent_free(a);
        fake_stop(f);
}

/* ---- hostile guests ----------------------------------------------------------------------- */

/* Connection n misbehaves in way n after the EXEC; the last one behaves. */
static bool serve_hostile(int fd, int conn)
{
        static const uint8_t garbage[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nmore garbage here";
        struct guest_msg_exec m;
        uint8_t hdr[GUEST_PROTO_HEADER_SIZE];
        uint32_t id;

        send_hello(fd);
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        switch (conn) {
        case 0: /* garbage instead of a frame */
                (void)fk_write_all(fd, garbage, sizeof(garbage));
                break;
        case 1: /* a header announcing 2 MiB */
                send_raw(fd, GUEST_MSG_STDOUT, id, "x", 1);
                struct guest_buf b = {0};
                assert_int_equal(guest_proto_put_raw(&b, GUEST_MSG_STARTED, id, NULL, 0), 0);
                memcpy(hdr, b.data, sizeof(hdr));
                guest_buf_free(&b);
                hdr[18] = 0x20; /* length = 2 MiB */
                (void)fk_write_all(fd, hdr, sizeof(hdr));
                break;
        case 2: /* a well-framed STARTED whose payload is too short */
                send_raw(fd, GUEST_MSG_STARTED, id, "\x01\x02", 2);
                break;
        default:
                send_u32(fd, GUEST_MSG_STARTED, id, 7);
                send_raw(fd, GUEST_MSG_STDOUT, id, "fine", 4);
                send_exit(fd, id, 0);
                break;
        }
        char tmp;
        /* Wait for the client to hang up (it must, after a protocol violation). */
        while (read(fd, &tmp, 1) > 0)
                ;
        return conn < 3;
}

static void test_hostile_guest(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_hostile);
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;
        struct out o;
        int r;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(vmm_agent_wait_ready(a, 5000, &err), 0);
                r = exec_argv(a, "x", NULL, 0, &o, &res, &err);
                assert_true(r == -EPROTO || r == -ECONNRESET);
                assert_true(err.msg[0] != 0);
        }
        /* The client reconnected by itself and works again. */
        assert_int_equal(vmm_agent_wait_ready(a, 5000, &err), 0);
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), 0);
        assert_memory_equal(o.data[0], "fine", 4);
        assert_int_equal(res.pid, 7);
        vmm_agent_free(a);
        fake_stop(f);
}

/* Guest text reaches logs, errors and API replies only escaped and cut. */
static bool is_clean(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
                        return false;
        return true;
}

static void test_guest_text(void **state)
{
        char out[16], big[AGENT_GUEST_TEXT_MAX];

        (void)state;
        agent_guest_text("ok 1.0", out, sizeof(out));
        assert_string_equal(out, "ok 1.0");
        agent_guest_text("a\nb\x1b\\\xff", out, sizeof(out));
        assert_string_equal(out, "a\\x0ab\\x1b...");
        agent_guest_text(NULL, out, sizeof(out));
        assert_string_equal(out, "");
        agent_guest_text("%s%n%s%n%s%n%s%n%s%n", big, sizeof(big));
        assert_string_equal(big, "%s%n%s%n%s%n%s%n%s%n"); /* data, never a format */
}

#define HOSTILE_TEXT "../../../../tmp/x %s%n\r\nFAKE-LOG-LINE \x1b]0;t\x07\xff\xfe"

static bool serve_hostile_text(int fd, int conn)
{
        struct guest_msg_hello h = {.proto_version = 1, .agent_version = S(HOSTILE_TEXT)};
        struct guest_msg_file_data d = {
                .flags = GUEST_FILE_EOF, .data = (const uint8_t *)"x", .size = 1};
        static char longmsg[GUEST_PROTO_MAX_PAYLOAD - 64];
        struct guest_buf b = {0};
        struct guest_msg_exec m;
        uint32_t id;

        (void)conn;
        assert_int_equal(guest_proto_put_hello(&b, &h), 0);
        send_buf(fd, &b);
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        assert_int_equal(guest_proto_put_error(&b, id, EACCES, HOSTILE_TEXT), 0);
        send_buf(fd, &b);
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        memset(longmsg, 'A', sizeof(longmsg) - 1);
        assert_int_equal(guest_proto_put_error(&b, id, EIO, longmsg), 0);
        send_buf(fd, &b);
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        /* Frames for ids that are not this request's, then the real answer. */
        assert_int_equal(guest_proto_put_file_data(&b, id + 1000, &d), 0);
        send_buf(fd, &b);
        send_exit(fd, id + 1, 9);
        send_raw(fd, 999, id, HOSTILE_TEXT, sizeof(HOSTILE_TEXT));
        send_raw(fd, GUEST_MSG_PONG, 0, "x", 1);
        send_u32(fd, GUEST_MSG_STARTED, id, 11);
        send_exit(fd, id, 0);
        char tmp;
        (void)!read(fd, &tmp, 1);
        return false;
}

static void test_hostile_text(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_hostile_text);
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;
        const char *v;
        struct out o;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(a, 2000, &err), 0);
        v = vmm_agent_guest_version(a);
        assert_true(is_clean(v) && strlen(v) < AGENT_GUEST_TEXT_MAX);
        assert_non_null(strstr(v, "\\x0d\\x0aFAKE-LOG-LINE \\x1b]0;t\\x07\\xff\\xfe"));
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), -EACCES);
        assert_true(is_clean(err.msg));
        assert_non_null(strstr(err.msg, "%s%n\\x0d\\x0aFAKE-LOG-LINE"));
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), -EIO);
        assert_true(is_clean(err.msg) && strlen(err.msg) < AGENT_GUEST_TEXT_MAX + 16);
        assert_non_null(strstr(err.msg, "AAA..."));
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), 0);
        assert_int_equal(res.pid, 11);
        assert_int_equal(res.exit_code, 0);
        assert_int_equal(o.size[0] + o.size[1], 0);
        vmm_agent_free(a);
        fake_stop(f);
}

/* The agent "restarts" mid-exec: a second HELLO on the same connection. */
static bool serve_restart(int fd, int conn)
{
        struct guest_msg_exec m;
        uint32_t id;

        (void)conn;
        send_hello(fd);
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        send_u32(fd, GUEST_MSG_STARTED, id, 5);
        send_hello(fd);
        if (!read_exec(fd, &id, &m)) /* the new agent serves the next request */
                return false;
        guest_msg_exec_done(&m);
        send_u32(fd, GUEST_MSG_STARTED, id, 6);
        send_exit(fd, id, 0);
        char tmp;
        (void)!read(fd, &tmp, 1);
        return false;
}

static void test_agent_restart(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_restart);
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;
        struct out o;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(a, 2000, &err), 0);
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), -ECONNRESET);
        assert_int_equal(exec_argv(a, "y", NULL, 0, &o, &res, &err), 0);
        assert_int_equal(res.pid, 6);
        vmm_agent_free(a);
        fake_stop(f);
}

static bool serve_silent(int fd, int conn)
{
        char tmp;

        (void)conn;
        while (read(fd, &tmp, 1) > 0) /* swallows PINGs, never says hello */
                ;
        return false;
}

static void test_not_ready(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_silent);
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;
        uint64_t t0 = fk_now_mono_ns();

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(a, 300, &err), -ETIMEDOUT);
        assert_true(fk_now_mono_ns() - t0 < 2000000000ull);
        vmm_agent_free(a);
        fake_stop(f);
        /* Nothing listens: connect gives up after its timeout. */
        assert_true(vmm_agent_connect("/nonexistent/agent.sock", 100, &a, &err) < 0);
        assert_non_null(strstr(err.msg, "/nonexistent/agent.sock"));
}

int main(void)
{
        signal(SIGPIPE, SIG_IGN); /* the fake guest writes to clients that hung up */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_stream),   cmocka_unit_test(test_exec_concurrent),
                cmocka_unit_test(test_hostile_guest), cmocka_unit_test(test_agent_restart),
                cmocka_unit_test(test_not_ready),     cmocka_unit_test(test_guest_text),
                cmocka_unit_test(test_hostile_text),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
