/* SPDX-License-Identifier: MIT */
/* Live egress policy of a session: apply and replace the nftables table atomically, and add
 * resolver-allowed addresses with a timeout (remembered so a policy update keeps them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

void net_session_policy(const struct net_session *s, struct net_egress_policy *ret)
{
        *ret = (struct net_egress_policy){
                .allow = s->allow,
                .n_allow = s->n_allow,
                .deny = s->deny,
                .n_deny = s->n_deny,
                .ipv6 = s->ipv6,
        };
}

static void *memdup_array(const void *p, size_t n, size_t size)
{
        void *q;

        if (n == 0)
                return calloc(1, 1);
        q = calloc(n, size);
        if (q)
                memcpy(q, p, n * size);
        return q;
}

int net_session_set_policy(struct net_session *s, const struct net_egress_policy *p)
{
        struct net_egress_entry *allow;
        struct net_cidr *deny;

        allow = memdup_array(p->allow, p->n_allow, sizeof(*allow));
        deny = memdup_array(p->deny, p->n_deny, sizeof(*deny));
        if (!allow || !deny) {
                free(allow);
                free(deny);
                return -ENOMEM;
        }
        free(s->allow);
        free(s->deny);
        s->allow = allow;
        s->n_allow = p->n_allow;
        s->deny = deny;
        s->n_deny = p->n_deny;
        s->ipv6 = p->ipv6;
        return 0;
}

/* Live resolver elements with their remaining timeout; drops expired ones from s. */
static int live_elems(struct net_session *s, struct net_nft_elem **ret, size_t *ret_n)
{
        uint64_t now = fk_now_mono_ns();
        struct net_nft_elem *v = calloc(s->n_elems + 1, sizeof(*v));
        size_t n = 0, j = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_elems; i++) {
                uint64_t left_ms;

                if (s->elems[i].expire_ns <= now + 1000000)
                        continue;
                left_ms = (s->elems[i].expire_ns - now) / 1000000;
                s->elems[j++] = s->elems[i];
                v[n] = s->elems[i].e;
                v[n++].timeout_ms = left_ms;
        }
        s->n_elems = j;
        *ret = v;
        *ret_n = n;
        return 0;
}

int net_session_apply_egress(struct net_session *s)
{
        cleanup_free struct net_nft_elem *elems = NULL;
        struct net_egress_policy pol;
        struct net_nft_session_params p;
        struct net_nft_batch b;
        size_t n_elems = 0;
        int r;

        r = live_elems(s, &elems, &n_elems);
        if (r < 0)
                return r;
        net_session_policy(s, &pol);
        p = (struct net_nft_session_params){
                .table = NET_NFT_TABLE,
                .policy = &pol,
                .pool = &s->node.pool_cidr,
                .elems = elems,
                .n_elems = n_elems,
        };
        r = net_nft_build_session(&p, ++s->seq, &b);
        if (r < 0)
                return r;
        s->seq = b.seq_next;
        r = net_nft_send(s->nsfd, &b);
        net_nft_batch_done(&b);
        return r;
}

int net_egress_update(struct net_session *s, const struct net_egress_policy *p,
                      struct fk_error *reterr)
{
        struct net_egress_policy old;
        struct net_session saved;
        int r;

        /* keep the old copy until the kernel took the new table */
        net_session_policy(s, &old);
        saved = *s;
        s->allow = NULL;
        s->deny = NULL;
        r = net_session_set_policy(s, p);
        if (r < 0) {
                s->allow = saved.allow;
                s->deny = saved.deny;
                return fk_error_set(reterr, r, "out of memory");
        }
        r = net_session_apply_egress(s);
        if (r < 0) {
                free(s->allow);
                free(s->deny);
                s->allow = saved.allow;
                s->n_allow = old.n_allow;
                s->deny = saved.deny;
                s->n_deny = old.n_deny;
                s->ipv6 = old.ipv6;
                return fk_error_set(reterr, r, "%s: apply egress policy: %s", s->name,
                                    strerror(-r));
        }
        free(saved.allow);
        free(saved.deny);
        return 0;
}

int net_egress_update_keep(struct net_session *s, const struct net_egress_policy *p,
                           bool (*keep)(struct net_nft_elem *e, void *ud), void *ud,
                           struct fk_error *reterr)
{
        size_t j = 0;

        for (size_t i = 0; keep && i < s->n_elems; i++)
                if (keep(&s->elems[i].e, ud))
                        s->elems[j++] = s->elems[i];
        if (keep)
                s->n_elems = j;
        return net_egress_update(s, p, reterr);
}

static bool policy_has_set(const struct net_session *s, int family, uint16_t port)
{
        if (family == AF_INET6 && !s->ipv6)
                return false;
        for (size_t i = 0; i < s->n_allow; i++)
                if (s->allow[i].kind == NET_EGRESS_NAME && s->allow[i].port == port)
                        return true;
        return false;
}

static int remember_elem(struct net_session *s, const struct net_nft_elem *e, uint64_t now)
{
        uint64_t expire = now + e->timeout_ms * 1000000ULL;
        struct net_resolved_elem *v;
        size_t len = e->family == AF_INET ? 4 : 16;

        for (size_t i = 0; i < s->n_elems; i++) {
                struct net_resolved_elem *x = &s->elems[i];

                if (x->e.family == e->family && x->e.port == e->port &&
                    memcmp(x->e.addr, e->addr, len) == 0) {
                        x->expire_ns = FK_MAX(x->expire_ns, expire);
                        return 0;
                }
        }
        v = realloc(s->elems, (s->n_elems + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        s->elems = v;
        v[s->n_elems++] = (struct net_resolved_elem){.e = *e, .expire_ns = expire};
        return 0;
}

int net_session_remember(struct net_session *s, const struct net_nft_elem *v, size_t n)
{
        uint64_t now = fk_now_mono_ns();
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++)
                r = remember_elem(s, &v[i], now);
        return r;
}

/* Does a rule with port match name (untagged: any rule with port)? */
static bool rules_match(const struct net_dns_rule *rules, size_t n_rules, const char *name,
                        uint16_t port)
{
        for (size_t j = 0; j < n_rules; j++)
                if (rules[j].port == port &&
                    (!name[0] || net_dns_name_matches(rules[j].name, rules[j].wildcard, name)))
                        return true;
        return false;
}

size_t net_restore_filter(struct net_nft_elem *v, size_t n, const struct net_dns_rule *rules,
                          size_t n_rules)
{
        size_t j = 0;

        for (size_t i = 0; i < n; i++) {
                bool dup = false;

                for (size_t k = 0; k < j && !dup; k++) /* one per (family, port, address) */
                        dup = v[k].family == v[i].family && v[k].port == v[i].port &&
                              memcmp(v[k].addr, v[i].addr, sizeof(v[k].addr)) == 0;
                if (!dup && v[i].timeout_ms > 0 &&
                    rules_match(rules, n_rules, v[i].name, v[i].port))
                        v[j++] = v[i];
        }
        return j;
}

int net_egress_allow_addr_named(struct net_session *s, const char *name, int family,
                                const void *addr, uint16_t port, uint32_t ttl_s)
{
        struct net_nft_elem e = {.family = family, .port = port};
        struct net_nft_batch b;
        int r;

        if ((family != AF_INET && family != AF_INET6) || !addr || ttl_s == 0)
                return -EINVAL;
        if (s->n_allow == 0 || (family == AF_INET6 && !s->ipv6))
                return 0; /* open egress, or IPv6 dropped anyway */
        if (!policy_has_set(s, family, port))
                return -ENOENT;
        memcpy(e.addr, addr, family == AF_INET ? 4 : 16);
        e.timeout_ms = (uint64_t)ttl_s * 1000;
        if (name)
                snprintf(e.name, sizeof(e.name), "%s", name);
        r = net_nft_build_elem(NET_NFT_TABLE, &e, ++s->seq, &b);
        if (r < 0)
                return r;
        s->seq = b.seq_next;
        r = net_nft_send(s->nsfd, &b);
        net_nft_batch_done(&b);
        if (r < 0)
                return r;
        return remember_elem(s, &e, fk_now_mono_ns());
}

int net_egress_allow_addr_port(struct net_session *s, int family, const void *addr, uint16_t port,
                               uint32_t ttl_s)
{
        return net_egress_allow_addr_named(s, NULL, family, addr, port, ttl_s);
}

int net_egress_allow_addr(struct net_session *s, int family, const void *addr, uint32_t ttl_s)
{
        return net_egress_allow_addr_port(s, family, addr, 0, ttl_s);
}
