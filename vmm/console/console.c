/* SPDX-License-Identifier: MIT */
/* The serial console log: a thread drains QEMU's console socket into a file that is rotated
 * (log -> log.1) before it would pass its size cap, so a chatty guest cannot fill the disk, and
 * through the health scanner (console-scan.c). */
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/console/console.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CONSOLE_BUF 16384

struct vmm_console {
        int sock;   /* QEMU's console socket */
        int log;    /* current log file (O_APPEND) */
        int stopfd; /* eventfd: free() wants the thread gone */
        char *path, *old_path;
        size_t max, size;
        pthread_t thread;
        atomic_uint_fast64_t bytes;
        atomic_uint rotations;
        pthread_mutex_t lock; /* scan, closed */
        pthread_cond_t cond;  /* closed became true */
        struct vmm_console_scan scan;
        bool closed; /* the thread is done reading (QEMU closed the socket, or free) */
};

static int log_open(struct vmm_console *c)
{
        struct stat st;

        c->log = open(c->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
        if (c->log < 0)
                return -errno;
        c->size = fstat(c->log, &st) == 0 ? (size_t)st.st_size : 0;
        return 0;
}

/* log -> log.1 (replacing it), then a new empty log. */
static int log_rotate(struct vmm_console *c)
{
        if (c->log >= 0)
                close(c->log);
        c->log = -1;
        if (rename(c->path, c->old_path) < 0 && errno != ENOENT)
                return -errno;
        atomic_fetch_add(&c->rotations, 1);
        return log_open(c);
}

/* Writes data, rotating exactly at the cap so no file ever exceeds max bytes. */
static int log_write(struct vmm_console *c, const char *data, size_t n)
{
        while (n > 0) {
                size_t room = c->max > c->size ? c->max - c->size : 0, k;
                int r;

                if (room == 0) {
                        r = log_rotate(c);
                        if (r < 0)
                                return r;
                        continue;
                }
                k = FK_MIN(room, n);
                r = fk_write_all(c->log, data, k);
                if (r < 0)
                        return r;
                c->size += k;
                atomic_fetch_add(&c->bytes, k);
                data += k;
                n -= k;
        }
        return 0;
}

/* After a failed write (a full disk): the output is dropped, as the guest's serial line must
 * keep draining; the size follows the file again (part of the write may have landed). */
static void log_recover(struct vmm_console *c)
{
        struct stat st;

        if (c->log < 0)
                (void)log_open(c);
        else if (fstat(c->log, &st) == 0)
                c->size = (size_t)st.st_size;
}

static void *console_thread(void *userdata)
{
        struct vmm_console *c = userdata;
        char buf[CONSOLE_BUF];
        bool stopping = false;
        unsigned drain = 64; /* reads allowed after stop: a chatty guest must not hold us */

        for (;;) {
                struct pollfd p[2] = {{.fd = c->sock, .events = POLLIN},
                                      {.fd = c->stopfd, .events = POLLIN}};
                ssize_t n;

                /* Once asked to stop, drain what is already queued without blocking. */
                if (poll(p, 2, stopping ? 0 : -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[1].revents & POLLIN)
                        stopping = true;
                if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)) || (stopping && drain-- == 0)) {
                        if (stopping)
                                break;
                        continue;
                }
                n = recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n > 0) {
                        pthread_mutex_lock(&c->lock);
                        vmm_console_scan_feed(&c->scan, buf, (size_t)n);
                        pthread_mutex_unlock(&c->lock);
                }
                if (n <= 0)
                        break;
                if (log_write(c, buf, (size_t)n) < 0)
                        log_recover(c);
        }
        pthread_mutex_lock(&c->lock);
        c->closed = true;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        return NULL;
}

static void console_close(struct vmm_console *c)
{
        if (c->sock >= 0)
                close(c->sock);
        if (c->log >= 0)
                close(c->log);
        if (c->stopfd >= 0)
                close(c->stopfd);
        free(c->path);
        free(c->old_path);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

int vmm_console_start(const char *socket_path, const char *log_path, size_t max_bytes,
                      bool rotate_first, unsigned timeout_ms, struct vmm_console **ret,
                      struct fk_error *err)
{
        struct vmm_console *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return fk_error_set(err, -ENOMEM, "out of memory");
        c->sock = c->log = c->stopfd = -1;
        c->max = max_bytes ? max_bytes : 1;
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->cond, NULL);
        if (!(c->path = strdup(log_path)) || fk_asprintf(&c->old_path, "%s.1", log_path) < 0) {
                console_close(c);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        r = rotate_first ? log_rotate(c) : log_open(c);
        if (r < 0) {
                console_close(c);
                return fk_error_set(err, r, "open console log %s: %s", log_path, strerror(-r));
        }
        if (!rotate_first && c->size >= c->max && (r = log_rotate(c)) < 0) {
                console_close(c);
                return fk_error_set(err, r, "rotate console log %s: %s", log_path, strerror(-r));
        }
        c->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        c->sock = fk_unix_connect_wait(socket_path, timeout_ms);
        if (c->stopfd < 0 || c->sock < 0) {
                r = c->sock < 0 ? c->sock : -errno;
                console_close(c);
                return fk_error_set(err, r, "connect to console socket %s: %s", socket_path,
                                    strerror(-r));
        }
        r = -pthread_create(&c->thread, NULL, console_thread, c);
        if (r < 0) {
                console_close(c);
                return fk_error_set(err, r, "start console thread: %s", strerror(-r));
        }
        *ret = c;
        return 0;
}

void vmm_console_stats(struct vmm_console *c, uint64_t *ret_bytes, unsigned *ret_rotations)
{
        *ret_bytes = atomic_load(&c->bytes);
        *ret_rotations = atomic_load(&c->rotations);
}

void vmm_console_report(struct vmm_console *c, struct vmm_console_report *ret)
{
        pthread_mutex_lock(&c->lock);
        vmm_console_scan_report(&c->scan, ret);
        pthread_mutex_unlock(&c->lock);
}

int vmm_console_wait_closed(struct vmm_console *c, unsigned timeout_ms)
{
        struct timespec ts;
        bool closed;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&c->lock);
        while (!c->closed && pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
                ;
        closed = c->closed;
        pthread_mutex_unlock(&c->lock);
        return closed ? 1 : 0;
}

struct vmm_console *vmm_console_free(struct vmm_console *c)
{
        uint64_t one = 1;

        if (!c)
                return NULL;
        (void)!write(c->stopfd, &one, sizeof(one));
        pthread_join(c->thread, NULL);
        console_close(c);
        return NULL;
}
