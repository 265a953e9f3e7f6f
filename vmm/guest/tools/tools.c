/* SPDX-License-Identifier: MIT */
/* What the forklet-tools share: durations, signal names and reading a process from /proc. */
#include "vmm/guest/tools/tools.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"

int gt_parse_duration(const char *s, long long *ret_ms)
{
        char *end;
        double v, mult = 1;

        if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
                return -EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || !isfinite(v) || v < 0)
                return -EINVAL;
        switch (*end) {
        case '\0':
        case 's':
                break;
        case 'm':
                mult = 60;
                break;
        case 'h':
                mult = 3600;
                break;
        case 'd':
                mult = 86400;
                break;
        default:
                return -EINVAL;
        }
        if (*end && end[1])
                return -EINVAL;
        v = ceil(v * mult * 1000);
        if (v > 1e15) /* ~31,000 years: nobody waits that long */
                return -EINVAL;
        *ret_ms = (long long)v;
        return 0;
}

int gt_parse_signal(const char *s, int *ret_sig)
{
        char *end;
        long n;

        if (!s || !*s)
                return -EINVAL;
        if (isdigit((unsigned char)*s)) {
                errno = 0;
                n = strtol(s, &end, 10);
                if (errno || *end || n < 1 || n >= NSIG)
                        return -EINVAL;
                *ret_sig = (int)n;
                return 0;
        }
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < SIGRTMIN; sig++) {
                const char *name = sigabbrev_np(sig);

                if (name && strcasecmp(name, s) == 0) {
                        *ret_sig = sig;
                        return 0;
                }
        }
        return -EINVAL;
}

const char *gt_signal_name(int sig)
{
        const char *name = sigabbrev_np(sig);

        return name ? name : "?";
}

static int read_at(int dirfd, const char *path, char *buf, size_t size, size_t *ret_len)
{
        cleanup_close int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
        size_t len = 0;

        if (fd < 0)
                return -errno;
        while (len < size - 1) {
                ssize_t n = read(fd, buf + len, size - 1 - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        *ret_len = len;
        return 0;
}

/* "PID (COMM) S PPID ..." where COMM may hold spaces and parentheses: it ends at the last ')'. */
static int parse_stat(const char *buf, struct gt_proc *p)
{
        const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        size_t n;
        char state;
        int ppid;

        if (!open || !close || close < open)
                return -EIO;
        n = FK_MIN((size_t)(close - open - 1), sizeof(p->comm) - 1);
        memcpy(p->comm, open + 1, n);
        p->comm[n] = '\0';
        if (sscanf(close + 1,
                   " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d "
                   "%llu",
                   &state, &ppid, &p->start) != 3)
                return -EIO;
        p->ppid = ppid;
        return 0;
}

int gt_proc_read(int procfd, pid_t pid, struct gt_proc *ret)
{
        struct gt_proc p = {.pid = pid};
        char path[64], stat[1024];
        cleanup_free char *cmd = NULL;
        size_t len;
        int r;

        snprintf(path, sizeof(path), "%d/stat", (int)pid);
        r = read_at(procfd, path, stat, sizeof(stat), &len);
        if (r < 0)
                return r == -ESRCH ? -ENOENT : r;
        r = parse_stat(stat, &p);
        if (r < 0)
                return r;
        cmd = malloc(65536);
        if (!cmd)
                return -ENOMEM;
        snprintf(path, sizeof(path), "%d/cmdline", (int)pid);
        r = read_at(procfd, path, cmd, 65536, &len);
        if (r < 0)
                return r == -ESRCH ? -ENOENT : r;
        for (size_t i = 0; i < len; i++)
                if (cmd[i] == '\0')
                        cmd[i] = ' ';
        while (len > 0 && cmd[len - 1] == ' ')
                cmd[--len] = '\0';
        p.cmdline = TAKE_PTR(cmd);
        *ret = p;
        return 0;
}

long long gt_proc_io_bytes(pid_t pid)
{
        char path[64], buf[1024];
        unsigned long long rchar = 0, wchar = 0;
        const char *r, *w;
        size_t len;
        int e;

        snprintf(path, sizeof(path), "/proc/%d/io", (int)pid);
        e = read_at(AT_FDCWD, path, buf, sizeof(buf), &len);
        if (e < 0)
                return e;
        r = strstr(buf, "rchar: ");
        w = strstr(buf, "wchar: ");
        if (!r || !w || sscanf(r + 7, "%llu", &rchar) != 1 || sscanf(w + 7, "%llu", &wchar) != 1)
                return -EIO;
        return (long long)((rchar + wchar) & 0x3fffffffffffffffULL);
}

int gt_exit_like(int status)
{
        struct rlimit no_core = {0, 0};
        sigset_t s;
        int sig;

        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (!WIFSIGNALED(status))
                return 125;
        sig = WTERMSIG(status);
        (void)setrlimit(RLIMIT_CORE, &no_core);
        signal(sig, SIG_DFL);
        sigemptyset(&s);
        sigaddset(&s, sig);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        raise(sig);
        return 128 + sig;
}
