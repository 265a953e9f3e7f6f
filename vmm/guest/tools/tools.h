/* SPDX-License-Identifier: MIT */
/* forklet-tools: the small static tools the minimal image adds to Debian's busybox-static
 * (pgrep, pkill, timeout with GNU exit codes, and a wget front that gives busybox's wget a
 * working -T). The parsers and the /proc scanner are separate from the mains for unit tests. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Multi-call entry points: argv[0] is the tool's name. They print their own errors. */
int gt_pgrep_main(int argc, char **argv, bool kill_mode);
int gt_timeout_main(int argc, char **argv);
int gt_wget_main(int argc, char **argv);

/* A timeout(1) DURATION: a non-negative decimal number with an optional s, m, h or d suffix.
 * Writes milliseconds (rounded up) to *ret_ms; -EINVAL for anything else. */
int gt_parse_duration(const char *s, long long *ret_ms);

/* A signal by number or name, with or without "SIG", any case (TERM, sigkill, 9). */
int gt_parse_signal(const char *s, int *ret_sig);

/* "TERM" for SIGTERM; a static string ("?" when unknown). */
const char *gt_signal_name(int sig);

/* One process as /proc shows it; cmdline is "" for a kernel thread (arguments joined by
 * spaces, owned). */
struct gt_proc {
        pid_t pid;
        pid_t ppid;
        unsigned long long start; /* clock ticks after boot */
        char comm[64];
        char *cmdline;
};

/* Reads PID's stat and cmdline under the proc directory PROCFD. 0, or -errno (-ENOENT when
 * the process is gone). Free ret->cmdline. */
int gt_proc_read(int procfd, pid_t pid, struct gt_proc *ret);

/* What pgrep/pkill select and print. */
struct gt_pgrep_opts {
        const char *pattern; /* POSIX ERE; NULL: every process (with -P) */
        bool full;           /* -f: match the command line, not the name */
        bool exact;          /* -x */
        bool invert;         /* -v */
        bool icase;          /* -i */
        bool newest;         /* -n */
        bool oldest;         /* -o */
        bool count;          /* -c */
        bool list_name;      /* -l */
        bool list_full;      /* -a */
        const char *delim;   /* -d, default "\n" */
        pid_t ppids[16];     /* -P */
        size_t n_ppids;
        pid_t self; /* never matched */
        int signal; /* pkill */
};

/* Parses pgrep (kill_mode false) or pkill arguments. 0, or -EINVAL with a message in err. */
int gt_pgrep_parse(int argc, char **argv, bool kill_mode, struct gt_pgrep_opts *ret, char *err,
                   size_t errlen);

/* Scans PROCFD for matches; prints them (pgrep) or signals them (pkill, errors to ERR).
 * Returns the exit status: 0 matched, 1 none, 2 bad pattern, 3 fatal. */
int gt_pgrep_run(const struct gt_pgrep_opts *o, bool kill_mode, int procfd, FILE *out, FILE *err);

/* wget's arguments with -T SEC / --timeout=SEC taken out (busybox-static's wget parses -T
 * without storing it and crashes), ready for busybox wget. */
struct gt_wget_args {
        char **argv;          /* NULL-terminated, argv[0] "wget"; array and strings owned */
        long long timeout_ms; /* -1: no -T */
};

/* 0, or -EINVAL (bad -T value, message in err) / -ENOMEM. gt_wget_args_done() frees. */
int gt_wget_args_parse(int argc, char **argv, struct gt_wget_args *ret, char *err, size_t errlen);
void gt_wget_args_done(struct gt_wget_args *a);

/* Bytes the process has read and written so far (rchar + wchar of /proc/PID/io), or -errno. */
long long gt_proc_io_bytes(pid_t pid);

/* Ends like a child with wait STATUS did: returns its exit code, or re-raises its signal (no
 * core dump) and returns 128+signal if that did not end us. */
int gt_exit_like(int status);
