/* SPDX-License-Identifier: MIT */
/* The guest agent: finds the virtio-serial port, survives the host coming and going (POLLHUP
 * while nobody is connected), reads frames and dispatches them, and writes queued replies.
 * Multi-call: as PID 1 it runs the init instead (init.c). */
#include "vmm/guest/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_POLL 256
/* The host reconnect poll: every 5 ms for the first second after it went, then every 100 ms;
 * every 100 ms only while the port signals the host's return (host_signal). */
#define GA_RECONNECT_FAST_MS      1000
#define GA_RECONNECT_FAST_POLL_MS 5
#define GA_RECONNECT_POLL_MS      100

static uint8_t inbuf[GUEST_PROTO_MAX_FRAME];
static size_t inlen;

uint64_t ga_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void ga_reply_raw(struct ga *a, uint16_t type, uint32_t id, const void *p, size_t size)
{
        if (a->connected)
                (void)guest_proto_put_raw(&a->out, type, id, p, size);
}

void ga_reply_error(struct ga *a, uint32_t id, int error, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        if (!a->connected)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        (void)guest_proto_put_error(&a->out, id, error > 0 ? error : EIO, msg);
}

/* Looks for /sys/class/virtio-ports/vportNpM/name == GUEST_PROTO_PORT_NAME. */
static int find_port(char *dev, size_t size)
{
        DIR *d = opendir("/sys/class/virtio-ports");
        struct dirent *de;
        int r = -ENOENT;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char path[512], name[128] = "";
                FILE *f;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                if (fgets(name, sizeof(name), f))
                        name[strcspn(name, "\n")] = 0;
                fclose(f);
                if (strcmp(name, GUEST_PROTO_PORT_NAME) == 0) {
                        snprintf(dev, size, "/dev/%s", de->d_name);
                        r = 0;
                        break;
                }
        }
        closedir(d);
        return r;
}

static int open_port(void)
{
        char dev[300];

        for (unsigned i = 0;; i++) {
                if (find_port(dev, sizeof(dev)) == 0) {
                        int fd = open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

                        if (fd >= 0)
                                return fd;
                }
                if (i == 50)
                        fprintf(stderr, "forklet-agent: waiting for port %s\n",
                                GUEST_PROTO_PORT_NAME);
                usleep(100 * 1000);
        }
}

static void send_hello(struct ga *a)
{
        struct guest_msg_hello h = {
                .proto_version = GUEST_PROTO_VERSION,
                .capabilities =
                        GUEST_CAP_EXEC | GUEST_CAP_FILE | GUEST_CAP_IDENTITY | GUEST_CAP_FREEZE,
                .agent_version = (char *)GA_VERSION,
        };

        (void)guest_proto_put_hello(&a->out, &h);
}

/* SIGIO from the port while the host is away: virtio-console sends it to an O_ASYNC reader when
 * the host side opens (VIRTIO_CONSOLE_PORT_OPEN), which poll() cannot wait for (POLLHUP until
 * then), and when data comes in, hence only while away. Blocked, it lands in sigchld_fd. */
static void host_signal(struct ga *a, bool on)
{
        int fl;

        if (a->local || a->port_fd < 0 || a->host_signal == on)
                return;
        fl = fcntl(a->port_fd, F_GETFL);
        if (fl < 0 || (on && fcntl(a->port_fd, F_SETOWN, getpid()) < 0) ||
            fcntl(a->port_fd, F_SETFL, on ? fl | O_ASYNC : fl & ~O_ASYNC) < 0) {
                fprintf(stderr, "forklet-agent: O_ASYNC on the port: %m\n");
                return;
        }
        a->host_signal = on;
}

/* The host side of a virtio-serial port shows as POLLHUP while no one is connected to the
 * chardev. Track it: queued frames of an old connection are meaningless to a new one. */
static void set_connected(struct ga *a, bool c)
{
        if (a->connected == c)
                return;
        /* armed before the next look at the port: a host back in between still wakes poll */
        host_signal(a, !c);
        a->connected = c;
        a->lost_ms = c ? 0 : ga_now_ms();
        a->out.size = 0;
        inlen = 0;
        ga_exec_orphan_all(a);
        if (!c && a->local && a->port_fd >= 0) {
                close(a->port_fd);
                a->port_fd = -1;
        }
        if (c)
                send_hello(a);
}

static void dispatch(struct ga *a, const struct guest_proto_header *h, const uint8_t *p)
{
        struct guest_msg_exec ex;
        uint32_t v;
        int r;

        if (a->local && (h->type == GUEST_MSG_SET_IDENTITY || h->type == GUEST_MSG_FSFREEZE ||
                         h->type == GUEST_MSG_FSTHAW || h->type == GUEST_MSG_ADD_ENTROPY))
                return ga_reply_error(a, h->id, ENOTSUP, "not in local test mode");
        switch (h->type) {
        case GUEST_MSG_PING:
                ga_reply_raw(a, GUEST_MSG_PONG, h->id, p, h->length);
                break;
        case GUEST_MSG_EXEC:
                r = guest_proto_get_exec(p, h->length, &ex);
                if (r < 0) {
                        ga_reply_error(a, h->id, -r, "malformed EXEC");
                        break;
                }
                ga_exec_start(a, h->id, &ex);
                guest_msg_exec_done(&ex);
                break;
        case GUEST_MSG_STDIN:
        case GUEST_MSG_STDIN_EOF:
                ga_exec_stdin(a, h->id, p, h->length, h->type == GUEST_MSG_STDIN_EOF);
                break;
        case GUEST_MSG_SIGNAL:
                if (guest_proto_get_u32(p, h->length, &v) == 0 && v > 0 && v < 65)
                        ga_exec_signal(a, h->id, (int)v);
                break;
        case GUEST_MSG_POWEROFF:
                ga_reply_raw(a, GUEST_MSG_OK, h->id, NULL, 0);
                a->poweroff_pending = true;
                a->poweroff_at_ms = ga_now_ms() + 1000;
                break;
        case GUEST_MSG_FILE_WRITE:
                ga_op_file_write(a, h->id, p, h->length);
                break;
        case GUEST_MSG_FILE_READ:
                ga_op_file_read(a, h->id, p, h->length);
                break;
        case GUEST_MSG_SET_IDENTITY:
                ga_op_identity(a, h->id, p, h->length);
                break;
        case GUEST_MSG_SET_TIME:
                ga_op_set_time(a, h->id, p, h->length);
                break;
        case GUEST_MSG_ADD_ENTROPY:
                ga_op_add_entropy(a, h->id, p, h->length);
                break;
        case GUEST_MSG_FSFREEZE:
        case GUEST_MSG_FSTHAW:
                ga_op_freeze(a, h->id, p, h->length, h->type == GUEST_MSG_FSFREEZE);
                break;
        default:
                ga_reply_error(a, h->id, ENOSYS, "unsupported message type %u", h->type);
                break;
        }
}

/* Skips to the next possible frame start after garbage (the host is trusted, but a torn
 * frame from a previous connection may precede the first real one). */
static void resync(void)
{
        static const uint8_t m[4] = {GUEST_PROTO_MAGIC & 0xff, (GUEST_PROTO_MAGIC >> 8) & 0xff,
                                     (GUEST_PROTO_MAGIC >> 16) & 0xff, GUEST_PROTO_MAGIC >> 24};
        size_t i;

        for (i = 1; i + 4 <= inlen; i++)
                if (memcmp(inbuf + i, m, 4) == 0)
                        break;
        if (i + 4 > inlen)
                i = inlen;
        memmove(inbuf, inbuf + i, inlen - i);
        inlen -= i;
}

static void handle_input(struct ga *a)
{
        for (;;) {
                ssize_t n;

                if (inlen == sizeof(inbuf)) /* cannot happen: a max frame fits */
                        inlen = 0;
                n = read(a->port_fd, inbuf + inlen, sizeof(inbuf) - inlen);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0) { /* EOF: the host went away */
                        set_connected(a, false);
                        return;
                }
                inlen += (size_t)n;
                for (;;) {
                        struct guest_proto_header h;
                        int r = guest_proto_frame_check(inbuf, inlen, &h);

                        if (r == 0)
                                break;
                        if (r < 0) {
                                ga_reply_error(a, 0, -r, "malformed frame dropped");
                                resync();
                                continue;
                        }
                        dispatch(a, &h, inbuf + GUEST_PROTO_HEADER_SIZE);
                        memmove(inbuf, inbuf + r, inlen - (size_t)r);
                        inlen -= (size_t)r;
                }
        }
}

static void flush_output(struct ga *a)
{
        while (a->out.size > 0) {
                ssize_t n = write(a->port_fd, a->out.data, a->out.size);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        if (errno != EAGAIN)
                                set_connected(a, false);
                        return;
                }
                guest_buf_consume(&a->out, (size_t)n);
        }
}

static bool port_hup(struct ga *a)
{
        struct pollfd p = {.fd = a->port_fd, .events = POLLIN};

        return poll(&p, 1, 0) > 0 && (p.revents & POLLHUP);
}

/* Local mode: the next test client takes the place of the host. */
static void accept_local(struct ga *a)
{
        int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0)
                return;
        a->port_fd = fd;
        set_connected(a, true);
}

static void loop_once(struct ga *a)
{
        struct pollfd fds[MAX_POLL];
        int n = 0, timeout = -1, nexec, inject = -1;

        if (!a->connected && !a->local && !port_hup(a))
                set_connected(a, true);
        if (a->connected) {
                fds[n++] = (struct pollfd){.fd = a->port_fd,
                                           .events = POLLIN | (a->out.size ? POLLOUT : 0)};
        } else if (a->local) {
                fds[n++] = (struct pollfd){.fd = a->listen_fd, .events = POLLIN};
        } else {
                /* The port's SIGIO says when the host comes back (a restored machine's host
                 * connects within milliseconds; every one of them waits here); the poll is a
                 * backstop. Without it, poll often right after the host went, then at a pace
                 * an idle guest can afford. */
                timeout = !a->host_signal && ga_now_ms() - a->lost_ms < GA_RECONNECT_FAST_MS
                                  ? GA_RECONNECT_FAST_POLL_MS
                                  : GA_RECONNECT_POLL_MS;
        }
        if (a->connected && a->inject_fd >= 0 && a->out.size < GA_OUT_HIGH_WATER) {
                inject = n;
                fds[n++] = (struct pollfd){.fd = a->inject_fd, .events = POLLIN};
        }
        fds[n++] = (struct pollfd){.fd = a->sigchld_fd, .events = POLLIN};
        nexec = ga_exec_pollfds(a, fds + n, MAX_POLL - n, &timeout);
        if (a->poweroff_pending)
                timeout = 10;
        if (poll(fds, (nfds_t)(n + nexec), timeout) < 0 && errno != EINTR)
                return;
        if (!a->connected && a->local && (fds[0].revents & POLLIN)) {
                accept_local(a);
        } else if (a->connected && (fds[0].revents & POLLHUP) && !(fds[0].revents & POLLIN)) {
                set_connected(a, false);
        } else if (a->connected) {
                if (fds[0].revents & (POLLIN | POLLHUP))
                        handle_input(a);
                if (a->connected && (fds[0].revents & POLLOUT))
                        flush_output(a);
        }
        if (inject >= 0 && a->connected && (fds[inject].revents & POLLIN))
                ga_inject_read(a);
        if (fds[n - 1].revents & POLLIN) {
                struct signalfd_siginfo si;

                while (read(a->sigchld_fd, &si, sizeof(si)) == sizeof(si))
                        ;
        }
        ga_exec_reap(a);
        ga_exec_dispatch(a, fds + n, nexec);
        if (a->connected)
                flush_output(a);
        if (a->poweroff_pending && (a->out.size == 0 || ga_now_ms() >= a->poweroff_at_ms)) {
                if (a->local)
                        exit(0);
                ga_poweroff_now();
        }
}

static int listen_local(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

/* The agent reports everything else (and init restarts it only after it died): let a guest that
 * runs out of memory lose its workload, never the agent. Its commands start at 0 again
 * (agent-exec.c). */
static void protect_from_oom(void)
{
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

        if (fd < 0 || write(fd, "-1000", 5) != 5)
                fprintf(stderr, "forklet-agent: oom_score_adj -1000: %m\n");
        if (fd >= 0)
                close(fd);
}

static int agent_main(const char *listen_path)
{
        struct ga a = {.port_fd = -1,
                       .listen_fd = -1,
                       .inject_fd = -1,
                       .urandom_fd = -1,
                       .identity_fd = -1};
        sigset_t mask;

        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGIO);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        a.sigchld_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (a.sigchld_fd < 0) {
                fprintf(stderr, "forklet-agent: signalfd: %m\n");
                return 1;
        }
        if (listen_path) {
                a.local = true;
                a.listen_fd = listen_local(listen_path);
                if (a.listen_fd < 0) {
                        fprintf(stderr, "forklet-agent: listen on %s: %s\n", listen_path,
                                strerror(-a.listen_fd));
                        return 1;
                }
        } else {
                protect_from_oom();
                ga_identity_open(&a);
                a.port_fd = open_port();
                host_signal(&a, true); /* not connected yet */
                ga_inject_open(&a);
        }
        fprintf(stderr, "forklet-guest: ready\n");
        for (;;)
                loop_once(&a);
}

int main(int argc, char **argv)
{
        if (getpid() == 1)
                return ga_init_main();
        if (argc == 3 && strcmp(argv[1], "--listen") == 0)
                return agent_main(argv[2]);
        if (argc != 1) {
                fprintf(stderr, "usage: forklet-agent [--listen SOCKET]\n");
                return 2;
        }
        return agent_main(NULL);
}
