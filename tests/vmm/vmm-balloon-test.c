/* SPDX-License-Identifier: MIT */
/* The balloon give-back (vmm/balloon.c): the plan's arithmetic, and the QMP conversation with a
 * fake QEMU over a socketpair: a share=off RAM backend is refused before any balloon command,
 * a VM without the device is -ENODEV, and a give-back inflates by the plan and always sets the
 * target back to the whole RAM. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

#define MIB (1024ull * 1024ull)
#define GREETING                                                                                   \
        "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, \"major\": 7}}}}\r\n"
#define RET_EMPTY "{\"return\": {}}\r\n"

/* ---- the plan ------------------------------------------------------------------------------ */

static void test_plan(void **state)
{
        struct vmm_give_back_opts o = {.ram_bytes = 256 * MIB,
                                       .host_bytes = 256 * MIB,
                                       .margin_bytes = 16 * MIB,
                                       .min_bytes = 32 * MIB};
        uint64_t expected = 1;

        (void)state;
        /* a live save read every page: all the guest's free memory but the margin */
        assert_int_equal(vmm_balloon_plan(&o, 150 * MIB, &expected), 134 * MIB);
        assert_int_equal(expected, 134 * MIB);
        /* the file holds 60 MiB more than the guest uses (100 - (256 - 216)) */
        o.host_bytes = 100 * MIB;
        assert_int_equal(vmm_balloon_plan(&o, 216 * MIB, &expected), 200 * MIB);
        assert_int_equal(expected, 60 * MIB);
        /* a fresh boot: the file holds about what the guest uses */
        o.host_bytes = 60 * MIB;
        assert_int_equal(vmm_balloon_plan(&o, 216 * MIB, &expected), 0);
        assert_int_equal(expected, 0);
        /* plenty in the file, but the guest has little free beyond the margin */
        o.host_bytes = 256 * MIB;
        assert_int_equal(vmm_balloon_plan(&o, 40 * MIB, &expected), 0);
        /* page-aligned; stats beyond the RAM are not believed */
        o.margin_bytes = 16 * MIB + 100;
        assert_int_equal(vmm_balloon_plan(&o, 150 * MIB, NULL), 134 * MIB - 4096);
        assert_int_equal(vmm_balloon_plan(&o, 300 * MIB, &expected), 0);
        assert_int_equal(vmm_balloon_plan(NULL, 1, NULL), 0);
}

/* ---- a fake QEMU ------------------------------------------------------------------------- */

/* For each step: read one command, check it holds expect, write reply. After the steps every
 * further command is recorded: none may be a balloon command. */
struct step {
        const char *expect;
        const char *reply;
};

struct fake {
        int fd;
        const struct step *steps;
        size_t n;
        pthread_t thread;
        char failure[512];
        char extra[512]; /* commands after the steps */
};

static int read_line(int fd, char *buf, size_t size)
{
        size_t n = 0;

        while (n + 1 < size) {
                ssize_t k = read(fd, buf + n, 1);

                if (k <= 0)
                        return -1;
                if (buf[n++] == '\n')
                        break;
        }
        buf[n] = '\0';
        return 0;
}

static void *fake_run(void *arg)
{
        struct fake *f = arg;
        char line[4096];

        (void)!fk_write_all(f->fd, GREETING, strlen(GREETING));
        if (read_line(f->fd, line, sizeof(line)) < 0 || !strstr(line, "qmp_capabilities") ||
            fk_write_all(f->fd, RET_EMPTY, strlen(RET_EMPTY)) < 0)
                snprintf(f->failure, sizeof(f->failure), "no handshake");
        for (size_t i = 0; i < f->n && !f->failure[0]; i++) {
                if (read_line(f->fd, line, sizeof(line)) < 0) {
                        snprintf(f->failure, sizeof(f->failure), "step %zu: EOF", i);
                        break;
                }
                if (!strstr(line, f->steps[i].expect)) {
                        snprintf(f->failure, sizeof(f->failure), "step %zu: got %.300s, want %s", i,
                                 line, f->steps[i].expect);
                        break;
                }
                if (fk_write_all(f->fd, f->steps[i].reply, strlen(f->steps[i].reply)) < 0)
                        break;
        }
        while (read_line(f->fd, line, sizeof(line)) == 0) {
                size_t have = strlen(f->extra);

                snprintf(f->extra + have, sizeof(f->extra) - have, "%.200s", line);
        }
        close(f->fd);
        return NULL;
}

static struct qmp_client *fake_start(struct fake *f, const struct step *steps, size_t n)
{
        struct qmp_client *c = NULL;
        struct fk_error err = {};
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        *f = (struct fake){.fd = sv[1], .steps = steps, .n = n};
        assert_int_equal(pthread_create(&f->thread, NULL, fake_run, f), 0);
        assert_int_equal(qmp_client_new_fd(sv[0], 2000, &c, &err), 0);
        return c;
}

/* Ends the client (EOF for the fake) and checks what the fake saw. */
static void fake_finish(struct fake *f, struct qmp_client *c)
{
        qmp_client_free(c);
        pthread_join(f->thread, NULL);
        if (f->failure[0])
                fail_msg("fake QEMU: %s", f->failure);
        if (strstr(f->extra, "\"balloon\""))
                fail_msg("a balloon command after the script: %s", f->extra);
}

#define SHARE_ON                                                                                   \
        {                                                                                          \
                "\"property\":\"share\"", "{\"return\": true}\r\n"                                 \
        }
#define POLL(n)                                                                                    \
        {                                                                                          \
                "\"guest-stats-polling-interval\",\"value\":" #n, RET_EMPTY                        \
        }
#define STATS(free)                                                                                \
        {                                                                                          \
                "\"guest-stats\"", "{\"return\": {\"stats\": {\"stat-free-memory\": " #free        \
                                   ", \"stat-total-memory\": "                                     \
                                   "215949312}, \"last-update\": 99999999999}}\r\n"                \
        }
#define ACTUAL(bytes)                                                                              \
        {                                                                                          \
                "query-balloon", "{\"return\": {\"actual\": " #bytes "}}\r\n"                      \
        }

static const struct vmm_give_back_opts opts = {.ram_bytes = 256 * MIB,
                                               .host_bytes = 256 * MIB,
                                               .margin_bytes = 16 * MIB,
                                               .min_bytes = 32 * MIB,
                                               .timeout_ms = 5000};

/* A private mapping: the one query, then nothing; the error says why. */
static void test_refuses_private(void **state)
{
        const struct step steps[] = {
                {"\"path\":\"/objects/mem\",\"property\":\"share\"", "{\"return\": false}\r\n"},
        };
        struct vmm_give_back_stats st = {.ballooned = 7};
        struct fk_error err = {};
        struct fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), -EPERM);
        assert_non_null(strstr(err.msg, "share=off"));
        assert_int_equal(st.ballooned, 0);
        assert_false(st.skipped);
        fake_finish(&f, c);
        assert_string_equal(f.extra, "");
}

static void test_no_device(void **state)
{
        const struct step steps[] = {
                SHARE_ON,
                {"qom-set", "{\"error\": {\"class\": \"DeviceNotFound\", \"desc\": \"Device "
                            "'/machine/peripheral/balloon0' not found\"}}\r\n"},
        };
        struct fk_error err = {};
        struct fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, NULL, &err), -ENODEV);
        fake_finish(&f, c);
}

/* Before the guest's first report every stat is 2^64-1 (a reply jansson cannot decode): read
 * again. Then the balloon takes free - margin, and the target goes back to the RAM. */
static void test_give_back(void **state)
{
        const struct step steps[] = {
                SHARE_ON,
                POLL(1),
                {"\"guest-stats\"",
                 "{\"return\": {\"stats\": {\"stat-free-memory\": 18446744073709551615}, "
                 "\"last-update\": 0}}\r\n"},
                STATS(157286400), /* 150 MiB free: 134 MiB into the balloon */
                POLL(0),
                {"\"balloon\",\"id\":7,\"arguments\":{\"value\":127926272}", RET_EMPTY},
                ACTUAL(200000000),
                ACTUAL(127926272),
                {"\"balloon\",\"id\":10,\"arguments\":{\"value\":268435456}", RET_EMPTY},
                ACTUAL(200000000),
                ACTUAL(268435456),
        };
        struct vmm_give_back_stats st = {0};
        struct fk_error err = {};
        struct fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), 0);
        assert_int_equal(st.guest_free, 150 * MIB);
        assert_int_equal(st.expected, 134 * MIB);
        assert_int_equal(st.ballooned, 134 * MIB);
        assert_false(st.skipped);
        fake_finish(&f, c);
}

/* Too little to win: stats only, no balloon command. */
static void test_skipped(void **state)
{
        const struct step steps[] = {SHARE_ON, POLL(1), STATS(41943040), POLL(0)};
        struct vmm_give_back_stats st = {0};
        struct fk_error err = {};
        struct fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), 0);
        assert_true(st.skipped);
        assert_int_equal(st.guest_free, 40 * MIB);
        fake_finish(&f, c);
        assert_string_equal(f.extra, "");
}

/* The inflation fails: the target still goes back to the whole RAM. */
static void test_inflate_fails_deflates(void **state)
{
        const struct step steps[] = {
                SHARE_ON,
                POLL(1),
                STATS(157286400),
                POLL(0),
                {"\"balloon\"", RET_EMPTY},
                {"query-balloon",
                 "{\"error\": {\"class\": \"GenericError\", \"desc\": \"x\"}}\r\n"},
                {"\"value\":268435456", RET_EMPTY},
                ACTUAL(268435456),
        };
        struct vmm_give_back_stats st = {0};
        struct fk_error err = {};
        struct fake f;
        struct qmp_client *c = fake_start(&f, steps, ARRAY_SIZE(steps));

        (void)state;
        assert_int_equal(vmm_balloon_give_back(c, &opts, &st, &err), -EIO);
        assert_non_null(strstr(err.msg, "query-balloon"));
        fake_finish(&f, c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plan),      cmocka_unit_test(test_refuses_private),
                cmocka_unit_test(test_no_device), cmocka_unit_test(test_give_back),
                cmocka_unit_test(test_skipped),   cmocka_unit_test(test_inflate_fails_deflates),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
