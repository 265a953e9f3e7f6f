/* SPDX-License-Identifier: MIT */
/* timeout with GNU coreutils' interface and exit codes (124 on timeout, 125 its own error, 126
 * cannot run, 127 not found, else the command's status): busybox's exits 128+signal. The
 * command runs in timeout's own process group, which gets the signal (as GNU does). */
#include "vmm/guest/tools/tools.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define USAGE                                                                                      \
        "usage: timeout [-s SIGNAL] [-k DURATION] [-v] [--preserve-status] [--foreground] "        \
        "DURATION COMMAND [ARG]...\n"                                                              \
        "DURATION: a number with an optional s, m, h or d suffix; 0 disables the timeout"

struct timeout_opts {
        int sig;
        long long duration_ms;
        long long kill_after_ms; /* 0: none */
        bool preserve, foreground, verbose;
        char **cmd;
};

static int parse(int argc, char **argv, struct timeout_opts *o)
{
        static const struct option longopts[] = {{"signal", required_argument, NULL, 's'},
                                                 {"kill-after", required_argument, NULL, 'k'},
                                                 {"preserve-status", no_argument, NULL, 'p'},
                                                 {"foreground", no_argument, NULL, 'f'},
                                                 {"verbose", no_argument, NULL, 'v'},
                                                 {NULL, 0, NULL, 0}};
        int c;

        *o = (struct timeout_opts){.sig = SIGTERM};
        optind = 0; /* 0: glibc resets its whole state (a caller may parse twice) */
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+:s:k:v", longopts, NULL)) != -1) {
                switch (c) {
                case 's':
                        if (gt_parse_signal(optarg, &o->sig) < 0)
                                return fprintf(stderr, "timeout: unknown signal '%s'\n", optarg),
                                       -1;
                        break;
                case 'k':
                        if (gt_parse_duration(optarg, &o->kill_after_ms) < 0)
                                return fprintf(stderr, "timeout: bad -k duration '%s'\n", optarg),
                                       -1;
                        break;
                case 'p':
                        o->preserve = true;
                        break;
                case 'f':
                        o->foreground = true;
                        break;
                case 'v':
                        o->verbose = true;
                        break;
                case ':':
                        return fprintf(stderr, "timeout: option '%s' needs a value\n",
                                       argv[optind - 1]),
                               -1;
                default:
                        return fprintf(stderr, "timeout: unknown option '%s'\n", argv[optind - 1]),
                               -1;
                }
        }
        if (argc - optind < 2)
                return fprintf(stderr, "timeout: give a DURATION and a COMMAND\n"), -1;
        if (gt_parse_duration(argv[optind], &o->duration_ms) < 0)
                return fprintf(stderr, "timeout: bad duration '%s'\n", argv[optind]), -1;
        o->cmd = argv + optind + 1;
        return 0;
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The command, and unless --foreground the rest of our process group; SIGKILL to the group
 * takes timeout with it (GNU does the same: the caller then sees 137). */
static void send_sig(const struct timeout_opts *o, pid_t pid, int sig)
{
        sigset_t self;

        if (o->verbose)
                fprintf(stderr, "timeout: sending signal %s to command '%s'\n", gt_signal_name(sig),
                        o->cmd[0]);
        kill(pid, sig);
        if (o->foreground)
                return;
        sigemptyset(&self);
        sigaddset(&self, sig);
        sigprocmask(SIG_BLOCK, &self, NULL);
        kill(0, sig);
        if (sig != SIGKILL && sig != SIGCONT) {
                kill(pid, SIGCONT);
                kill(0, SIGCONT);
        }
}

static pid_t spawn(const struct timeout_opts *o, const sigset_t *oldmask)
{
        pid_t pid = fork();

        if (pid != 0)
                return pid;
        sigprocmask(SIG_SETMASK, oldmask, NULL);
        execvp(o->cmd[0], o->cmd);
        fprintf(stderr, "timeout: failed to run command '%s': %s\n", o->cmd[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
}

/* Waits for the command; returns its wait status, *timed_out set when our deadline fired. */
static int supervise(const struct timeout_opts *o, pid_t pid, const sigset_t *set, bool *timed_out)
{
        long long deadline = o->duration_ms ? now_ms() + o->duration_ms : -1;
        bool killing = false;
        int status;

        for (;;) {
                struct timespec ts;
                siginfo_t info;
                long long left = deadline < 0 ? -1 : deadline - now_ms();
                int sig;

                if (left < 0 && deadline >= 0)
                        left = 0;
                ts.tv_sec = left / 1000;
                ts.tv_nsec = (left % 1000) * 1000000;
                sig = sigtimedwait(set, &info, deadline < 0 ? NULL : &ts);
                if (sig < 0 && errno == EAGAIN) {
                        *timed_out = true;
                        send_sig(o, pid, killing ? SIGKILL : o->sig);
                        deadline = !killing && o->kill_after_ms ? now_ms() + o->kill_after_ms : -1;
                        killing = true;
                } else if (sig == SIGCHLD) {
                        pid_t r = waitpid(pid, &status, WNOHANG);

                        if (r == pid)
                                return status;
                        if (r < 0 && errno == ECHILD)
                                return 125 << 8;
                } else if (sig > 0 && !(info.si_code == SI_USER && info.si_pid == getpid())) {
                        send_sig(o, pid, sig); /* TERM/INT/HUP/QUIT sent to us go on */
                }
        }
}

int gt_timeout_main(int argc, char **argv)
{
        struct timeout_opts o;
        sigset_t set, old;
        bool timed_out = false;
        int status;
        pid_t pid;

        if (parse(argc, argv, &o) < 0) {
                fprintf(stderr, "%s\n", USAGE);
                return 125;
        }
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGQUIT);
        sigprocmask(SIG_BLOCK, &set, &old);
        if (!o.foreground)
                (void)setpgid(0, 0); /* EPERM as a session leader: the group is ours already */
        pid = spawn(&o, &old);
        if (pid < 0) {
                fprintf(stderr, "timeout: fork: %s\n", strerror(errno));
                return 125;
        }
        status = supervise(&o, pid, &set, &timed_out);
        if (timed_out && !o.preserve)
                return 124;
        return gt_exit_like(status);
}
