/* SPDX-License-Identifier: MIT */
/* EXEC in the guest: each command runs in its own session and process group with pipes for
 * its stdio; one poll loop multiplexes every running exec, enforces timeouts by killing the
 * group, caps output (and says so), and reports exit. Detached commands are double-forked
 * (reparented to init) and only their pid is reported. */
#include "vmm/guest/agent.h"
#include "common/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const default_env[] = {
        "PATH=/bin:/sbin:/usr/bin:/usr/sbin",
        "HOME=/root",
        "TERM=dumb",
};

struct ga_exec {
        struct ga_exec *next;
        uint32_t id;
        pid_t pid;
        int out_fd, err_fd, in_fd;
        struct guest_buf in_buf; /* stdin bytes not yet written */
        bool in_eof;             /* close stdin once in_buf drains */
        uint64_t cap, sent;
        bool capped, timed_out, exited;
        int status;
        uint64_t deadline_ms, exit_ms;
};

/* ---- spawning --------------------------------------------------------------------------- */

struct spawn {
        const char *path;
        char **argv;
        char **envp;
        const char *cwd;
        bool as_user; /* drop to uid/gid before chdir and exec */
        unsigned uid, gid;
        int fd[3];  /* child's stdin, stdout, stderr */
        int err_fd; /* CLOEXEC pipe: errno if exec fails */
};

static void close_fd(int *fd)
{
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

/* Merges the default env with the request's (request wins). Pointers borrowed. */
static char **build_env(char *const *req)
{
        size_t n = 0, k = 0;
        char **e;

        while (req && req[n])
                n++;
        e = calloc(n + ARRAY_SIZE(default_env) + 1, sizeof(char *));
        if (!e)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(default_env); i++) {
                size_t klen = strcspn(default_env[i], "=") + 1;
                bool overridden = false;

                for (size_t j = 0; j < n; j++)
                        overridden |= strncmp(req[j], default_env[i], klen) == 0;
                if (!overridden)
                        e[k++] = (char *)default_env[i];
        }
        for (size_t j = 0; j < n; j++)
                e[k++] = req[j];
        return e;
}

/* Finds argv0 along the PATH in envp (the guest's, not the agent's). */
static int find_exec(const char *argv0, char **envp, char *out, size_t size)
{
        const char *path = "/bin:/sbin:/usr/bin:/usr/sbin";
        int r = -ENOENT;

        if (strchr(argv0, '/')) {
                snprintf(out, size, "%s", argv0);
                return access(out, X_OK) == 0 ? 0 : -errno;
        }
        for (size_t i = 0; envp[i]; i++)
                if (strncmp(envp[i], "PATH=", 5) == 0)
                        path = envp[i] + 5;
        while (*path) {
                size_t len = strcspn(path, ":");
                struct stat st;

                snprintf(out, size, "%.*s/%s", (int)len, path, argv0);
                if (len > 0 && stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
                        if (access(out, X_OK) == 0)
                                return 0;
                        r = -EACCES;
                }
                path += len;
                if (*path == ':')
                        path++;
        }
        return r;
}

/* In the child after fork: only async-signal-safe calls. */
static void __attribute__((noreturn)) child_exec(const struct spawn *s)
{
        sigset_t none;
        int e;

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        for (int i = 0; i < 3; i++)
                if (dup2(s->fd[i], i) < 0)
                        goto fail;
        if (s->as_user &&
            (setgroups(1, &(gid_t){s->gid}) < 0 || setgid(s->gid) < 0 || setuid(s->uid) < 0))
                goto fail;
        if (chdir(s->cwd ? s->cwd : "/") < 0)
                goto fail;
        /* Undo the agent's own OOM protection (agent.c): a command is what the OOM killer
         * should pick. Best effort. */
        e = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (e >= 0) {
                (void)!write(e, "0", 1);
                close(e);
        }
        execve(s->path, s->argv, s->envp);
fail:
        e = errno;
        (void)!write(s->err_fd, &e, sizeof(e));
        _exit(127);
}

/* Reads the exec-failure pipe: 0 once the child exec'd (EOF), else -errno. */
static int read_exec_error(int fd)
{
        int e;
        ssize_t n;

        do
                n = read(fd, &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        return n == sizeof(e) ? -e : 0;
}

static int open_null(int *fd)
{
        *fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        return *fd < 0 ? -errno : 0;
}

/* ---- attached execs --------------------------------------------------------------------- */

static int spawn_attached(struct spawn *s, struct ga_exec *x, bool has_stdin)
{
        int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1}, ep[2] = {-1, -1};
        int r = 0;
        pid_t pid = 0;

        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0 ||
            (has_stdin ? pipe2(in, O_CLOEXEC) : open_null(&in[0])) < 0) {
                r = -errno;
                goto out;
        }
        s->fd[0] = in[0];
        s->fd[1] = out[1];
        s->fd[2] = err[1];
        s->err_fd = ep[1];
        pid = fork();
        if (pid < 0) {
                r = -errno;
                goto out;
        }
        if (pid == 0) {
                setsid();
                child_exec(s);
        }
        close_fd(&ep[1]);
        r = read_exec_error(ep[0]);
        if (r < 0) {
                (void)waitpid(pid, NULL, 0);
                goto out;
        }
        x->pid = pid;
        x->out_fd = TAKE_FD(out[0]);
        x->err_fd = TAKE_FD(err[0]);
        x->in_fd = TAKE_FD(in[1]);
        fcntl(x->out_fd, F_SETFL, O_NONBLOCK);
        fcntl(x->err_fd, F_SETFL, O_NONBLOCK);
        if (x->in_fd >= 0)
                fcntl(x->in_fd, F_SETFL, O_NONBLOCK);
out:
        for (int i = 0; i < 2; i++) {
                close_fd(&out[i]);
                close_fd(&err[i]);
                close_fd(&in[i]);
                close_fd(&ep[i]);
        }
        return r;
}

/* ---- detached execs --------------------------------------------------------------------- */

static int spawn_detached(struct spawn *s, pid_t *ret_pid)
{
        int pp[2] = {-1, -1}, ep[2] = {-1, -1}, null = -1, r;
        pid_t mid, pid = 0;

        if (pipe2(pp, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0 || open_null(&null) < 0) {
                r = -errno;
                goto out;
        }
        s->fd[0] = s->fd[1] = s->fd[2] = null;
        s->err_fd = ep[1];
        mid = fork();
        if (mid < 0) {
                r = -errno;
                goto out;
        }
        if (mid == 0) {
                /* Double fork: the command is reparented to init, which reaps it. */
                pid_t g = fork();

                if (g == 0) {
                        setsid();
                        child_exec(s);
                }
                (void)!write(pp[1], &g, sizeof(g));
                _exit(g < 0 ? 1 : 0);
        }
        close_fd(&pp[1]);
        close_fd(&ep[1]);
        (void)waitpid(mid, NULL, 0);
        if (read(pp[0], &pid, sizeof(pid)) != sizeof(pid) || pid <= 0) {
                r = -ECHILD;
                goto out;
        }
        r = read_exec_error(ep[0]);
        if (r == 0)
                *ret_pid = pid;
out:
        close_fd(&pp[0]);
        close_fd(&pp[1]);
        close_fd(&ep[0]);
        close_fd(&ep[1]);
        close_fd(&null);
        return r;
}

/* ---- requests --------------------------------------------------------------------------- */

static struct ga_exec *find_exec_id(struct ga *a, uint32_t id)
{
        for (struct ga_exec *x = a->execs; x; x = x->next)
                if (x->id == id && id != 0)
                        return x;
        return NULL;
}

void ga_exec_start(struct ga *a, uint32_t id, const struct guest_msg_exec *m)
{
        char path[4096];
        struct spawn s = {.argv = m->argv, .cwd = m->cwd};
        struct ga_exec *x;
        pid_t pid = 0;
        int r;

        if (id == 0 || find_exec_id(a, id))
                return ga_reply_error(a, id, EEXIST, "request id %u already in use", id);
        if (m->user && (r = ga_user_resolve(m->user, &s.uid, &s.gid)) < 0)
                return ga_reply_error(a, id, -r, "user %s: %s", m->user,
                                      r == -ENOENT ? "not in the guest's /etc/passwd or /etc/group"
                                                   : strerror(-r));
        s.as_user = m->user != NULL;
        s.envp = build_env(m->env);
        if (!s.envp)
                return ga_reply_error(a, id, ENOMEM, "out of memory");
        r = find_exec(m->argv[0], s.envp, path, sizeof(path));
        if (r < 0) {
                free(s.envp);
                return ga_reply_error(a, id, -r, "%s: %s", m->argv[0], strerror(-r));
        }
        s.path = path;
        if (m->flags & GUEST_EXEC_DETACH) {
                r = spawn_detached(&s, &pid);
                free(s.envp);
                if (r < 0)
                        return ga_reply_error(a, id, -r, "%s: %s", m->argv[0], strerror(-r));
                return (void)guest_proto_put_u32(&a->out, GUEST_MSG_STARTED, id, (uint32_t)pid);
        }
        x = calloc(1, sizeof(*x));
        if (!x) {
                free(s.envp);
                return ga_reply_error(a, id, ENOMEM, "out of memory");
        }
        *x = (struct ga_exec){.id = id, .out_fd = -1, .err_fd = -1, .in_fd = -1};
        r = spawn_attached(&s, x, m->flags & GUEST_EXEC_HAS_STDIN);
        free(s.envp);
        if (r < 0) {
                free(x);
                return ga_reply_error(a, id, -r, "%s (cwd %s): %s", m->argv[0],
                                      m->cwd ? m->cwd : "/", strerror(-r));
        }
        x->cap = m->output_cap ? m->output_cap : GA_DEFAULT_OUTPUT_CAP;
        if (m->timeout_ms)
                x->deadline_ms = ga_now_ms() + m->timeout_ms;
        x->next = a->execs;
        a->execs = x;
        if (a->connected)
                (void)guest_proto_put_u32(&a->out, GUEST_MSG_STARTED, id, (uint32_t)x->pid);
}

void ga_exec_stdin(struct ga *a, uint32_t id, const void *p, size_t size, bool eof)
{
        struct ga_exec *x = find_exec_id(a, id);

        /* Input for an exec that already finished (or never took stdin) is dropped. */
        if (!x || x->in_fd < 0 || x->in_eof)
                return;
        if (eof) {
                x->in_eof = true;
        } else if (size > 0 && guest_buf_append(&x->in_buf, p, size) < 0) {
                ga_exec_signal(a, id, SIGKILL); /* out of memory: stdin cannot be delivered */
        }
}

void ga_exec_signal(struct ga *a, uint32_t id, int sig)
{
        struct ga_exec *x = find_exec_id(a, id);

        if (x && !x->exited)
                kill(-x->pid, sig);
}

void ga_exec_orphan_all(struct ga *a)
{
        for (struct ga_exec *x = a->execs; x; x = x->next)
                x->id = 0;
}

/* ---- the poll loop's side ----------------------------------------------------------------- */

static bool backlogged(const struct ga *a)
{
        return a->out.size >= GA_OUT_HIGH_WATER;
}

int ga_exec_pollfds(struct ga *a, struct pollfd *fds, int max, int *timeout_ms)
{
        uint64_t now = ga_now_ms();
        int n = 0;

        for (struct ga_exec *x = a->execs; x; x = x->next) {
                uint64_t when = 0;

                if (n + 3 > max)
                        break;
                if (x->out_fd >= 0 && !backlogged(a))
                        fds[n++] = (struct pollfd){.fd = x->out_fd, .events = POLLIN};
                if (x->err_fd >= 0 && !backlogged(a))
                        fds[n++] = (struct pollfd){.fd = x->err_fd, .events = POLLIN};
                if (x->in_fd >= 0 && (x->in_buf.size > 0 || x->in_eof))
                        fds[n++] = (struct pollfd){.fd = x->in_fd, .events = POLLOUT};
                if (x->exited)
                        when = x->exit_ms + GA_EXIT_GRACE_MS;
                else if (x->deadline_ms && !x->timed_out)
                        when = x->deadline_ms;
                if (when) {
                        int t = when > now ? (int)FK_MIN(when - now, 60000) : 0;

                        if (*timeout_ms < 0 || t < *timeout_ms)
                                *timeout_ms = t;
                }
        }
        return n;
}

static void forward_output(struct ga *a, struct ga_exec *x, int *fd, uint16_t type)
{
        static uint8_t buf[GUEST_PROTO_CHUNK];
        ssize_t n = read(*fd, buf, sizeof(buf));
        uint64_t left;

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                close_fd(fd);
                return;
        }
        left = x->cap - x->sent;
        if ((uint64_t)n > left) {
                n = (ssize_t)left;
                x->capped = true;
        }
        x->sent += (uint64_t)n;
        if (n > 0 && a->connected && x->id)
                (void)guest_proto_put_raw(&a->out, type, x->id, buf, (size_t)n);
}

static void feed_stdin(struct ga_exec *x)
{
        while (x->in_buf.size > 0) {
                ssize_t n = write(x->in_fd, x->in_buf.data, x->in_buf.size);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0) { /* EPIPE: the command closed its stdin */
                        guest_buf_free(&x->in_buf);
                        close_fd(&x->in_fd);
                        return;
                }
                guest_buf_consume(&x->in_buf, (size_t)n);
        }
        if (x->in_eof)
                close_fd(&x->in_fd);
}

static void handle_fd(struct ga *a, const struct pollfd *p)
{
        for (struct ga_exec *x = a->execs; x; x = x->next) {
                if (p->fd == x->out_fd)
                        forward_output(a, x, &x->out_fd, GUEST_MSG_STDOUT);
                else if (p->fd == x->err_fd)
                        forward_output(a, x, &x->err_fd, GUEST_MSG_STDERR);
                else if (p->fd == x->in_fd)
                        feed_stdin(x);
                else
                        continue;
                return;
        }
}

static void finish(struct ga *a, struct ga_exec *x)
{
        struct guest_msg_exit e = {0};

        if (WIFSIGNALED(x->status)) {
                e.flags |= GUEST_EXIT_SIGNALED;
                e.signal = WTERMSIG(x->status);
                e.exit_code = 128 + e.signal;
        } else {
                e.exit_code = WEXITSTATUS(x->status);
        }
        if (x->timed_out)
                e.flags |= GUEST_EXIT_TIMED_OUT;
        if (x->capped)
                e.flags |= GUEST_EXIT_OUTPUT_CAPPED;
        if (a->connected && x->id)
                (void)guest_proto_put_exit(&a->out, x->id, &e);
        close_fd(&x->out_fd);
        close_fd(&x->err_fd);
        close_fd(&x->in_fd);
        guest_buf_free(&x->in_buf);
        free(x);
}

void ga_exec_dispatch(struct ga *a, const struct pollfd *fds, int n)
{
        uint64_t now = ga_now_ms();

        for (int i = 0; i < n; i++)
                if (fds[i].revents)
                        handle_fd(a, &fds[i]);
        for (struct ga_exec **pp = &a->execs; *pp;) {
                struct ga_exec *x = *pp;

                if (!x->exited && x->deadline_ms && !x->timed_out && now >= x->deadline_ms) {
                        kill(-x->pid, SIGKILL);
                        x->timed_out = true;
                }
                /* Output still queued for the host holds back the grace period. */
                if (x->exited && backlogged(a))
                        x->exit_ms = now;
                if (x->exited &&
                    ((x->out_fd < 0 && x->err_fd < 0) || now >= x->exit_ms + GA_EXIT_GRACE_MS)) {
                        *pp = x->next;
                        finish(a, x);
                        continue;
                }
                pp = &x->next;
        }
}

void ga_exec_reap(struct ga *a)
{
        int status;
        pid_t pid = 0;

        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                for (struct ga_exec *x = a->execs; x; x = x->next) {
                        if (x->pid == pid) {
                                x->exited = true;
                                x->status = status;
                                x->exit_ms = ga_now_ms();
                                break;
                        }
                }
        }
}
