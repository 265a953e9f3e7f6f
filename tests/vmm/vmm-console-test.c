/* SPDX-License-Identifier: MIT */
/* The console log reader against a unix socket standing in for QEMU's console chardev: the
 * size cap is exact, rotation keeps the newest bytes in order, a fresh boot rotates, adoption
 * appends, a peer that closes or floods never hangs free(), a full disk drops output without
 * blocking QEMU; the health scanner's report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

struct env {
        char dir[64], sock[128], log[128], old[128];
        int listen_fd;
};

static int setup(void **state)
{
        struct env *e = calloc(1, sizeof(*e));
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        assert_non_null(e);
        strcpy(e->dir, "/tmp/fk-console-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->sock, sizeof(e->sock), "%s/console.sock", e->dir);
        snprintf(e->log, sizeof(e->log), "%s/console.log", e->dir);
        snprintf(e->old, sizeof(e->old), "%s/console.log.1", e->dir);
        strcpy(sa.sun_path, e->sock);
        e->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(e->listen_fd >= 0);
        assert_int_equal(bind(e->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(e->listen_fd, 4), 0);
        *state = e;
        return 0;
}

static int teardown(void **state)
{
        struct env *e = *state;

        close(e->listen_fd);
        fk_rm_rf(e->dir);
        free(e);
        return 0;
}

static size_t file_size(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

static char *slurp(const char *path, size_t *size)
{
        char *buf = NULL;

        *size = 0;
        if (fk_read_file(path, 1 << 24, &buf, size) < 0)
                return NULL;
        return buf;
}

/* Waits until the reader wrote want bytes in total (it runs in its own thread). */
static void wait_bytes(struct vmm_console *c, uint64_t want)
{
        uint64_t bytes = 0;
        unsigned rot = 0;

        for (int i = 0; i < 500; i++) {
                vmm_console_stats(c, &bytes, &rot);
                if (bytes >= want)
                        return;
                usleep(10000);
        }
        fail_msg("console reader wrote %llu of %llu bytes", (unsigned long long)bytes,
                 (unsigned long long)want);
}

static void test_cap_and_rotation(void **state)
{
        struct env *e = *state;
        struct vmm_console *c = NULL;
        struct fk_error err = {0};
        char data[10000];
        cleanup_free char *cur = NULL, *old = NULL;
        size_t ncur, nold;
        uint64_t bytes;
        unsigned rot;
        int peer;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (char)('a' + i % 26);
        assert_int_equal(vmm_console_start(e->sock, e->log, 4096, true, 1000, &c, &err), 0);
        peer = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(peer >= 0);
        assert_int_equal(fk_write_all(peer, data, sizeof(data)), 0);
        wait_bytes(c, sizeof(data));
        assert_true(file_size(e->log) <= 4096);
        assert_int_equal(file_size(e->old), 4096);
        /* 10000 = 4096 + 4096 + 1808: the last two files hold the newest 5904 bytes in order. */
        old = slurp(e->old, &nold);
        cur = slurp(e->log, &ncur);
        assert_non_null(old);
        assert_non_null(cur);
        assert_int_equal(ncur, sizeof(data) - 2 * 4096);
        assert_memory_equal(old, data + 4096, 4096);
        assert_memory_equal(cur, data + 8192, ncur);
        vmm_console_stats(c, &bytes, &rot);
        assert_int_equal(bytes, sizeof(data));
        assert_int_equal(rot, 3); /* the boot rotation + two at the cap */
        /* QEMU going away ends the thread; free still returns. */
        close(peer);
        c = vmm_console_free(c);
}

/* A full disk (the log is /dev/full) drops output but keeps draining QEMU's socket: a reader
 * that stopped would leave the guest's serial line blocked. */
static void test_full_disk_keeps_draining(void **state)
{
        struct env *e = *state;
        struct vmm_console *c = NULL;
        struct fk_error err = {0};
        struct timeval tv = {.tv_sec = 5};
        static char data[4 << 20];
        int peer;

        memset(data, 'x', sizeof(data));
        assert_int_equal(symlink("/dev/full", e->log), 0);
        assert_int_equal(vmm_console_start(e->sock, e->log, 1 << 20, false, 1000, &c, &err), 0);
        peer = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(peer >= 0);
        assert_int_equal(setsockopt(peer, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
        /* far more than the socket buffers hold: only a reader that goes on lets it through */
        assert_int_equal(fk_write_all(peer, data, sizeof(data)), 0);
        close(peer);
        c = vmm_console_free(c);
        assert_int_equal(unlink(e->log), 0);
}

static void test_boot_rotates_adopt_appends(void **state)
{
        struct env *e = *state;
        struct vmm_console *c = NULL;
        struct fk_error err = {0};
        cleanup_free char *cur = NULL, *old = NULL;
        size_t n;
        int peer;

        assert_int_equal(fk_write_file_atomic(e->log, "first boot\n", 11, 0600), 0);
        /* Adoption (forkletd restarted): keep appending to the same file. */
        assert_int_equal(vmm_console_start(e->sock, e->log, 4096, false, 1000, &c, &err), 0);
        peer = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_int_equal(fk_write_all(peer, "more\n", 5), 0);
        wait_bytes(c, 5);
        close(peer);
        c = vmm_console_free(c);
        cur = slurp(e->log, &n);
        assert_string_equal(cur, "first boot\nmore\n");
        /* A fresh boot moves the old log aside. */
        assert_int_equal(vmm_console_start(e->sock, e->log, 4096, true, 1000, &c, &err), 0);
        peer = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_int_equal(fk_write_all(peer, "second\n", 7), 0);
        wait_bytes(c, 7);
        c = vmm_console_free(c); /* with the peer still connected */
        close(peer);
        old = slurp(e->old, &n);
        free(cur);
        cur = slurp(e->log, &n);
        assert_string_equal(old, "first boot\nmore\n");
        assert_string_equal(cur, "second\n");
}

static void test_flood_and_errors(void **state)
{
        struct env *e = *state;
        struct vmm_console *c = NULL;
        struct fk_error err = {0};
        char buf[65536];
        int peer;

        memset(buf, 'x', sizeof(buf));
        assert_int_equal(vmm_console_start(e->sock, e->log, 1000, true, 1000, &c, &err), 0);
        peer = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        /* A peer that keeps the socket full must not keep free() from returning. */
        for (int i = 0; i < 16; i++)
                (void)!send(peer, buf, sizeof(buf), MSG_DONTWAIT);
        c = vmm_console_free(c);
        assert_true(file_size(e->log) <= 1000);
        assert_true(file_size(e->old) <= 1000);
        close(peer);

        assert_int_equal(
                vmm_console_start("/nonexistent/console.sock", e->log, 1000, false, 50, &c, &err),
                -ENOENT);
        assert_non_null(strstr(err.msg, "console socket"));
        assert_int_equal(vmm_console_start(e->sock, "/nonexistent/dir/console.log", 1000, false, 50,
                                           &c, &err),
                         -ENOENT);
        assert_null(vmm_console_free(NULL));
}

/* The health scanner (pure): panics, OOM kills, the last lines, text made safe. */
static void test_scan(void **state)
{
        static const char boot[] =
                "[    0.000000] Linux version 6.1.0\r\n"
                "\x1b[1mbold\x1b[0m \xff\ttab\n"
                "[   24.484822] Out of memory: Killed process 95 (tail) total-vm:160984kB, "
                "anon-rss:158820kB\n"
                "[   30.1] Memory cgroup out of memory: Killed process 7 (dd) total-vm:1kB\n"
                "forklet-init: [    6.383296] Kernel panic - not syncing: System is deadlocked "
                "on memory\n"
                "[    6.384372]  panic+0x118/0x2f4\n"
                "---[ end Kernel panic - not syncing: again ]---\n";
        struct vmm_console_scan *sc = calloc(1, sizeof(*sc));
        struct vmm_console_report r;
        char longline[400];

        (void)state;
        assert_non_null(sc);
        assert_int_equal(vmm_console_classify("[ 1.0] Kernel panic - not syncing: x"),
                         VMM_CONSOLE_LINE_PANIC);
        assert_int_equal(vmm_console_classify("Out of memory: Killed process 1 (a)"),
                         VMM_CONSOLE_LINE_OOM_KILL);
        assert_int_equal(vmm_console_classify("Kernel panic"), VMM_CONSOLE_LINE_PLAIN);
        assert_int_equal(vmm_console_classify("[    0.412011] APIC frequency too slow, "
                                              "disabling apic timer"),
                         VMM_CONSOLE_LINE_NO_TIMER);
        vmm_console_scan_feed(sc, "[ 0.4] APIC frequency too slow, disabling apic timer\n", 53);
        vmm_console_scan_report(sc, &r);
        assert_int_equal(r.timer_lost, 1);
        memset(sc, 0, sizeof(*sc));
        /* fed one byte at a time: lines split anywhere */
        for (size_t i = 0; i < sizeof(boot) - 1; i++)
                vmm_console_scan_feed(sc, boot + i, 1);
        vmm_console_scan_report(sc, &r);
        assert_int_equal(r.panics, 2);
        assert_string_equal(r.panic, "Kernel panic - not syncing: System is deadlocked on memory");
        assert_int_equal(r.oom_kills, 2);
        assert_int_equal(r.timer_lost, 0);
        assert_string_equal(r.oom, "out of memory: Killed process 7 (dd)");
        assert_int_equal(r.n_tail, 7);
        assert_string_equal(r.tail[0], "[    0.000000] Linux version 6.1.0");
        assert_string_equal(r.tail[1], "?[1mbold?[0m ? tab");
        assert_string_equal(r.tail[6], "---[ end Kernel panic - not syncing: again ]---");
        /* only the last 10 lines stay; a line beyond the cut keeps its start */
        for (int i = 0; i < 12; i++) {
                char l[32];

                snprintf(l, sizeof(l), "line %d\n", i);
                vmm_console_scan_feed(sc, l, strlen(l));
        }
        memset(longline, 'y', sizeof(longline));
        vmm_console_scan_feed(sc, longline, sizeof(longline));
        vmm_console_scan_report(sc, &r);
        assert_int_equal(r.n_tail, VMM_CONSOLE_TAIL_LINES);
        assert_string_equal(r.tail[0], "line 3");
        assert_string_equal(r.tail[8], "line 11");
        /* the unfinished last line is reported too, cut to the line size */
        assert_int_equal(strlen(r.tail[9]), VMM_CONSOLE_LINE_MAX - 1);
        assert_int_equal(r.tail[9][0], 'y');
        free(sc);
}

/* The reader feeds the scanner; wait_closed returns once QEMU closed its end. */
static void test_report_and_close(void **state)
{
        struct env *e = *state;
        struct vmm_console *c = NULL;
        struct vmm_console_report r;
        struct fk_error err = {0};
        static const char text[] = "hello\n[ 7.6] Kernel panic - not syncing: sysrq triggered "
                                   "crash\n";
        int peer;

        assert_int_equal(vmm_console_start(e->sock, e->log, 4096, true, 1000, &c, &err), 0);
        peer = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(peer >= 0);
        assert_int_equal(vmm_console_wait_closed(c, 50), 0);
        assert_int_equal(fk_write_all(peer, text, sizeof(text) - 1), 0);
        close(peer);
        assert_int_equal(vmm_console_wait_closed(c, 5000), 1);
        vmm_console_report(c, &r);
        assert_int_equal(r.panics, 1);
        assert_string_equal(r.panic, "Kernel panic - not syncing: sysrq triggered crash");
        assert_int_equal(r.n_tail, 2);
        assert_string_equal(r.tail[0], "hello");
        c = vmm_console_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_cap_and_rotation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_boot_rotates_adopt_appends, setup, teardown),
                cmocka_unit_test_setup_teardown(test_flood_and_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_full_disk_keeps_draining, setup, teardown),
                cmocka_unit_test(test_scan),
                cmocka_unit_test_setup_teardown(test_report_and_close, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
