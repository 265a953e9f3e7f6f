/* SPDX-License-Identifier: MIT */
/* bench-live-pause: where a precopy checkpoint's pause goes, step by step (vmm_live_stats:
 * seen, switch, continue, completed, postmigrate, callback, cont) against QEMU's own downtime,
 * for a guest idle and one rewriting 16 MiB in a loop, then idle guests whose disk is a qcow2
 * chain of N layers (FK_LIVE_DEPTHS, default "0 8 16": what N checkpoints leave a session's
 * disk). Through the vmm API (no forkletd; no disk switch: that step is empty), so it shows what
 * the QMP conversation and QEMU's block layer cost. Each row twice, checkpoints taken in turn:
 * the conversation polled (query-migrate, query-status: the baseline), driven by QEMU's
 * MIGRATION events with a pause before the switch-over, and driven by them without it
 * (forkletd's: vmm_live_opts.switch_after). Root, FORKLET_IMAGE_DIR; FK_LIVE_REPS (10),
 * FK_LIVE_MIB (256). Prints p50 / p90 in ms and each pause against the polled one. */
#include "tests/fork/fork-harness.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TIMEOUT_MS 120000
#define REPS_MAX   100

static char workdir[200];
static struct fh_vm vm;

static void cleanup(void)
{
        fh_vm_stop(&vm);
        if (workdir[0])
                (void)fk_rm_rf(workdir);
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return (x > y) - (x < y);
}

/* p-th quantile of v[0..n) in ms (sorts v) */
static double pct_ms(uint64_t *v, int n, double p)
{
        qsort(v, (size_t)n, sizeof(*v), cmp_u64);
        return (double)v[(int)((n - 1) * p + 0.5)] / 1e6;
}

struct row {
        uint64_t step[_VMM_LIVE_STEP_MAX][REPS_MAX], pause[REPS_MAX], downtime[REPS_MAX];
        uint64_t polls[REPS_MAX];
};

static unsigned poll_us; /* vmm_live_opts.poll_us of the polled rows run next */

static void print_row(const char *label, const char *mode, int reps, struct row *w, double base_p50)
{
        double p50 = pct_ms(w->pause, reps, 0.5);

        printf("| %s | %s | %.1f / %.1f | %.2fx | %.0f / %.0f |", label, mode, p50,
               pct_ms(w->pause, reps, 0.9), base_p50 > 0 ? p50 / base_p50 : 1.0,
               pct_ms(w->downtime, reps, 0.5), pct_ms(w->downtime, reps, 0.9));
        for (int s = 0; s < _VMM_LIVE_STEP_MAX; s++)
                printf(" %.2f |", pct_ms(w->step[s], reps, 0.5));
        printf(" %.0f |\n", pct_ms(w->polls, reps, 0.5));
        fflush(stdout);
}

enum conversation { POLLED, EVENTS, AFTER };

static int one(const char *stream, enum conversation c, int i, struct row *w)
{
        static const char *const what[] = {"vmm_checkpoint_live (polled)",
                                           "vmm_checkpoint_live (events)",
                                           "vmm_checkpoint_live (switch after)"};
        struct fk_error err = {0};
        struct vmm_live_opts o = {.converge_ms = 20000,
                                  .timeout_ms = TIMEOUT_MS,
                                  .poll = c == POLLED,
                                  .poll_us = poll_us,
                                  .switch_after = c == AFTER};
        struct vmm_live_stats st = {0};

        if (vmm_checkpoint_live(vm.qmp, stream, &o, &st, &err) < 0)
                return fh_fail(&vm, what[c], &err);
        unlink(stream);
        for (int s = 0; s < _VMM_LIVE_STEP_MAX; s++)
                w->step[s][i] = st.step_ns[s];
        w->pause[i] = st.pause_ns;
        w->downtime[i] = st.downtime_ms * 1000000ull;
        w->polls[i] = st.polls * 1000000ull;
        if (fh_sh(&vm, "true", NULL) != 0)
                return fh_fail(&vm, "the guest after the checkpoint", NULL);
        usleep(300000);
        return 0;
}

/* reps checkpoints each way, taken in turn (polled, event-driven with the pause before the
 * switch-over, event-driven without it: forkletd's), so the host's load weighs on all alike;
 * ratios against the polled row. */
static int run(const char *label, int reps)
{
        static struct row polled, events, after;
        char stream[300];
        double base;

        snprintf(stream, sizeof(stream), "%s/full", workdir);
        for (int i = 0; i < reps; i++)
                if (one(stream, POLLED, i, &polled) || one(stream, EVENTS, i, &events) ||
                    one(stream, AFTER, i, &after))
                        return 1;
        print_row(label, "polled", reps, &polled, 0);
        base = pct_ms(polled.pause, reps, 0.5);
        print_row(label, "events", reps, &events, base);
        print_row(label, "events, no pause before the switch-over", reps, &after, base);
        return 0;
}

/* A qcow2 of `depth` layers over an empty base in workdir (as `depth` checkpoints leave a
 * session's disk); its top's path into top. */
static int make_chain(int depth, char *top, size_t size)
{
        char cmd[1200];

        snprintf(cmd, sizeof(cmd),
                 "cd %s && rm -f l*.qcow2 && qemu-img create -q -f qcow2 l0.qcow2 1G && "
                 "for i in $(seq 1 %d); do qemu-img create -q -f qcow2 -F qcow2 -b "
                 "%s/l$((i - 1)).qcow2 %s/l$i.qcow2 || exit 1; done",
                 workdir, depth, workdir, workdir);
        snprintf(top, size, "%s/l%d.qcow2", workdir, depth);
        return system(cmd) == 0 ? 0 : -EIO;
}

int main(void)
{
        const char *image = getenv("FORKLET_IMAGE_DIR");
        const char *depths = getenv("FK_LIVE_DEPTHS") ? getenv("FK_LIVE_DEPTHS") : "0 8 16";
        int reps = getenv("FK_LIVE_REPS") ? atoi(getenv("FK_LIVE_REPS")) : 10;
        unsigned mib = getenv("FK_LIVE_MIB") ? (unsigned)atoi(getenv("FK_LIVE_MIB")) : 256;
        struct fk_error err = {0};
        char top[300], label[64], *list, *save = NULL;

        if (geteuid() != 0 || !image) {
                fprintf(stderr, "SKIP: needs root and FORKLET_IMAGE_DIR\n");
                return 77;
        }
        if (reps < 1 || reps > REPS_MAX || mib < 64 || mib > 4096)
                return fh_fail(&vm, "FK_LIVE_REPS 1..100, FK_LIVE_MIB 64..4096", NULL);
        fh_ram_tail = true; /* as forkletd's TCG sessions */
        snprintf(workdir, sizeof(workdir), "/dev/shm/fk-live-pause-XXXXXX");
        if (!mkdtemp(workdir))
                return 1;
        atexit(cleanup);
        if (fh_vm_start(&vm, workdir, "src", image, mib, NULL, true, &err) < 0)
                return fh_fail(&vm, "boot the guest", &err);
        printf("%d precopy checkpoints each way, taken in turn, %u MiB guest, p50 / p90 ms (steps: "
               "p50 ms); pause: QEMU's STOP event to cont's reply; ratio: the pause p50 "
               "against the polled one of the same guest\n\n",
               reps, mib);
        printf("| guest | conversation | pause | ratio | QEMU downtime |");
        for (int s = 0; s < _VMM_LIVE_STEP_MAX; s++)
                printf(" %s |", vmm_live_step_to_string(s));
        printf(" queries or refused conts |\n|---|---|---|---|---|");
        for (int s = 0; s <= _VMM_LIVE_STEP_MAX; s++)
                printf("---|");
        printf("\n");
        if (run("idle, no disk", reps))
                return 1;
        if (fh_sh(&vm,
                  "(while :; do head -c 16777216 /dev/urandom > /run/blob; done) "
                  ">/dev/null 2>&1 &",
                  NULL) != 0)
                return fh_fail(&vm, "start the writer", NULL);
        sleep(2);
        if (run("writing 16 MiB, no disk", reps))
                return 1;
        poll_us = 250;
        if (run("writing 16 MiB, no disk, polled every 0.25 ms", reps))
                return 1;
        poll_us = 0;
        fh_vm_stop(&vm);
        /* a disk of N layers: what the switch-over's block-layer (in)activation costs */
        list = strdup(depths);
        for (char *t = strtok_r(list, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                int depth = atoi(t);
                char name[32];

                if (depth < 0 || depth > 64 || make_chain(depth, top, sizeof(top)) < 0) {
                        free(list);
                        return fh_fail(&vm, "FK_LIVE_DEPTHS: 0..64 layers, made by qemu-img", NULL);
                }
                fh_disk = top;
                snprintf(name, sizeof(name), "src-%d", depth);
                if (fh_vm_start(&vm, workdir, name, image, mib, NULL, true, &err) < 0) {
                        free(list);
                        return fh_fail(&vm, "boot the guest with a disk", &err);
                }
                snprintf(label, sizeof(label), "idle, qcow2 of %d layers", depth + 1);
                if (run(label, reps)) {
                        free(list);
                        return 1;
                }
                fh_vm_stop(&vm);
        }
        free(list);
        return 0;
}
