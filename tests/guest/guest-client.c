/* SPDX-License-Identifier: MIT */
/* The host agent client against a fake guest on a unix socket: streamed exec output, exit
 * codes, concurrent execs demultiplexed by id, guest errors, the host-side output cap, an agent
 * restart, a guest that never answers (hostile guests: guest-client-hostile.c). */
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
#include "vmm/guest/protocol.h"
#include "vmm/vmm.h"

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
        char version[32];
        struct out o;

        assert_int_equal(vmm_agent_connect(f->path, 2000, &a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(a, 2000, &err), 0);
        assert_int_equal(vmm_agent_guest_version(a, version, sizeof(version)), 0);
        assert_string_equal(version, "fake");
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
                cmocka_unit_test(test_exec_stream),
                cmocka_unit_test(test_exec_concurrent),
                cmocka_unit_test(test_agent_restart),
                cmocka_unit_test(test_not_ready),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
