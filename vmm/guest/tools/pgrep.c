/* SPDX-License-Identifier: MIT */
/* pgrep and pkill (the procps options scripts use: -f -x -v -i -n -o -c -l -a -d -P, and
 * pkill's -SIGNAL / -s / --signal), over /proc; busybox-static has neither. */
#include "vmm/guest/tools/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "common/cleanup.h"

#define USAGE_PGREP "usage: pgrep [-flvxinoca] [-d DELIM] [-P PPID,...] [PATTERN]"
#define USAGE_PKILL "usage: pkill [-SIGNAL | -s SIGNAL] [-flvxinoc] [-P PPID,...] [PATTERN]"

static int parse_ppids(const char *s, struct gt_pgrep_opts *o)
{
        cleanup_free char *copy = strdup(s);
        char *save = NULL, *end;

        if (!copy)
                return -ENOMEM;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                long n;

                errno = 0;
                n = strtol(tok, &end, 10);
                if (errno || *end || n < 0 || n > 0x7fffffff || o->n_ppids >= 16)
                        return -EINVAL;
                o->ppids[o->n_ppids++] = (pid_t)n;
        }
        return o->n_ppids ? 0 : -EINVAL;
}

/* pkill -9 / -KILL / -SIGKILL as the first argument (upper case names only: -f is an option). */
static bool leading_signal(int argc, char **argv, int *ret_sig)
{
        const char *a = argc > 1 ? argv[1] : NULL;

        if (!a || a[0] != '-' || !a[1])
                return false;
        if (!(a[1] >= '0' && a[1] <= '9') && !(a[1] >= 'A' && a[1] <= 'Z'))
                return false;
        return gt_parse_signal(a + 1, ret_sig) == 0;
}

/* The flags: one bool each. */
static bool *flag_of(struct gt_pgrep_opts *o, int c)
{
        switch (c) {
        case 'f':
                return &o->full;
        case 'x':
                return &o->exact;
        case 'v':
                return &o->invert;
        case 'n':
                return &o->newest;
        case 'o':
                return &o->oldest;
        case 'c':
                return &o->count;
        case 'l':
                return &o->list_name;
        case 'a':
                return &o->list_full;
        case 'i':
                return &o->icase;
        default:
                return NULL;
        }
}

/* One option from getopt_long; 0 or -EINVAL with the message in err. */
static int apply_opt(int c, char **argv, bool kill_mode, struct gt_pgrep_opts *o, char *err,
                     size_t errlen)
{
        bool *flag = flag_of(o, c);

        if (flag) {
                *flag = true;
                return 0;
        }
        if (c == 'd') {
                o->delim = optarg;
                return 0;
        }
        if (c == 's' && kill_mode && gt_parse_signal(optarg, &o->signal) == 0)
                return 0;
        if (c == 'P' && parse_ppids(optarg, o) == 0)
                return 0;
        if (c == 's')
                snprintf(err, errlen, "unknown signal '%s'", optarg);
        else if (c == 'P')
                snprintf(err, errlen, "-P: bad parent PID list '%s'", optarg);
        else if (c == ':')
                snprintf(err, errlen, "option '%s' needs a value", argv[optind - 1]);
        else
                snprintf(err, errlen, "unknown option '%s'", argv[optind - 1]);
        return -EINVAL;
}

int gt_pgrep_parse(int argc, char **argv, bool kill_mode, struct gt_pgrep_opts *ret, char *err,
                   size_t errlen)
{
        static const struct option longopts[] = {{"signal", required_argument, NULL, 's'},
                                                 {"full", no_argument, NULL, 'f'},
                                                 {"exact", no_argument, NULL, 'x'},
                                                 {"inverse", no_argument, NULL, 'v'},
                                                 {"newest", no_argument, NULL, 'n'},
                                                 {"oldest", no_argument, NULL, 'o'},
                                                 {"count", no_argument, NULL, 'c'},
                                                 {"list-name", no_argument, NULL, 'l'},
                                                 {"list-full", no_argument, NULL, 'a'},
                                                 {"delimiter", required_argument, NULL, 'd'},
                                                 {"parent", required_argument, NULL, 'P'},
                                                 {"ignore-case", no_argument, NULL, 'i'},
                                                 {NULL, 0, NULL, 0}};
        struct gt_pgrep_opts o = {.delim = "\n", .self = getpid(), .signal = SIGTERM};
        int c, first = 1;

        if (kill_mode && leading_signal(argc, argv, &o.signal))
                first = 2;
        /* getopt sees the arguments after a leading -SIGNAL (argv is reordered, as getopt does) */
        argc -= first - 1;
        argv[first - 1] = argv[0];
        argv += first - 1;
        optind = 0; /* 0: glibc resets its whole state (a caller may parse twice) */
        opterr = 0;
        while ((c = getopt_long(argc, argv, kill_mode ? ":s:fxvnocliP:" : ":fxvnoclad:iP:",
                                longopts, NULL)) != -1)
                if (apply_opt(c, argv, kill_mode, &o, err, errlen) < 0)
                        return -EINVAL;
        if (o.newest && o.oldest) {
                snprintf(err, errlen, "-n and -o exclude each other");
                return -EINVAL;
        }
        if (optind < argc)
                o.pattern = argv[optind++];
        if (optind < argc) {
                snprintf(err, errlen, "only one pattern can be given (got '%s' too)", argv[optind]);
                return -EINVAL;
        }
        if (!o.pattern && !o.n_ppids) {
                snprintf(err, errlen, "no matching criteria: give a PATTERN or -P");
                return -EINVAL;
        }
        *ret = o;
        return 0;
}

struct match {
        pid_t pid;
        unsigned long long start;
        char *text; /* what -l/-a print */
};

static bool selected(const struct gt_pgrep_opts *o, const regex_t *re, const struct gt_proc *p)
{
        const char *subject = o->full && p->cmdline[0] ? p->cmdline : p->comm;
        bool hit = true;

        if (p->pid == o->self)
                return false;
        if (o->n_ppids) {
                hit = false;
                for (size_t i = 0; i < o->n_ppids; i++)
                        hit = hit || p->ppid == o->ppids[i];
                if (!hit)
                        return false;
        }
        if (re)
                hit = regexec(re, subject, 0, NULL, 0) == 0;
        return o->invert ? !hit : hit;
}

static int compile(const struct gt_pgrep_opts *o, regex_t *re, FILE *err)
{
        cleanup_free char *pat = NULL;
        char msg[256];
        int r;

        if (asprintf(&pat, o->exact ? "^(%s)$" : "%s", o->pattern) < 0)
                return 3;
        r = regcomp(re, pat, REG_EXTENDED | REG_NOSUB | (o->icase ? REG_ICASE : 0));
        if (r != 0) {
                regerror(r, re, msg, sizeof(msg));
                fprintf(err, "pgrep: bad pattern '%s': %s\n", o->pattern, msg);
                return 2;
        }
        return 0;
}

/* Every selected process, or with -n/-o the newest/oldest one only. */
static int collect(const struct gt_pgrep_opts *o, const regex_t *re, int procfd, struct match **ret,
                   size_t *ret_n)
{
        DIR *d = fdopendir(dup(procfd));
        struct match *m = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;

        if (!d)
                return -errno;
        rewinddir(d);
        while ((de = readdir(d))) {
                struct gt_proc p;
                char *end;
                long pid = strtol(de->d_name, &end, 10);

                if (*end || pid <= 0 || gt_proc_read(procfd, (pid_t)pid, &p) < 0)
                        continue;
                if (!selected(o, re, &p)) {
                        free(p.cmdline);
                        continue;
                }
                if (n == cap) {
                        struct match *bigger = realloc(m, (cap = cap ? cap * 2 : 64) * sizeof(*m));

                        if (!bigger) {
                                free(p.cmdline);
                                break;
                        }
                        m = bigger;
                }
                m[n].pid = p.pid;
                m[n].start = p.start;
                if ((o->list_name && !o->full) || !p.cmdline[0]) {
                        free(p.cmdline);
                        m[n].text = strdup(p.comm);
                } else {
                        m[n].text = p.cmdline;
                }
                n++;
        }
        closedir(d);
        if ((o->newest || o->oldest) && n > 1) {
                size_t best = 0;

                for (size_t i = 1; i < n; i++)
                        if (o->newest ? m[i].start >= m[best].start : m[i].start < m[best].start)
                                best = i;
                for (size_t i = 0; i < n; i++)
                        if (i != best)
                                free(m[i].text);
                m[0] = m[best];
                n = 1;
        }
        *ret = m;
        *ret_n = n;
        return 0;
}

static int report(const struct gt_pgrep_opts *o, bool kill_mode, const struct match *m, size_t n,
                  FILE *out, FILE *err)
{
        size_t done = 0;

        for (size_t i = 0; i < n; i++) {
                if (kill_mode) {
                        if (kill(m[i].pid, o->signal) < 0) {
                                fprintf(err, "pkill: killing pid %d failed: %s\n", (int)m[i].pid,
                                        strerror(errno));
                                continue;
                        }
                        done++;
                } else if (!o->count) {
                        if (o->list_name || o->list_full)
                                fprintf(out, "%d %s%s", (int)m[i].pid, m[i].text ? m[i].text : "",
                                        o->delim);
                        else
                                fprintf(out, "%d%s", (int)m[i].pid, o->delim);
                }
        }
        if (o->count)
                fprintf(out, "%zu\n", kill_mode ? done : n);
        fflush(out);
        return n == 0 ? 1 : (kill_mode && done == 0 ? 3 : 0);
}

int gt_pgrep_run(const struct gt_pgrep_opts *o, bool kill_mode, int procfd, FILE *out, FILE *err)
{
        struct match *m = NULL;
        regex_t re;
        size_t n = 0;
        int r;

        if (o->pattern && (r = compile(o, &re, err)) != 0)
                return r;
        r = collect(o, o->pattern ? &re : NULL, procfd, &m, &n);
        if (o->pattern)
                regfree(&re);
        if (r < 0) {
                fprintf(err, "%s: cannot read /proc: %s\n", kill_mode ? "pkill" : "pgrep",
                        strerror(-r));
                return 3;
        }
        r = report(o, kill_mode, m, n, out, err);
        for (size_t i = 0; i < n; i++)
                free(m[i].text);
        free(m);
        return r;
}

int gt_pgrep_main(int argc, char **argv, bool kill_mode)
{
        const char *me = kill_mode ? "pkill" : "pgrep";
        struct gt_pgrep_opts o;
        cleanup_close int procfd = -1;
        char err[256];

        if (gt_pgrep_parse(argc, argv, kill_mode, &o, err, sizeof(err)) < 0) {
                fprintf(stderr, "%s: %s\n%s\n", me, err, kill_mode ? USAGE_PKILL : USAGE_PGREP);
                return 2;
        }
        procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (procfd < 0) {
                fprintf(stderr, "%s: open /proc: %s (is /proc mounted?)\n", me, strerror(errno));
                return 3;
        }
        return gt_pgrep_run(&o, kill_mode, procfd, stdout, stderr);
}
