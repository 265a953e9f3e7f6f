/* SPDX-License-Identifier: MIT */
/* The daemon's side of session networking: re-attach after a restart, orphan cleanup, live
 * egress updates, teardown on delete, and port-forward connections with their relay registry
 * (so a stopping session closes its relays). */
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT_CONNECT_TIMEOUT_MS 5000

struct agent_fwd {
        struct agent_fwd *next;
        char key[2 * 64 + 2];
        int a, b; /* borrowed from the relay thread */
};

void agent_daemon_set_net(struct agent_daemon *d, const struct agent_net_ops *ops)
{
        d->net_ops = ops;
}

/* Under d->lock: every session key (the networks to keep), except skip. */
static char **keys_except(struct agent_daemon *d, const struct agent_session *skip)
{
        char **v = calloc(1, sizeof(char *));

        for (size_t i = 0; v && i < d->n_sessions; i++)
                if (d->sessions[i] != skip && fk_strv_push(&v, d->sessions[i]->key) < 0)
                        v = fk_strv_free(v);
        return v;
}

void agent_daemon_net_start(struct agent_daemon *d)
{
        struct fk_error err = {0};
        char **keep;
        int r;

        if (!d->net_ops)
                return;
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];

                if (!s->vm || !s->spec || s->net)
                        continue;
                r = d->net_ops->setup(d->cfg, s->key, s->spec, &s->net, &err);
                if (r < 0)
                        log_error("session %s: re-attach network: %s", s->key, err.msg);
                else {
                        s->net_ops = d->net_ops;
                        log_info("session %s: network re-attached", s->key);
                }
        }
        keep = keys_except(d, NULL);
        pthread_mutex_unlock(&d->lock);
        if (!keep)
                return;
        r = d->net_ops->cleanup(d->cfg, keep, &err);
        if (r < 0)
                log_warning("network orphan cleanup: %s", err.msg);
        else if (r > 0)
                log_info("removed %d orphaned session network(s)", r);
        fk_strv_free(keep);
}

void agent_daemon_net_observe(struct agent_daemon *d, struct agent_session *s)
{
        struct fk_error err = {0};
        int r;

        if (!d->net_ops || !s->net || !s->spec)
                return;
        r = s->net_ops->update(s->net, s->spec, &err);
        if (r < 0)
                log_error("session %s: update egress: %s", s->key, err.msg);
        else
                log_info("session %s: egress policy updated live (%zu entr%s)", s->key,
                         s->spec->n_egress, s->spec->n_egress == 1 ? "y" : "ies");
}

void agent_daemon_net_destroy(struct agent_daemon *d, struct agent_session *s)
{
        const struct agent_net_ops *ops;
        struct fk_error err = {0};
        char **keep = NULL;
        void *net;
        int r;

        if (!d->net_ops)
                return;
        pthread_mutex_lock(&d->lock);
        net = TAKE_PTR(s->net);
        ops = s->net_ops ? s->net_ops : d->net_ops;
        if (!net)
                keep = keys_except(d, s);
        pthread_mutex_unlock(&d->lock);
        if (net)
                r = ops->teardown(net, &err);
        else
                r = keep ? ops->cleanup(d->cfg, keep, &err) : -ENOMEM;
        fk_strv_free(keep);
        if (r < 0)
                log_warning("session %s: remove network: %s", s->key, err.msg);
}

static bool port_listed(const struct session_manifest *m, uint16_t port)
{
        for (size_t i = 0; i < m->n_ports; i++)
                if (m->ports[i] == port)
                        return true;
        return false;
}

static int ports_text(const struct session_manifest *m, char *buf, size_t size)
{
        size_t off = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < m->n_ports && off < size; i++)
                off += (size_t)snprintf(buf + off, size - off, "%s%u", i ? ", " : "", m->ports[i]);
        if (m->n_ports == 0)
                snprintf(buf, size, "none");
        return 0;
}

/* Under d->lock: checks and a dup of the session's netns fd. */
static int port_check(struct agent_daemon *d, const char *ns, const char *name, uint16_t port,
                      struct fk_error *err)
{
        struct agent_session *s = NULL;
        char list[256];
        int fd = agent_daemon_find_running(d, ns, name, &s, err);

        if (fd < 0)
                return fd;
        if (!port_listed(s->spec, port)) {
                ports_text(s->spec, list, sizeof(list));
                return fk_error_set(err, -EPERM,
                                    "guest port %u is not in spec.ports of %s/%s (allowed: %s); "
                                    "add it to spec.ports and apply",
                                    port, ns, name, list);
        }
        if (!s->net)
                return fk_error_set(err, -ENETDOWN, "session %s/%s has no network", ns, name);
        fd = fcntl(s->net_ops->netns_fd(s->net), F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return fk_error_set(err, -errno, "dup netns fd: %m");
        return fd;
}

int agent_daemon_port_connect(struct agent_daemon *d, const char *ns, const char *name,
                              uint16_t port, struct fk_error *err)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        cleanup_close int nsfd = -1, fd = -1;
        struct pollfd p;
        socklen_t len = sizeof(int);
        int r, soerr = 0;

        pthread_mutex_lock(&d->lock);
        nsfd = port_check(d, ns, name, port, err);
        pthread_mutex_unlock(&d->lock);
        if (nsfd < 0)
                return nsfd;
        fd = net_netns_socket(nsfd, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return fk_error_set(err, fd, "socket in the session netns: %s", strerror(-fd));
        inet_pton(AF_INET, NET_GUEST_IPV4, &sa.sin_addr);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
                return fk_error_set(err, -errno, "connect to guest port %u: %m", port);
        p = (struct pollfd){.fd = fd, .events = POLLOUT};
        r = poll(&p, 1, PORT_CONNECT_TIMEOUT_MS);
        if (r == 0)
                return fk_error_set(err, -ETIMEDOUT, "connect to guest port %u: timed out", port);
        if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
                return fk_error_set(err, -errno, "connect to guest port %u: %m", port);
        if (soerr)
                return fk_error_set(err, -soerr, "connect to guest port %u: %s%s", port,
                                    strerror(soerr),
                                    soerr == ECONNREFUSED ? " (nothing listens there)" : "");
        return TAKE_FD(fd);
}

int agent_daemon_port_connect_check(struct agent_daemon *d, const char *ns, const char *name,
                                    uint16_t port, struct fk_error *err)
{
        int fd;

        pthread_mutex_lock(&d->lock);
        fd = port_check(d, ns, name, port, err);
        pthread_mutex_unlock(&d->lock);
        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

int agent_fwd_register(struct agent_daemon *d, const char *key, int a, int b,
                       struct agent_fwd **ret)
{
        struct agent_fwd *f = calloc(1, sizeof(*f));

        if (!f)
                return -ENOMEM;
        snprintf(f->key, sizeof(f->key), "%s", key);
        f->a = a;
        f->b = b;
        pthread_mutex_lock(&d->fwd_lock);
        if (d->fwd_closing) {
                pthread_mutex_unlock(&d->fwd_lock);
                free(f);
                return -ESHUTDOWN;
        }
        f->next = d->fwds;
        d->fwds = f;
        pthread_mutex_unlock(&d->fwd_lock);
        *ret = f;
        return 0;
}

void agent_fwd_thread_begin(struct agent_daemon *d)
{
        pthread_mutex_lock(&d->fwd_lock);
        d->n_fwd_threads++;
        pthread_mutex_unlock(&d->fwd_lock);
}

void agent_fwd_thread_end(struct agent_daemon *d)
{
        pthread_mutex_lock(&d->fwd_lock);
        d->n_fwd_threads--;
        pthread_cond_broadcast(&d->fwd_done);
        pthread_mutex_unlock(&d->fwd_lock);
}

void agent_fwd_close_all(struct agent_daemon *d)
{
        pthread_mutex_lock(&d->fwd_lock);
        d->fwd_closing = true;
        for (struct agent_fwd *f = d->fwds; f; f = f->next) {
                (void)shutdown(f->a, SHUT_RDWR);
                (void)shutdown(f->b, SHUT_RDWR);
        }
        while (d->n_fwd_threads > 0)
                pthread_cond_wait(&d->fwd_done, &d->fwd_lock);
        pthread_mutex_unlock(&d->fwd_lock);
}

void agent_fwd_unregister(struct agent_daemon *d, struct agent_fwd *f)
{
        pthread_mutex_lock(&d->fwd_lock);
        for (struct agent_fwd **p = &d->fwds; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        break;
                }
        pthread_mutex_unlock(&d->fwd_lock);
        free(f);
}

void agent_fwd_close_key(struct agent_daemon *d, const char *key)
{
        unsigned n = 0;

        pthread_mutex_lock(&d->fwd_lock);
        for (struct agent_fwd *f = d->fwds; f; f = f->next)
                if (strcmp(f->key, key) == 0) {
                        /* the relay thread sees EOF on both sides and closes its fds */
                        (void)shutdown(f->a, SHUT_RDWR);
                        (void)shutdown(f->b, SHUT_RDWR);
                        n++;
                }
        pthread_mutex_unlock(&d->fwd_lock);
        if (n)
                log_info("session %s: closed %u port-forward connection(s)", key, n);
}
