/* SPDX-License-Identifier: MIT */
/* Parsing and formatting of IPv4/IPv6 networks (struct net_cidr). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

static bool host_bits_zero(const struct net_cidr *c)
{
        size_t len = c->family == AF_INET ? 4 : 16;

        for (size_t i = 0; i < len; i++) {
                unsigned bits = c->prefix_len > i * 8 ? c->prefix_len - i * 8 : 0;
                uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));

                if (c->addr[i] & ~mask)
                        return false;
        }
        return true;
}

int net_cidr_parse(const char *s, struct net_cidr *ret)
{
        struct net_cidr c = {};
        char buf[NET_ADDRSTRLEN + 1];
        const char *slash;
        size_t alen;
        unsigned maxlen;

        if (!s)
                return -EINVAL;
        slash = strchr(s, '/');
        alen = slash ? (size_t)(slash - s) : strlen(s);
        if (alen == 0 || alen >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, s, alen);
        buf[alen] = 0;
        if (inet_pton(AF_INET, buf, c.addr) == 1)
                c.family = AF_INET;
        else if (inet_pton(AF_INET6, buf, c.addr) == 1)
                c.family = AF_INET6;
        else
                return -EINVAL;
        maxlen = c.family == AF_INET ? 32 : 128;
        c.prefix_len = (uint8_t)maxlen;
        if (slash) {
                char *end;
                unsigned long n;

                if (slash[1] < '0' || slash[1] > '9')
                        return -EINVAL;
                n = strtoul(slash + 1, &end, 10);
                if (*end || n > maxlen)
                        return -EINVAL;
                c.prefix_len = (uint8_t)n;
                if (!host_bits_zero(&c))
                        return -EINVAL;
        }
        *ret = c;
        return 0;
}

char *net_cidr_format(const struct net_cidr *c, char *buf, size_t size)
{
        char a[NET_ADDRSTRLEN];

        if (!inet_ntop(c->family, c->addr, a, sizeof(a)))
                snprintf(a, sizeof(a), "?");
        snprintf(buf, size, "%s/%u", a, c->prefix_len);
        return buf;
}
