/* SPDX-License-Identifier: MIT */
/* The per-session resolver: listens on the resolver address inside the session netns, refuses
 * names outside the allow list, forwards the rest upstream and, before answering, puts the
 * A/AAAA answers (through CNAMEs) into the session's nft sets for their TTL (with a floor). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

#define DNS_MAX_IN_FLIGHT 64
#define DNS_UDP_MAX       512 /* larger answers go back truncated; the guest retries on tcp */
#define DNS_TTL_CAP_S     86400
#define DNS_LEARNED_MAX   4096
#define DNS_TCP_IDLE_MS   10000
#define DNS_DERIVED_MAX   1024

struct learned {
        char name[NET_DNS_NAME_MAX]; /* the allowed query name that produced addr; "": unknown
                                      * (read back untagged from the kernel at re-attach) */
        int family;
        uint8_t addr[16];
        uint64_t expire_ns;
};

struct net_dns {
        struct net_session *s; /* borrowed */
        struct net_dns_upstreams up;
        uint32_t ttl_floor_s;
        pthread_mutex_t lock; /* rules, open, learned, stats and every call into s */
        pthread_cond_t idle;
        struct net_dns_rule *rules; /* owned array, names owned */
        size_t n_rules;
        bool open;
        struct learned *learned;
        size_t n_learned;
        struct net_dns_derived *derived; /* CNAME targets of allowed names */
        size_t n_derived;
        struct net_dns_stats stats;
        bool restoring; /* until the first set_policy: untagged restored elements may stay */
        int udp_fd, tcp_fd, stop_fd;
        pthread_t thread;
        bool thread_started;
        atomic_bool quit;
        unsigned in_flight;
};

static void rules_free(struct net_dns_rule *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                free((char *)v[i].name);
        free(v);
}

/* Under d->lock: the allowed name a query counts as (NULL: refuse). */
static const char *effective_name(const struct net_dns *d, const char *qname)
{
        return net_dns_effective_name(d->rules, d->n_rules, d->derived, d->n_derived, qname,
                                      fk_now_mono_ns());
}

/* Under d->lock: remember chain[1..] as reached from origin (expired entries are reused). */
static void derive(struct net_dns *d, const char *origin, char (*chain)[NET_DNS_NAME_MAX],
                   size_t n_chain, uint64_t expire)
{
        uint64_t now = fk_now_mono_ns();

        for (size_t c = 1; c < n_chain; c++) {
                struct net_dns_derived *slot = NULL;

                for (size_t i = 0; i < d->n_derived && !slot; i++)
                        if (d->derived[i].expire_ns <= now ||
                            (strcmp(d->derived[i].name, chain[c]) == 0 &&
                             strcmp(d->derived[i].origin, origin) == 0))
                                slot = &d->derived[i];
                if (!slot && d->n_derived < DNS_DERIVED_MAX) {
                        struct net_dns_derived *v =
                                realloc(d->derived, (d->n_derived + 1) * sizeof(*v));

                        if (!v)
                                return;
                        d->derived = v;
                        slot = &v[d->n_derived++];
                }
                if (!slot)
                        return;
                snprintf(slot->name, sizeof(slot->name), "%s", chain[c]);
                snprintf(slot->origin, sizeof(slot->origin), "%s", origin);
                slot->expire_ns = expire;
        }
}

static void remember(struct net_dns *d, const char *name, const struct net_dns_answer *a,
                     uint64_t expire)
{
        size_t len = a->family == AF_INET ? 4 : 16, j = 0;
        uint64_t now = fk_now_mono_ns();

        for (size_t i = 0; i < d->n_learned; i++) {
                struct learned *l = &d->learned[i];

                if (l->family == a->family && memcmp(l->addr, a->addr, len) == 0 &&
                    strcmp(l->name, name) == 0) {
                        l->expire_ns = FK_MAX(l->expire_ns, expire);
                        return;
                }
        }
        for (size_t i = 0; i < d->n_learned; i++) /* drop expired ones first */
                if (d->learned[i].expire_ns > now)
                        d->learned[j++] = d->learned[i];
        d->n_learned = j;
        if (d->n_learned >= DNS_LEARNED_MAX)
                return; /* the nft element is in place; only a policy update forgets it early */
        if (!(d->n_learned & (d->n_learned + 1))) { /* grow at 0, 1, 3, 7, ... */
                struct learned *v = realloc(d->learned, (d->n_learned * 2 + 2) * sizeof(*v));

                if (!v)
                        return;
                d->learned = v;
        }
        d->learned[d->n_learned] = (struct learned){.family = a->family, .expire_ns = expire};
        memcpy(d->learned[d->n_learned].addr, a->addr, len);
        snprintf(d->learned[d->n_learned].name, NET_DNS_NAME_MAX, "%s", name);
        d->n_learned++;
}

/* Puts the addresses of an allowed answer into the nft sets, once per port of the rules that
 * match the name the query counts as; CNAME targets become derived names of it. */
static void learn(struct net_dns *d, const char *qname, const uint8_t *msg, size_t size)
{
        char chain[NET_DNS_CHAIN_MAX][NET_DNS_NAME_MAX];
        char origin[NET_DNS_NAME_MAX];
        struct net_dns_answer a[64];
        size_t n = 0, n_chain = 0;
        const char *eff;

        if (net_dns_parse_answers(msg, size, qname, a, sizeof(a) / sizeof(a[0]), &n, chain,
                                  &n_chain) < 0)
                return;
        pthread_mutex_lock(&d->lock);
        eff = d->open ? NULL : effective_name(d, qname);
        if (eff) { /* copied: derive() may reuse the slot eff points into */
                snprintf(origin, sizeof(origin), "%s", eff);
                derive(d, origin, chain, n_chain,
                       fk_now_mono_ns() + (uint64_t)d->ttl_floor_s * 1000000000);
        }
        for (size_t i = 0; i < n && eff; i++) {
                uint32_t ttl = FK_MIN(FK_MAX(a[i].ttl, d->ttl_floor_s), DNS_TTL_CAP_S);
                bool any = false;

                for (size_t k = 0; k < d->n_rules; k++) {
                        if (!net_dns_name_matches(d->rules[k].name, d->rules[k].wildcard, origin))
                                continue;
                        if (net_egress_allow_addr_named(d->s, origin, a[i].family, a[i].addr,
                                                        d->rules[k].port, ttl) >= 0)
                                any = true;
                }
                if (any) {
                        remember(d, origin, &a[i], fk_now_mono_ns() + (uint64_t)ttl * 1000000000);
                        d->stats.learned++;
                }
        }
        pthread_mutex_unlock(&d->lock);
}

/* Answers one query into out; <0: drop it (not a query). */
static int process(struct net_dns *d, const uint8_t *q, size_t q_size, uint8_t *out,
                   size_t out_size, size_t *ret_size)
{
        struct net_dns_question qu;
        bool allowed, open;
        int r;

        r = net_dns_parse_query(q, q_size, &qu);
        if (r < 0)
                return r;
        pthread_mutex_lock(&d->lock);
        d->stats.queries++;
        allowed = d->open || effective_name(d, qu.name);
        open = d->open;
        if (!allowed)
                d->stats.refused++;
        pthread_mutex_unlock(&d->lock);
        if (!allowed)
                return net_dns_build_error(q, &qu, NET_DNS_RCODE_REFUSED, out, out_size, ret_size);
        r = net_dns_upstream_query(&d->up, q, q_size, out, out_size, ret_size);
        pthread_mutex_lock(&d->lock);
        if (r < 0)
                d->stats.failed++;
        else
                d->stats.forwarded++;
        pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return net_dns_build_error(q, &qu, NET_DNS_RCODE_SERVFAIL, out, out_size, ret_size);
        if (!open && net_dns_rcode(out, *ret_size) == 0)
                learn(d, qu.name, out, *ret_size);
        return 0;
}

static void worker_done(struct net_dns *d)
{
        pthread_mutex_lock(&d->lock);
        d->in_flight--;
        pthread_cond_broadcast(&d->idle);
        pthread_mutex_unlock(&d->lock);
}

struct udp_job {
        struct net_dns *d;
        struct sockaddr_storage peer;
        socklen_t peer_len;
        size_t size;
        uint8_t msg[];
};

static void *udp_worker(void *userdata)
{
        struct udp_job *j = userdata;
        uint8_t out[NET_DNS_MSG_MAX];
        size_t n = 0;

        if (process(j->d, j->msg, j->size, out, sizeof(out), &n) >= 0) {
                if (n > DNS_UDP_MAX) {
                        struct net_dns_question qu;

                        if (net_dns_parse_query(j->msg, j->size, &qu) >= 0 &&
                            net_dns_build_error(j->msg, &qu, 0, out, sizeof(out), &n) >= 0)
                                out[2] |= 0x02; /* TC */
                }
                (void)sendto(j->d->udp_fd, out, n, MSG_NOSIGNAL, (struct sockaddr *)&j->peer,
                             j->peer_len);
        }
        worker_done(j->d);
        free(j);
        return NULL;
}

struct tcp_job {
        struct net_dns *d;
        int fd;
};

static int tcp_read(struct net_dns *d, int fd, uint8_t *buf, size_t n)
{
        size_t got = 0;
        unsigned waited = 0;

        while (got < n) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t k;

                if (atomic_load(&d->quit) || waited >= DNS_TCP_IDLE_MS)
                        return -ETIMEDOUT;
                if (poll(&p, 1, 500) == 0) {
                        waited += 500;
                        continue;
                }
                k = read(fd, buf + got, n - got);
                if (k <= 0)
                        return k == 0 ? -ECONNRESET : -errno;
                got += (size_t)k;
        }
        return 0;
}

static void *tcp_worker(void *userdata)
{
        struct tcp_job *j = userdata;
        uint8_t *q = malloc(NET_DNS_MSG_MAX), *out = malloc(NET_DNS_MSG_MAX + 2);

        while (q && out) {
                uint8_t hdr[2];
                size_t len, n = 0;

                if (tcp_read(j->d, j->fd, hdr, 2) < 0)
                        break;
                len = (size_t)hdr[0] << 8 | hdr[1];
                if (tcp_read(j->d, j->fd, q, len) < 0 ||
                    process(j->d, q, len, out + 2, NET_DNS_MSG_MAX, &n) < 0)
                        break;
                out[0] = (uint8_t)(n >> 8);
                out[1] = (uint8_t)n;
                if (fk_write_all(j->fd, out, n + 2) < 0)
                        break;
        }
        free(q);
        free(out);
        close(j->fd);
        worker_done(j->d);
        free(j);
        return NULL;
}

static void spawn_worker(struct net_dns *d, void *(*fn)(void *), void *job)
{
        pthread_attr_t attr;
        pthread_t t;
        bool ok;

        pthread_mutex_lock(&d->lock);
        ok = d->in_flight < DNS_MAX_IN_FLIGHT;
        if (ok)
                d->in_flight++;
        pthread_mutex_unlock(&d->lock);
        if (ok) {
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                ok = pthread_create(&t, &attr, fn, job) == 0;
                pthread_attr_destroy(&attr);
                if (!ok)
                        worker_done(d);
        }
        if (!ok) { /* overloaded: drop, the client retries */
                if (fn == tcp_worker)
                        close(((struct tcp_job *)job)->fd);
                free(job);
        }
}

static void serve_udp(struct net_dns *d)
{
        uint8_t buf[NET_DNS_MSG_MAX];
        struct udp_job *j;
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        ssize_t k =
                recvfrom(d->udp_fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&peer, &len);

        if (k <= 0 || !(j = malloc(sizeof(*j) + (size_t)k)))
                return;
        *j = (struct udp_job){.d = d, .peer = peer, .peer_len = len, .size = (size_t)k};
        memcpy(j->msg, buf, (size_t)k);
        spawn_worker(d, udp_worker, j);
}

static void serve_tcp(struct net_dns *d)
{
        int fd = accept4(d->tcp_fd, NULL, NULL, SOCK_CLOEXEC);
        struct tcp_job *j;

        if (fd < 0)
                return;
        j = malloc(sizeof(*j));
        if (!j) {
                close(fd);
                return;
        }
        *j = (struct tcp_job){.d = d, .fd = fd};
        spawn_worker(d, tcp_worker, j);
}

static void *server_thread(void *userdata)
{
        struct net_dns *d = userdata;

        while (!atomic_load(&d->quit)) {
                struct pollfd p[3] = {
                        {.fd = d->udp_fd, .events = POLLIN},
                        {.fd = d->tcp_fd, .events = POLLIN},
                        {.fd = d->stop_fd, .events = POLLIN},
                };

                if (poll(p, 3, -1) < 0 && errno != EINTR)
                        break;
                if (p[0].revents & POLLIN)
                        serve_udp(d);
                if (p[1].revents & POLLIN)
                        serve_tcp(d);
        }
        return NULL;
}

/* Runs inside the session netns (net_netns_run): the two listening sockets. */
static int open_sockets(void *userdata)
{
        struct net_dns *d = userdata;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
        int one = 1;

        inet_pton(AF_INET, NET_RESOLVER_IPV4, &sa.sin_addr);
        d->udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        d->tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (d->udp_fd < 0 || d->tcp_fd < 0)
                return -errno;
        (void)setsockopt(d->tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        (void)setsockopt(d->udp_fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
        (void)setsockopt(d->tcp_fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
        if (bind(d->udp_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            bind(d->tcp_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(d->tcp_fd, 64) < 0)
                return -errno;
        return 0;
}

/* After a re-attach the session holds the elements read back from the kernel: they become
 * the resolver's learned addresses again, so policy updates keep or drop them by name. */
static void seed_learned(struct net_dns *d)
{
        uint64_t now = fk_now_mono_ns();

        for (size_t i = 0; i < d->s->n_elems; i++) {
                const struct net_resolved_elem *x = &d->s->elems[i];
                struct net_dns_answer a = {.family = x->e.family};

                if (x->expire_ns <= now)
                        continue;
                memcpy(a.addr, x->e.addr, sizeof(a.addr));
                remember(d, x->e.name, &a, x->expire_ns);
                d->restoring = d->restoring || !x->e.name[0];
        }
}

int net_dns_start(struct net_session *s, const struct net_dns_config *c, struct net_dns **ret,
                  struct fk_error *reterr)
{
        struct net_dns *d = calloc(1, sizeof(*d));
        int r;

        if (!d)
                return fk_error_set(reterr, -ENOMEM, "out of memory");
        d->s = s;
        d->udp_fd = d->tcp_fd = -1;
        d->ttl_floor_s = c->ttl_floor_s ? c->ttl_floor_s : 30;
        d->open = s->n_allow == 0;
        seed_learned(d);
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->idle, NULL);
        d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        r = net_dns_upstreams_init(&d->up, c, reterr);
        if (r >= 0 && d->stop_fd < 0)
                r = fk_error_set(reterr, -errno, "eventfd: %m");
        if (r >= 0) {
                r = net_netns_run(s->nsfd, open_sockets, d);
                if (r < 0)
                        fk_error_set(reterr, r, "%s: listen on %s:53: %s", s->name,
                                     NET_RESOLVER_IPV4, strerror(-r));
        }
        if (r >= 0) {
                r = -pthread_create(&d->thread, NULL, server_thread, d);
                if (r < 0)
                        fk_error_set(reterr, r, "start resolver thread: %s", strerror(-r));
                d->thread_started = r >= 0;
        }
        if (r < 0) {
                net_dns_stop(d);
                return r;
        }
        *ret = d;
        return 0;
}

struct keep_ctx {
        struct net_dns *d;
        const struct net_dns_rule *rules;
        size_t n;
};

static bool rule_for(const struct keep_ctx *k, const char *name, uint16_t port)
{
        for (size_t j = 0; j < k->n; j++)
                if (k->rules[j].port == port &&
                    (name ? net_dns_name_matches(k->rules[j].name, k->rules[j].wildcard, name)
                          : true))
                        return true;
        return false;
}

/* A learned element survives a policy change when a still-allowed name (with the element's
 * port) produced it and its time has not run out; it is then tagged with that name. An
 * untagged one read back at re-attach survives only the re-attach's own policy (the spec it
 * was learned under), when that still has names on its port. */
static bool keep_elem(struct net_nft_elem *e, void *userdata)
{
        const struct keep_ctx *k = userdata;
        size_t len = e->family == AF_INET ? 4 : 16;
        uint64_t now = fk_now_mono_ns();
        bool untagged = false;

        for (size_t i = 0; i < k->d->n_learned; i++) {
                const struct learned *l = &k->d->learned[i];

                if (l->family != e->family || l->expire_ns <= now ||
                    memcmp(l->addr, e->addr, len) != 0)
                        continue;
                if (!l->name[0]) {
                        untagged = true;
                        continue;
                }
                if (rule_for(k, l->name, e->port)) {
                        if (!e->name[0] || !rule_for(k, e->name, e->port))
                                snprintf(e->name, sizeof(e->name), "%.*s", (int)sizeof(e->name) - 1,
                                         l->name);
                        return true;
                }
        }
        if (untagged && k->d->restoring && rule_for(k, NULL, e->port)) {
                e->name[0] = '\0';
                return true;
        }
        return false;
}

static int rules_copy(const struct net_dns_rule *rules, size_t n, struct net_dns_rule **ret)
{
        struct net_dns_rule *v = calloc(n + 1, sizeof(*v));

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                v[i] = rules[i];
                v[i].name = strdup(rules[i].name);
                if (!v[i].name) {
                        rules_free(v, i);
                        return -ENOMEM;
                }
        }
        *ret = v;
        return 0;
}

int net_dns_set_policy(struct net_dns *d, const struct net_dns_rule *rules, size_t n_rules,
                       const struct net_egress_policy *p, struct fk_error *reterr)
{
        struct net_dns_rule *copy = NULL;
        struct keep_ctx k = {.d = d, .rules = rules, .n = n_rules};
        int r;

        r = rules_copy(rules, n_rules, &copy);
        if (r < 0)
                return fk_error_set(reterr, r, "out of memory");
        pthread_mutex_lock(&d->lock);
        r = net_egress_update_keep(d->s, p, keep_elem, &k, reterr);
        if (r >= 0) {
                rules_free(d->rules, d->n_rules);
                d->rules = TAKE_PTR(copy);
                d->n_rules = n_rules;
                d->open = p->n_allow == 0;
                d->restoring = false;
        }
        pthread_mutex_unlock(&d->lock);
        rules_free(copy, n_rules);
        return r;
}

void net_dns_get_stats(struct net_dns *d, struct net_dns_stats *ret)
{
        pthread_mutex_lock(&d->lock);
        *ret = d->stats;
        pthread_mutex_unlock(&d->lock);
}

struct net_dns *net_dns_stop(struct net_dns *d)
{
        if (!d)
                return NULL;
        atomic_store(&d->quit, true);
        if (d->stop_fd >= 0)
                (void)eventfd_write(d->stop_fd, 1);
        if (d->thread_started)
                pthread_join(d->thread, NULL);
        pthread_mutex_lock(&d->lock);
        while (d->in_flight > 0)
                pthread_cond_wait(&d->idle, &d->lock);
        pthread_mutex_unlock(&d->lock);
        if (d->udp_fd >= 0)
                close(d->udp_fd);
        if (d->tcp_fd >= 0)
                close(d->tcp_fd);
        if (d->stop_fd >= 0)
                close(d->stop_fd);
        rules_free(d->rules, d->n_rules);
        free(d->learned);
        free(d->derived);
        free(d->up.addrs);
        free(d->up.lens);
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->idle);
        free(d);
        return NULL;
}
