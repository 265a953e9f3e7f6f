/* SPDX-License-Identifier: MIT */
/* The host agent client against hostile fake guests: garbage, oversized and stalled frames -> an
 * error, a reconnect, no crash; guest text (version, error messages) only escaped and cut;
 * frames for foreign ids and unknown types ignored. */
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

#include "tests/lib/guest-fake.h"

#include "common/util.h"
#include "vmm/agent-client/agent-client-internal.h"
#include "vmm/guest/protocol.h"
#include "vmm/vmm.h"

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
        vmm_agent_guest_text("ok 1.0", out, sizeof(out));
        assert_string_equal(out, "ok 1.0");
        vmm_agent_guest_text("a\nb\x1b\\\xff", out, sizeof(out));
        assert_string_equal(out, "a\\x0ab\\x1b...");
        vmm_agent_guest_text(NULL, out, sizeof(out));
        assert_string_equal(out, "");
        vmm_agent_guest_text("%s%n%s%n%s%n%s%n%s%n", big, sizeof(big));
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
        if (!read_exec(fd, &id, &m)) /* an EXIT with a signal no kernel has */
                return false;
        guest_msg_exec_done(&m);
        send_u32(fd, GUEST_MSG_STARTED, id, 12);
        assert_int_equal(
                guest_proto_put_exit(&b, id,
                                     &(struct guest_msg_exit){.signal = INT32_MIN,
                                                              .flags = GUEST_EXIT_SIGNALED}),
                0);
        send_buf(fd, &b);
        char tmp;
        while (read(fd, &tmp, 1) > 0) /* the host hangs up on it */
                ;
        return false;
}

static void test_hostile_text(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_hostile_text);
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;
        char v[AGENT_GUEST_TEXT_MAX];
        struct out o;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(a, 2000, &err), 0);
        assert_int_equal(vmm_agent_guest_version(a, v, sizeof(v)), 0);
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
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), -EPROTO);
        vmm_agent_free(a);
        fake_stop(f);
}

/* A header announcing more than ever comes: the host gives up on the frame, drops the channel
 * and the reconnected guest serves again (without it every later reply would be swallowed). */
static bool serve_stall(int fd, int conn)
{
        struct guest_msg_exec m;
        uint8_t hdr[GUEST_PROTO_HEADER_SIZE];
        struct guest_buf b = {0};
        uint32_t id;

        send_hello(fd);
        if (!read_exec(fd, &id, &m))
                return false;
        guest_msg_exec_done(&m);
        if (conn == 0) {
                assert_int_equal(guest_proto_put_raw(&b, GUEST_MSG_STDOUT, id, NULL, 0), 0);
                memcpy(hdr, b.data, sizeof(hdr));
                guest_buf_free(&b);
                hdr[17] = 0x10; /* 4096 bytes announced, 8 sent */
                (void)fk_write_all(fd, hdr, sizeof(hdr));
                (void)fk_write_all(fd, "partial!", 8);
        } else {
                send_u32(fd, GUEST_MSG_STARTED, id, 8);
                send_exit(fd, id, 0);
        }
        char tmp;
        while (read(fd, &tmp, 1) > 0)
                ;
        return conn == 0;
}

static void test_stalled_frame(void **state)
{
        (void)state;
        struct fake *f = fake_start(serve_stall);
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct vmm_agent *a = NULL;
        uint64_t t0;
        struct out o;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        a->partial_frame_ms = 300;
        assert_int_equal(vmm_agent_wait_ready(a, 2000, &err), 0);
        t0 = fk_now_mono_ns();
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), -EPROTO);
        assert_true(fk_now_mono_ns() - t0 < 5000000000ull);
        assert_int_equal(vmm_agent_wait_ready(a, 5000, &err), 0);
        assert_int_equal(exec_argv(a, "x", NULL, 0, &o, &res, &err), 0);
        assert_int_equal(res.pid, 8);
        vmm_agent_free(a);
        fake_stop(f);
}

int main(void)
{
        signal(SIGPIPE, SIG_IGN); /* the fake guest writes to clients that hung up */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hostile_guest),
                cmocka_unit_test(test_guest_text),
                cmocka_unit_test(test_hostile_text),
                cmocka_unit_test(test_stalled_frame),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
