/* SPDX-License-Identifier: MIT */
/* The host TSC frequency, measured once. Under TCG the guest's rdtsc reads the host TSC, and
 * the guest kernel's own calibration against the PIT fails on a loaded host (microvm has no
 * HPET or PM timer), after which it hangs at boot; tsc_early_khz= hands it the answer. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "vmm/vmm-internal.h"

static unsigned tsc_khz_cached;
static int tsc_error;
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

bool vmm_host_tsc_invariant(void)
{
        unsigned a, b, c, d;

        if (!__get_cpuid(0x80000007, &a, &b, &c, &d))
                return false;
        return (d & (1u << 8)) != 0;
}

static uint64_t raw_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One sample over ~20 ms: cycles per nanosecond, times 1e6, is kHz. */
static uint64_t sample_khz(void)
{
        struct timespec nap = {.tv_nsec = 20 * 1000000L};
        uint64_t t0 = raw_ns(), c0 = __builtin_ia32_rdtsc(), t1, c1;

        nanosleep(&nap, NULL);
        c1 = __builtin_ia32_rdtsc();
        t1 = raw_ns();
        if (t1 <= t0 || c1 <= c0)
                return 0;
        return (c1 - c0) * 1000000ULL / (t1 - t0);
}

static void measure(void)
{
        uint64_t s[5], tmp;

        /* Median of five: a sample stretched by preemption between the two reads is an
         * outlier on either side. */
        for (int i = 0; i < 5; i++)
                s[i] = sample_khz();
        for (int i = 0; i < 5; i++)
                for (int j = i + 1; j < 5; j++)
                        if (s[j] < s[i]) {
                                tmp = s[i];
                                s[i] = s[j];
                                s[j] = tmp;
                        }
        if (s[2] == 0 || s[2] > UINT32_MAX) {
                tsc_error = -EIO;
                return;
        }
        tsc_khz_cached = (unsigned)s[2];
}
#else
bool vmm_host_tsc_invariant(void)
{
        return false;
}

static void measure(void)
{
        tsc_error = -EOPNOTSUPP;
}
#endif

int vmm_host_tsc_khz(unsigned *ret)
{
        pthread_once(&tsc_once, measure);
        if (tsc_error < 0)
                return tsc_error;
        *ret = tsc_khz_cached;
        return 0;
}
