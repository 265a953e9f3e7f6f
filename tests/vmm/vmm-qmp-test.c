/* SPDX-License-Identifier: MIT */
/* The QMP protocol layer (encode, line splitting, decode) and the client driven through a
 * socketpair() by a fake QEMU thread that plays recorded replies (tests/lib/qmp-fake.h). */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "tests/lib/qmp-fake.h"
#include "vmm/vmm-internal.h"
#include "vmm/vmm.h"

#define EV_STOP                                                                                    \
        "{\"timestamp\": {\"seconds\": 1764407400, \"microseconds\": 1}, \"event\": \"STOP\"}\r\n"

/* ---- pure protocol ------------------------------------------------------------------------ */

static void test_encode(void **state)
{
        cleanup_free char *line = NULL;
        json_t *args = json_pack("{s:s}", "uri", "exec:cat > /tmp/x");
        size_t len;

        (void)state;
        assert_int_equal(qmp_proto_encode("query-status", NULL, 7, &line, &len), 0);
        assert_string_equal(line, "{\"execute\":\"query-status\",\"id\":7}\n");
        assert_int_equal(len, strlen(line));
        free(line);
        assert_int_equal(qmp_proto_encode("migrate", args, 8, &line, NULL), 0);
        assert_string_equal(line,
                            "{\"execute\":\"migrate\",\"id\":8,\"arguments\":{\"uri\":\"exec:cat > "
                            "/tmp/x\"}}\n");
        json_decref(args);
        args = json_array();
        assert_int_equal(qmp_proto_encode("x", args, 1, &line, NULL), -EINVAL);
        json_decref(args);
        assert_int_equal(qmp_proto_encode("", NULL, 1, &line, NULL), -EINVAL);
}

static void expect_kind(const char *line, enum qmp_msg_kind want)
{
        struct fk_error err = {};
        enum qmp_msg_kind kind;
        json_t *msg = NULL;

        assert_int_equal(qmp_proto_decode(line, strlen(line), &msg, &kind, &err), 0);
        assert_int_equal(kind, want);
        json_decref(msg);
}

static void test_decode(void **state)
{
        struct fk_error err = {};
        enum qmp_msg_kind kind;
        json_t *msg = NULL;
        uint64_t id = 0;
        const char *err_line =
                "{\"id\": 4, \"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command "
                "nope has not been found\"}}";

        (void)state;
        expect_kind(QMP_FAKE_GREETING, QMP_MSG_GREETING);
        expect_kind(QMP_FAKE_CAPS_OK, QMP_MSG_RETURN);
        expect_kind(EV_STOP, QMP_MSG_EVENT);
        expect_kind(err_line, QMP_MSG_ERROR);

        assert_int_equal(qmp_proto_decode(err_line, strlen(err_line), &msg, &kind, &err), 0);
        assert_int_equal(qmp_proto_msg_id(msg, &id), 1);
        assert_int_equal(id, 4);
        assert_int_equal(qmp_proto_error_to_fk(msg, "nope", &err), -EIO);
        assert_string_equal(err.msg,
                            "QMP nope: CommandNotFound: The command nope has not been found");
        json_decref(msg);

        assert_int_equal(qmp_proto_decode("{\"return\": {}}", 14, &msg, &kind, &err), 0);
        assert_int_equal(qmp_proto_msg_id(msg, &id), 0);
        json_decref(msg);

        assert_int_equal(qmp_proto_decode("garbage", 7, &msg, &kind, &err), -EBADMSG);
        assert_non_null(strstr(err.msg, "malformed"));
        assert_int_equal(qmp_proto_decode("{\"foo\": 1}", 10, &msg, &kind, &err), -EBADMSG);
        assert_non_null(strstr(err.msg, "unknown message"));
        assert_int_equal(qmp_proto_decode("[1, 2]", 6, &msg, &kind, &err), -EBADMSG);
}

static int feed(struct qmp_linebuf *b, const char *s)
{
        return qmp_linebuf_feed(b, s, strlen(s));
}

static void test_linebuf(void **state)
{
        struct qmp_linebuf b = {};
        char *line = NULL;

        (void)state;
        assert_int_equal(feed(&b, "{\"a\":"), 0);
        assert_int_equal(qmp_linebuf_next(&b, &line), 0);
        assert_int_equal(feed(&b, " 1}\r\n\r\n{\"b\": 2}\r\n{\"c\""), 0);
        assert_int_equal(qmp_linebuf_next(&b, &line), 1);
        assert_string_equal(line, "{\"a\": 1}");
        free(line);
        /* The blank line is skipped. */
        assert_int_equal(qmp_linebuf_next(&b, &line), 1);
        assert_string_equal(line, "{\"b\": 2}");
        free(line);
        assert_int_equal(qmp_linebuf_next(&b, &line), 0);
        assert_int_equal(feed(&b, ": 3}\n"), 0);
        assert_int_equal(qmp_linebuf_next(&b, &line), 1);
        assert_string_equal(line, "{\"c\": 3}");
        free(line);
        assert_int_equal(b.len, 0);
        qmp_linebuf_done(&b);
}

static void test_linebuf_limit(void **state)
{
        struct qmp_linebuf b = {};
        size_t chunk = 1 << 20;
        char *big = malloc(chunk);
        int r = 0;

        (void)state;
        assert_non_null(big);
        memset(big, 'x', chunk);
        for (unsigned i = 0; i <= QMP_LINE_MAX / chunk && r == 0; i++)
                r = qmp_linebuf_feed(&b, big, chunk);
        assert_int_equal(r, -EMSGSIZE);
        free(big);
        qmp_linebuf_done(&b);
}

/* ---- client over a socketpair ------------------------------------------------------------ */

static void test_client_commands(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                /* Reply split across writes, with an event before it. */
                {"\"query-status\"", EV_STOP "{\"return\": {\"status\": \"pau", 0, false},
                {NULL, "sed\", \"singlestep\": false, \"running\": false}, \"id\": 2}\r\n", 20,
                 false},
                {"\"nope\"",
                 "{\"id\": 3, \"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command "
                 "nope has not been found\"}}\r\n",
                 0, false},
                {"\"arguments\":{\"uri\":\"exec:cat\"}",
                 "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": \"RESUME\"}\r\n"
                 "{\"return\": {}, \"id\": 4}\r\n",
                 0, false},
        };
        struct qmp_fake f;
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        cleanup_free char *status = NULL;
        json_t *ev = NULL;
        int fd = qmp_fake_start(&f, steps, ARRAY_SIZE(steps), false);

        (void)state;
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), 0);
        assert_int_equal(qmp_query_status(c, 2000, &status, &err), 0);
        assert_string_equal(status, "paused");
        assert_int_equal(qmp_execute(c, "nope", NULL, 2000, NULL, &err), -EIO);
        assert_string_equal(err.msg,
                            "QMP nope: CommandNotFound: The command nope has not been found");
        /* qmp_execute_take: a failed json_pack is -ENOMEM, nothing sent (the fake would see
         * an unexpected command); the args it takes are dropped (ASan's leak check) */
        assert_int_equal(qmp_execute_take(c, "migrate", NULL, 2000, NULL, &err), -ENOMEM);
        assert_string_equal(err.msg, "out of memory");
        assert_int_equal(qmp_execute_take(c, "migrate", json_pack("{s:s}", "uri", "exec:cat"), 2000,
                                          NULL, &err),
                         0);
        /* Events were queued in order. */
        assert_int_equal(qmp_next_event(c, &ev), 1);
        assert_string_equal(json_string_value(json_object_get(ev, "event")), "STOP");
        json_decref(ev);
        assert_int_equal(qmp_next_event(c, &ev), 1);
        assert_string_equal(json_string_value(json_object_get(ev, "event")), "RESUME");
        json_decref(ev);
        assert_int_equal(qmp_next_event(c, &ev), 0);
        assert_null(ev);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

static void test_client_timeout_then_stale(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                /* The reply to id 2 arrives late, after the client gave up... */
                {"\"id\":2", NULL, 0, false},
                /* ...so it precedes the reply to id 3, and must be dropped. */
                {"\"id\":3",
                 "{\"return\": {\"status\": \"running\"}, \"id\": 2}\r\n"
                 "{\"return\": {\"status\": \"paused\"}, \"id\": 3}\r\n",
                 0, false},
        };
        struct qmp_fake f;
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        cleanup_free char *status = NULL;
        uint64_t t0;
        int fd = qmp_fake_start(&f, steps, ARRAY_SIZE(steps), false);

        (void)state;
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), 0);
        t0 = fk_now_mono_ns();
        assert_int_equal(qmp_execute(c, "query-status", NULL, 100, NULL, &err), -ETIMEDOUT);
        assert_true(fk_now_mono_ns() - t0 >= 90 * 1000000ULL);
        assert_true(fk_now_mono_ns() - t0 < 1000 * 1000000ULL);
        assert_non_null(strstr(err.msg, "timed out"));
        assert_int_equal(qmp_query_status(c, 2000, &status, &err), 0);
        assert_string_equal(status, "paused");
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

static void test_client_garbage_and_eof(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {"query-status", "this is not json\r\n", 0, false},
                {"query-status", "{\"return\": {\"status\": \"running\"}, \"id\": 3}\r\n", 0,
                 false},
                /* quit: QEMU closes the socket without answering. */
                {"\"quit\"", NULL, 0, true},
        };
        struct qmp_fake f;
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        cleanup_free char *status = NULL;
        int fd = qmp_fake_start(&f, steps, ARRAY_SIZE(steps), false);

        (void)state;
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), 0);
        assert_int_equal(qmp_query_status(c, 2000, &status, &err), -EBADMSG);
        assert_non_null(strstr(err.msg, "malformed"));
        /* The stream resynchronises on the next line. */
        assert_int_equal(qmp_query_status(c, 2000, &status, &err), 0);
        assert_string_equal(status, "running");
        assert_int_equal(qmp_execute(c, "quit", NULL, 2000, NULL, &err), -ECONNRESET);
        assert_non_null(strstr(err.msg, "closed"));
        /* Later calls fail at once. */
        assert_int_equal(qmp_execute(c, "query-status", NULL, 2000, NULL, &err), -ECONNRESET);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

/* pump: events of an idle client are queued without a command; a stray reply and garbage
 * are dropped; what came before QEMU closed the socket is still queued. */
static void test_client_pump(void **state)
{
        const struct qmp_fake_step steps[] = {
                QMP_FAKE_HANDSHAKE,
                {NULL,
                 "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": "
                 "\"BLOCK_IO_ERROR\", \"data\": {\"device\": \"disk0\", \"nospace\": true, "
                 "\"action\": \"stop\"}}\r\n"
                 "{\"return\": {}, \"id\": 9}\r\nnot json\r\n" EV_STOP "{\"event\": \"RES",
                 0, false},
                {NULL, "UME\", \"timestamp\": {\"seconds\": 3, \"microseconds\": 0}}\r\n", 100,
                 true},
        };
        static const char *const want[] = {"BLOCK_IO_ERROR", "STOP", "RESUME"};
        struct qmp_fake f;
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        json_t *ev = NULL;
        int fd = qmp_fake_start(&f, steps, ARRAY_SIZE(steps), false), r = 0;

        (void)state;
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), 0);
        assert_true(qmp_client_fd(c) >= 0);
        /* nothing sent yet or only part of it: never blocks */
        for (int i = 0; i < 200 && (r = qmp_client_pump(c)) == 0; i++)
                usleep(10000);
        assert_int_equal(r, -ECONNRESET);
        assert_int_equal(qmp_client_fd(c), -1);
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                assert_int_equal(qmp_next_event(c, &ev), 1);
                assert_string_equal(json_string_value(json_object_get(ev, "event")), want[i]);
                json_decref(ev);
        }
        assert_int_equal(qmp_next_event(c, &ev), 0);
        assert_int_equal(qmp_client_pump(c), -ECONNRESET);
        assert_int_equal(qmp_client_pump(NULL), -EINVAL);
        qmp_client_free(c);
        qmp_fake_finish(&f);
}

static void test_client_bad_greeting(void **state)
{
        const struct qmp_fake_step no_greeting[] = {
                {NULL, "{\"return\": {}}\r\n", 0, false},
        };
        const struct qmp_fake_step caps_refused[] = {
                {NULL, QMP_FAKE_GREETING, 0, false},
                {"qmp_capabilities",
                 "{\"id\": 1, \"error\": {\"class\": \"CommandNotFound\", \"desc\": "
                 "\"Capabilities negotiation is already complete, command ignored\"}}\r\n",
                 0, false},
        };
        const struct qmp_fake_step silent[] = {
                {NULL, NULL, 300, false},
        };
        const struct qmp_fake_step hangup[] = {
                {NULL, "{\"QMP\": {\"vers", 0, true},
        };
        struct qmp_fake f;
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        int fd;

        (void)state;
        fd = qmp_fake_start(&f, no_greeting, ARRAY_SIZE(no_greeting), false);
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), -EPROTO);
        assert_null(c);
        qmp_fake_finish(&f);

        fd = qmp_fake_start(&f, caps_refused, ARRAY_SIZE(caps_refused), false);
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), -EIO);
        assert_non_null(strstr(err.msg, "CommandNotFound: Capabilities negotiation"));
        qmp_fake_finish(&f);

        fd = qmp_fake_start(&f, silent, ARRAY_SIZE(silent), false);
        assert_int_equal(qmp_client_new_fd(fd, 100, &c, &err), -ETIMEDOUT);
        qmp_fake_finish(&f);

        fd = qmp_fake_start(&f, hangup, ARRAY_SIZE(hangup), false);
        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), -ECONNRESET);
        qmp_fake_finish(&f);
}

static void test_connect_missing_socket(void **state)
{
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        char longpath[200];
        uint64_t t0 = fk_now_mono_ns();

        (void)state;
        assert_int_equal(qmp_client_connect("/nonexistent/forklet-qmp.sock", 150, &c, &err),
                         -ETIMEDOUT);
        assert_true(fk_now_mono_ns() - t0 >= 140 * 1000000ULL);
        assert_non_null(strstr(err.msg, "did not accept connections"));
        memset(longpath, 'a', sizeof(longpath) - 1);
        longpath[sizeof(longpath) - 1] = '\0';
        assert_int_equal(qmp_client_connect(longpath, 150, &c, &err), -ENAMETOOLONG);
        assert_null(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_encode),
                cmocka_unit_test(test_decode),
                cmocka_unit_test(test_linebuf),
                cmocka_unit_test(test_linebuf_limit),
                cmocka_unit_test(test_client_commands),
                cmocka_unit_test(test_client_timeout_then_stale),
                cmocka_unit_test(test_client_garbage_and_eof),
                cmocka_unit_test(test_client_pump),
                cmocka_unit_test(test_client_bad_greeting),
                cmocka_unit_test(test_connect_missing_socket),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
