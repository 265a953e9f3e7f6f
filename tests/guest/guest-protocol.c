/* SPDX-License-Identifier: MIT */
/* The guest agent wire codec: round trips of every message, framing edge cases (truncated,
 * oversized, bad magic/version), and a fixed-seed randomized hostile-frame property test. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vmm/guest/protocol.h"

/* Literals into the codec's char * fields (never written through). */
#define S(x) ((char *)(x))

/* Checks b holds exactly one frame of type/id and returns its payload. */
static const uint8_t *one_frame(const struct guest_buf *b, uint16_t type, uint32_t id,
                                uint32_t *ret_len)
{
        struct guest_proto_header h;
        int r = guest_proto_frame_check(b->data, b->size, &h);

        assert_int_equal(r, (int)b->size);
        assert_int_equal(h.type, type);
        assert_int_equal(h.id, id);
        assert_int_equal(h.magic, GUEST_PROTO_MAGIC);
        assert_int_equal(h.version, GUEST_PROTO_VERSION);
        *ret_len = h.length;
        return b->data + GUEST_PROTO_HEADER_SIZE;
}

static void test_exec_roundtrip(void **state)
{
        (void)state;
        char *argv[] = {S("sh"), S("-c"), S("echo hi"), NULL};
        char *env[] = {S("A=1"), S("B=two=2"), NULL};
        struct guest_msg_exec m = {.flags = GUEST_EXEC_HAS_STDIN,
                                   .timeout_ms = 1234,
                                   .output_cap = 1ull << 40,
                                   .cwd = S("/tmp"),
                                   .argv = argv,
                                   .env = env};
        struct guest_msg_exec d;
        struct guest_buf b = {0};
        const uint8_t *p;
        uint32_t len;

        assert_int_equal(guest_proto_put_exec(&b, 77, &m), 0);
        p = one_frame(&b, GUEST_MSG_EXEC, 77, &len);
        assert_int_equal(guest_proto_get_exec(p, len, &d), 0);
        assert_int_equal(d.flags, GUEST_EXEC_HAS_STDIN);
        assert_int_equal(d.timeout_ms, 1234);
        assert_true(d.output_cap == 1ull << 40);
        assert_string_equal(d.cwd, "/tmp");
        for (int i = 0; i < 3; i++)
                assert_string_equal(d.argv[i], argv[i]);
        assert_null(d.argv[3]);
        assert_string_equal(d.env[1], "B=two=2");
        assert_null(d.env[2]);
        guest_msg_exec_done(&d);

        /* Every strict prefix of the payload is rejected. */
        for (uint32_t n = 0; n < len; n++) {
                assert_int_equal(guest_proto_get_exec(p, n, &d), -EBADMSG);
                assert_null(d.argv);
        }
        guest_buf_free(&b);
}

/* The user field is appended only when set: without it the frame is the older one, byte for
 * byte; with it, a frame cut inside it is malformed and one cut before it has no user. */
static void test_exec_user(void **state)
{
        (void)state;
        char *argv[] = {S("id"), NULL};
        char *env[] = {NULL};
        struct guest_msg_exec m = {.argv = argv, .env = env}, d;
        struct guest_buf plain = {0}, b = {0};
        const uint8_t *p;
        uint32_t len, plain_len;

        assert_int_equal(guest_proto_put_exec(&plain, 1, &m), 0);
        (void)one_frame(&plain, GUEST_MSG_EXEC, 1, &plain_len);
        m.user = S("app:staff");
        assert_int_equal(guest_proto_put_exec(&b, 1, &m), 0);
        p = one_frame(&b, GUEST_MSG_EXEC, 1, &len);
        assert_int_equal(len, plain_len + 4 + 9);
        assert_memory_equal(p, plain.data + GUEST_PROTO_HEADER_SIZE, plain_len);
        assert_int_equal(guest_proto_get_exec(p, len, &d), 0);
        assert_string_equal(d.user, "app:staff");
        guest_msg_exec_done(&d);
        assert_int_equal(guest_proto_get_exec(p, plain_len, &d), 0);
        assert_null(d.user);
        guest_msg_exec_done(&d);
        for (uint32_t n = plain_len + 1; n < len; n++)
                assert_int_equal(guest_proto_get_exec(p, n, &d), -EBADMSG);
        guest_buf_free(&plain);
        guest_buf_free(&b);
}

static void test_exec_invalid(void **state)
{
        (void)state;
        char *noargv[] = {NULL};
        char *argv[] = {S("true"), NULL};
        char *badenv[] = {S("NOEQUALS"), NULL};
        struct guest_msg_exec m = {.argv = noargv};
        struct guest_msg_exec d;
        struct guest_buf b = {0};
        const uint8_t *p;
        uint32_t len;

        assert_int_equal(guest_proto_put_exec(&b, 1, &m), -EINVAL);
        assert_int_equal(b.size, 0);
        /* The encoder does not judge env; the decoder (the agent) does. */
        m = (struct guest_msg_exec){.argv = argv, .env = badenv};
        assert_int_equal(guest_proto_put_exec(&b, 1, &m), 0);
        p = one_frame(&b, GUEST_MSG_EXEC, 1, &len);
        assert_int_equal(guest_proto_get_exec(p, len, &d), -EBADMSG);
        guest_buf_free(&b);
}

static void test_small_messages(void **state)
{
        (void)state;
        struct guest_msg_hello h = {
                .proto_version = 1, .capabilities = 5, .agent_version = S("9.9")};
        struct guest_msg_exit x = {
                .exit_code = -1, .signal = 9, .flags = GUEST_EXIT_SIGNALED | GUEST_EXIT_TIMED_OUT};
        struct guest_msg_hello hd;
        struct guest_msg_exit xd;
        struct guest_msg_error ed;
        struct guest_buf b = {0};
        const uint8_t *p;
        uint32_t len, v;

        assert_int_equal(guest_proto_put_hello(&b, &h), 0);
        p = one_frame(&b, GUEST_MSG_HELLO, 0, &len);
        assert_int_equal(guest_proto_get_hello(p, len, &hd), 0);
        assert_int_equal(hd.capabilities, 5);
        assert_string_equal(hd.agent_version, "9.9");
        guest_msg_hello_done(&hd);
        guest_buf_free(&b);

        assert_int_equal(guest_proto_put_exit(&b, 3, &x), 0);
        p = one_frame(&b, GUEST_MSG_EXIT, 3, &len);
        assert_int_equal(guest_proto_get_exit(p, len, &xd), 0);
        assert_int_equal(xd.exit_code, -1);
        assert_int_equal(xd.signal, 9);
        assert_int_equal(xd.flags, x.flags);
        guest_buf_free(&b);

        assert_int_equal(guest_proto_put_u32(&b, GUEST_MSG_STARTED, 4, 4242), 0);
        p = one_frame(&b, GUEST_MSG_STARTED, 4, &len);
        assert_int_equal(guest_proto_get_u32(p, len, &v), 0);
        assert_int_equal(v, 4242);
        assert_int_equal(guest_proto_get_u32(p, 3, &v), -EBADMSG);
        guest_buf_free(&b);

        uint64_t ns = 1795910400123456789ull, got = 0;
        assert_int_equal(guest_proto_put_u64(&b, GUEST_MSG_SET_TIME, 6, ns), 0);
        p = one_frame(&b, GUEST_MSG_SET_TIME, 6, &len);
        assert_int_equal(len, 8);
        assert_int_equal(guest_proto_get_u64(p, len, &got), 0);
        assert_true(got == ns);
        assert_int_equal(guest_proto_get_u64(p, 7, &got), -EBADMSG);
        guest_buf_free(&b);

        assert_int_equal(guest_proto_put_error(&b, 5, ENOENT, "no such thing"), 0);
        p = one_frame(&b, GUEST_MSG_ERROR, 5, &len);
        assert_int_equal(guest_proto_get_error(p, len, &ed), 0);
        assert_int_equal(ed.error, ENOENT);
        assert_string_equal(ed.message, "no such thing");
        guest_msg_error_done(&ed);
        guest_buf_free(&b);

        /* An error code that is not a positive errno is a hostile reply. */
        assert_int_equal(guest_proto_put_error(&b, 5, 0, "success?"), 0);
        p = one_frame(&b, GUEST_MSG_ERROR, 5, &len);
        assert_int_equal(guest_proto_get_error(p, len, &ed), -EBADMSG);
        guest_buf_free(&b);
}

static void test_file_identity_path(void **state)
{
        (void)state;
        struct guest_msg_file_write w = {.path = S("/w/f"),
                                         .mode = 0600,
                                         .flags = 1,
                                         .offset = 65536,
                                         .data = (const uint8_t *)"abc",
                                         .size = 3};
        struct guest_msg_file_read rd = {.path = S("/etc/x"), .offset = 7, .max = 100};
        struct guest_msg_identity id = {.fork_id = S("f-1"),
                                        .hostname = S("h"),
                                        .entropy = (const uint8_t *)"\0\1\2\3",
                                        .entropy_size = 4};
        struct guest_msg_file_write wd;
        struct guest_msg_file_read rdd;
        struct guest_msg_identity idd;
        struct guest_msg_path pd;
        struct guest_buf b = {0};
        const uint8_t *p;
        uint32_t len;

        assert_int_equal(guest_proto_put_file_write(&b, 9, &w), 0);
        p = one_frame(&b, GUEST_MSG_FILE_WRITE, 9, &len);
        assert_int_equal(guest_proto_get_file_write(p, len, &wd), 0);
        assert_string_equal(wd.path, "/w/f");
        assert_int_equal(wd.mode, 0600);
        assert_int_equal(wd.offset, 65536);
        assert_int_equal(wd.size, 3);
        assert_memory_equal(wd.data, "abc", 3);
        guest_msg_path_done(&wd.path);
        guest_buf_free(&b);

        assert_int_equal(guest_proto_put_file_read(&b, 10, &rd), 0);
        p = one_frame(&b, GUEST_MSG_FILE_READ, 10, &len);
        assert_int_equal(guest_proto_get_file_read(p, len, &rdd), 0);
        assert_string_equal(rdd.path, "/etc/x");
        assert_int_equal(rdd.max, 100);
        guest_msg_path_done(&rdd.path);
        guest_buf_free(&b);

        assert_int_equal(guest_proto_put_identity(&b, 11, &id), 0);
        p = one_frame(&b, GUEST_MSG_SET_IDENTITY, 11, &len);
        assert_int_equal(guest_proto_get_identity(p, len, &idd), 0);
        assert_string_equal(idd.fork_id, "f-1");
        assert_int_equal(idd.entropy_size, 4);
        assert_memory_equal(idd.entropy, "\0\1\2\3", 4);
        guest_msg_identity_done(&idd);
        guest_buf_free(&b);

        /* Relative paths are refused by the decoder. */
        assert_int_equal(guest_proto_put_path(&b, GUEST_MSG_FSFREEZE, 12, "workspace"), 0);
        p = one_frame(&b, GUEST_MSG_FSFREEZE, 12, &len);
        assert_int_equal(guest_proto_get_path(p, len, &pd), -EBADMSG);
        guest_buf_free(&b);
}

static void test_framing(void **state)
{
        (void)state;
        struct guest_proto_header h;
        struct guest_buf b = {0};
        uint8_t raw[GUEST_PROTO_HEADER_SIZE];
        uint8_t *big;

        assert_int_equal(guest_proto_put_raw(&b, GUEST_MSG_PING, 1, "xy", 2), 0);
        /* Truncated: every prefix needs more bytes. */
        for (size_t n = 0; n < b.size; n++)
                assert_int_equal(guest_proto_frame_check(b.data, n, &h), 0);
        memcpy(raw, b.data, sizeof(raw));
        raw[0] ^= 0xff;
        assert_int_equal(guest_proto_frame_check(raw, 4, &h), -EBADMSG);
        memcpy(raw, b.data, sizeof(raw));
        raw[4] = 2;
        assert_int_equal(guest_proto_frame_check(raw, sizeof(raw), &h), -EPROTONOSUPPORT);
        memcpy(raw, b.data, sizeof(raw));
        raw[16] = 1, raw[17] = 0, raw[18] = 0x10, raw[19] = 0; /* 1 MiB + 1 */
        assert_int_equal(guest_proto_frame_check(raw, sizeof(raw), &h), -EMSGSIZE);
        raw[16] = 0; /* exactly 1 MiB: allowed, needs more bytes */
        assert_int_equal(guest_proto_frame_check(raw, sizeof(raw), &h), 0);
        guest_buf_free(&b);

        big = calloc(1, GUEST_PROTO_MAX_PAYLOAD + 1);
        assert_non_null(big);
        assert_int_equal(
                guest_proto_put_raw(&b, GUEST_MSG_STDOUT, 1, big, GUEST_PROTO_MAX_PAYLOAD + 1),
                -EMSGSIZE);
        assert_int_equal(b.size, 0);
        assert_int_equal(guest_proto_put_raw(&b, GUEST_MSG_STDOUT, 1, big, GUEST_PROTO_MAX_PAYLOAD),
                         0);
        assert_int_equal(guest_proto_frame_check(b.data, b.size, &h), (int)GUEST_PROTO_MAX_FRAME);
        free(big);
        guest_buf_free(&b);
}

static void test_trailing_fields_ignored(void **state)
{
        (void)state;
        /* A later version may append fields: an older decoder must accept and ignore them. */
        uint8_t p[16] = {7, 0, 0, 0, 0xaa, 0xbb};
        uint32_t v;

        assert_int_equal(guest_proto_get_u32(p, sizeof(p), &v), 0);
        assert_int_equal(v, 7);
        assert_string_equal(guest_msg_type_to_string(GUEST_MSG_EXEC), "EXEC");
        assert_string_equal(guest_msg_type_to_string(999), "?");
        /* every type has a name (a missing one prints "?" in the host's protocol errors) */
        for (int t = 1; t < _GUEST_MSG_MAX; t++)
                assert_string_not_equal(guest_msg_type_to_string(t), "?");
}

/* xorshift64*: fixed seed so a failure reproduces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 2685821657736338717ull;
}

/* Feeds one payload to every decoder; whatever they return, they must not crash, and a
 * success must yield well-formed data. */
static void decode_all(const uint8_t *p, size_t n)
{
        struct guest_msg_hello h;
        struct guest_msg_exec e;
        struct guest_msg_exit x;
        struct guest_msg_error er;
        struct guest_msg_file_write fw;
        struct guest_msg_file_read fr;
        struct guest_msg_file_data fd;
        struct guest_msg_identity id;
        struct guest_msg_path pa;
        uint32_t v;

        if (guest_proto_get_hello(p, n, &h) == 0)
                guest_msg_hello_done(&h);
        if (guest_proto_get_exec(p, n, &e) == 0) {
                assert_non_null(e.argv[0]);
                for (size_t i = 0; e.env[i]; i++)
                        assert_non_null(strchr(e.env[i], '='));
                guest_msg_exec_done(&e);
        }
        (void)guest_proto_get_u32(p, n, &v);
        (void)guest_proto_get_u64(p, n, &(uint64_t){0});
        (void)guest_proto_get_exit(p, n, &x);
        if (guest_proto_get_error(p, n, &er) == 0) {
                assert_true(er.error > 0);
                guest_msg_error_done(&er);
        }
        if (guest_proto_get_file_write(p, n, &fw) == 0) {
                assert_true(fw.data + fw.size <= p + n);
                guest_msg_path_done(&fw.path);
        }
        if (guest_proto_get_file_read(p, n, &fr) == 0)
                guest_msg_path_done(&fr.path);
        if (guest_proto_get_file_data(p, n, &fd) == 0)
                assert_true(fd.data + fd.size <= p + n);
        if (guest_proto_get_identity(p, n, &id) == 0)
                guest_msg_identity_done(&id);
        if (guest_proto_get_path(p, n, &pa) == 0)
                guest_msg_path_done(&pa.path);
}

static void test_hostile_frames(void **state)
{
        (void)state;
        char *argv[] = {S("sh"), S("-c"), S("x"), NULL};
        char *env[] = {S("K=V"), NULL};
        struct guest_msg_exec m = {.cwd = S("/"), .argv = argv, .env = env};
        struct guest_msg_identity id = {.fork_id = S("a"),
                                        .hostname = S("b"),
                                        .entropy = (const uint8_t *)"zz",
                                        .entropy_size = 2};
        struct guest_buf seeds[4] = {{0}};
        int accepted = 0;

        assert_int_equal(guest_proto_put_exec(&seeds[0], 1, &m), 0);
        assert_int_equal(guest_proto_put_identity(&seeds[1], 2, &id), 0);
        assert_int_equal(guest_proto_put_error(&seeds[2], 3, 5, "e"), 0);
        assert_int_equal(guest_proto_put_path(&seeds[3], GUEST_MSG_FSTHAW, 4, "/x"), 0);
        for (int iter = 0; iter < 20000; iter++) {
                const struct guest_buf *s = &seeds[rnd() % 4];
                size_t n = s->size + (rnd() % 3 == 0 ? rnd() % 64 : 0);
                uint8_t *buf = malloc(n ? n : 1);
                struct guest_proto_header h;
                int r;

                assert_non_null(buf);
                if (rnd() % 8 == 0) { /* pure garbage */
                        for (size_t i = 0; i < n; i++)
                                buf[i] = (uint8_t)rnd();
                } else { /* a valid frame with a few bytes flipped, maybe truncated */
                        memset(buf, 0, n);
                        memcpy(buf, s->data, n < s->size ? n : s->size);
                        for (int k = (int)(rnd() % 4); k >= 0; k--)
                                buf[rnd() % n] = (uint8_t)rnd();
                        n = rnd() % 4 == 0 ? rnd() % (n + 1) : n;
                }
                r = guest_proto_frame_check(buf, n, &h);
                assert_true(r <= (int)n);
                if (r > 0) {
                        assert_true(h.length <= GUEST_PROTO_MAX_PAYLOAD);
                        accepted++;
                }
                /* Decode the bytes after a header whether or not the header was fine. */
                if (n >= GUEST_PROTO_HEADER_SIZE)
                        decode_all(buf + GUEST_PROTO_HEADER_SIZE, n - GUEST_PROTO_HEADER_SIZE);
                decode_all(buf, n);
                free(buf);
        }
        /* The mutations keep many headers intact, so the decoders saw real payloads. */
        assert_true(accepted > 1000);
        for (int i = 0; i < 4; i++)
                guest_buf_free(&seeds[i]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_roundtrip),
                cmocka_unit_test(test_exec_user),
                cmocka_unit_test(test_exec_invalid),
                cmocka_unit_test(test_small_messages),
                cmocka_unit_test(test_file_identity_path),
                cmocka_unit_test(test_framing),
                cmocka_unit_test(test_trailing_fields_ignored),
                cmocka_unit_test(test_hostile_frames),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
