/* SPDX-License-Identifier: MIT */
/* bench/fork: cold boot of N microVMs vs fork of N from one checkpoint (wall, per-child p50/p90),
 * memory of an idle fork (PSS of its guest RAM mapping and QEMU's own), checkpoint pause windows
 * at low and high touched RAM for 256 MiB and 1 GiB guests, and rollback (restore) latency.
 * Every ratio is against a baseline measured in the same run. Root, QEMU and the image needed.
 * Usage: bench-fork [N...]   (default: 1 10; the full run is 1 10 30)
 *        bench-fork rollback  (only the rollback table)
 *        bench-fork tb N MIB  (fork of N with the default TCG translation cache vs MIB) */
#include "tests/fork/fork-harness.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_N 64

static char workdir[200];
static const char *image;

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
        qsort(v, n, sizeof(*v), cmp_double);
        return v[(size_t)((double)(n - 1) * p + 0.5)];
}

struct group_result {
        double wall_ms, p50_ms, p90_ms;
};

/* Starts n VMs (cold, or forks of ckpt), all spawned first and then awaited. */
static int run_group(struct fh_vm *vms, unsigned n, const char *tag, const char *ckpt,
                     struct group_result *res)
{
        double per[MAX_N];
        struct fk_error err = {0};
        uint64_t t0 = fk_now_mono_ns();
        int r = 0;

        for (unsigned i = 0; i < n && r >= 0; i++) {
                char name[48];

                snprintf(name, sizeof(name), "%s-%u", tag, i);
                r = fh_vm_start(&vms[i], workdir, name, image, 256, ckpt, false, &err);
        }
        for (unsigned i = 0; i < n && r >= 0; i++) {
                char name[48];

                snprintf(name, sizeof(name), "%s-%u", tag, i);
                r = fh_vm_wait(&vms[i], name, ckpt != NULL, &err);
                per[i] = (double)(vms[i].ready_ns - vms[i].spawn_ns) / 1e6;
        }
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", tag, err.msg);
                return r;
        }
        res->wall_ms = (double)(fk_now_mono_ns() - t0) / 1e6;
        res->p50_ms = pct(per, n, 0.5);
        res->p90_ms = pct(per, n, 0.9);
        return 0;
}

static void stop_group(struct fh_vm *vms, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                fh_vm_stop(&vms[i]);
                fk_rm_rf(vms[i].dir);
                memset(&vms[i], 0, sizeof(vms[i]));
        }
}

/* Pss (kB) of the mapping whose path ends in suffix, and of the whole process. */
static int map_kb(pid_t pid, const char *suffix, long *ret_map, long *ret_anon, long *ret_total);

static int pss_kb(pid_t pid, const char *suffix, long *ret_map, long *ret_total)
{
        long anon;

        return map_kb(pid, suffix, ret_map, &anon, ret_total);
}

/* PSS (kB) of QEMU pid: of the mapping whose path ends in suffix (*ret_map), its Anonymous
 * part (*ret_anon: the pages of it this process wrote), and of everything (*ret_total). */
static int map_kb(pid_t pid, const char *suffix, long *ret_map, long *ret_anon, long *ret_total)
{
        char path[64], line[512];
        long map = 0, anon = 0, total = 0;
        bool in_map = false;
        cleanup_fclose FILE *f = NULL;

        snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                long kb;
                size_t len = strcspn(line, "\n");

                line[len] = '\0';
                unsigned long lo, hi;

                /* Mapping headers start "lo-hi perms"; field lines are "Name: value". */
                if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
                        in_map = len >= strlen(suffix) &&
                                 strcmp(line + len - strlen(suffix), suffix) == 0;
                        continue;
                }
                if (sscanf(line, "Pss: %ld kB", &kb) == 1) {
                        total += kb;
                        if (in_map)
                                map += kb;
                } else if (in_map && sscanf(line, "Anonymous: %ld kB", &kb) == 1) {
                        anon += kb;
                }
        }
        *ret_map = map;
        *ret_anon = anon;
        *ret_total = total;
        return 0;
}

static int checkpoint_once(struct fh_vm *vm, const char *name, struct vmm_checkpoint_stats *st)
{
        char dir[300];
        struct fk_error err = {0};
        int r;

        snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
        fk_rm_rf(dir);
        if (mkdir(dir, 0700) < 0)
                return -errno;
        r = vmm_checkpoint_save(vm->qmp, vm->mem, dir, 60000, st, &err);
        if (r < 0)
                fprintf(stderr, "checkpoint %s: %s\n", name, err.msg);
        return r;
}

static int bench_boot_vs_fork(const unsigned *ns, size_t count)
{
        static struct fh_vm vms[MAX_N], parent;
        struct vmm_checkpoint_stats st;
        struct fk_error err = {0};
        char ckpt[300];
        int r;

        r = fh_vm_start(&parent, workdir, "parent", image, 256, NULL, true, &err);
        if (r < 0)
                return fprintf(stderr, "parent: %s\n", err.msg), r;
        r = checkpoint_once(&parent, "ck", &st);
        if (r < 0)
                return r;
        snprintf(ckpt, sizeof(ckpt), "%s/ck", workdir);
        printf("\n%-6s %14s %14s %14s %14s %14s %14s %10s\n", "N", "cold wall ms", "cold p50 ms",
               "cold p90 ms", "fork wall ms", "fork p50 ms", "fork p90 ms", "speedup");
        for (size_t k = 0; k < count; k++) {
                struct group_result cold, fork;
                unsigned n = ns[k];

                r = run_group(vms, n, "cold", NULL, &cold);
                stop_group(vms, n);
                if (r < 0)
                        return r;
                r = run_group(vms, n, "fork", ckpt, &fork);
                if (r >= 0 && k == count - 1) {
                        long map = 0, total = 0;

                        if (pss_kb(vmm_process_pid(vms[0].proc), "/ck/ram", &map, &total) >= 0)
                                printf("# idle fork memory (N=%u): guest RAM mapping PSS %ld KiB "
                                       "(%.2f%% of 256 MiB), QEMU's own PSS %ld KiB\n",
                                       n, map, 100.0 * (double)map / (256.0 * 1024), total - map);
                }
                stop_group(vms, n);
                if (r < 0)
                        return r;
                printf("%-6u %14.0f %14.0f %14.0f %14.0f %14.0f %14.0f %9.1fx\n", n, cold.wall_ms,
                       cold.p50_ms, cold.p90_ms, fork.wall_ms, fork.p50_ms, fork.p90_ms,
                       cold.wall_ms / fork.wall_ms);
        }
        fh_vm_stop(&parent);
        return 0;
}

/* What "busy" runs in each fork: a dozen programs over the guest's files, three times. */
#define TB_BUSY                                                                                    \
        "for i in 1 2 3; do find / -xdev -type f 2>/dev/null | sort | md5sum >/dev/null; "         \
        "tar cf - /bin /etc 2>/dev/null | gzip -1 | wc -c >/dev/null; "                            \
        "awk '{n += NF} END {print n}' /proc/kallsyms >/dev/null; "                                \
        "sed -n 's/a/b/gp' /proc/kallsyms | grep -c x >/dev/null; ps >/dev/null; done"

/* Forks of N with the default TCG translation cache and with a smaller one (tb_mib), in the
 * same run: fork wall and p50, the forks' QEMU PSS beyond guest RAM after an exec each, and
 * how long a busy guest then takes (TB_BUSY, one fork at a time). */
static int bench_tb(unsigned n, unsigned tb_mib)
{
        static struct fh_vm vms[MAX_N], parent;
        struct vmm_checkpoint_stats st;
        struct fk_error err = {0};
        char ckpt[300];
        int r;

        r = fh_vm_start(&parent, workdir, "tb-parent", image, 256, NULL, true, &err);
        if (r < 0)
                return fprintf(stderr, "parent: %s\n", err.msg), r;
        r = checkpoint_once(&parent, "ck", &st);
        fh_vm_stop(&parent);
        if (r < 0)
                return r;
        snprintf(ckpt, sizeof(ckpt), "%s/ck", workdir);
        printf("\n# fork of %u, TCG translation cache: default %u MiB vs %u MiB (same run)\n", n,
               VMM_TCG_TB_MIB, tb_mib);
        printf("%-8s %12s %12s %12s %18s %18s %14s\n", "tb MiB", "fork wall", "fork p50",
               "fork p90", "QEMU PSS p50 MiB", "QEMU PSS max MiB", "busy p50 ms");
        for (int pass = 0; pass < 2 && r >= 0; pass++) {
                struct group_result g;
                double pss[MAX_N], busy[MAX_N];

                fh_tb_size_mib = pass ? tb_mib : 0;
                r = run_group(vms, n, pass ? "tb-small" : "tb-default", ckpt, &g);
                for (unsigned i = 0; r >= 0 && i < n; i++) {
                        long map = 0, total = 0;

                        (void)fh_sh(&vms[i], "ls / >/dev/null; true", NULL);
                        (void)pss_kb(vmm_process_pid(vms[i].proc), "/ck/ram", &map, &total);
                        pss[i] = (double)(total - map) / 1024.0;
                }
                /* then a busy guest, one fork at a time: many programs, much code to translate */
                for (unsigned i = 0; r >= 0 && i < n; i++) {
                        uint64_t t0 = fk_now_mono_ns();

                        (void)fh_sh(&vms[i], TB_BUSY, NULL);
                        busy[i] = (double)(fk_now_mono_ns() - t0) / 1e6;
                }
                if (r >= 0)
                        printf("%-8u %10.0f ms %9.0f ms %9.0f ms %18.1f %18.1f %14.0f\n",
                               pass ? tb_mib : VMM_TCG_TB_MIB, g.wall_ms, g.p50_ms, g.p90_ms,
                               pct(pss, n, 0.5), pct(pss, n, 1.0), pct(busy, n, 0.5));
                stop_group(vms, n);
        }
        fh_tb_size_mib = 0;
        return r;
}

#define PAGES_REPS  3
#define PAGES_STEPS 8

/* Which step of a fork writes its guest RAM: the fork's own pages (Anonymous in its RAM
 * mapping) after the restore with the agent channel open, idle, the agent's first ping, the
 * identity request (what forkletd sends first), idle, a first and a second exec of `true`,
 * idle; PAGES_REPS forks of one checkpoint, one at a time. The parent's cold boot is seeded
 * (ADD_ENTROPY in fh_vm_wait) as forkletd seeds one. */
static int bench_pages(void)
{
        static const char *const steps[PAGES_STEPS] = {"restored, agent channel open",
                                                       "+ 2 s idle",
                                                       "+ ping",
                                                       "+ identity",
                                                       "+ 2 s idle",
                                                       "+ exec true",
                                                       "+ exec true",
                                                       "+ 2 s idle"};
        static struct fh_vm parent, vm;
        long kb[PAGES_REPS][PAGES_STEPS] = {{0}};
        struct vmm_checkpoint_stats st;
        struct fk_error err = {0};
        char ckpt[300];
        int r;

        r = fh_vm_start(&parent, workdir, "pg-parent", image, 256, NULL, true, &err);
        if (r >= 0)
                r = checkpoint_once(&parent, "ck", &st);
        fh_vm_stop(&parent);
        snprintf(ckpt, sizeof(ckpt), "%s/ck", workdir);
        for (int k = 0; r >= 0 && k < PAGES_REPS; k++) {
                r = fh_vm_start(&vm, workdir, "pg-fork", image, 256, ckpt, false, &err);
                for (int s = 0; r >= 0 && s < PAGES_STEPS; s++) {
                        long map, total;

                        if (s == 1 || s == 4 || s == 7)
                                sleep(2);
                        else if (s == 2)
                                r = vmm_agent_wait_ready(vm.agent, 60000, &err);
                        else if (s == 3) /* its ping again, then the identity request */
                                r = fh_vm_wait(&vm, "pg-fork", true, &err);
                        else if (s >= 5)
                                r = fh_sh(&vm, "true", NULL) == 0 ? 0 : -EIO;
                        if (r >= 0)
                                r = map_kb(vmm_process_pid(vm.proc), "/ck/ram", &map, &kb[k][s],
                                           &total);
                }
                fh_vm_stop(&vm);
        }
        if (r < 0)
                return fprintf(stderr, "pages: %s\n", err.msg[0] ? err.msg : strerror(-r)), r;
        printf("\n# guest RAM a fork wrote (KiB, its own pages of the checkpoint's RAM), %d "
               "forks\n",
               PAGES_REPS);
        for (int s = 0; s < PAGES_STEPS; s++) {
                printf("%-30s", steps[s]);
                for (int k = 0; k < PAGES_REPS; k++)
                        printf(" %6ld (%+5ld)", kb[k][s], s ? kb[k][s] - kb[k][s - 1] : kb[k][s]);
                printf("\n");
        }
        return 0;
}

static int bench_pause(unsigned mib)
{
        struct vmm_checkpoint_stats low, high;
        struct fk_error err = {0};
        struct fh_vm vm = {0};
        char name[32], script[128];
        int r;

        snprintf(name, sizeof(name), "pause-%u", mib);
        r = fh_vm_start(&vm, workdir, name, image, mib, NULL, true, &err);
        if (r < 0)
                return fprintf(stderr, "%s: %s\n", name, err.msg), r;
        r = checkpoint_once(&vm, "ck-low", &low);
        /* Touch about 60% of RAM with incompressible data: dd's buffer is one block of that
         * size, filled from urandom (guest tmpfs is capped at half of RAM, so not a file). */
        snprintf(script, sizeof(script), "dd if=/dev/urandom of=/dev/null bs=%uM count=1",
                 mib * 6 / 10);
        if (r >= 0 && fh_sh(&vm, script, NULL) != 0) {
                fprintf(stderr, "%s: touching RAM failed\n", name);
                r = -EIO;
        }
        if (r >= 0)
                r = checkpoint_once(&vm, "ck-high", &high);
        fh_vm_stop(&vm);
        fk_rm_rf(vm.dir);
        if (r < 0)
                return r;
        printf("%-10u %12.1f %14.0f %12.1f %14.0f %8.1fx\n", mib, (double)low.pause_ns / 1e6,
               (double)low.ram_bytes / 1048576.0, (double)high.pause_ns / 1e6,
               (double)high.ram_bytes / 1048576.0, (double)high.pause_ns / (double)low.pause_ns);
        return 0;
}

/* One rollback as forkletd does it: kill the VM, copy the checkpoint's RAM into a fresh file
 * (the session owns its RAM again), restore device state, identity, agent ready. */
static int rollback_once(struct fh_vm *vm, const char *ck, const char *tag, double *ret_copy_ms,
                         double *ret_total_ms)
{
        char rb[300], src[330], dst[330];
        struct fk_error err = {0};
        uint64_t t0 = fk_now_mono_ns(), t1;
        int r;

        fh_vm_stop(vm);
        snprintf(rb, sizeof(rb), "%s/rb-%s", workdir, tag);
        fk_rm_rf(rb);
        if (fk_mkdir_p(rb, 0700) < 0)
                return -errno;
        snprintf(src, sizeof(src), "%s/ram", ck);
        snprintf(dst, sizeof(dst), "%s/ram", rb);
        r = vmm_sparse_copy(src, dst, 0, NULL);
        snprintf(src, sizeof(src), "%s/state", ck);
        snprintf(dst, sizeof(dst), "%s/state", rb);
        if (r >= 0)
                r = vmm_sparse_copy(src, dst, 0, NULL);
        t1 = fk_now_mono_ns();
        if (r >= 0)
                r = fh_vm_start(vm, workdir, tag, image, 256, rb, true, &err);
        if (r < 0)
                return fprintf(stderr, "rollback %s: %s\n", tag, err.msg), r;
        if (fh_sh(vm, "true", NULL) != 0)
                return fprintf(stderr, "rollback %s: guest does not run commands\n", tag), -EIO;
        *ret_copy_ms = (double)(t1 - t0) / 1e6;
        *ret_total_ms = (double)(fk_now_mono_ns() - t0) / 1e6;
        return 0;
}

/* One row: a fresh guest (its cold boot is the baseline) with low or high touched RAM (a fresh
 * one each time: after the harness's restore the RAM is a private mapping, which
 * vmm_checkpoint_save cannot see), checkpoint, rollback. */
static int rollback_row(bool high)
{
        const char *tag = high ? "high" : "low";
        struct vmm_checkpoint_stats st;
        struct fk_error err = {0};
        struct fh_vm vm = {0};
        double cold_ms, copy_ms = 0, total_ms = 0;
        char ck[300], name[32];
        int r;

        snprintf(name, sizeof(name), "rollback-%s", tag);
        r = fh_vm_start(&vm, workdir, name, image, 256, NULL, true, &err);
        if (r < 0)
                return fprintf(stderr, "%s: %s\n", name, err.msg), r;
        cold_ms = (double)(vm.ready_ns - vm.spawn_ns) / 1e6;
        if (high && fh_sh(&vm, "dd if=/dev/urandom of=/dev/null bs=150M count=1", NULL) != 0)
                r = -EIO;
        snprintf(ck, sizeof(ck), "%s/ck-rb-%s", workdir, tag);
        if (r >= 0)
                r = checkpoint_once(&vm, ck + strlen(workdir) + 1, &st);
        if (r >= 0)
                r = rollback_once(&vm, ck, tag, &copy_ms, &total_ms);
        if (r >= 0)
                printf("%-10s %12.0f %14.0f %14.0f %14.0f %8.1fx\n", tag,
                       (double)st.ram_bytes / 1048576.0, cold_ms, copy_ms, total_ms,
                       cold_ms / total_ms);
        fh_vm_stop(&vm);
        return r;
}

/* Rollback latency at low and high touched RAM, each against its own guest's cold boot. */
static int bench_rollback(void)
{
        int r = rollback_row(false);

        return r < 0 ? r : rollback_row(true);
}

int main(int argc, char **argv)
{
        unsigned ns[16] = {1, 10};
        size_t count = 2;
        int r;

        image = getenv("FORKLET_IMAGE_DIR");
        if (geteuid() != 0 || !image) {
                fprintf(stderr, "bench-fork: needs root and FORKLET_IMAGE_DIR (the built image)\n");
                return 77;
        }
        bool only_rollback = argc == 2 && strcmp(argv[1], "rollback") == 0;
        bool only_tb = argc == 4 && strcmp(argv[1], "tb") == 0;
        bool only_pages = argc == 2 && strcmp(argv[1], "pages") == 0;

        if (argc > 1 && !only_rollback && !only_tb && !only_pages) {
                count = 0;
                for (int i = 1; i < argc && count < ARRAY_SIZE(ns); i++) {
                        int n = atoi(argv[i]);
                        if (n < 1 || n > MAX_N)
                                return fprintf(stderr, "bench-fork: N must be 1..%d\n", MAX_N), 2;
                        ns[count++] = (unsigned)n;
                }
        }
        snprintf(workdir, sizeof(workdir), "/run/fk-bench-fork-%d", (int)getpid());
        if (fk_mkdir_p(workdir, 0700) < 0)
                return perror("mkdir"), 1;
        printf("# bench/fork: cold boot to agent-ready vs fork from a checkpoint to agent-ready\n");
        if (only_tb) {
                unsigned n = (unsigned)atoi(argv[2]), mib = (unsigned)atoi(argv[3]);

                r = n >= 1 && n <= MAX_N && mib >= 1 ? bench_tb(n, mib) : -EINVAL;
                fk_rm_rf(workdir);
                return r < 0 ? 1 : 0;
        }
        if (only_pages) {
                r = bench_pages();
                fk_rm_rf(workdir);
                return r < 0 ? 1 : 0;
        }
        r = only_rollback ? 0 : bench_boot_vs_fork(ns, count);
        if (r >= 0 && !only_rollback) {
                printf("\n# checkpoint pause window (guest stopped -> running), baseline = low\n");
                printf("%-10s %12s %14s %12s %14s %9s\n", "guest MiB", "low ms", "low RAM MiB",
                       "high ms", "high RAM MiB", "high/low");
                r = bench_pause(256);
                if (r >= 0)
                        r = bench_pause(1024);
        }
        if (r >= 0) {
                printf("\n# rollback of a 256 MiB guest (kill, RAM copy, restore, agent ready), "
                       "baseline = that guest's cold boot\n");
                printf("%-10s %12s %14s %14s %14s %9s\n", "touched", "RAM MiB", "cold boot ms",
                       "kill+copy ms", "rollback ms", "speedup");
                r = bench_rollback();
        }
        fk_rm_rf(workdir);
        return r < 0 ? 1 : 0;
}
