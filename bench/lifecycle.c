/* SPDX-License-Identifier: MIT */
/* bench/lifecycle: through a real forkletd and its API (what the CLI calls): cold boot to
 * agent-ready, exec round trip, pause and resume latency (p50/p99), each against a baseline
 * measured in the same run (QEMU spawn to QMP ready; API GET /healthz), with the accelerator.
 * Root, QEMU and the minimal image needed.
 * Usage: bench-lifecycle FORKLETD IMAGE_DIR [BOOTS [EXECS [PAUSES]]]   (default 5 200 20) */
#include "bench/forkletd-run.h"
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[128];
static const char *image;
static pid_t daemon_pid;
static struct cli cli;
static unsigned n_sessions; /* b0 .. b<n-1> were created */

/* One API call that must answer 2xx; returns its wall time in ms or < 0. */
static double call(const char *method, const char *path, const char *body)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        uint64_t t0 = fk_now_mono_ns();
        double ms;

        if (cli_request(&cli, method, path, body, &resp, &err) < 0) {
                fprintf(stderr, "%s %s: %s\n", method, path, err.msg);
                return -1;
        }
        ms = bench_ms_since(t0);
        if (resp.status < 200 || resp.status >= 300) {
                fprintf(stderr, "%s %s: HTTP %ld %s\n", method, path, resp.status,
                        resp.body ? resp.body : "");
                ms = -1;
        }
        cli_response_done(&resp);
        return ms;
}

static int start_daemon(const char *forkletd)
{
        cleanup_free char *cfg = NULL;

        if (fk_asprintf(&cfg,
                        "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\nnodeName: bench\n"
                        "stateDir: %s/state\nrunDir: %s/run\nmanifestDir: %s/manifests\n"
                        "accel: %s\napi: {socket: %s/run/api.sock}\n"
                        "sizeClasses: [{name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, "
                        "pids: 1024}]\nimages: [{name: minimal, dir: %s}]\n",
                        dir, dir, dir, getenv("FORKLET_BENCH_ACCEL") ?: "auto", dir, image) < 0)
                return -ENOMEM;
        return bench_forkletd_start(forkletd, dir, cfg, NULL, 200, &cli, &daemon_pid);
}

/* Deletes every session, waits until they are gone, then bench_forkletd_teardown. */
static void teardown(void)
{
        for (unsigned i = 0; i < n_sessions; i++) {
                char path[160];

                snprintf(path, sizeof(path), "/api/v1alpha1/namespaces/default/sessions/b%u", i);
                (void)call("DELETE", path, NULL);
        }
        for (int i = 0; i < 240 && daemon_pid > 0; i++) {
                struct cli_response resp = {0};
                struct fk_error err = {0};
                json_t *j = NULL;
                size_t n = 1;

                if (cli_request(&cli, "GET", "/api/v1alpha1/sessions", NULL, &resp, &err) >= 0 &&
                    (j = json_loads(resp.body ?: "", 0, NULL)))
                        n = json_array_size(json_object_get(j, "items"));
                json_decref(j);
                cli_response_done(&resp);
                if (n == 0)
                        break;
                usleep(250 * 1000);
        }
        bench_forkletd_teardown(daemon_pid, dir);
}

/* The baseline of a boot: spawn QEMU with the same kernel/initrd and wait for QMP. */
static double qemu_spawn_to_qmp(int i)
{
        cleanup_free char *d = NULL, *k = NULL, *in = NULL, *mem = NULL, *qmp = NULL, *ag = NULL,
                          *con = NULL;
        struct vmm_process *p = NULL;
        struct qmp_client *q = NULL;
        struct fk_error err = {0};
        char **argv = NULL;
        enum vmm_accel accel;
        uint64_t t0;
        double ms = -1;

        if (vmm_accel_resolve(getenv("FORKLET_BENCH_ACCEL") ?: "auto", &accel, &err) < 0 ||
            fk_asprintf(&d, "%s/base%d", dir, i) < 0 || fk_mkdir_p(d, 0700) < 0 ||
            fk_asprintf(&k, "%s/vmlinuz", image) < 0 ||
            fk_asprintf(&in, "%s/initrd.img", image) < 0 || fk_asprintf(&mem, "%s/mem", d) < 0 ||
            fk_asprintf(&qmp, "%s/qmp.sock", d) < 0 || fk_asprintf(&ag, "%s/agent.sock", d) < 0 ||
            fk_asprintf(&con, "%s/console.log", d) < 0)
                return -1;
        struct vmm_config c = {.name = "baseline",
                               .accel = accel,
                               .vcpus = 1,
                               .memory_mib = 256,
                               .kernel = k,
                               .initrd = in,
                               .mem_path = mem,
                               .mem_share = true,
                               .qmp_socket = qmp,
                               .agent_socket = ag,
                               .console_log = con};
        if (vmm_build_argv(&c, &argv, &err) < 0)
                return -1;
        t0 = fk_now_mono_ns();
        if (vmm_process_spawn(argv, NULL, NULL, NULL, &p, &err) >= 0 &&
            qmp_client_connect(qmp, 30000, &q, &err) >= 0)
                ms = bench_ms_since(t0);
        fk_strv_free(argv);
        if (ms < 0)
                fprintf(stderr, "baseline QEMU: %s\n", err.msg);
        if (p)
                (void)vmm_stop(p, NULL, q, 2000);
        qmp_client_free(q);
        vmm_process_free(p);
        fk_rm_rf(d);
        return ms;
}

static void row(const char *what, double *v, size_t n, const char *base_what, double *b, size_t bn)
{
        double p50 = bench_pct(v, n, 0.5), p99 = bench_pct(v, n, 0.99);
        double b50 = bench_pct(b, bn, 0.5), b99 = bench_pct(b, bn, 0.99);

        printf("| %-28s | %4zu | %9.1f | %9.1f | %-24s | %9.2f | %9.2f | %8.1fx |\n", what, n, p50,
               p99, base_what, b50, b99, b50 > 0 ? p50 / b50 : 0.0);
}

static const char *session_json(int i, const char *state)
{
        static char buf[512];

        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\",\"metadata\":"
                 "{\"name\":\"b%d\"},\"spec\":{\"sizeClass\":\"small\",\"image\":\"minimal\","
                 "\"state\":\"%s\"}}",
                 i, state);
        return buf;
}

#define SPATH(i, sfx) "/api/v1alpha1/namespaces/default/sessions/b" #i sfx

static int run(unsigned boots, unsigned execs, unsigned pauses)
{
        double *boot = calloc(boots, sizeof(double)), *qemu = calloc(boots, sizeof(double));
        double *ex = calloc(execs, sizeof(double)), *hz = calloc(execs, sizeof(double));
        double *pa = calloc(pauses, sizeof(double)), *re = calloc(pauses, sizeof(double));
        double *hz2 = calloc(pauses, sizeof(double));
        const char *exec_body = "{\"argv\":[\"true\"]}";
        char path[160];

        if (!boot || !qemu || !ex || !hz || !pa || !re || !hz2)
                return -ENOMEM;
        for (unsigned i = 0; i < boots; i++) {
                if ((qemu[i] = qemu_spawn_to_qmp((int)i)) < 0 ||
                    call("POST", "/api/v1alpha1/namespaces/default/sessions",
                         session_json((int)i, "Stopped")) < 0)
                        return -EIO;
                n_sessions = i + 1;
                snprintf(path, sizeof(path),
                         "/api/v1alpha1/namespaces/default/sessions/b%u/start?wait=600", i);
                if ((boot[i] = call("POST", path, NULL)) < 0)
                        return -EIO;
                /* Keep b0 for the rest; the others are stopped to free their memory. */
                snprintf(path, sizeof(path),
                         "/api/v1alpha1/namespaces/default/sessions/b%u/stop?wait=120", i);
                if (i > 0 && call("POST", path, NULL) < 0)
                        return -EIO;
        }
        for (unsigned i = 0; i < execs; i++) {
                if ((hz[i] = call("GET", "/healthz", NULL)) < 0 ||
                    (ex[i] = call("POST", SPATH(0, "/exec"), exec_body)) < 0)
                        return -EIO;
        }
        for (unsigned i = 0; i < pauses; i++) {
                if ((hz2[i] = call("GET", "/healthz", NULL)) < 0 ||
                    (pa[i] = call("POST", SPATH(0, "/pause?wait=60"), NULL)) < 0 ||
                    (re[i] = call("POST", SPATH(0, "/resume?wait=60"), NULL)) < 0)
                        return -EIO;
        }
        printf("| %-28s | %4s | %9s | %9s | %-24s | %9s | %9s | %9s |\n", "operation (via the API)",
               "n", "p50 ms", "p99 ms", "baseline (same run)", "p50 ms", "p99 ms", "ratio");
        printf("|------------------------------|------|-----------|-----------|"
               "--------------------------|-----------|-----------|-----------|\n");
        row("cold boot to agent-ready", boot, boots, "QEMU spawn to QMP ready", qemu, boots);
        row("exec round trip (true)", ex, execs, "API GET /healthz", hz, execs);
        row("pause (QMP stop + freeze)", pa, pauses, "API GET /healthz", hz2, pauses);
        row("resume (thaw + cont + clock)", re, pauses, "API GET /healthz", hz2, pauses);
        printf("\nField anchors (docs/design.md, hosted platform): pause 860 ms, resume 1160 ms; "
               "Firecracker cold boot 759 ms for 100 VMs.\n"
               "Pause/resume/boot are API calls with ?wait (they return once the phase is "
               "reached); exec runs `true` in the guest and streams its exit back.\n");
        free(boot), free(qemu), free(ex), free(hz), free(pa), free(re), free(hz2);
        return 0;
}

int main(int argc, char **argv)
{
        unsigned boots = argc > 3 ? (unsigned)atoi(argv[3]) : 5;
        unsigned execs = argc > 4 ? (unsigned)atoi(argv[4]) : 200;
        unsigned pauses = argc > 5 ? (unsigned)atoi(argv[5]) : 20;
        struct fk_error err = {0};
        enum vmm_accel accel;
        char sock[200];
        int r;

        if (argc < 3 || boots < 1 || boots > 12 || execs < 1 || pauses < 1) {
                fprintf(stderr, "usage: %s FORKLETD IMAGE_DIR [BOOTS(1-12) [EXECS [PAUSES]]]\n",
                        argv[0]);
                return 2;
        }
        image = argv[2];
        if (geteuid() != 0 || access(argv[1], X_OK) < 0) {
                fprintf(stderr, "needs root and a forkletd binary\n");
                return 77;
        }
        if (vmm_accel_resolve(getenv("FORKLET_BENCH_ACCEL") ?: "auto", &accel, &err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
        }
        snprintf(dir, sizeof(dir), "/tmp/fk-bench-life-%d", (int)getpid());
        snprintf(sock, sizeof(sock), "%s/run/api.sock", dir);
        cli = (struct cli){.socket = sock, .namespace = "default"};
        if (fk_mkdir_p(dir, 0700) < 0)
                return 1;
        printf("bench/lifecycle: accelerator %s, 1 vCPU, 256 MiB, image %s\n",
               vmm_accel_to_string(accel), image);
        printf("boots %u, execs %u, pause/resume cycles %u\n\n", boots, execs, pauses);
        r = start_daemon(argv[1]);
        if (r >= 0)
                r = run(boots, execs, pauses);
        if (r < 0)
                bench_forkletd_log_tail(dir, r, 3000);
        teardown();
        return r < 0 ? 1 : 0;
}
