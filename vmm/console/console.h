/* SPDX-License-Identifier: MIT */
/* fk_vmm_console: a VM's serial console, copied from QEMU's socket into a rotated log by a
 * background thread, and what it said about the guest's health (panics, OOM kills, the last
 * lines). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct vmm_console;

/* Connects to the console socket QEMU listens on (vmm_config.console_socket; retrying until
 * timeout_ms) and copies what the guest prints into log_path from a background thread. The
 * file never grows past max_bytes: the writer then renames it to "<log_path>.1" (replacing the
 * older one) and starts a new one, so at most 2 * max_bytes are kept. rotate_first rotates an
 * existing log before anything is written (a fresh boot); adoption appends. The thread ends when
 * QEMU closes the socket. Does not log. */
int vmm_console_start(const char *socket_path, const char *log_path, size_t max_bytes,
                      bool rotate_first, unsigned timeout_ms, struct vmm_console **ret,
                      struct fk_error *err);
/* Bytes written to the log files so far and rotations done (tests, metrics). */
void vmm_console_stats(struct vmm_console *c, uint64_t *ret_bytes, unsigned *ret_rotations);

/* What the console said about the guest's health since the reader started. */
#define VMM_CONSOLE_TAIL_LINES 10
#define VMM_CONSOLE_LINE_MAX   160 /* a longer line is cut */
struct vmm_console_report {
        unsigned panics;                  /* "Kernel panic - not syncing" lines */
        char panic[VMM_CONSOLE_LINE_MAX]; /* the first one, from "Kernel panic" on */
        unsigned oom_kills;               /* the OOM killer's "Killed process" lines */
        char oom[VMM_CONSOLE_LINE_MAX];   /* the last one, "Out of memory: Killed process N (x)" */
        unsigned timer_lost; /* "APIC frequency too slow" (VMM_CONSOLE_LINE_NO_TIMER) */
        char tail[VMM_CONSOLE_TAIL_LINES][VMM_CONSOLE_LINE_MAX]; /* last lines, oldest first */
        unsigned n_tail;
};
/* A copy of the report so far (thread-safe). */
void vmm_console_report(struct vmm_console *c, struct vmm_console_report *ret);
/* Waits up to timeout_ms until the reader has seen QEMU close the console (everything the guest
 * printed is in the report). 1: closed, 0: still open. */
int vmm_console_wait_closed(struct vmm_console *c, unsigned timeout_ms);

/* The scanner behind the report (pure, console-scan.c): lines are cut at VMM_CONSOLE_LINE_MAX,
 * "\r" dropped, other control and non-ASCII bytes shown as '?'. */
enum vmm_console_line {
        VMM_CONSOLE_LINE_PLAIN,
        VMM_CONSOLE_LINE_PANIC,    /* the kernel panicked */
        VMM_CONSOLE_LINE_OOM_KILL, /* the OOM killer killed a process */
        /* The kernel disabled its local APIC timer: its calibration (100 ms of TSC) measured
         * almost nothing because the vCPU was off the host CPU. On microvm that timer is the
         * only tick, so the boot then sleeps in HLT for ever (a warning: loglevel=5 shows it). */
        VMM_CONSOLE_LINE_NO_TIMER,
};
enum vmm_console_line vmm_console_classify(const char *line);
struct vmm_console_scan {
        char line[VMM_CONSOLE_LINE_MAX]; /* the line being read */
        size_t len;
        char ring[VMM_CONSOLE_TAIL_LINES][VMM_CONSOLE_LINE_MAX];
        unsigned next, n;
        struct vmm_console_report report; /* counters and summaries (tail filled on report) */
};
/* Feeds bytes as they arrive (zero-initialize s first). */
void vmm_console_scan_feed(struct vmm_console_scan *s, const void *data, size_t size);
/* The report, a line still missing its newline included. */
void vmm_console_scan_report(const struct vmm_console_scan *s, struct vmm_console_report *ret);
/* Stops the thread (after draining what is already readable) and frees; accepts NULL. */
struct vmm_console *vmm_console_free(struct vmm_console *c);
