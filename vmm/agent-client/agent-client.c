/* SPDX-License-Identifier: MIT */
/* Host side of the guest agent channel: connects to QEMU's chardev socket, runs a reader
 * thread that demultiplexes frames by request id, and reconnects whenever the channel drops
 * (a guest frame that breaks the protocol drops it too: the guest is untrusted). */
#include "vmm/agent-client/agent-client.h"
#include "vmm/agent-client/agent-client-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#define RECONNECT_INTERVAL_MS 100
#define WRITE_TIMEOUT_MS      10000

/* Non-blocking once connected; timeout_ms 0: one try (fk_unix_connect_wait). */
static int unix_connect(const char *path, unsigned timeout_ms)
{
        int fd = fk_unix_connect_wait(path, timeout_ms);

        if (fd >= 0 && fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

void vmm_agent_guest_text(const char *in, char *out, size_t out_size)
{
        fk_escape_text(in, out, out_size);
}

/* ---- connection state (reader thread) ------------------------------------------------------ */

static void set_connected(struct vmm_agent *a, int fd)
{
        pthread_mutex_lock(&a->lock);
        a->fd = fd;
        a->generation++;
        a->hello = false;
        a->failing = false;
        a->rlen = 0;
        a->partial_since_ns = 0;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
}

/* Closes the connection and fails every request sent on it with error. */
static void drop(struct vmm_agent *a, int error)
{
        pthread_mutex_lock(&a->write_lock);
        pthread_mutex_lock(&a->lock);
        log_debug("agent %s: channel dropped: %s", a->path, strerror(-error));
        if (a->fd >= 0)
                close(a->fd);
        a->fd = -1;
        a->hello = false;
        a->rlen = 0;
        a->partial_since_ns = 0;
        for (struct agent_pending *p = a->pending; p; p = p->next)
                if (p->generation == a->generation && !p->error)
                        p->error = error;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
        pthread_mutex_unlock(&a->write_lock);
}

void vmm_agent_fail_connection(struct vmm_agent *a, unsigned generation)
{
        pthread_mutex_lock(&a->write_lock);
        pthread_mutex_lock(&a->lock);
        /* shutdown, not close: the reader owns the fd and sees EOF, then drops. */
        if (a->fd >= 0 && a->generation == generation) {
                shutdown(a->fd, SHUT_RDWR);
                a->failing = true;
                a->hello = false;
        }
        pthread_mutex_unlock(&a->lock);
        pthread_mutex_unlock(&a->write_lock);
}

static struct agent_pending *find_pending(struct vmm_agent *a, uint32_t id)
{
        for (struct agent_pending *p = a->pending; p; p = p->next)
                if (p->id == id && p->generation == a->generation)
                        return p;
        return NULL;
}

static void on_hello(struct vmm_agent *a, const uint8_t *payload, uint32_t size)
{
        char version[AGENT_GUEST_TEXT_MAX];
        struct guest_msg_hello h;

        if (guest_proto_get_hello(payload, size, &h) < 0)
                return;
        /* Kept only in its escaped form: whoever reads it later logs or shows it. */
        vmm_agent_guest_text(h.agent_version, version, sizeof(version));
        free(h.agent_version);
        h.agent_version = strdup(version);
        if (!h.agent_version)
                return;
        /* A second HELLO on one connection: the guest agent died and init restarted it.
         * Requests in flight are lost (a command may have run); fail them, don't hang. */
        if (a->hello)
                for (struct agent_pending *p = a->pending; p; p = p->next)
                        if (p->generation == a->generation && !p->error)
                                p->error = -ECONNRESET;
        guest_msg_hello_done(&a->info);
        a->info = h;
        a->hello = true;
        log_debug("agent %s: hello from agent %s (protocol %u)", a->path, h.agent_version,
                  h.proto_version);
}

/* Routes one complete frame; called with a->lock held. Frames for unknown ids (a request
 * that gave up) are dropped. */
static void route(struct vmm_agent *a, const struct guest_proto_header *h, const uint8_t *payload)
{
        struct agent_pending *p;
        struct agent_frame *f;

        if (h->type == GUEST_MSG_HELLO)
                return on_hello(a, payload, h->length);
        p = h->id ? find_pending(a, h->id) : NULL;
        if (!p || p->error)
                return;
        if (p->queued + h->length > AGENT_PENDING_MAX_BYTES) {
                p->error = -ENOBUFS;
                return;
        }
        f = malloc(sizeof(*f) + h->length);
        if (!f) {
                p->error = -ENOMEM;
                return;
        }
        *f = (struct agent_frame){.type = h->type, .size = h->length};
        memcpy(f->data, payload, h->length);
        if (p->tail)
                p->tail->next = f;
        else
                p->head = f;
        p->tail = f;
        p->queued += h->length;
}

/* Reads what is there and routes whole frames. Returns <0 when the channel must drop. */
static int read_frames(struct vmm_agent *a)
{
        ssize_t n = read(a->fd, a->rbuf + a->rlen, GUEST_PROTO_MAX_FRAME - a->rlen);
        size_t off = 0;
        int r = 0;

        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n == 0)
                return -ECONNRESET;
        a->rlen += (size_t)n;
        pthread_mutex_lock(&a->lock);
        for (;;) {
                struct guest_proto_header h;

                r = guest_proto_frame_check(a->rbuf + off, a->rlen - off, &h);
                if (r <= 0)
                        break;
                route(a, &h, a->rbuf + off + GUEST_PROTO_HEADER_SIZE);
                off += (size_t)r;
        }
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
        if (r < 0) {
                log_debug("agent %s: malformed frame from guest: %s", a->path, strerror(-r));
                return -EPROTO;
        }
        memmove(a->rbuf, a->rbuf + off, a->rlen - off);
        a->rlen -= off;
        if (a->rlen == 0)
                a->partial_since_ns = 0;
        else if (off > 0 || !a->partial_since_ns)
                a->partial_since_ns = fk_now_mono_ns();
        return 0;
}

/* poll timeout for the reader: until the incomplete frame's deadline, or none. */
static int partial_timeout_ms(const struct vmm_agent *a)
{
        uint64_t end, now = fk_now_mono_ns();

        if (!a->partial_since_ns)
                return -1;
        end = a->partial_since_ns + (uint64_t)a->partial_frame_ms * 1000000;
        return now >= end ? 0 : (int)((end - now) / 1000000) + 1;
}

/* Waits for the wake pipe up to ms; returns true when asked to stop. */
static bool nap(struct vmm_agent *a, int ms)
{
        struct pollfd p = {.fd = a->wake[0], .events = POLLIN};

        (void)poll(&p, 1, ms);
        return p.revents != 0;
}

static void *reader_main(void *userdata)
{
        struct vmm_agent *a = userdata;

        for (;;) {
                struct pollfd p[2] = {{.fd = a->fd, .events = POLLIN},
                                      {.fd = a->wake[0], .events = POLLIN}};
                int r;

                if (a->fd < 0) {
                        if (nap(a, RECONNECT_INTERVAL_MS))
                                return NULL;
                        r = unix_connect(a->path, 0);
                        if (r >= 0)
                                set_connected(a, r);
                        continue;
                }
                r = poll(p, 2, partial_timeout_ms(a));
                if (r < 0 && errno != EINTR)
                        continue;
                if (p[1].revents)
                        return NULL;
                if (r == 0 && partial_timeout_ms(a) == 0) {
                        log_debug("agent %s: guest stalled in the middle of a frame", a->path);
                        r = -EPROTO;
                } else if (!p[0].revents) {
                        continue;
                } else {
                        r = read_frames(a);
                }
                if (r < 0) {
                        drop(a, r == -EPROTO ? -EPROTO : -ECONNRESET);
                        /* Give the guest time to see the hangup before we reconnect. */
                        if (nap(a, RECONNECT_INTERVAL_MS * 2))
                                return NULL;
                }
        }
}

/* ---- requests (caller threads) ------------------------------------------------------------- */

static uint64_t deadline_after(unsigned ms)
{
        return fk_now_mono_ns() + (uint64_t)ms * 1000000;
}

/* pthread_cond_timedwait on CLOCK_MONOTONIC until deadline_ns (0: forever). */
static int wait_until(struct vmm_agent *a, uint64_t deadline_ns)
{
        struct timespec ts;

        if (!deadline_ns)
                return pthread_cond_wait(&a->cond, &a->lock);
        ts.tv_sec = (time_t)(deadline_ns / 1000000000);
        ts.tv_nsec = (long)(deadline_ns % 1000000000);
        return pthread_cond_timedwait(&a->cond, &a->lock, &ts);
}

struct agent_pending *vmm_agent_pending_begin(struct vmm_agent *a, unsigned wait_ms, int *ret_error)
{
        uint64_t deadline = deadline_after(wait_ms);
        struct agent_pending *p = calloc(1, sizeof(*p));

        if (!p) {
                *ret_error = -ENOMEM;
                return NULL;
        }
        pthread_mutex_lock(&a->lock);
        while ((a->fd < 0 || a->failing) && fk_now_mono_ns() < deadline)
                (void)wait_until(a, deadline);
        if (a->fd < 0 || a->failing) {
                pthread_mutex_unlock(&a->lock);
                free(p);
                *ret_error = -ENOTCONN;
                return NULL;
        }
        if (++a->next_id == 0)
                a->next_id = 1;
        p->id = a->next_id;
        p->generation = a->generation;
        p->next = a->pending;
        a->pending = p;
        pthread_mutex_unlock(&a->lock);
        return p;
}

void vmm_agent_pending_end(struct vmm_agent *a, struct agent_pending *p)
{
        pthread_mutex_lock(&a->lock);
        for (struct agent_pending **pp = &a->pending; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        pthread_mutex_unlock(&a->lock);
        while (p->head) {
                struct agent_frame *f = p->head;

                p->head = f->next;
                free(f);
        }
        free(p);
}

struct agent_frame *vmm_agent_pending_next(struct vmm_agent *a, struct agent_pending *p,
                                           uint64_t deadline_ns, int *ret_error)
{
        struct agent_frame *f = NULL;

        pthread_mutex_lock(&a->lock);
        /* Frames that arrived before a drop are still delivered, then the error. */
        while (!p->head && !p->error && (!deadline_ns || fk_now_mono_ns() < deadline_ns))
                (void)wait_until(a, deadline_ns);
        if (p->head) {
                f = p->head;
                p->head = f->next;
                if (!p->head)
                        p->tail = NULL;
                p->queued -= f->size;
        } else {
                *ret_error = p->error ? p->error : -ETIMEDOUT;
        }
        pthread_mutex_unlock(&a->lock);
        return f;
}

static int write_timeout(int fd, const uint8_t *data, size_t size)
{
        uint64_t deadline = deadline_after(WRITE_TIMEOUT_MS);

        while (size > 0) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                ssize_t n = send(fd, data, size, MSG_NOSIGNAL);

                if (n >= 0) {
                        data += n;
                        size -= (size_t)n;
                        continue;
                }
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return -ECONNRESET;
                if (fk_now_mono_ns() >= deadline)
                        return -ETIMEDOUT;
                (void)poll(&pfd, 1, 100);
        }
        return 0;
}

int vmm_agent_send(struct vmm_agent *a, const struct agent_pending *p, const struct guest_buf *b)
{
        int r = -ECONNRESET;

        pthread_mutex_lock(&a->write_lock);
        pthread_mutex_lock(&a->lock);
        bool ok = a->fd >= 0 && !a->failing && a->generation == p->generation;
        int fd = a->fd;
        pthread_mutex_unlock(&a->lock);
        /* The fd cannot be closed meanwhile: drop() needs write_lock. */
        if (ok)
                r = write_timeout(fd, b->data, b->size);
        pthread_mutex_unlock(&a->write_lock);
        if (r == -ETIMEDOUT) /* the guest stopped reading: the channel is wedged */
                vmm_agent_fail_connection(a, p->generation);
        return r;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

int vmm_agent_connect(const char *socket_path, unsigned timeout_ms, struct vmm_agent **ret,
                      struct fk_error *err)
{
        struct vmm_agent *a;
        pthread_condattr_t ca;
        int r;

        if (!socket_path)
                return fk_error_set(err, -EINVAL, "agent socket path missing");
        r = unix_connect(socket_path, timeout_ms);
        if (r < 0)
                return fk_error_set(err, r, "connect to agent socket %s: %s", socket_path,
                                    strerror(-r));
        a = calloc(1, sizeof(*a));
        if (a) {
                a->path = strdup(socket_path);
                a->rbuf = malloc(GUEST_PROTO_MAX_FRAME);
        }
        if (!a || !a->path || !a->rbuf || pipe2(a->wake, O_CLOEXEC) < 0) {
                close(r);
                if (a) {
                        free(a->path);
                        free(a->rbuf);
                        free(a);
                }
                return fk_error_set(err, -ENOMEM, "agent client: out of memory");
        }
        pthread_mutex_init(&a->lock, NULL);
        pthread_mutex_init(&a->write_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&a->cond, &ca);
        pthread_condattr_destroy(&ca);
        a->fd = -1;
        a->partial_frame_ms = AGENT_PARTIAL_FRAME_MS;
        set_connected(a, r);
        r = -pthread_create(&a->reader, NULL, reader_main, a);
        if (r < 0) {
                a->reader = 0;
                vmm_agent_free(a);
                return fk_error_set(err, r, "agent client: start reader thread: %s", strerror(-r));
        }
        *ret = a;
        return 0;
}

struct vmm_agent *vmm_agent_free(struct vmm_agent *a)
{
        if (!a)
                return NULL;
        if (a->reader) {
                (void)!write(a->wake[1], "x", 1);
                pthread_join(a->reader, NULL);
        }
        if (a->fd >= 0)
                close(a->fd);
        while (a->pending) {
                struct agent_pending *p = a->pending;

                a->pending = p->next;
                p->next = NULL;
                vmm_agent_pending_end(a, p);
        }
        close(a->wake[0]);
        close(a->wake[1]);
        guest_msg_hello_done(&a->info);
        pthread_cond_destroy(&a->cond);
        pthread_mutex_destroy(&a->lock);
        pthread_mutex_destroy(&a->write_lock);
        free(a->rbuf);
        free(a->path);
        free(a);
        return NULL;
}
