/* SPDX-License-Identifier: MIT */
/* A QEMU process's memory by region from /proc/PID/smaps (PSS and its private anonymous part),
 * for the benches' idle-fork figures. */
#pragma once

#include <stdio.h>
#include <sys/types.h>

enum bench_region {
        BENCH_REGION_GUEST_RAM, /* the guest RAM mapping ("/ram", "mem.ram") */
        BENCH_REGION_TCG,       /* anonymous rwx: TCG's translation cache */
        BENCH_REGION_HEAP,      /* [heap]: glibc's main malloc arena */
        BENCH_REGION_STACKS,    /* [stack] and anonymous mappings of 8 MiB or more (threads) */
        BENCH_REGION_ANON,      /* other anonymous: malloc arenas and mmap'd blocks, coroutines */
        BENCH_REGION_BINARY,    /* the QEMU binary */
        BENCH_REGION_LIBS,      /* shared libraries */
        BENCH_REGION_OTHER,     /* any other file or special mapping */
        _BENCH_REGION_MAX,
};

struct bench_smaps {
        long pss_kb[_BENCH_REGION_MAX];
        long anon_kb[_BENCH_REGION_MAX]; /* Anonymous: the process's own copies */
};

/* Reads /proc/pid/smaps into *ret (zeroed first). -errno if it cannot be read. */
int bench_smaps_read(pid_t pid, struct bench_smaps *ret);
const char *bench_region_to_string(enum bench_region r);
/* Prints a markdown table of n processes' regions: median PSS and median anonymous, MiB. */
void bench_smaps_print(FILE *f, const char *title, const struct bench_smaps *v, unsigned n);
