/* SPDX-License-Identifier: MIT */
/* Drives a real guest booted by guest-boot.sh through the host agent client: ready, exec
 * (streams, exit codes, stdin, timeout, cap, ENOENT, concurrency), detach, files, identity,
 * freeze, reconnect after the host side hung up, and poweroff.
 * Usage: guest-driver AGENT_SOCKET KERNEL_VERSION */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "vmm/vmm.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
                        fprintf(stderr, __VA_ARGS__);                                              \
                        fputc('\n', stderr);                                                       \
                        failures++;                                                                \
                }                                                                                  \
        } while (0)

struct out {
        char data[2][65536];
        size_t size[2];
        size_t total;
};

static int collect(int stream, const void *data, size_t size, void *userdata)
{
        struct out *o = userdata;
        size_t i = stream == 1 ? 0 : 1;
        size_t n = size;

        if (n > sizeof(o->data[i]) - 1 - o->size[i])
                n = sizeof(o->data[i]) - 1 - o->size[i];
        memcpy(o->data[i] + o->size[i], data, n);
        o->size[i] += n;
        o->data[i][o->size[i]] = 0;
        o->total += size;
        return 0;
}

static int run(struct vmm_agent *a, struct vmm_exec_request *req, struct out *o,
               struct vmm_exec_result *res, struct fk_error *err)
{
        memset(o, 0, sizeof(*o));
        memset(res, 0, sizeof(*res));
        return vmm_agent_exec(a, req, collect, o, res, err);
}

/* The agent's voluntary context switches (its sleeps in poll), read by a child of it. */
static long agent_wakeups(struct vmm_agent *a)
{
        const char *sh[] = {
                "sh", "-c",
                "sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' /proc/$PPID/status", NULL};
        struct vmm_exec_request req = {.argv = (char *const *)sh};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;

        if (run(a, &req, &o, &res, &err) < 0 || res.exit_code != 0)
                return -1;
        return strtol(o.data[0], NULL, 10);
}

static void test_basic(struct vmm_agent *a, const char *kver)
{
        const char *uname[] = {"uname", "-r", NULL};
        const char *sh[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
        const char *env[] = {"FOO=bar baz", "PATH=/bin", NULL};
        const char *envsh[] = {"sh", "-c", "echo \"$FOO|$PATH|$HOME|$TERM|$(pwd)\"", NULL};
        struct vmm_exec_request req = {.argv = (char *const *)uname};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        char want[128];
        struct out o;
        int r;

        r = run(a, &req, &o, &res, &err);
        snprintf(want, sizeof(want), "%s\n", kver);
        CHECK(r == 0 && res.exit_code == 0 && strcmp(o.data[0], want) == 0,
              "uname -r: r=%d (%s) out=%s", r, err.msg, o.data[0]);
        CHECK(res.pid > 1, "pid %d", (int)res.pid);

        req = (struct vmm_exec_request){.argv = (char *const *)sh};
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && res.exit_code == 3 && !res.signaled, "exit 3: r=%d code=%d", r,
              res.exit_code);
        CHECK(strcmp(o.data[0], "out\n") == 0 && strcmp(o.data[1], "err\n") == 0,
              "streams: out=%s err=%s", o.data[0], o.data[1]);

        req = (struct vmm_exec_request){
                .argv = (char *const *)envsh, .env = (char *const *)env, .cwd = "/tmp"};
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "bar baz|/bin|/root|dumb|/tmp\n") == 0, "env: %s",
              o.data[0]);
}

/* What guest-boot.sh put on the kernel command line reached the guest's configuration. */
static void test_boot_config(struct vmm_agent *a)
{
        const char *argv[] = {"sh", "-c",
                              "hostname; ip -4 -o addr show dev eth0 | awk '{print $4}'; "
                              "ip route | grep default; cat /etc/resolv.conf",
                              NULL};
        struct vmm_exec_request req = {.argv = (char *const *)argv};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;
        int r;

        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "fk-boot\n192.0.2.2/24\n"
                                          "default via 192.0.2.1 dev eth0 \n"
                                          "nameserver 192.0.2.53\nnameserver 192.0.2.54\n") == 0,
              "boot config: r=%d out=%s err=%s", r, o.data[0], o.data[1]);
}

static void test_edges(struct vmm_agent *a)
{
        const char *cat[] = {"cat", NULL};
        const char *sleep10[] = {"sleep", "10", NULL};
        const char *zero[] = {"head", "-c", "100000", "/dev/zero", NULL};
        const char *missing[] = {"no-such-binary", NULL};
        const char *killself[] = {"sh", "-c", "kill -TERM $$", NULL};
        struct vmm_exec_request req = {
                .argv = (char *const *)cat, .stdin_data = "hello stdin", .stdin_size = 11};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        uint64_t t0;
        struct out o;
        int r;

        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "hello stdin") == 0, "stdin: r=%d out=%s", r, o.data[0]);

        req = (struct vmm_exec_request){.argv = (char *const *)sleep10, .timeout_ms = 500};
        t0 = fk_now_mono_ns();
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && res.timed_out && res.signaled && res.signal == 9, "timeout: r=%d t=%d", r,
              res.timed_out);
        CHECK(fk_now_mono_ns() - t0 < 5000000000ull, "timeout took too long");

        req = (struct vmm_exec_request){.argv = (char *const *)zero, .output_cap = 1000};
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && res.output_capped && o.total == 1000, "cap: r=%d capped=%d total=%zu", r,
              res.output_capped, o.total);

        req = (struct vmm_exec_request){.argv = (char *const *)missing};
        r = run(a, &req, &o, &res, &err);
        CHECK(r == -ENOENT && strstr(err.msg, "no-such-binary"), "ENOENT: r=%d %s", r, err.msg);

        req = (struct vmm_exec_request){.argv = (char *const *)killself};
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && res.signaled && res.signal == 15, "signaled: r=%d sig=%d", r, res.signal);
}

struct conc {
        struct vmm_agent *a;
        int n;
        int ok;
};

static void *conc_main(void *userdata)
{
        struct conc *c = userdata;
        char script[64];
        char want[32];
        const char *argv[] = {"sh", "-c", script, NULL};
        struct vmm_exec_request req = {.argv = (char *const *)argv};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        struct out o;

        snprintf(script, sizeof(script), "sleep 1; echo job%d; exit %d", c->n, c->n);
        snprintf(want, sizeof(want), "job%d\n", c->n);
        c->ok = run(c->a, &req, &o, &res, &err) == 0 && res.exit_code == c->n &&
                strcmp(o.data[0], want) == 0;
        return NULL;
}

static void test_concurrent(struct vmm_agent *a)
{
        struct conc c[4];
        pthread_t t[4];
        uint64_t t0 = fk_now_mono_ns();

        for (int i = 0; i < 4; i++) {
                c[i] = (struct conc){.a = a, .n = i + 1};
                pthread_create(&t[i], NULL, conc_main, &c[i]);
        }
        for (int i = 0; i < 4; i++) {
                pthread_join(t[i], NULL);
                CHECK(c[i].ok, "concurrent exec %d", i);
        }
        /* Four 1 s sleeps in parallel, not in series. */
        CHECK(fk_now_mono_ns() - t0 < 3500000000ull, "execs did not run concurrently");
}

static void test_detach_files(struct vmm_agent *a)
{
        const char *sleep30[] = {"sleep", "30", NULL};
        char check[128];
        const char *argv[] = {"sh", "-c", check, NULL};
        struct vmm_exec_request req = {.argv = (char *const *)sleep30, .detach = true};
        struct vmm_exec_result res;
        struct fk_error err = {0};
        char *data = NULL;
        size_t size = 0;
        struct out o;
        int r;

        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && res.pid > 1, "detach: r=%d pid=%d %s", r, (int)res.pid, err.msg);
        snprintf(check, sizeof(check), "tr '\\0' ' ' </proc/%d/cmdline", (int)res.pid);
        req = (struct vmm_exec_request){.argv = (char *const *)argv};
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "sleep 30 ") == 0, "detached runs: %s", o.data[0]);

        r = vmm_agent_write_file(a, "/workspace/hello.txt", "hi there\n", 9, 0644, 5000, &err);
        CHECK(r == 0, "write file: %s", err.msg);
        r = vmm_agent_read_file(a, "/workspace/hello.txt", 1024, (void **)&data, &size, 5000, &err);
        CHECK(r == 0 && size == 9 && strcmp(data, "hi there\n") == 0, "read file: %s", err.msg);
        free(data);
        r = vmm_agent_read_file(a, "/nonexistent", 1024, (void **)&data, &size, 5000, &err);
        CHECK(r == -ENOENT, "read missing: r=%d", r);

        /* A cold boot's seed makes the CRNG ready (the kernel says so once); the identity file
         * is there, empty, and fork-id names it, before any fork id was given. */
        r = vmm_agent_add_entropy(a, "0123456789abcdef0123456789abcdef0123456789abcdef01234567", 56,
                                  5000, &err);
        CHECK(r == 0, "add entropy: %s", err.msg);
        snprintf(check, sizeof(check),
                 "dmesg | grep -c 'crng init done'; wc -c </run/forklet/identity; "
                 "readlink /run/forklet/fork-id");
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "1\n0\nidentity\n") == 0, "seeded: %s", o.data[0]);
        r = vmm_agent_set_identity(a, "fork-42", "forked", "0123456789abcdef0123456789abcdef", 32,
                                   5000, &err);
        CHECK(r == 0, "identity: %s", err.msg);
        snprintf(check, sizeof(check), "hostname; cat /run/forklet/fork-id");
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "forked\nfork-42\n") == 0, "identity: %s", o.data[0]);
        /* rewritten in place: a shorter id leaves nothing of the longer one */
        r = vmm_agent_set_identity(a, "f7", NULL, "0123456789abcdef", 16, 5000, &err);
        CHECK(r == 0, "identity again: %s", err.msg);
        snprintf(check, sizeof(check), "cat /run/forklet/identity /run/forklet/fork-id");
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "f7\nf7\n") == 0, "identity again: %s", o.data[0]);

        r = vmm_agent_fsfreeze(a, "/workspace", true, 5000, &err);
        CHECK(r == 0, "freeze: %s", err.msg);
        r = vmm_agent_fsfreeze(a, "/workspace", false, 5000, &err);
        CHECK(r == 0, "thaw: %s", err.msg);
        snprintf(check, sizeof(check), "grep -c ' /workspace ext4 ' /proc/mounts");
        r = run(a, &req, &o, &res, &err);
        CHECK(r == 0 && strcmp(o.data[0], "1\n") == 0, "workspace mounted: %s", o.data[0]);
}

int main(int argc, char **argv)
{
        struct vmm_agent *a = NULL;
        struct fk_error err = {0};
        uint64_t t0 = fk_now_mono_ns();
        char version[64];
        int r;

        if (argc != 3) {
                fprintf(stderr, "usage: %s AGENT_SOCKET KERNEL_VERSION\n", argv[0]);
                return 2;
        }
        r = vmm_agent_connect(argv[1], 30000, &a, &err);
        if (r < 0 || vmm_agent_wait_ready(a, 120000, &err) < 0) {
                fprintf(stderr, "FAIL: agent not ready: %s\n", err.msg);
                vmm_agent_free(a);
                return 1;
        }
        if (vmm_agent_guest_version(a, version, sizeof(version)) < 0)
                snprintf(version, sizeof(version), "?");
        printf("guest agent ready %.2f s after connect (version %s)\n",
               (double)(fk_now_mono_ns() - t0) / 1e9, version);
        test_basic(a, argv[2]);
        test_boot_config(a);
        test_edges(a);
        test_concurrent(a);
        test_detach_files(a);

        /* Kill the agent from inside: init restarts it, the call in flight fails (no hang),
         * and the restarted agent serves the next one. */
        {
                const char *kill_agent[] = {"sh", "-c", "sleep 0.2; kill -9 $PPID; sleep 5", NULL};
                struct vmm_exec_request req = {.argv = (char *const *)kill_agent};
                struct vmm_exec_result res;
                struct out o;

                r = run(a, &req, &o, &res, &err);
                CHECK(r == -ECONNRESET, "exec across agent restart: r=%d %s", r, err.msg);
                test_basic(a, argv[2]);
        }

        /* Hang up and come back: the guest sees POLLHUP, must not exit, and says hello again.
         * While the host is away the agent sleeps until the port's SIGIO says it is back (a
         * backstop poll every 100 ms): over 2 s away it wakes about 20 times, where a 5 ms
         * poll for the first second woke it about 200. */
        {
                long before = agent_wakeups(a), after;

                vmm_agent_free(a);
                a = NULL;
                sleep(2);
                r = vmm_agent_connect(argv[1], 10000, &a, &err);
                CHECK(r == 0 && vmm_agent_wait_ready(a, 20000, &err) == 0, "reconnect: %s",
                      err.msg);
                after = a ? agent_wakeups(a) : -1;
                printf("guest agent: %ld wakeups over 2 s with the host away\n", after - before);
                CHECK(before > 0 && after > before && after - before < 60,
                      "the agent woke %ld times while the host was away (%ld -> %ld)",
                      after - before, before, after);
        }
        if (a)
                test_basic(a, argv[2]);

        r = a ? vmm_agent_poweroff(a, 10000, &err) : -ENOTCONN;
        CHECK(r == 0, "poweroff: %s", err.msg);
        vmm_agent_free(a);
        printf("guest-driver: %d failures\n", failures);
        return failures ? 1 : 0;
}
