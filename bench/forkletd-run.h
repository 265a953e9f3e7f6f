/* SPDX-License-Identifier: MIT */
/* What the benches that drive a real forkletd through its API share (bench/lifecycle,
 * bench/fork-steps): nearest-rank percentiles, a process's CPU time, the wait for an idle host,
 * a private forkletd started on a node config and waited for, and its teardown (the daemon,
 * leftover QEMUs, its guest RAM tmpfs, the dir). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cli;

/* Nearest-rank percentile p (0..1) of n samples; sorts v. 0 for n == 0. */
double bench_pct(double *v, size_t n, double p);
/* Milliseconds since t0 (fk_now_mono_ns). */
double bench_ms_since(uint64_t t0);

/* A process's user+system CPU time in clock ticks from /proc/PID/stat; -1 if unreadable. */
long bench_cpu_ticks(pid_t pid);
/* Waits, at most max_ms in all, until the host has no more links than at
 * bench_settle_links_baseline (if it was called) and then until its CPUs were at least
 * min_idle_pct idle over 500 ms (/proc/stat): a phase measured right after another one's teardown
 * would pay for it. 30 QEMUs end at once, and the kernel frees their sessions' netns in the
 * background: the host ends of their veths go last, and until then the netns cleanup holds the
 * rtnl lock that the next phase's netns setups need, with the CPUs idle. Returns the ms waited;
 * *ret_idle (may be NULL) the idle share of the last window, -1 when /proc/stat could not be
 * read. */
double bench_settle(unsigned min_idle_pct, unsigned max_ms, int *ret_idle);
/* Records how many links the host has now (/sys/class/net), for bench_settle. */
void bench_settle_links_baseline(void);

/* Writes config to dir/node.yaml and starts forkletd on it, its stdout and stderr to
 * dir/forkletd.log, with env ("NAME=VALUE", NULL-terminated; may be NULL) added to its
 * environment; *pid is set once it is forked, so teardown stops it also when it never answers.
 * Then polls GET /healthz through cli every 50 ms, at most tries times. 0 once it answers 200;
 * -ETIMEDOUT (said on stderr, naming the log) or -errno. */
int bench_forkletd_start(const char *forkletd, const char *dir, const char *config,
                         const char *const *env, unsigned tries, struct cli *cli, pid_t *pid);
/* Stops forkletd (SIGTERM, waits; pid <= 0: none), kills every QEMU still left that a state
 * record under dir/state/sessions names (state.json's vm.pid) and whose command line names
 * dir, unmounts forkletd's guest RAM tmpfs (dir/run/sessions) and removes dir. */
void bench_forkletd_teardown(pid_t pid, const char *dir);
/* Prints "bench failed (errno text of r); the end of forkletd's log:" and the log's last tail
 * bytes to stderr. */
void bench_forkletd_log_tail(const char *dir, int r, size_t tail);
