/* SPDX-License-Identifier: MIT */
/* The real guest agent binary (forklet-agent --listen, its local test mode) driven by the real
 * host client over a unix socket, no QEMU and no root: exec streams and exit codes, stdin,
 * timeouts that kill the whole process group, output caps, large output, detach, concurrency,
 * reconnect after a hangup, files, refused machine-wide requests, poweroff (exit), and a
 * pipeline of requests. */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "vmm/agent-client/agent-client-internal.h"
#include "vmm/vmm.h"

#define S(x) ((char *)(x))

struct env {
        char dir[64];
        char sock[128];
        pid_t agent;
        struct vmm_agent *a;
};

static int setup(void **state)
{
        const char *bindir = getenv("FORKLET_BINARY_DIR");
        char bin[512];
        struct env *e = calloc(1, sizeof(*e));
        struct fk_error err = {0};

        if (!e || !bindir)
                return -1;
        snprintf(bin, sizeof(bin), "%s/vmm/guest/forklet-agent", bindir);
        strcpy(e->dir, "/tmp/guest-agent-local-XXXXXX");
        if (!mkdtemp(e->dir))
                return -1;
        snprintf(e->sock, sizeof(e->sock), "%s/agent.sock", e->dir);
        e->agent = fork();
        if (e->agent == 0) {
                execl(bin, bin, "--listen", e->sock, (char *)NULL);
                _exit(127);
        }
        if (e->agent < 0 || vmm_agent_connect(e->sock, 5000, &e->a, &err) < 0 ||
            vmm_agent_wait_ready(e->a, 5000, &err) < 0) {
                fprintf(stderr, "agent %s did not come up: %s\n", bin, err.msg);
                return -1;
        }
        *state = e;
        return 0;
}

static int teardown(void **state)
{
        struct env *e = *state;
        char cmd[128];

        vmm_agent_free(e->a);
        if (e->agent > 0) {
                kill(e->agent, SIGKILL);
                waitpid(e->agent, NULL, 0);
        }
        snprintf(cmd, sizeof(cmd), "%s/agent.sock", e->dir);
        unlink(cmd);
        snprintf(cmd, sizeof(cmd), "%s/file", e->dir);
        unlink(cmd);
        rmdir(e->dir);
        free(e);
        return 0;
}

struct out {
        struct {
                char *data;
                size_t size;
        } s[2];
};

static int collect(int stream, const void *data, size_t size, void *userdata)
{
        struct out *o = userdata;
        int i = stream == 1 ? 0 : 1;
        char *d = realloc(o->s[i].data, o->s[i].size + size + 1);

        if (!d)
                return -ENOMEM;
        memcpy(d + o->s[i].size, data, size);
        o->s[i].size += size;
        d[o->s[i].size] = 0;
        o->s[i].data = d;
        return 0;
}

static void out_free(struct out *o)
{
        free(o->s[0].data);
        free(o->s[1].data);
        memset(o, 0, sizeof(*o));
}

/* Runs "sh -c script"; o must be freed by the caller. */
static int sh(struct vmm_agent *a, const char *script, struct vmm_exec_request *tmpl, struct out *o,
              struct vmm_exec_result *res, struct fk_error *err)
{
        char *argv[] = {S("sh"), S("-c"), S(script), NULL};
        struct vmm_exec_request req = tmpl ? *tmpl : (struct vmm_exec_request){0};

        req.argv = argv;
        memset(o, 0, sizeof(*o));
        memset(res, 0, sizeof(*res));
        return vmm_agent_exec(a, &req, collect, o, res, err);
}

static void test_streams_env(void **state)
{
        struct env *e = *state;
        char *env[] = {S("FOO=bar"), S("TERM=xterm"), NULL};
        struct vmm_exec_request req = {.env = env, .cwd = e->dir};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;

        assert_int_equal(sh(e->a, "echo out; echo err >&2; exit 3", NULL, &o, &res, &err), 0);
        assert_int_equal(res.exit_code, 3);
        assert_string_equal(o.s[0].data, "out\n");
        assert_string_equal(o.s[1].data, "err\n");
        out_free(&o);

        assert_int_equal(sh(e->a, "echo \"$FOO $TERM $HOME $PATH\"; pwd", &req, &o, &res, &err), 0);
        char want[256];
        snprintf(want, sizeof(want), "bar xterm /root /bin:/sbin:/usr/bin:/usr/sbin\n%s\n", e->dir);
        assert_string_equal(o.s[0].data, want);
        out_free(&o);

        char *missing[] = {S("/no/such/binary"), NULL};
        char *tru[] = {S("true"), NULL};
        struct vmm_exec_request bad = {.argv = missing};

        assert_int_equal(vmm_agent_exec(e->a, &bad, collect, &o, &res, &err), -ENOENT);
        bad = (struct vmm_exec_request){.argv = tru, .cwd = "/no/such/dir"};
        assert_int_equal(vmm_agent_exec(e->a, &bad, collect, &o, &res, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "/no/such/dir"));
        char *badenv[] = {S("NOVALUE"), NULL};
        bad = (struct vmm_exec_request){.argv = tru, .env = badenv};
        assert_int_equal(vmm_agent_exec(e->a, &bad, collect, &o, &res, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "NOVALUE"));
        out_free(&o);
}

static void test_stdin_large(void **state)
{
        struct env *e = *state;
        size_t n = 300 * 1024;
        char *data = malloc(n);
        struct vmm_exec_request req = {.stdin_data = data, .stdin_size = n};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;

        assert_non_null(data);
        for (size_t i = 0; i < n; i++)
                data[i] = (char)('a' + i % 26);
        assert_int_equal(sh(e->a, "cat", &req, &o, &res, &err), 0);
        assert_int_equal(o.s[0].size, n);
        assert_memory_equal(o.s[0].data, data, n);
        out_free(&o);
        free(data);

        /* 3 MB of output: many chunks, under the default cap. */
        assert_int_equal(sh(e->a, "head -c 3000000 /dev/zero", NULL, &o, &res, &err), 0);
        assert_int_equal(o.s[0].size, 3000000);
        assert_false(res.output_capped);
        out_free(&o);
}

static void test_timeout_cap(void **state)
{
        struct env *e = *state;
        struct vmm_exec_request req = {.timeout_ms = 300};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        uint64_t t0 = fk_now_mono_ns();
        struct out o;

        /* The background sleep holds the pipes: only killing the group ends this. */
        assert_int_equal(sh(e->a, "sleep 100 & sleep 100", &req, &o, &res, &err), 0);
        assert_true(res.timed_out);
        assert_true(res.signaled);
        assert_int_equal(res.signal, SIGKILL);
        assert_true(fk_now_mono_ns() - t0 < 3000000000ull);
        out_free(&o);

        req = (struct vmm_exec_request){.output_cap = 5000};
        assert_int_equal(sh(e->a, "head -c 1000000 /dev/zero; echo tail >&2", &req, &o, &res, &err),
                         0);
        assert_true(res.output_capped);
        assert_int_equal(o.s[0].size + o.s[1].size, 5000);
        out_free(&o);

        /* A daemon child keeps stdout open: the exec still returns after the grace time. */
        t0 = fk_now_mono_ns();
        assert_int_equal(sh(e->a, "sleep 3 & echo done", NULL, &o, &res, &err), 0);
        assert_string_equal(o.s[0].data, "done\n");
        assert_true(fk_now_mono_ns() - t0 < 2000000000ull);
        out_free(&o);
}

static void test_detach(void **state)
{
        struct env *e = *state;
        struct vmm_exec_request req = {.detach = true};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        char path[64], *cmdline = NULL;
        size_t size = 0;
        struct out o;

        char *argv[] = {S("sleep"), S("30"), NULL};

        req.argv = argv;
        memset(&o, 0, sizeof(o));
        assert_int_equal(vmm_agent_exec(e->a, &req, collect, &o, &res, &err), 0);
        assert_true(res.pid > 1);
        /* Local mode: the guest pid is a pid here. */
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)res.pid);
        assert_int_equal(fk_read_file(path, 4096, &cmdline, &size), 0);
        assert_string_equal(cmdline, "sleep");
        free(cmdline);
        assert_int_equal(getsid(res.pid), res.pid); /* its own session */
        assert_int_equal(kill(res.pid, SIGKILL), 0);
        out_free(&o);
}

struct worker {
        struct vmm_agent *a;
        int n, r, code;
        char out[32];
};

static void *worker_main(void *userdata)
{
        struct worker *w = userdata;
        struct vmm_exec_result res;
        struct fk_error err = {0};
        char script[64];
        struct out o;

        snprintf(script, sizeof(script), "sleep 0.5; echo w%d; exit %d", w->n, w->n);
        w->r = sh(w->a, script, NULL, &o, &res, &err);
        w->code = res.exit_code;
        snprintf(w->out, sizeof(w->out), "%s", o.s[0].data ? o.s[0].data : "");
        out_free(&o);
        return NULL;
}

static void test_concurrent_reconnect(void **state)
{
        struct env *e = *state;
        struct worker w[4];
        pthread_t t[4];
        uint64_t t0 = fk_now_mono_ns();
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;

        for (int i = 0; i < 4; i++) {
                w[i] = (struct worker){.a = e->a, .n = i + 1};
                assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
                char want[16];

                pthread_join(t[i], NULL);
                snprintf(want, sizeof(want), "w%d\n", i + 1);
                assert_int_equal(w[i].r, 0);
                assert_int_equal(w[i].code, i + 1);
                assert_string_equal(w[i].out, want);
        }
        assert_true(fk_now_mono_ns() - t0 < 1800000000ull);

        /* Hang up: the agent keeps running and serves the next client. */
        vmm_agent_free(e->a);
        e->a = NULL;
        assert_int_equal(vmm_agent_connect(e->sock, 5000, &e->a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(e->a, 5000, &err), 0);
        assert_int_equal(sh(e->a, "echo again", NULL, &o, &res, &err), 0);
        assert_string_equal(o.s[0].data, "again\n");
        out_free(&o);
}

struct slow {
        struct vmm_agent *a;
        int r;
};

static void *slow_main(void *userdata)
{
        struct slow *w = userdata;
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;

        w->r = sh(w->a, "sleep 3; echo late", NULL, &o, &res, &err);
        out_free(&o);
        return NULL;
}

/* An exec in flight when the channel drops is orphaned in the agent: the caller gets an error,
 * and a new client (whose request ids start over) can reuse its id at once. */
static void test_orphaned_exec(void **state)
{
        struct env *e = *state;
        struct slow w = {.a = e->a};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, slow_main, &w), 0);
        usleep(300 * 1000);
        pthread_mutex_lock(&e->a->lock);
        unsigned gen = e->a->generation;
        pthread_mutex_unlock(&e->a->lock);
        vmm_agent_fail_connection(e->a, gen);
        pthread_join(t, NULL);
        assert_int_equal(w.r, -ECONNRESET);
        vmm_agent_free(e->a);
        assert_int_equal(vmm_agent_connect(e->sock, 5000, &e->a, &err), 0);
        assert_int_equal(vmm_agent_wait_ready(e->a, 5000, &err), 0);
        for (int i = 0; i < 6; i++) {
                assert_int_equal(sh(e->a, "echo fresh", NULL, &o, &res, &err), 0);
                assert_string_equal(o.s[0].data, "fresh\n");
                out_free(&o);
        }
}

static void test_files_refusals_poweroff(void **state)
{
        struct env *e = *state;
        size_t n = 200 * 1024, size = 0;
        char path[128], *data = malloc(n), *back = NULL;
        struct fk_error err = {0};
        int status;

        assert_non_null(data);
        for (size_t i = 0; i < n; i++)
                data[i] = (char)(i * 7);
        snprintf(path, sizeof(path), "%s/file", e->dir);
        assert_int_equal(vmm_agent_write_file(e->a, path, data, n, 0600, 5000, &err), 0);
        assert_int_equal(vmm_agent_read_file(e->a, path, n, (void **)&back, &size, 5000, &err), 0);
        assert_int_equal(size, n);
        assert_memory_equal(back, data, n);
        free(back);
        assert_int_equal(vmm_agent_read_file(e->a, path, n - 1, (void **)&back, &size, 5000, &err),
                         -EFBIG);
        free(data);

        assert_int_equal(vmm_agent_set_identity(e->a, "f", "h", "x", 1, 5000, &err), -ENOTSUP);
        assert_int_equal(vmm_agent_fsfreeze(e->a, "/", true, 5000, &err), -ENOTSUP);
        assert_int_equal(vmm_agent_add_entropy(e->a, "seed", 4, 5000, &err), -ENOTSUP);

        /* Local mode: poweroff acks and the agent exits instead of powering anything off. */
        assert_int_equal(vmm_agent_poweroff(e->a, 5000, &err), 0);
        assert_int_equal(waitpid(e->agent, &status, 0), e->agent);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        e->agent = 0;
}

/* A pipeline: every request goes out at once and the answers come in order. The writes before
 * a refused request are done, the refusal is the result (named), and the answer to the request
 * after it, not awaited, does not confuse the next call on the channel. */
static void test_pipeline(void **state)
{
        struct env *e = *state;
        size_t n = 200 * 1024, size = 0; /* several chunks */
        char a[128], b[128], c[128], *data = malloc(n), *back = NULL;
        struct fk_error err = {0};
        struct vmm_agent_pipe *pp;

        assert_non_null(data);
        for (size_t i = 0; i < n; i++)
                data[i] = (char)(i * 13);
        snprintf(a, sizeof(a), "%s/a", e->dir);
        snprintf(b, sizeof(b), "%s/b", e->dir);
        snprintf(c, sizeof(c), "%s/c", e->dir);

        pp = vmm_agent_pipe_new(e->a);
        vmm_agent_pipe_write_file(pp, a, "first", 5, 0600);
        vmm_agent_pipe_write_file(pp, b, data, n, 0600);
        assert_int_equal(vmm_agent_pipe_run(pp, 5000, &err, NULL), 0);
        assert_int_equal(vmm_agent_read_file(e->a, b, n, (void **)&back, &size, 5000, &err), 0);
        assert_int_equal(size, n);
        assert_memory_equal(back, data, n);
        free(back);

        pp = vmm_agent_pipe_new(e->a);
        vmm_agent_pipe_write_file(pp, a, "second", 6, 0600);
        vmm_agent_pipe_set_identity(pp, "f", "x", 1); /* refused in local mode */
        vmm_agent_pipe_write_file(pp, c, "after", 5, 0600);
        assert_int_equal(vmm_agent_pipe_run(pp, 5000, &err, NULL), -ENOTSUP);
        assert_non_null(strstr(err.msg, "set identity"));
        assert_int_equal(vmm_agent_read_file(e->a, a, 64, (void **)&back, &size, 5000, &err), 0);
        assert_int_equal(size, 6);
        assert_memory_equal(back, "second", 6);
        free(back);
        assert_int_equal(vmm_agent_ping(e->a, 5000, &err), 0);

        /* empty, and NULL (out of memory at new) */
        assert_int_equal(vmm_agent_pipe_run(vmm_agent_pipe_new(e->a), 5000, &err, NULL), 0);
        assert_int_equal(vmm_agent_pipe_run(NULL, 5000, &err, NULL), -ENOMEM);
        free(data);
        /* the agent handled c before the ping: the dir is left empty for teardown */
        assert_int_equal(unlink(c), 0);
        unlink(b);
        unlink(a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_streams_env, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stdin_large, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timeout_cap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_detach, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_reconnect, setup, teardown),
                cmocka_unit_test_setup_teardown(test_orphaned_exec, setup, teardown),
                cmocka_unit_test_setup_teardown(test_files_refusals_poweroff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pipeline, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
