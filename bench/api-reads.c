/* SPDX-License-Identifier: MIT */
/* bench/api-reads: GET /sessions latency (p50/p99) through forkletd's API on a unix socket, for
 * 1 and 50 sessions with 5 checkpoints each, reading the status held in memory against the
 * baseline of the same run that loads every checkpoint list from disk for each request (what a
 * read cost before the status cache: readdir, meta.json and a disk-usage walk per checkpoint).
 * VMs are the unit tests' fake backend, so only the read path is measured; no root needed.
 * Usage: bench-api-reads [REQUESTS]   (default 300) */
#include "tests/lib/agent-fake.h"
#include "agent/api/api.h"
#include "agent/daemon/daemon-internal.h"
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
        size_t k = (size_t)((double)n * p + 0.999999);

        qsort(v, n, sizeof(*v), cmp_double);
        return v[k ? k - 1 : 0];
}

/* A checkpoint as the real engine leaves it, small: device state, a sparse RAM file. */
static int fake_checkpoint(void *ud, void *vm, const struct agent_checkpoint_params *p,
                           struct agent_checkpoint_result *ret, struct fk_error *err)
{
        char path[600];

        (void)ud, (void)vm;
        snprintf(path, sizeof(path), "%s/state", p->dir);
        if (fk_write_file_atomic(path, "state", 5, 0600) < 0)
                return fk_error_set(err, -EIO, "write %s", path);
        snprintf(path, sizeof(path), "%s/ram", p->dir);
        if (fk_write_file_atomic(path, "ram-bytes", 9, 0600) < 0)
                return fk_error_set(err, -EIO, "write %s", path);
        *ret = (struct agent_checkpoint_result){.pause_ns = 1000000, .ram_bytes = 9};
        return 0;
}

struct node {
        char dir[64], sock[128];
        struct node_config *cfg;
        struct fake_backend fake;
        struct agent_vm_ops ops;
        struct agent_daemon *d;
        struct api_server *api;
        struct cli cli;
};

static long call(struct node *n, const char *method, const char *path, const char *body)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        long status;

        if (cli_request(&n->cli, method, path, body, &resp, &err) < 0) {
                fprintf(stderr, "%s %s: %s\n", method, path, err.msg);
                return -1;
        }
        status = resp.status;
        cli_response_done(&resp);
        return status;
}

static int node_start(struct node *n)
{
        struct manifest_diag diag = {0};
        struct fk_error err = {0};
        cleanup_free char *yaml = NULL, *img = NULL, *k = NULL, *i = NULL;

        strcpy(n->dir, "/tmp/fk-bench-reads-XXXXXX");
        if (!mkdtemp(n->dir))
                return -errno;
        snprintf(n->sock, sizeof(n->sock), "%s/api.sock", n->dir);
        if (fk_asprintf(&img, "%s/images", n->dir) < 0 || fk_mkdir_p(img, 0700) < 0 ||
            fk_asprintf(&k, "%s/vmlinuz", img) < 0 || fk_asprintf(&i, "%s/initrd.img", img) < 0 ||
            fk_write_file_atomic(k, "", 0, 0600) < 0 || fk_write_file_atomic(i, "", 0, 0600) < 0)
                return -EIO;
        if (fk_asprintf(&yaml,
                        "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\nnodeName: bench\n"
                        "stateDir: %s/state\nrunDir: %s/run\nmanifestDir: %s/manifests\n"
                        "accel: tcg\nsizeClasses: [{name: small, vcpus: 1, memoryMiB: 64, "
                        "cpu: 0.1, pids: 64}]\nimages: [{name: minimal, dir: %s}]\n"
                        "capacity: {maxSessions: 64, reserveMemoryMiB: 0, cpuOvercommitPercent: "
                        "10000}\n",
                        n->dir, n->dir, n->dir, img) < 0)
                return -ENOMEM;
        if (node_config_parse(yaml, strlen(yaml), "node.yaml", &n->cfg, &diag) < 0) {
                fprintf(stderr, "node config: %s\n", diag.n ? diag.messages[0] : "?");
                return -EINVAL;
        }
        atomic_store(&n->fake.next_pid, 1000);
        n->ops = fake_ops(&n->fake);
        n->ops.checkpoint = fake_checkpoint;
        n->cli = (struct cli){.socket = n->sock, .namespace = "default"};
        if (agent_daemon_new(n->cfg, VMM_ACCEL_TCG, &n->ops, &agent_clock_system, &n->d) < 0 ||
            api_server_start(n->d, n->cfg, n->sock, &n->api, &err) < 0) {
                fprintf(stderr, "start: %s\n", err.msg);
                return -EIO;
        }
        return 0;
}

static void node_stop(struct node *n)
{
        n->api = api_server_stop(n->api);
        n->d = agent_daemon_free(n->d);
        node_config_free(n->cfg);
        (void)fk_rm_rf(n->dir);
}

/* Sessions s0..s<count-1>, Running, with 5 checkpoints each. */
static int populate(struct node *n, unsigned count)
{
        for (unsigned i = 0; i < count; i++) {
                char body[512], path[160];

                snprintf(body, sizeof(body),
                         "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\","
                         "\"metadata\":{\"name\":\"s%u\"},\"spec\":{\"sizeClass\":\"small\","
                         "\"image\":\"minimal\"}}",
                         i);
                if (call(n, "POST", "/api/v1alpha1/sessions", body) != 201)
                        return -EIO;
                if (agent_daemon_reconcile(n->d) < 0 || agent_daemon_wait_idle(n->d, 10000) != 1)
                        return -ETIMEDOUT;
                snprintf(path, sizeof(path),
                         "/api/v1alpha1/namespaces/default/sessions/s%u/checkpoints", i);
                for (int c = 0; c < 5; c++)
                        if (call(n, "POST", path, "{}") != 201)
                                return -EIO;
        }
        return 0;
}

/* Drops every held checkpoint list, so the next read loads them from disk (the baseline). */
static void forget_lists(struct node *n)
{
        pthread_mutex_lock(&n->d->lock);
        for (size_t i = 0; i < n->d->n_sessions; i++) {
                json_decref(n->d->sessions[i]->ck_cache);
                n->d->sessions[i]->ck_cache = NULL;
        }
        pthread_mutex_unlock(&n->d->lock);
}

static int measure(struct node *n, unsigned reqs, bool from_disk, double *ret_p50, double *ret_p99)
{
        cleanup_free double *v = calloc(reqs, sizeof(*v));

        if (!v)
                return -ENOMEM;
        for (unsigned i = 0; i < reqs; i++) {
                uint64_t t0;

                if (from_disk)
                        forget_lists(n);
                t0 = fk_now_mono_ns();
                if (call(n, "GET", "/api/v1alpha1/sessions", NULL) != 200)
                        return -EIO;
                v[i] = (double)(fk_now_mono_ns() - t0) / 1e6;
        }
        *ret_p50 = pct(v, reqs, 0.50);
        *ret_p99 = pct(v, reqs, 0.99);
        return 0;
}

int main(int argc, char **argv)
{
        unsigned reqs = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 300;
        static const unsigned sizes[] = {1, 50};
        /* BENCH_MEMORY_ONLY=1: skip the baseline (to trace the cached path alone) */
        bool memory_only = getenv("BENCH_MEMORY_ONLY") != NULL;
        double dp50 = 0, dp99 = 0;

        if (reqs < 10)
                reqs = 10;
        log_set_max_level(LOG_LEVEL_ERROR);
        printf("GET /api/v1alpha1/sessions, %u requests each, 5 checkpoints per session\n", reqs);
        printf("%-9s %-22s %9s %9s %14s\n", "sessions", "status from", "p50 ms", "p99 ms",
               "p50 vs disk");
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
                struct node n = {0};
                double mp50, mp99;
                int r = node_start(&n);

                if (r >= 0)
                        r = populate(&n, sizes[k]);
                /* the baseline before and after, so noise hits both alike */
                if (r >= 0 && !memory_only)
                        r = measure(&n, reqs / 2, true, &dp50, &dp99);
                if (r >= 0)
                        r = measure(&n, reqs, false, &mp50, &mp99);
                if (r >= 0 && !memory_only)
                        r = measure(&n, reqs / 2, true, &dp50, &dp99);
                node_stop(&n);
                if (r < 0) {
                        fprintf(stderr, "bench with %u sessions failed: %s\n", sizes[k],
                                strerror(-r));
                        return 1;
                }
                printf("%-9u %-22s %9.3f %9.3f %14s\n", sizes[k], "disk (baseline)", dp50, dp99,
                       "1.00x");
                printf("%-9u %-22s %9.3f %9.3f %13.2fx\n", sizes[k], "memory", mp50, mp99,
                       dp50 / (mp50 > 0 ? mp50 : 1e-9));
        }
        return 0;
}
