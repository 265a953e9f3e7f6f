/* SPDX-License-Identifier: MIT */
/* The QMP client over a connected stream fd: handshake, commands with ids and timeouts, an
 * event queue, and connecting to QEMU's unix socket with retry. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm-internal.h"
#include "vmm/vmm.h"

/* A client nobody drains must not grow without bound: keep the newest events only. */
#define QMP_EVENT_QUEUE_MAX 1024
/* timeout_ms == 0 means this, so a forgotten timeout never hangs forkletd. */
#define QMP_DEFAULT_TIMEOUT_MS 30000U

struct qmp_client {
        int fd;
        struct qmp_linebuf buf;
        json_t *events; /* array, oldest first */
        uint64_t next_id;
        bool eof;
        /* qmp_arm: a command sent but for its closing brace and newline */
        uint64_t armed_id;
        char armed[32]; /* its name; "" when nothing is armed */
};

static uint64_t deadline_after(unsigned timeout_ms)
{
        return fk_now_mono_ns() +
               (uint64_t)(timeout_ms ? timeout_ms : QMP_DEFAULT_TIMEOUT_MS) * 1000000ULL;
}

static int ms_left(uint64_t deadline)
{
        uint64_t now = fk_now_mono_ns();

        if (now >= deadline)
                return 0;
        return (int)FK_MIN((deadline - now + 999999) / 1000000, (uint64_t)INT_MAX);
}

static int send_all(int fd, const char *data, size_t size)
{
        while (size > 0) {
                ssize_t n = send(fd, data, size, MSG_NOSIGNAL);

                if (n < 0 && errno == ENOTSOCK)
                        n = write(fd, data, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EPIPE ? -ECONNRESET : -errno;
                }
                data += n;
                size -= (size_t)n;
        }
        return 0;
}

/* Reads what is available within the deadline into the line buffer. */
static int read_some(struct qmp_client *c, uint64_t deadline)
{
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        char chunk[65536];
        ssize_t n;
        int r;

        for (;;) {
                r = poll(&pfd, 1, ms_left(deadline));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
                n = read(c->fd, chunk, sizeof(chunk));
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n < 0)
                        return errno == ECONNRESET ? -ECONNRESET : -errno;
                if (n == 0) {
                        c->eof = true;
                        return -ECONNRESET;
                }
                return qmp_linebuf_feed(&c->buf, chunk, (size_t)n);
        }
}

static void queue_event(struct qmp_client *c, json_t *ev)
{
        if (json_array_size(c->events) >= QMP_EVENT_QUEUE_MAX) {
                log_debug("QMP: event queue full, dropping the oldest event");
                json_array_remove(c->events, 0);
        }
        if (json_array_append(c->events, ev) < 0)
                log_debug("QMP: out of memory queueing an event");
}

/* Next complete message (new reference), reading until the deadline. Events are returned too:
 * the caller decides whether to queue them. */
static int next_message(struct qmp_client *c, uint64_t deadline, json_t **ret,
                        enum qmp_msg_kind *ret_kind, struct fk_error *err)
{
        int r;

        for (;;) {
                cleanup_free char *line = NULL;

                r = qmp_linebuf_next(&c->buf, &line);
                if (r < 0)
                        return fk_error_set(err, r, "QMP: out of memory");
                if (r > 0)
                        return qmp_proto_decode(line, strlen(line), ret, ret_kind, err);
                if (c->eof)
                        return fk_error_set(err, -ECONNRESET, "QMP: connection closed by QEMU");
                r = read_some(c, deadline);
                if (r == -ETIMEDOUT)
                        return fk_error_set(err, r, "QMP: timed out waiting for QEMU");
                if (r == -ECONNRESET)
                        return fk_error_set(err, r, "QMP: connection closed by QEMU");
                if (r == -EMSGSIZE)
                        return fk_error_set(err, r, "QMP: line longer than %u bytes", QMP_LINE_MAX);
                if (r < 0)
                        return fk_error_set(err, r, "QMP: read: %s", strerror(-r));
        }
}

/* Waits for the reply to id, queueing events and dropping stale replies (to commands that
 * timed out earlier). *ret gets the reply (new reference). */
static int wait_reply(struct qmp_client *c, uint64_t id, uint64_t deadline, json_t **ret,
                      enum qmp_msg_kind *ret_kind, struct fk_error *err)
{
        for (;;) {
                _cleanup_(json_decrefp) json_t *msg = NULL;
                enum qmp_msg_kind kind;
                uint64_t got;
                int r;

                r = next_message(c, deadline, &msg, &kind, err);
                if (r < 0)
                        return r;
                if (kind == QMP_MSG_EVENT) {
                        queue_event(c, msg);
                        continue;
                }
                if (kind == QMP_MSG_GREETING)
                        continue;
                /* QEMU omits the id only when it could not parse our command at all. */
                if (qmp_proto_msg_id(msg, &got) && got != id) {
                        log_debug("QMP: dropping stale reply to id %llu", (unsigned long long)got);
                        continue;
                }
                *ret = TAKE_PTR(msg);
                *ret_kind = kind;
                return 0;
        }
}

/* The command goes with the fd (SCM_RIGHTS) in one message, as libvirt sends getfd. */
static int send_with_fd(int sock, const char *data, size_t size, int pass_fd)
{
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = (void *)data, .iov_len = size};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf)};
        struct cmsghdr *cm;
        ssize_t n;

        memset(&u, 0, sizeof(u));
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
        do
                n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EPIPE ? -ECONNRESET : -errno;
        return send_all(sock, data + n, size - (size_t)n);
}

/* A command may go now: a client, a live connection, nothing armed. */
static int may_send(struct qmp_client *c, const char *command, struct fk_error *err)
{
        if (!c || !command)
                return fk_error_set(err, -EINVAL, "QMP: no client or command");
        if (c->eof)
                return fk_error_set(err, -ECONNRESET, "QMP %s: connection closed by QEMU", command);
        if (c->armed[0])
                return fk_error_set(err, -EBUSY, "QMP %s: %s is armed (fire or disarm it first)",
                                    command, c->armed);
        return 0;
}

/* r: what a send returned; a closed socket marks the client. */
static int sent(struct qmp_client *c, int r, const char *command, struct fk_error *err)
{
        if (r == -ECONNRESET)
                c->eof = true;
        return r < 0 ? fk_error_set(err, r, "QMP %s: send: %s", command, strerror(-r)) : 0;
}

/* Waits for the reply to id: QMP errors -EIO, else *ret_return (may be NULL) gets "return". */
static int reply_of(struct qmp_client *c, uint64_t id, const char *command, uint64_t deadline,
                    json_t **ret_return, struct fk_error *err)
{
        _cleanup_(json_decrefp) json_t *reply = NULL;
        enum qmp_msg_kind kind;
        int r = wait_reply(c, id, deadline, &reply, &kind, err);

        if (r < 0)
                return r;
        if (kind == QMP_MSG_ERROR)
                return qmp_proto_error_to_fk(reply, command, err);
        if (ret_return)
                *ret_return = json_incref(json_object_get(reply, "return"));
        return 0;
}

static int execute(struct qmp_client *c, const char *command, json_t *args, int pass_fd,
                   unsigned timeout_ms, json_t **ret_return, struct fk_error *err)
{
        uint64_t deadline = deadline_after(timeout_ms), id;
        cleanup_free char *line = NULL;
        size_t len;
        int r = may_send(c, command, err);

        if (r < 0)
                return r;
        id = c->next_id++;
        r = qmp_proto_encode(command, args, id, &line, &len);
        if (r < 0)
                return fk_error_set(err, r,
                                    "QMP %s: cannot encode command (arguments must be "
                                    "an object)",
                                    command);
        r = pass_fd >= 0 ? send_with_fd(c->fd, line, len, pass_fd) : send_all(c->fd, line, len);
        if (r < 0)
                return sent(c, r, command, err);
        return reply_of(c, id, command, deadline, ret_return, err);
}

int qmp_execute(struct qmp_client *c, const char *command, json_t *args, unsigned timeout_ms,
                json_t **ret_return, struct fk_error *err)
{
        return execute(c, command, args, -1, timeout_ms, ret_return, err);
}

int qmp_execute_take(struct qmp_client *c, const char *command, json_t *args, unsigned timeout_ms,
                     json_t **ret_return, struct fk_error *err)
{
        int r;

        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(c, command, args, timeout_ms, ret_return, err);
        json_decref(args);
        return r;
}

int qmp_arm(struct qmp_client *c, const char *command, json_t *args, struct fk_error *err)
{
        cleanup_free char *line = NULL;
        size_t len = 0;
        int r = may_send(c, command, err);

        if (r < 0)
                return r;
        r = qmp_proto_encode(command, args, c->next_id, &line, &len);
        if (r < 0 || len < 3 || strcmp(line + len - 2, "}\n"))
                return fk_error_set(err, r < 0 ? r : -EINVAL, "QMP %s: cannot encode command",
                                    command);
        r = sent(c, send_all(c->fd, line, len - 2), command, err);
        if (r < 0)
                return r;
        c->armed_id = c->next_id++;
        snprintf(c->armed, sizeof(c->armed), "%s", command);
        return 0;
}

/* Sends the armed command's tail and waits for its reply. */
static int finish_armed(struct qmp_client *c, const char *tail, unsigned timeout_ms,
                        json_t **ret_return, struct fk_error *err)
{
        uint64_t deadline = deadline_after(timeout_ms);
        char command[sizeof(c->armed)];
        int r;

        if (!c || !c->armed[0])
                return fk_error_set(err, -EINVAL, "QMP: nothing armed");
        snprintf(command, sizeof(command), "%s", c->armed);
        c->armed[0] = '\0';
        r = sent(c, send_all(c->fd, tail, strlen(tail)), command, err);
        if (r < 0)
                return r;
        return reply_of(c, c->armed_id, command, deadline, ret_return, err);
}

int qmp_fire(struct qmp_client *c, unsigned timeout_ms, json_t **ret_return, struct fk_error *err)
{
        return finish_armed(c, "}\n", timeout_ms, ret_return, err);
}

int qmp_disarm(struct qmp_client *c, unsigned timeout_ms)
{
        struct fk_error err = {0};
        int r;

        if (!c || !c->armed[0])
                return 0;
        /* A member QMP does not know makes QEMU refuse the command before it runs anything, and
         * the refusal carries our id (qmp_dispatch: "QMP input member ... is unexpected"). */
        r = finish_armed(c, ",\"forklet-disarm\":0}\n", timeout_ms, NULL, &err);
        if (r == -EIO && strstr(err.msg, "forklet-disarm"))
                return 0;
        return r < 0 ? r : -EPROTO; /* it ran: QEMU took the member */
}

int qmp_execute_with_fd(struct qmp_client *c, const char *command, json_t *args, int fd,
                        unsigned timeout_ms, json_t **ret_return, struct fk_error *err)
{
        if (fd < 0)
                return fk_error_set(err, -EBADF, "QMP %s: no fd to pass", command);
        return execute(c, command, args, fd, timeout_ms, ret_return, err);
}

int qmp_next_event(struct qmp_client *c, json_t **ret)
{
        if (!c || !ret)
                return -EINVAL;
        if (json_array_size(c->events) == 0) {
                *ret = NULL;
                return 0;
        }
        *ret = json_incref(json_array_get(c->events, 0));
        json_array_remove(c->events, 0);
        return 1;
}

static bool name_in(json_t *ev, const char *const *names)
{
        const char *name = json_string_value(json_object_get(ev, "event"));

        for (size_t i = 0; name && names[i]; i++)
                if (strcmp(name, names[i]) == 0)
                        return true;
        return false;
}

int qmp_take_event(struct qmp_client *c, const char *const *names, json_t **ret)
{
        size_t i;
        json_t *ev;

        if (!c || !names || !ret)
                return -EINVAL;
        json_array_foreach(c->events, i, ev)
        {
                if (name_in(ev, names)) {
                        *ret = json_incref(ev);
                        json_array_remove(c->events, i);
                        return 1;
                }
        }
        return 0;
}

int qmp_wait_event(struct qmp_client *c, const char *const *names, unsigned timeout_ms,
                   json_t **ret, struct fk_error *err)
{
        uint64_t deadline = deadline_after(timeout_ms);

        if (!c || !names || !ret)
                return fk_error_set(err, -EINVAL, "QMP: no client, names or result");
        if (qmp_take_event(c, names, ret) > 0)
                return 0;
        for (;;) {
                _cleanup_(json_decrefp) json_t *msg = NULL;
                enum qmp_msg_kind kind;
                int r = next_message(c, deadline, &msg, &kind, err);

                if (r < 0)
                        return r;
                if (kind != QMP_MSG_EVENT) {
                        /* a reply to a command that timed out earlier */
                        log_debug("QMP: dropping a reply while waiting for an event");
                        continue;
                }
                if (name_in(msg, names)) {
                        *ret = TAKE_PTR(msg);
                        return 0;
                }
                queue_event(c, msg);
        }
}

void qmp_drop_events(struct qmp_client *c, const char *name)
{
        const char *const names[] = {name, NULL};

        for (size_t i = 0; c && i < json_array_size(c->events);) {
                if (name_in(json_array_get(c->events, i), names))
                        json_array_remove(c->events, i);
                else
                        i++;
        }
}

/* Reads what is there now into the line buffer; 1 when something was read, 0 nothing. */
static int read_ready(struct qmp_client *c)
{
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        char chunk[65536];
        ssize_t n;
        int r;

        do
                r = poll(&pfd, 1, 0);
        while (r < 0 && errno == EINTR);
        if (r <= 0)
                return r < 0 ? -errno : 0;
        n = read(c->fd, chunk, sizeof(chunk));
        if (n < 0)
                return errno == EINTR || errno == EAGAIN ? 0 : -errno;
        if (n == 0) {
                c->eof = true;
                return 0;
        }
        r = qmp_linebuf_feed(&c->buf, chunk, (size_t)n);
        return r < 0 ? r : 1;
}

int qmp_client_pump(struct qmp_client *c)
{
        int r = 0;

        if (!c)
                return -EINVAL;
        /* Bounded: a guest cannot keep forkletd here by making QEMU emit events nonstop. */
        for (unsigned i = 0; i < 16 && !c->eof && (r = read_ready(c)) > 0; i++)
                ;
        if (r < 0)
                return r;
        for (;;) {
                _cleanup_(json_decrefp) json_t *msg = NULL;
                cleanup_free char *line = NULL;
                struct fk_error err = {0};
                enum qmp_msg_kind kind;

                r = qmp_linebuf_next(&c->buf, &line);
                if (r <= 0)
                        break;
                if (qmp_proto_decode(line, strlen(line), &msg, &kind, &err) < 0)
                        log_debug("QMP: dropping a message: %s", err.msg);
                else if (kind == QMP_MSG_EVENT)
                        queue_event(c, msg);
        }
        if (r < 0)
                return r;
        return c->eof ? -ECONNRESET : 0;
}

int qmp_client_fd(const struct qmp_client *c)
{
        return c && !c->eof ? c->fd : -1;
}

int qmp_query_status(struct qmp_client *c, unsigned timeout_ms, char **ret, struct fk_error *err)
{
        _cleanup_(json_decrefp) json_t *st = NULL;
        const char *s;
        int r;

        r = qmp_execute(c, "query-status", NULL, timeout_ms, &st, err);
        if (r < 0)
                return r;
        s = json_string_value(json_object_get(st, "status"));
        if (!s)
                return fk_error_set(err, -EBADMSG, "QMP query-status: reply has no status");
        *ret = strdup(s);
        return *ret ? 0 : fk_error_set(err, -ENOMEM, "QMP: out of memory");
}

static int handshake(struct qmp_client *c, unsigned timeout_ms, struct fk_error *err)
{
        _cleanup_(json_decrefp) json_t *msg = NULL;
        enum qmp_msg_kind kind;
        int r;

        r = next_message(c, deadline_after(timeout_ms), &msg, &kind, err);
        if (r < 0)
                return r;
        if (kind != QMP_MSG_GREETING)
                return fk_error_set(err, -EPROTO, "QMP: expected a greeting, got a %s",
                                    qmp_msg_kind_to_string(kind));
        return qmp_execute(c, "qmp_capabilities", NULL, timeout_ms, NULL, err);
}

int qmp_client_new_fd(int fd, unsigned timeout_ms, struct qmp_client **ret, struct fk_error *err)
{
        struct qmp_client *c;
        int r;

        if (fd < 0 || !ret)
                return fk_error_set(err, -EBADF, "QMP: no connection");
        c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return fk_error_set(err, -ENOMEM, "QMP: out of memory");
        }
        c->fd = fd;
        c->next_id = 1;
        c->events = json_array();
        if (!c->events) {
                qmp_client_free(c);
                return fk_error_set(err, -ENOMEM, "QMP: out of memory");
        }
        r = handshake(c, timeout_ms, err);
        if (r < 0) {
                qmp_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

struct qmp_client *qmp_client_free(struct qmp_client *c)
{
        if (!c)
                return NULL;
        if (c->fd >= 0)
                close(c->fd);
        qmp_linebuf_done(&c->buf);
        json_decref(c->events);
        free(c);
        return NULL;
}

int qmp_client_connect(const char *path, unsigned timeout_ms, struct qmp_client **ret,
                       struct fk_error *err)
{
        uint64_t deadline = deadline_after(timeout_ms);
        int fd;

        if (!path)
                return fk_error_set(err, -EINVAL, "QMP: no socket path");
        fd = fk_unix_connect_wait(path, timeout_ms);
        if (fd == -ENAMETOOLONG)
                return fk_error_set(err, fd,
                                    "QMP: socket path too long for a unix socket (max %zu): %s",
                                    sizeof(((struct sockaddr_un *)0)->sun_path) - 1, path);
        if (fd == -ENOENT || fd == -ECONNREFUSED || fd == -EAGAIN)
                return fk_error_set(err, -ETIMEDOUT,
                                    "QMP: %s did not accept connections in time (%s); "
                                    "did QEMU start? see its log",
                                    path, strerror(-fd));
        if (fd < 0)
                return fk_error_set(err, fd, "QMP: connect %s: %s", path, strerror(-fd));
        return qmp_client_new_fd(fd, (unsigned)FK_MAX(ms_left(deadline), 1), ret, err);
}
