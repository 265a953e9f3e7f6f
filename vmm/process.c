/* SPDX-License-Identifier: MIT */
/* QEMU process supervision: spawn (clone/exec in a new session, errors reported through a
 * CLOEXEC pipe), adopt by pid + start time, exit detection through a pidfd. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "vmm/vmm.h"

extern char **environ;

struct vmm_process {
        pid_t pid;
        int pidfd;
        uint64_t start_time;
        bool is_child; /* spawned by us: reap with waitid; adopted: pidfd readiness only */
        bool exited;
        int status;
        const char *reason;
        uint64_t pre_exec_ns; /* the child's pre-exec hook, 0: none */
};

/* ---- exit reasons: static strings, built once ---------------------------------------- */

static char exit_reasons[256][32];
static char signal_reasons[65][32];
static pthread_once_t reasons_once = PTHREAD_ONCE_INIT;

static void reasons_init(void)
{
        for (int i = 0; i < 256; i++)
                snprintf(exit_reasons[i], sizeof(exit_reasons[i]), "exited with status %d", i);
        for (int i = 0; i < 65; i++)
                snprintf(signal_reasons[i], sizeof(signal_reasons[i]), "killed by signal %d", i);
}

static const char *reason_exit(int code)
{
        pthread_once(&reasons_once, reasons_init);
        return exit_reasons[code & 0xff];
}

static const char *reason_signal(int sig)
{
        pthread_once(&reasons_once, reasons_init);
        return sig >= 0 && sig < 65 ? signal_reasons[sig] : "killed by a signal";
}

/* ---- /proc and pidfd helpers ------------------------------------------------------------ */

static int pidfd_open_compat(pid_t pid)
{
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);

        return fd < 0 ? -errno : fd;
}

/* Field 22 of /proc/PID/stat (starttime, clock ticks since boot). The comm field may hold
 * spaces and parentheses, so parsing starts after the last ')'. */
static int read_start_time(pid_t pid, uint64_t *ret)
{
        cleanup_free char *buf = NULL;
        char path[64];
        const char *p;
        int r;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        r = fk_read_file(path, 4096, &buf, NULL);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        /* After ")": field 3 (state) ... field 22 is the 20th token. */
        p++;
        for (int field = 3; field <= 22; field++) {
                char *end;
                unsigned long long v;

                while (*p == ' ')
                        p++;
                if (!*p)
                        return -EBADMSG;
                if (field == 22) {
                        errno = 0;
                        v = strtoull(p, &end, 10);
                        if (errno || end == p)
                                return -EBADMSG;
                        *ret = v;
                        return 0;
                }
                p = strchr(p, ' ');
                if (!p)
                        return -EBADMSG;
        }
        return -EBADMSG;
}

/* ---- spawn ----------------------------------------------------------------------------- */

/* What the child reports through the pipe: how long its pre-exec hook took (stage READY,
 * right before exec), or that it failed before exec. */
struct spawn_failure {
        int stage;                        /* SPAWN_STAGE_* */
        int error;                        /* positive errno, 0 with READY */
        uint64_t pre_exec_ns;             /* READY */
        char step[VMM_PRE_EXEC_STEP_MAX]; /* PRE_EXEC: the hook's step (vmm_pre_exec_step) */
};

enum {
        SPAWN_STAGE_SETUP,
        SPAWN_STAGE_PRE_EXEC,
        SPAWN_STAGE_EXEC,
        SPAWN_STAGE_READY,
};

/* Written only in a spawned child between its clone and exec. The child runs on the memory
 * and the thread-local storage of the thread that spawned it, which waits meanwhile
 * (CLONE_VFORK): thread-local, so two threads spawning at once do not share it. */
static __thread char pre_exec_step[VMM_PRE_EXEC_STEP_MAX];

void vmm_pre_exec_step(const char *what, const char *arg)
{
        size_t n = 0;

        for (const char *c = what; c && *c && n + 1 < sizeof(pre_exec_step); c++)
                pre_exec_step[n++] = *c;
        if (arg && n + 2 < sizeof(pre_exec_step))
                pre_exec_step[n++] = ' ';
        for (const char *c = arg; c && *c && n + 1 < sizeof(pre_exec_step); c++)
                pre_exec_step[n++] = *c;
        pre_exec_step[n] = '\0';
}

static uint64_t child_now_ns(void)
{
        struct timespec ts;

        /* a vDSO read or a plain syscall: async-signal-safe */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *const spawn_stage_names[] = {
        [SPAWN_STAGE_SETUP] = "child setup",
        [SPAWN_STAGE_PRE_EXEC] = "pre-exec hook",
        [SPAWN_STAGE_EXEC] = "exec",
};

/* Resolves argv[0] against PATH in the parent (execvp is not async-signal-safe after fork in
 * a threaded process). *ret is owned. */
static int resolve_binary(const char *name, char **ret)
{
        const char *path = getenv("PATH");
        cleanup_free char *copy = NULL;
        char *saveptr = NULL;

        if (strchr(name, '/')) {
                if (access(name, X_OK) < 0)
                        return -errno;
                *ret = strdup(name);
                return *ret ? 0 : -ENOMEM;
        }
        copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
        if (!copy)
                return -ENOMEM;
        for (char *dir = strtok_r(copy, ":", &saveptr); dir; dir = strtok_r(NULL, ":", &saveptr)) {
                cleanup_free char *full = NULL;
                struct stat st;

                if (fk_asprintf(&full, "%s/%s", dir, name) < 0)
                        return -ENOMEM;
                if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0) {
                        *ret = TAKE_PTR(full);
                        return 0;
                }
        }
        return -ENOENT;
}

static void close_fds_from(int first, int keep)
{
        /* close_range(2) is a plain syscall (async-signal-safe); fall back to a bounded loop. */
        if (keep > first) {
                if (close_range(first, keep - 1, 0) < 0)
                        for (int fd = first; fd < keep; fd++)
                                close(fd);
                first = keep + 1;
        }
        if (close_range(first, ~0U, 0) < 0) {
                long max = sysconf(_SC_OPEN_MAX);
                for (int fd = first; fd < (max > 0 ? max : 65536); fd++)
                        close(fd);
        }
}

static void child_fail(int errpipe, int stage, int error)
{
        struct spawn_failure f = {.stage = stage, .error = error};
        ssize_t n;

        if (stage == SPAWN_STAGE_PRE_EXEC)
                memcpy(f.step, pre_exec_step, sizeof(f.step));
        n = write(errpipe, &f, sizeof(f));

        (void)n;
        _exit(127);
}

struct spawn_ctx {
        const char *binary;
        char *const *argv;
        char *const *envp;
        bool thp_disable;
        int null_fd;
        int log_fd;
        int errpipe;
        vmm_pre_exec_fn pre_exec;
        void *userdata;
};

/* Runs in the child: only async-signal-safe calls from here on. */
static void __attribute__((noreturn)) spawn_child(struct spawn_ctx *ctx)
{
        struct sigaction sa = {.sa_handler = SIG_DFL};
        struct spawn_failure ready = {.stage = SPAWN_STAGE_READY};
        uint64_t t0;
        ssize_t n;
        sigset_t all;
        int r;

        /* If forkletd ran with 0-2 closed, our fds may sit there: lift them above 2 so the
         * dup2() calls below cannot clobber or no-op on them. */
        int *fds[] = {&ctx->errpipe, &ctx->null_fd, &ctx->log_fd};
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
                if (*fds[i] < 3) {
                        r = fcntl(*fds[i], F_DUPFD_CLOEXEC, 3);
                        if (r < 0)
                                _exit(127);
                        *fds[i] = r;
                }
        }

        /* forkletd may block signals (signalfd) or ignore SIGPIPE: QEMU must start clean. */
        for (int sig = 1; sig < NSIG; sig++)
                (void)sigaction(sig, &sa, NULL);
        sigemptyset(&all);
        if (sigprocmask(SIG_SETMASK, &all, NULL) < 0)
                child_fail(ctx->errpipe, SPAWN_STAGE_SETUP, errno);
        if (setsid() < 0)
                child_fail(ctx->errpipe, SPAWN_STAGE_SETUP, errno);
        pre_exec_step[0] = '\0';
        t0 = child_now_ns();
        if (ctx->pre_exec) {
                r = ctx->pre_exec(ctx->userdata);
                if (r != 0)
                        child_fail(ctx->errpipe, SPAWN_STAGE_PRE_EXEC, r < 0 ? -r : r);
        }
        ready.pre_exec_ns = ctx->pre_exec ? child_now_ns() - t0 : 0;
        /* Kept across execve; after the hook so a hook's own work is not changed by it. */
        if (ctx->thp_disable && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) < 0)
                child_fail(ctx->errpipe, SPAWN_STAGE_SETUP, errno);
        if (dup2(ctx->null_fd, STDIN_FILENO) < 0 || dup2(ctx->log_fd, STDOUT_FILENO) < 0 ||
            dup2(ctx->log_fd, STDERR_FILENO) < 0)
                child_fail(ctx->errpipe, SPAWN_STAGE_SETUP, errno);
        /* Keep only 0-2 and the error pipe (CLOEXEC, so exec closes it). */
        close_fds_from(3, ctx->errpipe);
        n = write(ctx->errpipe, &ready, sizeof(ready));
        (void)n;
        execve(ctx->binary, ctx->argv, ctx->envp);
        child_fail(ctx->errpipe, SPAWN_STAGE_EXEC, errno);
        _exit(127);
}

static int __attribute__((noreturn)) child_main(void *arg)
{
        spawn_child(arg);
}

/* Parent side after the clone: wait for exec (pipe EOF, after a READY report with the pre-exec
 * time) or a failure report. */
static int spawn_collect(pid_t pid, int errpipe, const char *binary, uint64_t *ret_pre_exec_ns,
                         struct fk_error *err)
{
        struct spawn_failure f;
        ssize_t n;

        for (;;) {
                do
                        n = read(errpipe, &f, sizeof(f));
                while (n < 0 && errno == EINTR);
                if (n != (ssize_t)sizeof(f) || f.stage != SPAWN_STAGE_READY)
                        break;
                *ret_pre_exec_ns = f.pre_exec_ns;
        }
        if (n == 0)
                return 0;
        /* The child failed (or the read did): reap it so no zombie stays behind. */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (n != (ssize_t)sizeof(f))
                return fk_error_set(err, n < 0 ? -errno : -EIO, "spawn %s: lost the child's report",
                                    binary);
        if (f.stage < 0 || f.stage > SPAWN_STAGE_EXEC || f.error <= 0)
                return fk_error_set(err, -EIO, "spawn %s: bad report from child", binary);
        f.step[sizeof(f.step) - 1] = '\0';
        if (f.stage == SPAWN_STAGE_PRE_EXEC && f.step[0])
                return fk_error_set(err, -f.error, "spawn %s: pre-exec hook failed at %s: %s",
                                    binary, f.step, strerror(f.error));
        return fk_error_set(err, -f.error, "spawn %s: %s failed: %s", binary,
                            spawn_stage_names[f.stage], strerror(f.error));
}

static int open_log(const char *path, struct fk_error *err)
{
        int fd;

        if (!path)
                fd = open("/dev/null", O_WRONLY | O_CLOEXEC | O_NOCTTY);
        else
                /* never through a symlink: the log may be in a directory QEMU's uid owns */
                fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW,
                          0640);
        if (fd < 0)
                return fk_error_set(err, -errno, "spawn: open log %s: %s",
                                    path ? path : "/dev/null", strerror(errno));
        return fd;
}

static int process_new(pid_t pid, int pidfd, bool is_child, struct vmm_process **ret)
{
        struct vmm_process *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->pidfd = pidfd;
        p->is_child = is_child;
        p->status = -1;
        *ret = p;
        return 0;
}

/* Parent side once exec succeeded: wrap pid and pidfd (taken) into a process. On failure the
 * child is killed and reaped: nobody could supervise it. */
static int spawn_finish(pid_t pid, int pidfd, const char *binary, uint64_t pre_exec_ns,
                        struct vmm_process **ret, struct fk_error *err)
{
        struct vmm_process *p = NULL;
        int r = pidfd;

        if (pidfd >= 0) {
                r = process_new(pid, pidfd, true, &p);
                if (r < 0)
                        close(pidfd);
        }
        if (r < 0) {
                kill(pid, SIGKILL);
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return fk_error_set(err, r, "spawn %s: %s: %s", binary,
                                    pidfd < 0 ? "pidfd_open" : "allocate", strerror(-r));
        }
        (void)read_start_time(pid, &p->start_time);
        p->pre_exec_ns = pre_exec_ns;
        *ret = p;
        return 0;
}

int vmm_process_spawn(char *const *argv, const char *stderr_log, vmm_pre_exec_fn pre_exec,
                      void *userdata, struct vmm_process **ret, struct fk_error *err)
{
        return vmm_process_spawn_env(argv, NULL, stderr_log, pre_exec, userdata, ret, err);
}

int vmm_process_spawn_env(char *const *argv, const struct vmm_exec_env *env, const char *stderr_log,
                          vmm_pre_exec_fn pre_exec, void *userdata, struct vmm_process **ret,
                          struct fk_error *err)
{
        cleanup_free char *binary = NULL;
        cleanup_close int null_fd = -1, log_fd = -1, pidfd = -1;
        uint64_t pre_exec_ns = 0;
        int pipefd[2], r;
        pid_t pid;

        if (!argv || !argv[0] || !ret)
                return fk_error_set(err, -EINVAL, "spawn: empty command line");
        r = resolve_binary(argv[0], &binary);
        if (r < 0)
                return fk_error_set(err, r, "spawn: %s: %s (is it installed and in PATH?)", argv[0],
                                    strerror(-r));
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (null_fd < 0)
                return fk_error_set(err, -errno, "spawn: open /dev/null: %s", strerror(errno));
        log_fd = open_log(stderr_log, err);
        if (log_fd < 0)
                return log_fd;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return fk_error_set(err, -errno, "spawn: pipe: %s", strerror(errno));

        struct spawn_ctx ctx = {
                .binary = binary,
                .argv = argv,
                .envp = env && env->envp ? env->envp : environ,
                .thp_disable = env && env->thp_disable,
                .null_fd = null_fd,
                .log_fd = log_fd,
                .errpipe = pipefd[1],
                .pre_exec = pre_exec,
                .userdata = userdata,
        };
        /* Not fork(): it copied forkletd's page tables, and until the child's exec every page
         * any thread of forkletd wrote took a copy-on-write fault with a TLB shootdown (30 forks
         * starting at once: most of forkletd's CPU). The hooks make system calls only. */
        pid = fk_clone_vfork(child_main, &ctx);
        if (pid < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return fk_error_set(err, pid, "spawn %s: clone: %s", binary, strerror(-pid));
        }
        close(pipefd[1]);
        /* Open the pidfd before anyone can reap the child, so it always names our child. */
        pidfd = pidfd_open_compat(pid);
        r = spawn_collect(pid, pipefd[0], binary, &pre_exec_ns, err);
        close(pipefd[0]);
        if (r < 0)
                return r;
        return spawn_finish(pid, TAKE_FD(pidfd), binary, pre_exec_ns, ret, err);
}

/* ---- adopt, poll, wait, kill -------------------------------------------------------------- */

int vmm_process_adopt(pid_t pid, uint64_t start_time, struct vmm_process **ret)
{
        cleanup_close int pidfd = -1;
        uint64_t st;
        int r;

        if (pid <= 0 || !ret)
                return -EINVAL;
        pidfd = pidfd_open_compat(pid);
        if (pidfd < 0)
                return pidfd;
        /* Read the start time after the pidfd exists: if it still matches, the pidfd refers to
         * the process we meant, not a later one that reused the pid. */
        r = read_start_time(pid, &st);
        if (r < 0)
                return r;
        if (st != start_time)
                return -ESRCH;
        r = process_new(pid, pidfd, false, ret);
        if (r < 0)
                return r;
        TAKE_FD(pidfd);
        (*ret)->start_time = st;
        return 0;
}

pid_t vmm_process_pid(const struct vmm_process *p)
{
        return p ? p->pid : -1;
}

uint64_t vmm_process_pre_exec_ns(const struct vmm_process *p)
{
        return p ? p->pre_exec_ns : 0;
}

uint64_t vmm_process_start_time(const struct vmm_process *p)
{
        return p ? p->start_time : 0;
}

int vmm_process_fd(const struct vmm_process *p)
{
        return p ? p->pidfd : -EBADF;
}

static int pidfd_ready(int pidfd, int timeout_ms)
{
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        int n = poll(&pfd, 1, timeout_ms);

        if (n < 0)
                return -errno;
        return n > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR)) ? 1 : 0;
}

static int reap_child(struct vmm_process *p)
{
        siginfo_t si = {};

        if (waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG) < 0)
                return -errno;
        if (si.si_pid == 0)
                return 0;
        if (si.si_code == CLD_EXITED) {
                p->status = si.si_status;
                p->reason = reason_exit(si.si_status);
        } else {
                p->status = 128 + si.si_status;
                p->reason = reason_signal(si.si_status);
        }
        return 1;
}

int vmm_process_poll(struct vmm_process *p, int *ret_status, const char **ret_reason)
{
        int r;

        if (!p)
                return -EINVAL;
        if (!p->exited) {
                if (p->is_child) {
                        r = reap_child(p);
                } else {
                        /* Not our child: the pidfd turns readable on exit, but the status
                         * belongs to the real parent. */
                        r = pidfd_ready(p->pidfd, 0);
                        if (r > 0) {
                                p->status = -1;
                                p->reason = "exited (not our child: status unknown)";
                        }
                }
                if (r <= 0)
                        return r;
                p->exited = true;
        }
        if (ret_status)
                *ret_status = p->status;
        if (ret_reason)
                *ret_reason = p->reason;
        return 1;
}

int vmm_process_kill(struct vmm_process *p, int sig)
{
        if (!p)
                return -EINVAL;
        if (p->exited)
                return -ESRCH;
        if (syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0) < 0)
                return -errno;
        return 0;
}

int vmm_process_wait(struct vmm_process *p, unsigned timeout_ms)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ULL;
        int r;

        if (!p)
                return -EINVAL;
        for (;;) {
                uint64_t now;
                int left;

                r = vmm_process_poll(p, NULL, NULL);
                if (r != 0)
                        return r;
                now = fk_now_mono_ns();
                if (now >= deadline)
                        return 0;
                left = (int)FK_MIN((deadline - now + 999999) / 1000000, (uint64_t)INT_MAX);
                r = pidfd_ready(p->pidfd, left);
                if (r < 0 && r != -EINTR)
                        return r;
        }
}

struct vmm_process *vmm_process_free(struct vmm_process *p)
{
        if (!p)
                return NULL;
        if (p->pidfd >= 0)
                close(p->pidfd);
        free(p);
        return NULL;
}
