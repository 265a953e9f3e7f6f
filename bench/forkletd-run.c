/* SPDX-License-Identifier: MIT */
/* The private forkletd of bench/lifecycle and bench/fork-steps (forkletd-run.h). */
#include "bench/forkletd-run.h"
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

double bench_pct(double *v, size_t n, double p)
{
        size_t k;

        if (n == 0)
                return 0;
        qsort(v, n, sizeof(*v), cmp_double);
        k = (size_t)((double)n * p + 0.999999);
        return v[k ? k - 1 : 0];
}

double bench_ms_since(uint64_t t0)
{
        return (double)(fk_now_mono_ns() - t0) / 1e6;
}

long bench_cpu_ticks(pid_t pid)
{
        cleanup_free char *buf = NULL;
        char path[64], *p;
        unsigned long ut, st;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (fk_read_file(path, 4096, &buf, NULL) < 0)
                return -1;
        /* after the command's closing parenthesis: state is field 3, utime 14, stime 15 */
        if (!(p = strrchr(buf, ')')) ||
            sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
                return -1;
        return (long)(ut + st);
}

/* The first line of /proc/stat: all jiffies and the idle ones (idle + iowait). */
static int cpu_jiffies(unsigned long long *all, unsigned long long *idle)
{
        unsigned long long v[8] = {0};
        cleanup_fclose FILE *f = fopen("/proc/stat", "re");

        if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                         &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
                return -EIO;
        *all = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
        *idle = v[3] + v[4];
        return 0;
}

/* The links of the host's network namespace (entries of /sys/class/net), -1 if unreadable. */
static long count_links(void)
{
        DIR *d = opendir("/sys/class/net");
        struct dirent *de;
        long n = 0;

        if (!d)
                return -1;
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

static long links_baseline = -1;

void bench_settle_links_baseline(void)
{
        links_baseline = count_links();
}

double bench_settle(unsigned min_idle_pct, unsigned max_ms, int *ret_idle)
{
        uint64_t t0 = fk_now_mono_ns();
        int idle = -1;
        long n;

        while (links_baseline >= 0 && (n = count_links()) >= 0 && n > links_baseline &&
               bench_ms_since(t0) < max_ms)
                usleep(50 * 1000);
        while (bench_ms_since(t0) < max_ms) {
                unsigned long long a0, i0, a1, i1;

                if (cpu_jiffies(&a0, &i0) < 0)
                        break;
                usleep(500 * 1000);
                if (cpu_jiffies(&a1, &i1) < 0)
                        break;
                idle = a1 > a0 ? (int)(100 * (i1 - i0) / (a1 - a0)) : 100;
                if (idle >= (int)min_idle_pct)
                        break;
        }
        if (ret_idle)
                *ret_idle = idle;
        return bench_ms_since(t0);
}

int bench_forkletd_start(const char *forkletd, const char *dir, const char *config,
                         const char *const *env, unsigned tries, struct cli *cli, pid_t *pid)
{
        cleanup_free char *path = NULL, *log = NULL;

        if (fk_asprintf(&path, "%s/node.yaml", dir) < 0 ||
            fk_asprintf(&log, "%s/forkletd.log", dir) < 0 ||
            fk_write_file_atomic(path, config, strlen(config), 0600) < 0)
                return -ENOMEM;
        *pid = fork();
        if (*pid < 0)
                return -errno;
        if (*pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

                if (fd >= 0) {
                        dup2(fd, STDOUT_FILENO);
                        dup2(fd, STDERR_FILENO);
                }
                for (size_t i = 0; env && env[i]; i++)
                        (void)putenv((char *)env[i]); /* exec follows: env outlives it */
                execl(forkletd, forkletd, "--config", path, (char *)NULL);
                _exit(127);
        }
        for (unsigned i = 0; i < tries; i++) {
                struct cli_response resp = {0};
                struct fk_error err = {0};

                if (cli_request(cli, "GET", "/healthz", NULL, &resp, &err) >= 0 &&
                    resp.status == 200) {
                        cli_response_done(&resp);
                        return 0;
                }
                cli_response_done(&resp);
                usleep(50 * 1000);
        }
        fprintf(stderr, "forkletd did not answer (see %s)\n", log);
        return -ETIMEDOUT;
}

/* Kills pid when its command line names dir (a QEMU of ours, not a reused pid). */
static void kill_ours(pid_t pid, const char *dir)
{
        char p[64], cmd[512];
        FILE *f;
        size_t n;

        snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
        if (pid <= 0 || !(f = fopen(p, "re")))
                return;
        n = fread(cmd, 1, sizeof(cmd) - 1, f);
        fclose(f);
        for (size_t k = 0; k < n; k++)
                cmd[k] = cmd[k] ? cmd[k] : ' ';
        cmd[n] = '\0';
        if (strstr(cmd, dir))
                kill(pid, SIGKILL);
}

void bench_forkletd_teardown(pid_t pid, const char *dir)
{
        cleanup_free char *records = NULL, *ram = NULL;
        struct dirent *de;
        DIR *dp;

        if (pid > 0) {
                kill(pid, SIGTERM);
                waitpid(pid, NULL, 0);
        }
        /* the VMs the state records name (state.json's vm.pid) */
        if (fk_asprintf(&records, "%s/state/sessions", dir) >= 0 && (dp = opendir(records))) {
                while ((de = readdir(dp))) {
                        cleanup_free char *buf = NULL;
                        char p[512];
                        json_t *j;

                        snprintf(p, sizeof(p), "%s/%s/state.json", records, de->d_name);
                        if (fk_read_file(p, 4 * 1024 * 1024, &buf, NULL) < 0 ||
                            !(j = json_loads(buf, 0, NULL)))
                                continue;
                        kill_ours((pid_t)json_integer_value(
                                          json_object_get(json_object_get(j, "vm"), "pid")),
                                  dir);
                        json_decref(j);
                }
                closedir(dp);
        }
        /* forkletd's guest RAM tmpfs on <runDir>/sessions (the benches' runDir is on a disk
         * filesystem), kept if a VM outlived it */
        if (fk_asprintf(&ram, "%s/run/sessions", dir) >= 0)
                (void)umount2(ram, UMOUNT_NOFOLLOW);
        fk_rm_rf(dir);
}

void bench_forkletd_log_tail(const char *dir, int r, size_t tail)
{
        cleanup_free char *log = NULL, *text = NULL;
        size_t n = 0;

        fprintf(stderr, "bench failed (%s); the end of forkletd's log:\n", strerror(-r));
        if (fk_asprintf(&log, "%s/forkletd.log", dir) >= 0 &&
            fk_read_file(log, 64 << 20, &text, &n) >= 0)
                fputs(text + (n > tail ? n - tail : 0), stderr);
}
