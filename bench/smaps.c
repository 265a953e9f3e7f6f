/* SPDX-License-Identifier: MIT */
/* /proc/PID/smaps of a QEMU, region by region (bench/smaps.h). */
#include "bench/smaps.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[_BENCH_REGION_MAX] = {
        [BENCH_REGION_GUEST_RAM] = "guest RAM",
        [BENCH_REGION_TCG] = "TCG translation cache",
        [BENCH_REGION_HEAP] = "heap (main malloc arena)",
        [BENCH_REGION_STACKS] = "thread stacks",
        [BENCH_REGION_ANON] = "other anonymous (arenas, mmap'd blocks)",
        [BENCH_REGION_BINARY] = "QEMU binary",
        [BENCH_REGION_LIBS] = "shared libraries",
        [BENCH_REGION_OTHER] = "other mappings",
};

const char *bench_region_to_string(enum bench_region r)
{
        return r >= 0 && r < _BENCH_REGION_MAX ? names[r] : "?";
}

/* The region of one smaps header line "lo-hi perms offset dev inode [path]". */
static enum bench_region classify(const char *line, unsigned long size)
{
        char perms[8] = "";
        const char *path;
        int off = 0;

        if (sscanf(line, "%*x-%*x %7s %*x %*s %*u %n", perms, &off) < 1 || off == 0)
                return BENCH_REGION_OTHER;
        path = line + off;
        if (strstr(path, "/ram") || strstr(path, "mem.ram"))
                return BENCH_REGION_GUEST_RAM;
        if (strncmp(path, "[heap]", 6) == 0)
                return BENCH_REGION_HEAP;
        if (strncmp(path, "[stack]", 7) == 0)
                return BENCH_REGION_STACKS;
        if (path[0] == '\n' || path[0] == '\0') {
                if (strchr(perms, 'x'))
                        return BENCH_REGION_TCG;
                return size >= (8UL << 20) ? BENCH_REGION_STACKS : BENCH_REGION_ANON;
        }
        if (strstr(path, "qemu-system"))
                return BENCH_REGION_BINARY;
        if (strstr(path, ".so"))
                return BENCH_REGION_LIBS;
        return BENCH_REGION_OTHER;
}

int bench_smaps_read(pid_t pid, struct bench_smaps *ret)
{
        char path[64], line[512];
        enum bench_region cur = BENCH_REGION_OTHER;
        cleanup_fclose FILE *f = NULL;

        *ret = (struct bench_smaps){0};
        snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
        if (!(f = fopen(path, "re")))
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long lo, hi;
                long kb;

                if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
                        cur = classify(line, hi - lo);
                else if (sscanf(line, "Pss: %ld kB", &kb) == 1)
                        ret->pss_kb[cur] += kb;
                else if (sscanf(line, "Anonymous: %ld kB", &kb) == 1)
                        ret->anon_kb[cur] += kb;
        }
        return 0;
}

static int cmp_long(const void *a, const void *b)
{
        long x = *(const long *)a, y = *(const long *)b;

        return x < y ? -1 : x > y;
}

static double median_mib(long *v, unsigned n)
{
        if (n == 0)
                return 0;
        qsort(v, n, sizeof(*v), cmp_long);
        return (double)v[(n - 1) / 2] / 1024.0;
}

void bench_smaps_print(FILE *f, const char *title, const struct bench_smaps *v, unsigned n)
{
        cleanup_free long *tmp = calloc(n ? n : 1, sizeof(long));
        long own_pss[128] = {0};

        if (!tmp || n > 128)
                return;
        fprintf(f, "\n%s: QEMU memory by region, median of %u idle forks, MiB\n\n", title, n);
        fprintf(f, "| region | PSS | anonymous |\n|---|---|---|\n");
        for (int r = 0; r < _BENCH_REGION_MAX; r++) {
                double pss, anon;

                for (unsigned i = 0; i < n; i++)
                        tmp[i] = v[i].pss_kb[r];
                pss = median_mib(tmp, n);
                for (unsigned i = 0; i < n; i++)
                        tmp[i] = v[i].anon_kb[r];
                anon = median_mib(tmp, n);
                fprintf(f, "| %s | %.2f | %.2f |\n", names[r], pss, anon);
        }
        for (unsigned i = 0; i < n; i++)
                for (int r = 0; r < _BENCH_REGION_MAX; r++)
                        own_pss[i] += r == BENCH_REGION_GUEST_RAM ? 0 : v[i].pss_kb[r];
        fprintf(f, "| QEMU's own (all but guest RAM) | %.2f | |\n", median_mib(own_pss, n));
}
