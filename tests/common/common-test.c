/* SPDX-License-Identifier: MIT */
/* common/: base64 (RFC 4648 vectors, binary round trip, bad input), SHA-256 (FIPS 180-2
 * vectors), the host id and the socket relay (both directions, half-close). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

static void test_base64_vectors(void **state)
{
        static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
        static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                          "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

        (void)state;
        for (size_t i = 0; i < 7; i++) {
                char *s = NULL;
                void *d = NULL;
                size_t n = 99;

                assert_int_equal(fk_base64_encode(plain[i], strlen(plain[i]), &s), 0);
                assert_string_equal(s, enc[i]);
                assert_int_equal(fk_base64_decode(enc[i], strlen(enc[i]), &d, &n), 0);
                assert_int_equal(n, strlen(plain[i]));
                assert_memory_equal(d, plain[i], n);
                assert_int_equal(((char *)d)[n], '\0');
                free(s);
                free(d);
        }
}

static void test_base64_binary_roundtrip(void **state)
{
        unsigned char data[256];

        (void)state;
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char)(255 - i);
        for (size_t len = 0; len <= sizeof(data); len += 37) {
                char *s = NULL;
                void *d = NULL;
                size_t n;

                assert_int_equal(fk_base64_encode(data, len, &s), 0);
                assert_int_equal(strlen(s), (len + 2) / 3 * 4);
                assert_int_equal(fk_base64_decode(s, strlen(s), &d, &n), 0);
                assert_int_equal(n, len);
                if (len)
                        assert_memory_equal(d, data, len);
                free(s);
                free(d);
        }
}

static void test_base64_bad(void **state)
{
        void *d = NULL;
        size_t n;

        (void)state;
        assert_int_equal(fk_base64_decode("Zm9v!", 5, &d, &n), -EINVAL);
        assert_int_equal(fk_base64_decode("Z", 1, &d, &n), -EINVAL);
        assert_int_equal(fk_base64_decode("Zm=v", 4, &d, &n), -EINVAL);
        assert_int_equal(fk_base64_decode("Zm9v\n", 5, &d, &n), -EINVAL);
        /* Non-zero leftover bits: not canonical. */
        assert_int_equal(fk_base64_decode("Zh==", 4, &d, &n), -EINVAL);
        assert_null(d);
        /* Unpadded is accepted; only len bytes are read. */
        assert_int_equal(fk_base64_decode("Zm8XXXX", 3, &d, &n), 0);
        assert_int_equal(n, 2);
        assert_memory_equal(d, "fo", 2);
        free(d);
}

static void test_sha256(void **state)
{
        static const char *const abc2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        char hex[65], block[1000];
        struct fk_sha256 c;
        uint8_t d[32];

        (void)state;
        fk_sha256_hex("abc", 3, hex);
        assert_string_equal(hex,
                            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        fk_sha256_hex(abc2, strlen(abc2), hex);
        assert_string_equal(hex,
                            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        fk_sha256_hex("", 0, hex);
        assert_string_equal(hex,
                            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        /* One million 'a', fed in uneven pieces to cross block boundaries. */
        memset(block, 'a', sizeof(block));
        fk_sha256_init(&c);
        for (size_t done = 0, step = 1; done < 1000000; step = step % 997 + 1) {
                size_t n = FK_MIN(step, 1000000 - done);

                fk_sha256_update(&c, block, n);
                done += n;
        }
        fk_sha256_final(&c, d);
        fk_hex(d, sizeof(d), hex);
        assert_string_equal(hex,
                            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_host_id(void **state)
{
        char a[FK_HOST_ID_SIZE], b[FK_HOST_ID_SIZE];

        (void)state;
        assert_int_equal(fk_host_id(a), 0);
        assert_int_equal(strlen(a), FK_HOST_ID_SIZE - 1);
        for (size_t i = 0; a[i]; i++)
                assert_true(isxdigit((unsigned char)a[i]) && !isupper((unsigned char)a[i]));
        assert_int_equal(fk_host_id(b), 0);
        assert_string_equal(a, b);
}

struct relay_run {
        int a, b, r;
};

static void *relay_thread(void *p)
{
        struct relay_run *run = p;

        run->r = fk_relay(run->a, run->b);
        return NULL;
}

/* client <-> (a | relay | b) <-> server: bytes cross both ways, a half-close travels through
 * and the relay returns once both directions ended. */
static void test_relay(void **state)
{
        int ca[2], bs[2];
        struct relay_run run;
        pthread_t t;
        char buf[16];

        (void)state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ca), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bs), 0);
        run = (struct relay_run){.a = ca[1], .b = bs[0], .r = 1};
        assert_int_equal(pthread_create(&t, NULL, relay_thread, &run), 0);
        assert_int_equal(fk_write_all(ca[0], "ping", 4), 0);
        assert_int_equal(fk_read_all(bs[1], buf, 4), 0);
        assert_memory_equal(buf, "ping", 4);
        assert_int_equal(fk_write_all(bs[1], "pong!", 5), 0);
        assert_int_equal(fk_read_all(ca[0], buf, 5), 0);
        assert_memory_equal(buf, "pong!", 5);
        /* The client's EOF reaches the server; the server can still answer. */
        assert_int_equal(shutdown(ca[0], SHUT_WR), 0);
        assert_int_equal(read(bs[1], buf, sizeof(buf)), 0);
        assert_int_equal(fk_write_all(bs[1], "bye", 3), 0);
        assert_int_equal(fk_read_all(ca[0], buf, 3), 0);
        assert_memory_equal(buf, "bye", 3);
        assert_int_equal(shutdown(bs[1], SHUT_WR), 0);
        assert_int_equal(read(ca[0], buf, sizeof(buf)), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(run.r, 0);
        for (int i = 0; i < 2; i++) {
                close(ca[i]);
                close(bs[i]);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_base64_vectors),
                cmocka_unit_test(test_base64_binary_roundtrip),
                cmocka_unit_test(test_base64_bad),
                cmocka_unit_test(test_sha256),
                cmocka_unit_test(test_host_id),
                cmocka_unit_test(test_relay),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
