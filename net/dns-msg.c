/* SPDX-License-Identifier: MIT */
/* DNS messages for the session resolver, pure: parse a query's question, build REFUSED and
 * SERVFAIL replies, collect the A/AAAA answers reachable from the question through CNAMEs,
 * and match names against the allow list (exact names and "*." wildcards). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "net/net-internal.h"

#define DNS_HEADER_SIZE  12
#define DNS_MAX_POINTERS 32

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

/* Reads the (possibly compressed) name at *off into text form, lowercased, without the trailing
 * dot ("" for the root). *off moves past the name as stored at that place. */
static int read_name(const uint8_t *msg, size_t size, size_t *off, char out[NET_DNS_NAME_MAX])
{
        size_t pos = *off, len = 0, end = 0;
        unsigned jumps = 0;

        for (;;) {
                uint8_t l;

                if (pos >= size)
                        return -EBADMSG;
                l = msg[pos];
                if ((l & 0xc0) == 0xc0) {
                        if (pos + 1 >= size || ++jumps > DNS_MAX_POINTERS)
                                return -EBADMSG;
                        if (!end)
                                end = pos + 2;
                        pos = (size_t)(l & 0x3f) << 8 | msg[pos + 1];
                        continue;
                }
                if (l & 0xc0)
                        return -EBADMSG;
                if (l == 0) {
                        if (!end)
                                end = pos + 1;
                        break;
                }
                if (pos + 1 + l > size || len + l + 2 > NET_DNS_NAME_MAX)
                        return -EBADMSG;
                if (len)
                        out[len++] = '.';
                for (uint8_t i = 0; i < l; i++) {
                        char ch = (char)msg[pos + 1 + i];

                        if (ch == '.' || ch == '\0')
                                return -EBADMSG; /* cannot be represented in text form */
                        out[len++] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
                }
                pos += 1 + l;
        }
        out[len] = '\0';
        *off = end;
        return 0;
}

int net_dns_parse_query(const uint8_t *msg, size_t size, struct net_dns_question *ret)
{
        struct net_dns_question q = {0};
        size_t off = DNS_HEADER_SIZE;
        int r;

        if (size < DNS_HEADER_SIZE)
                return -EBADMSG;
        q.id = get16(msg);
        q.flags = get16(msg + 2);
        if (q.flags & 0x8000 || ((q.flags >> 11) & 0xf) != 0 || get16(msg + 4) != 1)
                return -EBADMSG; /* a response, not QUERY, or not exactly one question */
        r = read_name(msg, size, &off, q.name);
        if (r < 0)
                return r;
        if (off + 4 > size)
                return -EBADMSG;
        q.qtype = get16(msg + off);
        q.qclass = get16(msg + off + 2);
        q.end = off + 4;
        *ret = q;
        return 0;
}

int net_dns_build_error(const uint8_t *query, const struct net_dns_question *q, uint8_t rcode,
                        uint8_t *out, size_t out_size, size_t *ret_size)
{
        uint16_t flags;

        if (q->end > out_size || q->end < DNS_HEADER_SIZE)
                return -ENOBUFS;
        memcpy(out, query, q->end);
        /* QR, the query's opcode and RD, RA; rcode */
        flags = (uint16_t)(0x8000 | (q->flags & 0x7900) | 0x0080 | (rcode & 0xf));
        put16(out + 2, flags);
        put16(out + 4, 1);
        put16(out + 6, 0);
        put16(out + 8, 0);
        put16(out + 10, 0);
        *ret_size = q->end;
        return 0;
}

static bool in_chain(char (*chain)[NET_DNS_NAME_MAX], size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(chain[i], name) == 0)
                        return true;
        return false;
}

struct rr {
        char owner[NET_DNS_NAME_MAX];
        uint16_t type, class;
        uint32_t ttl;
        size_t rdata, rdlen;
};

static int read_rr(const uint8_t *msg, size_t size, size_t *off, struct rr *rr)
{
        int r = read_name(msg, size, off, rr->owner);

        if (r < 0)
                return r;
        if (*off + 10 > size)
                return -EBADMSG;
        rr->type = get16(msg + *off);
        rr->class = get16(msg + *off + 2);
        rr->ttl = get32(msg + *off + 4);
        rr->rdlen = get16(msg + *off + 8);
        rr->rdata = *off + 10;
        if (rr->rdata + rr->rdlen > size)
                return -EBADMSG;
        *off = rr->rdata + rr->rdlen;
        return 0;
}

/* One pass over the answer section: extends the chain through CNAMEs and collects addresses of
 * chain members. Returns 1 when the chain grew (another pass may find more). */
static int answer_pass(const uint8_t *msg, size_t size, size_t start, unsigned ancount,
                       char (*chain)[NET_DNS_NAME_MAX], size_t *n_chain, struct net_dns_answer *ret,
                       size_t max, size_t *ret_n)
{
        size_t off = start;
        int grew = 0, r;

        for (unsigned i = 0; i < ancount; i++) {
                struct rr rr;

                r = read_rr(msg, size, &off, &rr);
                if (r < 0)
                        return r;
                if (rr.class != NET_DNS_CLASS_IN || !in_chain(chain, *n_chain, rr.owner))
                        continue;
                if (rr.type == NET_DNS_TYPE_CNAME) {
                        size_t p = rr.rdata;

                        if (*n_chain >= NET_DNS_CHAIN_MAX)
                                continue;
                        r = read_name(msg, size, &p, chain[*n_chain]);
                        if (r < 0)
                                return r;
                        if (!in_chain(chain, *n_chain, chain[*n_chain])) {
                                (*n_chain)++;
                                grew = 1;
                        }
                        continue;
                }
                if (grew || *ret_n >= max)
                        continue; /* collected on the final pass */
                if ((rr.type == NET_DNS_TYPE_A && rr.rdlen == 4) ||
                    (rr.type == NET_DNS_TYPE_AAAA && rr.rdlen == 16)) {
                        struct net_dns_answer *a = &ret[(*ret_n)++];

                        *a = (struct net_dns_answer){
                                .family = rr.type == NET_DNS_TYPE_A ? AF_INET : AF_INET6,
                                .ttl = rr.ttl,
                        };
                        memcpy(a->addr, msg + rr.rdata, rr.rdlen);
                }
        }
        return grew;
}

int net_dns_parse_answers(const uint8_t *msg, size_t size, const char *qname,
                          struct net_dns_answer *ret, size_t max, size_t *ret_n,
                          char (*ret_chain)[NET_DNS_NAME_MAX], size_t *ret_n_chain)
{
        char chain[NET_DNS_CHAIN_MAX][NET_DNS_NAME_MAX];
        size_t off = DNS_HEADER_SIZE, n_chain = 1, n = 0;
        unsigned qdcount, ancount;
        int r;

        if (size < DNS_HEADER_SIZE || strlen(qname) >= NET_DNS_NAME_MAX)
                return -EBADMSG;
        qdcount = get16(msg + 4);
        ancount = get16(msg + 6);
        for (unsigned i = 0; i < qdcount; i++) {
                char name[NET_DNS_NAME_MAX];

                r = read_name(msg, size, &off, name);
                if (r < 0)
                        return r;
                if (off + 4 > size)
                        return -EBADMSG;
                off += 4;
        }
        snprintf(chain[0], sizeof(chain[0]), "%s", qname);
        /* CNAMEs may come in any order; repeat until the chain stops growing. */
        for (unsigned pass = 0; pass <= NET_DNS_CHAIN_MAX; pass++) {
                n = 0;
                r = answer_pass(msg, size, off, ancount, chain, &n_chain, ret, max, &n);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
        }
        *ret_n = n;
        if (ret_chain) {
                memcpy(ret_chain, chain, n_chain * sizeof(chain[0]));
                *ret_n_chain = n_chain;
        }
        return 0;
}

uint8_t net_dns_rcode(const uint8_t *msg, size_t size)
{
        return size < DNS_HEADER_SIZE ? 0xff : (uint8_t)(msg[3] & 0xf);
}

int net_dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out,
                        size_t out_size, size_t *ret_size)
{
        size_t off = DNS_HEADER_SIZE;
        const char *p = name;

        if (out_size < DNS_HEADER_SIZE + strlen(name) + 6)
                return -ENOBUFS;
        memset(out, 0, DNS_HEADER_SIZE);
        put16(out, id);
        put16(out + 2, 0x0100); /* RD */
        put16(out + 4, 1);
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);

                if (l == 0 || l > 63)
                        return -EINVAL;
                out[off++] = (uint8_t)l;
                memcpy(out + off, p, l);
                off += l;
                p += l + (dot ? 1 : 0);
        }
        out[off++] = 0;
        put16(out + off, qtype);
        put16(out + off + 2, NET_DNS_CLASS_IN);
        *ret_size = off + 4;
        return 0;
}

bool net_dns_name_matches(const char *pattern, bool wildcard, const char *name)
{
        size_t pl = strlen(pattern), nl = strlen(name);

        if (!wildcard)
                return strcasecmp(pattern, name) == 0;
        /* "*.example.com" matches subdomains only: "a.example.com", not "example.com" */
        return nl > pl + 1 && name[nl - pl - 1] == '.' && strcasecmp(name + nl - pl, pattern) == 0;
}

const char *net_dns_effective_name(const struct net_dns_rule *rules, size_t n_rules,
                                   const struct net_dns_derived *derived, size_t n_derived,
                                   const char *qname, uint64_t now_ns)
{
        for (size_t i = 0; i < n_rules; i++)
                if (net_dns_name_matches(rules[i].name, rules[i].wildcard, qname))
                        return qname;
        for (size_t i = 0; i < n_derived; i++) {
                if (derived[i].expire_ns <= now_ns || strcmp(derived[i].name, qname) != 0)
                        continue;
                for (size_t k = 0; k < n_rules; k++)
                        if (net_dns_name_matches(rules[k].name, rules[k].wildcard,
                                                 derived[i].origin))
                                return derived[i].origin;
        }
        return NULL;
}
