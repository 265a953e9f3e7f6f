/* SPDX-License-Identifier: MIT */
/* wget: Debian's busybox-static wget with -T SEC / --timeout=SEC made to work. That build has
 * no FEATURE_WGET_TIMEOUT, yet its option parser still takes -T and stores the number through
 * a NULL pointer (SIGSEGV, exit 139). This front takes -T out, runs busybox wget with the rest
 * and ends it when it has neither read nor written anything for SEC seconds (busybox's own -T
 * is the same idle limit), printing "download timed out" and exiting 1. Without -T it just
 * executes busybox wget. */
#include "vmm/guest/tools/tools.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

#define BUSYBOX "/bin/busybox"
#define TICK_MS 200

/* Long options of busybox wget that take their value as the next argument. */
static bool long_takes_value(const char *name)
{
        static const char *const with_value[] = {
                "output-document", "output-file", "directory-prefix", "proxy",     "user-agent",
                "tries",           "header",      "post-data",        "post-file", NULL};

        for (size_t i = 0; with_value[i]; i++)
                if (strcmp(name, with_value[i]) == 0)
                        return true;
        return false;
}

static int set_timeout(const char *v, struct gt_wget_args *a, char *err, size_t errlen)
{
        if (!v || gt_parse_duration(v, &a->timeout_ms) < 0) {
                snprintf(err, errlen, "-T: bad timeout '%s' (seconds)", v ? v : "");
                return -EINVAL;
        }
        return 0;
}

static int push(struct gt_wget_args *a, size_t *n, const char *s, size_t len)
{
        char *copy = strndup(s, len);

        if (!copy)
                return -ENOMEM;
        a->argv[(*n)++] = copy;
        return 0;
}

/* "-abc": flags, then at most one option with a value (the rest of the cluster, else the next
 * argument). Copied unless it holds T. Returns how many arguments it used, or -errno. */
static int short_cluster(int argc, char **argv, int i, struct gt_wget_args *a, size_t *n, char *err,
                         size_t errlen)
{
        const char *s = argv[i], *v;
        size_t k = strcspn(s + 1, "OoPYUtnT") + 1;
        int r;

        if (!s[k] || s[k] == 'n') /* only flags; -n's optional value is the rest */
                return push(a, n, s, strlen(s)) < 0 ? -ENOMEM : 1;
        if (s[k] == 'T') {
                v = s[k + 1] ? s + k + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
                r = set_timeout(v, a, err, errlen);
                if (r < 0)
                        return r;
                if (k > 1 && push(a, n, s, k) < 0)
                        return -ENOMEM;
                return s[k + 1] ? 1 : 2;
        }
        if (push(a, n, s, strlen(s)) < 0)
                return -ENOMEM;
        if (s[k + 1] || i + 1 >= argc)
                return 1;
        return push(a, n, argv[i + 1], strlen(argv[i + 1])) < 0 ? -ENOMEM : 2;
}

/* "--name[=value]": --timeout is taken out, the rest copied (with the next argument as the value
 * where busybox expects one). */
static int long_option(int argc, char **argv, int i, struct gt_wget_args *a, size_t *n, char *err,
                       size_t errlen)
{
        const char *s = argv[i] + 2, *eq = strchr(s, '=');
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        bool next = !eq && i + 1 < argc;
        char name[64];

        snprintf(name, sizeof(name), "%.*s", (int)FK_MIN(len, sizeof(name) - 1), s);
        if (strcmp(name, "timeout") == 0) {
                int r = set_timeout(eq ? eq + 1 : (next ? argv[i + 1] : NULL), a, err, errlen);

                return r < 0 ? r : (eq ? 1 : 2);
        }
        if (push(a, n, argv[i], strlen(argv[i])) < 0)
                return -ENOMEM;
        if (!next || !long_takes_value(name))
                return 1;
        return push(a, n, argv[i + 1], strlen(argv[i + 1])) < 0 ? -ENOMEM : 2;
}

int gt_wget_args_parse(int argc, char **argv, struct gt_wget_args *ret, char *err, size_t errlen)
{
        struct gt_wget_args a = {.timeout_ms = -1};
        bool options = true;
        size_t n = 0;
        int i = 1, r;

        a.argv = calloc((size_t)argc + 2, sizeof(char *));
        if (!a.argv || push(&a, &n, "wget", 4) < 0) {
                gt_wget_args_done(&a);
                return -ENOMEM;
        }
        while (i < argc) {
                const char *s = argv[i];

                if (options && strcmp(s, "--") == 0) {
                        options = false;
                        r = push(&a, &n, s, 2) < 0 ? -ENOMEM : 1;
                } else if (options && s[0] == '-' && s[1] == '-') {
                        r = long_option(argc, argv, i, &a, &n, err, errlen);
                } else if (options && s[0] == '-' && s[1]) {
                        r = short_cluster(argc, argv, i, &a, &n, err, errlen);
                } else {
                        r = push(&a, &n, s, strlen(s)) < 0 ? -ENOMEM : 1;
                }
                if (r < 0) {
                        gt_wget_args_done(&a);
                        return r;
                }
                i += r;
        }
        *ret = a;
        return 0;
}

void gt_wget_args_done(struct gt_wget_args *a)
{
        for (size_t i = 0; a->argv && a->argv[i]; i++)
                free(a->argv[i]);
        free(a->argv);
        a->argv = NULL;
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for busybox wget; ends it after TIMEOUT_MS without I/O (where /proc/PID/io cannot be
 * read, TIMEOUT_MS after the start). Signals sent to us are passed on. */
static int watch(pid_t pid, long long timeout_ms, const sigset_t *set, bool *timed_out)
{
        long long last = gt_proc_io_bytes(pid), since = now_ms();
        struct timespec tick = {0, TICK_MS * 1000000L};
        int status;

        for (;;) {
                int sig = sigtimedwait(set, NULL, &tick);
                long long io;

                if (sig == SIGCHLD || sig < 0) {
                        pid_t r = waitpid(pid, &status, WNOHANG);

                        if (r == pid)
                                return status;
                        if (r < 0 && errno == ECHILD)
                                return 1 << 8;
                } else if (sig > 0) {
                        kill(pid, sig);
                }
                io = gt_proc_io_bytes(pid);
                if (io >= 0 && io != last) {
                        last = io;
                        since = now_ms();
                }
                if (!*timed_out && now_ms() - since >= timeout_ms) {
                        *timed_out = true;
                        kill(pid, SIGKILL);
                }
        }
}

int gt_wget_main(int argc, char **argv)
{
        const char *busybox = getenv("FORKLET_TOOLS_BUSYBOX");
        struct gt_wget_args a;
        bool timed_out = false;
        sigset_t set, old;
        char err[256];
        int status;
        pid_t pid;

        if (!busybox || !*busybox)
                busybox = BUSYBOX;
        if (gt_wget_args_parse(argc, argv, &a, err, sizeof(err)) < 0) {
                fprintf(stderr, "wget: %s\n", err[0] ? err : "out of memory");
                return 1;
        }
        if (a.timeout_ms < 0 || a.timeout_ms == 0) {
                execv(busybox, a.argv);
                fprintf(stderr, "wget: cannot run %s: %s\n", busybox, strerror(errno));
                gt_wget_args_done(&a);
                return 1;
        }
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGQUIT);
        sigprocmask(SIG_BLOCK, &set, &old);
        pid = fork();
        if (pid == 0) {
                sigprocmask(SIG_SETMASK, &old, NULL);
                execv(busybox, a.argv);
                fprintf(stderr, "wget: cannot run %s: %s\n", busybox, strerror(errno));
                _exit(1);
        }
        gt_wget_args_done(&a);
        if (pid < 0) {
                fprintf(stderr, "wget: fork: %s\n", strerror(errno));
                return 1;
        }
        status = watch(pid, a.timeout_ms, &set, &timed_out);
        if (timed_out) {
                fprintf(stderr, "wget: download timed out\n");
                return 1;
        }
        return gt_exit_like(status);
}
