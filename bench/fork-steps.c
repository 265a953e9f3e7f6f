/* SPDX-License-Identifier: MIT */
/* bench/fork-steps: fork of N through a real forkletd (netns, cgroup, jail, API), against N cold
 * boots in the same run, with the per-step breakdown every boot leaves in status.bootTiming:
 * per N, the median and p90 of each step for cold boots and forks, the walls (request to all
 * Running) and their ratio; with --exec, 5 s after all ran the idle forks' CPU over 10 s, their
 * QEMU PSS and guest-RAM PSS, then every fork answers an exec, then their PSS again. Root, QEMU
 * and the minimal image needed. Usage: bench-fork-steps FORKLETD IMAGE_DIR [--exec] [--no-cold]
 * [--baseline FORKLETD [--baseline-image DIR] [--new-first]] N...   (N <= 128); the baseline's
 * forks run first unless --new-first; --baseline-image: the baseline boots and forks its own
 * image (a guest change measured against the guest before it). */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "agent/obs/obs.h"
#include "bench/forkletd-run.h"
#include "bench/smaps.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_N    128
#define SESSIONS "/api/v1alpha1/namespaces/default/sessions"
#define WAIT_S   900
#define STEPS    _AGENT_BOOT_STEP_MAX
#define IDLE_S   5  /* after all forks ran, before their CPU and memory are read */
#define CPU_S    10 /* the window over which the idle forks' CPU is measured */

static char dir[128], sock[200];

static const char *image;
static pid_t daemon_pid;
static struct cli cli;

static bool quiet_404; /* teardown deletes names that may not exist */
/* SIGINT or SIGTERM came: the waits give up, and the run tears down what it made */
static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
        (void)sig;
        stopping = 1;
}

/* One API call; *ret (may be NULL) gets the parsed body. 0 on 2xx. */
static int call(const char *method, const char *path, const char *body, json_t **ret)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        int r = 0;

        if (cli_request(&cli, method, path, body, &resp, &err) < 0) {
                fprintf(stderr, "%s %s: %s\n", method, path, err.msg);
                return -EIO;
        }
        if (resp.status == 404 && quiet_404) {
                r = -ENOENT;
        } else if (resp.status < 200 || resp.status >= 300) {
                fprintf(stderr, "%s %s: HTTP %ld %.300s\n", method, path, resp.status,
                        resp.body ? resp.body : "");
                r = -EIO;
        } else if (ret)
                *ret = json_loads(resp.body ? resp.body : "", 0, NULL);
        cli_response_done(&resp);
        return r;
}

static int start_daemon(const char *forkletd)
{
        /* N cold boots at once under TCG can take longer than the default 120 s */
        static const char *const env[] = {"FORKLET_BOOT_TIMEOUT_S=900", NULL};
        cleanup_free char *cfg = NULL;
        int pool = 4 * (getpid() % 60);

        /* own uplink pool and cgroup parent: other forkletds may run on this host */
        if (fk_asprintf(&cfg,
                        "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\nnodeName: bench\n"
                        "stateDir: %s/state\nrunDir: %s/run\nmanifestDir: %s/manifests\n"
                        "accel: %s\napi: {socket: %s/run/api.sock}\n"
                        "cgroupParent: fk-bench-steps-%d\n"
                        "network: {uplinkPool: 198.19.%d.0/22, uplinkInterface: \"\"}\n"
                        "capacity: {maxSessions: 300, maxForksPerSession: 200, "
                        "cpuOvercommitPercent: 10000, "
                        "forkMemoryPercent: 10}\n"
                        "sizeClasses: [{name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, "
                        "pids: 1024}]\nimages: [{name: minimal, dir: %s}]\n",
                        dir, dir, dir, getenv("FORKLET_BENCH_ACCEL") ?: "tcg", dir, (int)getpid(),
                        pool, image) < 0)
                return -ENOMEM;
        return bench_forkletd_start(forkletd, dir, cfg, env, 400, &cli, &daemon_pid);
}

/* The sessions whose name starts with prefix (NULL: all): how many, how many Running, how many
 * Failed; with a Failed one its message on stderr once. */
static int census(const char *prefix, unsigned *ret_n, unsigned *ret_running, unsigned *ret_failed)
{
        json_t *j = NULL, *it;
        size_t i;
        int r = call("GET", "/api/v1alpha1/sessions", NULL, &j);

        *ret_n = *ret_running = *ret_failed = 0;
        if (r < 0 || !j)
                return r < 0 ? r : -EIO;
        json_array_foreach(json_object_get(j, "items"), i, it)
        {
                const char *name =
                        json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
                const char *phase =
                        json_string_value(json_object_get(json_object_get(it, "status"), "phase"));

                if (!name || (prefix && strncmp(name, prefix, strlen(prefix)) != 0))
                        continue;
                (*ret_n)++;
                *ret_running += phase && strcmp(phase, "Running") == 0;
                *ret_failed += phase && strcmp(phase, "Failed") == 0;
        }
        json_decref(j);
        return 0;
}

/* Waits until n sessions named prefix* are Running (or one failed, or WAIT_S passed). */
static int wait_running(const char *prefix, unsigned n, unsigned *ret_failed)
{
        uint64_t t0 = fk_now_mono_ns();

        while (bench_ms_since(t0) < WAIT_S * 1000.0) {
                unsigned have, running, failed;
                int r = census(prefix, &have, &running, &failed);

                if (r < 0)
                        return r;
                /* forks: every one settles (a failed fork is a result, counted) */
                if (failed && (!ret_failed || running + failed >= n)) {
                        fprintf(stderr, "%s*: %u of %u Failed (see %s/forkletd.log)\n", prefix,
                                failed, n, dir);
                        if (ret_failed)
                                *ret_failed = failed;
                        return ret_failed ? 0 : -EIO;
                }
                if (have >= n && running >= n)
                        return 0;
                if (stopping)
                        return -EINTR;
                usleep(50 * 1000);
        }
        fprintf(stderr, "%s*: not all Running after %d s\n", prefix, WAIT_S);
        return -ETIMEDOUT;
}

static int wait_gone(const char *prefix)
{
        for (int i = 0; i < WAIT_S * 4; i++) {
                unsigned have, running, failed;

                if (census(prefix, &have, &running, &failed) < 0)
                        return -EIO;
                if (have == 0)
                        return 0;
                usleep(250 * 1000);
        }
        return -ETIMEDOUT;
}

/* Per-session step times (ms) of the sessions named prefix*, from status.bootTiming; with
 * pids, their QEMU pids. Returns how many. */
static unsigned collect(const char *prefix, double steps[STEPS][MAX_N], pid_t *pids)
{
        json_t *j = NULL, *it;
        unsigned n = 0;
        size_t i;

        if (call("GET", "/api/v1alpha1/sessions", NULL, &j) < 0 || !j)
                return 0;
        json_array_foreach(json_object_get(j, "items"), i, it)
        {
                json_t *st = json_object_get(it, "status");
                json_t *bt = json_object_get(st, "bootTiming");
                const char *name =
                        json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));

                if (!name || strncmp(name, prefix, strlen(prefix)) != 0 || !bt || n >= MAX_N)
                        continue;
                for (unsigned s = 0; s < STEPS; s++) {
                        char key[32];

                        snprintf(key, sizeof(key), "%sMs",
                                 agent_boot_step_to_string((enum agent_boot_step)s));
                        steps[s][n] = json_number_value(json_object_get(bt, key));
                }
                if (pids)
                        pids[n] = (pid_t)json_integer_value(
                                json_object_get(json_object_get(st, "vm"), "pid"));
                n++;
        }
        json_decref(j);
        return n;
}

static void delete_all(const char *prefix, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                char path[200];

                snprintf(path, sizeof(path), SESSIONS "/%s%u", prefix, i);
                (void)call("DELETE", path, NULL, NULL);
        }
        (void)wait_gone(prefix);
}

static const char *session_json(const char *name)
{
        static char buf[512];

        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"forklet.dev/v1alpha1\",\"kind\":\"Session\",\"metadata\":"
                 "{\"name\":\"%s\"},\"spec\":{\"sizeClass\":\"small\",\"image\":\"minimal\","
                 "\"state\":\"Running\"}}",
                 name);
        return buf;
}

static void print_steps(const char *what, const double steps[STEPS][MAX_N], unsigned n)
{
        printf("| %-9s |", what);
        for (unsigned s = 0; s < STEPS; s++) {
                double v[MAX_N];

                memcpy(v, steps[s], n * sizeof(double));
                double p50 = bench_pct(v, n, 0.5), p90 = bench_pct(v, n, 0.9);

                printf(p50 < 100 && p90 < 100 ? " %.1f/%.1f |" : " %.0f/%.0f |", p50, p90);
        }
        printf("\n");
}

static void print_header(void)
{
        printf("| boots     |");
        for (unsigned s = 0; s < STEPS; s++)
                printf(" %s |", agent_boot_step_to_string((enum agent_boot_step)s));
        printf("\n|-----------|");
        for (unsigned s = 0; s < STEPS; s++)
                printf("---|");
        printf("\n");
}

/* One N's results: its cold boots, its forks, the baseline forkletd's forks (--baseline). */
struct n_result {
        unsigned n, nc, nf, nb;
        unsigned failed[2];   /* forks that failed: new, base */
        unsigned cold_failed; /* cold boots that failed (forkletd's boot timeout on a busy host) */
        double cold_wall, fork_wall, base_wall;
        long cpu[2]; /* forkletd's own CPU (clock ticks) from the fork request to all Running */
        double cold[STEPS][MAX_N], fork[STEPS][MAX_N], base[STEPS][MAX_N];
        char exec_line[2][840]; /* fork, base: idle CPU, memory before and after the exec */
        struct bench_smaps smaps[2][MAX_N];
        unsigned n_smaps[2];
        /* before the cold boots, the forks, the baseline's forks: the wait for an idle host
         * (bench_settle: the last phase's teardown ends in the background) and its idle % */
        double settle_ms[3];
        int settle_idle[3];
};

#define SETTLE_IDLE_PCT 90
#define SETTLE_MAX_MS   20000

static struct n_result results[16];

/* The forks' memory now (smaps into smaps[0..npids)), medians and p90s into line after what. */
static void pss_line(const char *what, const pid_t *pids, unsigned npids, struct bench_smaps *smaps,
                     char *line, size_t size)
{
        double ram[MAX_N], own[MAX_N], other[MAX_N];

        for (unsigned i = 0; i < npids; i++) {
                long o = 0;

                (void)bench_smaps_read(pids[i], &smaps[i]);
                for (int k = 0; k < _BENCH_REGION_MAX; k++)
                        o += k == BENCH_REGION_GUEST_RAM ? 0 : smaps[i].pss_kb[k];
                ram[i] = (double)smaps[i].pss_kb[BENCH_REGION_GUEST_RAM] / 1024.0;
                own[i] = (double)smaps[i].anon_kb[BENCH_REGION_GUEST_RAM] / 1024.0;
                other[i] = (double)o / 1024.0;
        }
        snprintf(line, size,
                 "%s: idle fork PSS median/p90: guest RAM %.2f/%.2f MiB (written since the "
                 "restore %.2f/%.2f), QEMU's own %.1f/%.1f MiB",
                 what, bench_pct(ram, npids, 0.5), bench_pct(ram, npids, 0.9),
                 bench_pct(own, npids, 0.5), bench_pct(own, npids, 0.9),
                 bench_pct(other, npids, 0.5), bench_pct(other, npids, 0.9));
}

/* The idle forks' CPU over CPU_S, as a share of one host core per QEMU: median, p90 and sum. */
static void cpu_line(const pid_t *pids, unsigned npids, char *line, size_t size)
{
        long t0[MAX_N], hz = sysconf(_SC_CLK_TCK);
        double pct[MAX_N], sum = 0;
        unsigned n = 0;

        for (unsigned i = 0; i < npids; i++)
                t0[i] = bench_cpu_ticks(pids[i]);
        sleep(CPU_S);
        for (unsigned i = 0; i < npids; i++) {
                long t1 = bench_cpu_ticks(pids[i]);

                if (t0[i] < 0 || t1 < t0[i])
                        continue;
                pct[n] = 100.0 * (double)(t1 - t0[i]) / (double)hz / CPU_S;
                sum += pct[n++];
        }
        snprintf(line, size,
                 "idle fork CPU over %d s, %% of a host core per QEMU median/p90: %.2f/%.2f, all "
                 "%u: %.1f",
                 CPU_S, bench_pct(pct, n, 0.5), bench_pct(pct, n, 0.9), n, sum);
}

/* The idle forks' CPU, then their memory before any exec (IDLE_S after all ran), then every fork
 * answers an exec of `true`, then their memory again (smaps keeps that one): all into line. */
static int exec_all(const char *prefix, unsigned n, const pid_t *pids, unsigned npids,
                    struct bench_smaps *smaps, char *line, size_t size)
{
        char cpu[160], before[320], after[320], what[120];
        unsigned ok = 0;
        uint64_t t0;

        sleep(IDLE_S);
        cpu_line(pids, npids, cpu, sizeof(cpu));
        pss_line("Running, no exec yet", pids, npids, smaps, before, sizeof(before));
        t0 = fk_now_mono_ns();
        for (unsigned i = 0; i < n && !stopping; i++) {
                char path[200];

                snprintf(path, sizeof(path), SESSIONS "/%s%u/exec", prefix, i);
                ok += call("POST", path, "{\"argv\":[\"true\"]}", NULL) == 0;
        }
        snprintf(what, sizeof(what),
                 "exec `true` in each of %u forks: %u answered (%.0f ms for all)", n, ok,
                 bench_ms_since(t0));
        pss_line(what, pids, npids, smaps, after, sizeof(after));
        snprintf(line, size, "%s\n%s\n%s", cpu, before, after);
        return ok == n ? 0 : -EIO;
}

/* N cold boots at once, all Running, then deleted. */
static int bench_cold(struct n_result *res)
{
        char name[48];
        uint64_t t0;
        int r = 0;

        res->settle_ms[0] = bench_settle(SETTLE_IDLE_PCT, SETTLE_MAX_MS, &res->settle_idle[0]);
        t0 = fk_now_mono_ns();
        for (unsigned i = 0; i < res->n && r >= 0; i++) {
                snprintf(name, sizeof(name), "cold%u", i);
                r = call("POST", SESSIONS, session_json(name), NULL);
        }
        if (r >= 0)
                r = wait_running("cold", res->n, &res->cold_failed);
        res->cold_wall = bench_ms_since(t0);
        res->nc = collect("cold", res->cold, NULL);
        delete_all("cold", res->n);
        return r;
}

/* A fork of N from ck, all Running (with exec: each answers an exec), then deleted. */
static int bench_fork(const char *ck, struct n_result *res, bool base, bool exec)
{
        char body[160];
        pid_t pids[MAX_N];
        uint64_t t0;
        long cpu1;
        int r;

        snprintf(body, sizeof(body), "{\"from\":\"%s\",\"count\":%u}", ck, res->n);
        res->settle_ms[1 + base] =
                bench_settle(SETTLE_IDLE_PCT, SETTLE_MAX_MS, &res->settle_idle[1 + base]);
        res->cpu[base] = bench_cpu_ticks(daemon_pid);
        t0 = fk_now_mono_ns();
        r = call("POST", SESSIONS "/p/forks", body, NULL);
        if (r >= 0)
                r = wait_running("p-fork-", res->n, &res->failed[base]);
        *(base ? &res->base_wall : &res->fork_wall) = bench_ms_since(t0);
        cpu1 = bench_cpu_ticks(daemon_pid);
        res->cpu[base] = res->cpu[base] >= 0 && cpu1 >= 0 ? cpu1 - res->cpu[base] : -1;
        *(base ? &res->nb : &res->nf) = collect("p-fork-", base ? res->base : res->fork, pids);
        if (r >= 0 && exec && !res->failed[base]) {
                res->n_smaps[base] = base ? res->nb : res->nf;
                r = exec_all("p-fork-", res->n, pids, res->n_smaps[base], res->smaps[base],
                             res->exec_line[base], sizeof(res->exec_line[base]));
        }
        delete_all("p-fork-", res->n);
        return r;
}

static void print_result(const struct n_result *res)
{
        printf("\n## N=%u: fork wall %.0f ms (request to all Running)", res->n, res->fork_wall);
        if (res->nc)
                printf(", cold wall %.0f ms%s, speedup %.1fx", res->cold_wall,
                       res->cold_failed ? " (until the last settled)" : "",
                       res->fork_wall > 0 ? res->cold_wall / res->fork_wall : 0.0);
        if (res->cold_failed)
                printf("; cold boots Failed: %u (see forkletd.log)", res->cold_failed);
        if (res->nb)
                printf("; baseline forkletd's fork wall %.0f ms (%.2fx of it)", res->base_wall,
                       res->fork_wall > 0 ? res->base_wall / res->fork_wall : 0.0);
        if (res->failed[0] || res->failed[1])
                printf("; forks Failed: %u (baseline %u)", res->failed[0], res->failed[1]);
        /* what forkletd itself spent meanwhile (its threads, not QEMU), in ms */
        if (res->cpu[0] >= 0)
                printf("\nforkletd's own CPU during the fork: %.0f ms",
                       (double)res->cpu[0] * 1000.0 / (double)sysconf(_SC_CLK_TCK));
        if (res->nb && res->cpu[1] >= 0)
                printf(" (baseline forkletd: %.0f ms)",
                       (double)res->cpu[1] * 1000.0 / (double)sysconf(_SC_CLK_TCK));
        printf("\nthe host settled (links gone, %u%% idle over 500 ms, at most %u s) before",
               SETTLE_IDLE_PCT, SETTLE_MAX_MS / 1000);
        for (unsigned k = 0, shown = 0; k < 3; k++) {
                static const char *const what[] = {"the cold boots", "the forks",
                                                   "the baseline's forks"};

                if ((k == 0 && !res->nc) || (k == 2 && !res->nb))
                        continue;
                printf("%s %s in %.0f ms (idle %d%%)", shown++ ? "," : "", what[k],
                       res->settle_ms[k], res->settle_idle[k]);
        }
        printf("\n\nper step, ms, median/p90 over the N boots (preExec is part of spawn; total: "
               "request to Running)\n\n");
        print_header();
        if (res->nc)
                print_steps("cold", res->cold, res->nc);
        if (res->nb)
                print_steps("fork base", res->base, res->nb);
        print_steps("fork", res->fork, res->nf);
        for (int i = 1; i >= 0; i--)
                if (res->exec_line[i][0])
                        printf("\n%s%s\n", i ? "baseline: " : "", res->exec_line[i]);
        for (int i = 1; i >= 0; i--)
                if (res->n_smaps[i])
                        bench_smaps_print(stdout, i ? "baseline forkletd" : "this forkletd",
                                          res->smaps[i], res->n_smaps[i]);
}

/* Deletes what is left, stops forkletd, kills any QEMU of ours still there (its command line
 * names our directory), unmounts what forkletd left mounted, removes the directory. */
static void teardown(void)
{
        struct dirent *de;
        DIR *dp;

        quiet_404 = true;
        /* a forkletd that is gone (killed with the bench's process group) takes no deletes:
         * its VMs are found through its state records below */
        if (daemon_pid > 0 && call("GET", "/api/v1alpha1/sessions", NULL, NULL) == 0) {
                delete_all("p-fork-", MAX_N);
                delete_all("cold", MAX_N);
                (void)call("DELETE", SESSIONS "/p", NULL, NULL);
                (void)wait_gone(NULL);
        }
        bench_forkletd_teardown(daemon_pid, dir);
        /* the cgroup parent forkletd made (empty once its sessions are gone) */
        if ((dp = opendir("/sys/fs/cgroup"))) {
                while ((de = readdir(dp))) {
                        char p[300];

                        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/fk-bench-steps-%d", de->d_name,
                                 (int)getpid());
                        (void)rmdir(p);
                }
                closedir(dp);
        }
}

/* The parent session and its checkpoint; *ck gets the id. */
static int make_parent(char *ck, size_t size)
{
        json_t *j = NULL;
        int r = call("POST", SESSIONS, session_json("p"), NULL);

        if (r >= 0)
                r = wait_running("p", 1, NULL);
        bench_settle_links_baseline(); /* the parent's, and those that were there before */
        if (r >= 0)
                r = call("POST", SESSIONS "/p/checkpoints", "{}", &j);
        if (r >= 0 && !json_is_string(json_object_get(j, "id")))
                r = -EIO;
        if (r >= 0)
                snprintf(ck, size, "%s", json_string_value(json_object_get(j, "id")));
        json_decref(j);
        return r;
}

/* One forkletd: its parent and checkpoint, then per N the cold boots (unless base or no_cold)
 * and the fork; the daemon and everything of it gone again. */
static int run_daemon(const char *forkletd, size_t count, bool base, bool cold, bool exec)
{
        char ck[64];
        int r;

        daemon_pid = 0;
        quiet_404 = false;
        snprintf(dir, sizeof(dir), "/var/tmp/fk-bench-steps-%d%s", (int)getpid(),
                 base ? "-base" : "");
        snprintf(sock, sizeof(sock), "%s/run/api.sock", dir);
        cli = (struct cli){.socket = sock, .namespace = "default"};
        if (fk_mkdir_p(dir, 0700) < 0)
                return -errno;
        r = start_daemon(forkletd);
        if (r >= 0)
                r = make_parent(ck, sizeof(ck));
        for (size_t k = 0; r >= 0 && k < count; k++) {
                if (cold && !base)
                        r = bench_cold(&results[k]);
                if (r >= 0)
                        r = bench_fork(ck, &results[k], base, exec);
        }
        if (r < 0)
                bench_forkletd_log_tail(dir, r, 4000);
        teardown();
        return r;
}

int main(int argc, char **argv)
{
        size_t count = 0;
        bool exec = false, cold = true, new_first = false;
        const char *baseline = NULL;
        static char image_abs[4096], base_image_abs[4096];
        int r = 0;

        if (argc < 4) {
                fprintf(stderr,
                        "usage: %s FORKLETD IMAGE_DIR [--exec] [--no-cold] [--baseline "
                        "FORKLETD [--baseline-image DIR] [--new-first]] N...\n",
                        argv[0]);
                return 2;
        }
        /* forkletd runs in its own directory: the node config needs an absolute path */
        if (!realpath(argv[2], image_abs))
                return fprintf(stderr, "%s: %s\n", argv[2], strerror(errno)), 2;
        image = image_abs;
        for (int i = 3; i < argc; i++) {
                int n = atoi(argv[i]);

                if (strcmp(argv[i], "--exec") == 0)
                        exec = true;
                else if (strcmp(argv[i], "--no-cold") == 0)
                        cold = false;
                else if (strcmp(argv[i], "--new-first") == 0)
                        new_first = true;
                else if (strcmp(argv[i], "--baseline") == 0 && i + 1 < argc)
                        baseline = argv[++i];
                else if (strcmp(argv[i], "--baseline-image") == 0 && i + 1 < argc) {
                        if (!realpath(argv[++i], base_image_abs))
                                return fprintf(stderr, "%s: %s\n", argv[i], strerror(errno)), 2;
                } else if (n >= 1 && n <= MAX_N && count < ARRAY_SIZE(results))
                        results[count++].n = (unsigned)n;
                else
                        return fprintf(stderr, "N must be 1..%d\n", MAX_N), 2;
        }
        if (geteuid() != 0 || access(argv[1], X_OK) < 0 ||
            (baseline && access(baseline, X_OK) < 0)) {
                fprintf(stderr, "needs root and forkletd binaries\n");
                return 77;
        }
        printf("# bench/fork-steps: fork of N vs N cold boots through forkletd (TCG, 1 vCPU, "
               "256 MiB, netns + cgroup + jail), image %s%s%s\n",
               image, baseline ? ", baseline forkletd " : "", baseline ? baseline : "");
        if (baseline && base_image_abs[0])
                printf("# the baseline's image: %s\n", base_image_abs);
        if (baseline)
                printf("# order: %s\n", new_first ? "this forkletd first, then the baseline"
                                                  : "the baseline first, then this forkletd");
        /* no SA_RESTART: a wait or an API call in progress returns, and teardown runs */
        sigaction(SIGINT, &(struct sigaction){.sa_handler = on_stop}, NULL);
        sigaction(SIGTERM, &(struct sigaction){.sa_handler = on_stop}, NULL);
        /* the second forkletd runs on a host that has just run and torn down the first one's
         * QEMUs (an A/A run measured the second 0.83x of the first): --new-first swaps them */
        if (new_first)
                r = run_daemon(argv[1], count, false, cold, exec);
        if (baseline && !stopping) {
                image = base_image_abs[0] ? base_image_abs : image_abs;
                if (run_daemon(baseline, count, true, cold, exec) < 0)
                        fprintf(stderr, "the baseline run failed; the new forkletd runs anyway\n");
                image = image_abs;
        }
        if (!new_first)
                r = stopping ? -EINTR : run_daemon(argv[1], count, false, cold, exec);
        if (stopping)
                return fprintf(stderr, "stopped by a signal; what the run made is gone\n"), 1;
        for (size_t k = 0; k < count; k++)
                print_result(&results[k]);
        return r < 0 ? 1 : 0;
}
