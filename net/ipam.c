/* SPDX-License-Identifier: MIT */
/* Uplink IPAM: one /30 per session out of the node's pool. Leases live in <dir>/ipam (one
 * "SLOT OWNER" line each), changed under flock and replaced atomically, so they survive
 * forkletd's restarts. Not fsynced: a lease names a veth of a running session, which a crash of
 * the host ends too, and the sessions of a fan-out took the lock one fsync after the other (up
 * to 370 ms each of a fork of 30 waited for it, right after 30 sessions were deleted). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

#define IPAM_HEADER   "# forklet uplink leases v1: SLOT OWNER\n"
#define IPAM_MAX_FILE (4 * 1024 * 1024)

int net_ipam_pool_parse(const char *cidr, struct net_ipam_pool *ret)
{
        struct net_cidr c;
        uint32_t base;
        int r;

        r = net_cidr_parse(cidr, &c);
        if (r < 0)
                return r;
        if (c.family != AF_INET || c.prefix_len < 8 || c.prefix_len > 32 - NET_IPAM_SLOT_BITS)
                return -EINVAL;
        memcpy(&base, c.addr, sizeof(base));
        *ret = (struct net_ipam_pool){
                .base = ntohl(base),
                .prefix_len = c.prefix_len,
                .n_slots = 1u << (32 - c.prefix_len - NET_IPAM_SLOT_BITS),
        };
        return 0;
}

void net_ipam_slot_addrs(const struct net_ipam_pool *pool, uint32_t slot, uint32_t *ret_host,
                         uint32_t *ret_netns)
{
        uint32_t net = pool->base + (slot << NET_IPAM_SLOT_BITS);

        if (ret_host)
                *ret_host = net + 1;
        if (ret_netns)
                *ret_netns = net + 2;
}

static int lease_push(struct net_ipam_lease **v, size_t *n, uint32_t slot, const char *owner)
{
        struct net_ipam_lease *nv;

        if (strlen(owner) >= sizeof(nv->owner))
                return -EINVAL;
        nv = realloc(*v, (*n + 1) * sizeof(*nv));
        if (!nv)
                return -ENOMEM;
        *v = nv;
        nv[*n].slot = slot;
        strcpy(nv[*n].owner, owner);
        (*n)++;
        return 0;
}

int net_ipam_parse(const char *text, struct net_ipam_lease **ret, size_t *ret_n)
{
        cleanup_free struct net_ipam_lease *v = NULL;
        size_t n = 0;
        const char *p = text;
        int r;

        while (p && *p) {
                const char *eol = strchrnul(p, '\n');
                char line[128], owner[128];
                unsigned long slot;
                int used = 0;

                if ((size_t)(eol - p) >= sizeof(line))
                        return -EBADMSG;
                memcpy(line, p, eol - p);
                line[eol - p] = 0;
                p = *eol ? eol + 1 : eol;
                if (line[0] == '#' || line[0] == 0)
                        continue;
                if (sscanf(line, "%lu %127s%n", &slot, owner, &used) != 2 || line[used] != 0 ||
                    slot > UINT32_MAX || !net_name_valid(owner))
                        return -EBADMSG;
                for (size_t i = 0; i < n; i++)
                        if (v[i].slot == slot || strcmp(v[i].owner, owner) == 0)
                                return -EBADMSG;
                r = lease_push(&v, &n, slot, owner);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

int net_ipam_format(const struct net_ipam_lease *l, size_t n, char **ret)
{
        size_t size = sizeof(IPAM_HEADER) + n * (12 + sizeof(l->owner));
        cleanup_free char *buf = malloc(size);
        size_t off;

        if (!buf)
                return -ENOMEM;
        off = (size_t)snprintf(buf, size, "%s", IPAM_HEADER);
        for (size_t i = 0; i < n; i++)
                off += (size_t)snprintf(buf + off, size - off, "%u %s\n", l[i].slot, l[i].owner);
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Locks <dir>/ipam.lock exclusively; the lock goes with the returned fd. */
static int ipam_lock(const char *dir)
{
        cleanup_free char *path = NULL;
        int fd, r;

        r = fk_mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        if (fk_asprintf(&path, "%s/ipam.lock", dir) < 0)
                return -ENOMEM;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static int ipam_load(const char *dir, struct net_ipam_lease **ret, size_t *ret_n)
{
        cleanup_free char *path = NULL, *text = NULL;
        int r;

        if (fk_asprintf(&path, "%s/ipam", dir) < 0)
                return -ENOMEM;
        r = fk_read_file(path, IPAM_MAX_FILE, &text, NULL);
        if (r == -ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return r;
        return net_ipam_parse(text, ret, ret_n);
}

static int ipam_store(const char *dir, const struct net_ipam_lease *l, size_t n)
{
        cleanup_free char *path = NULL, *text = NULL;
        int r;

        if (fk_asprintf(&path, "%s/ipam", dir) < 0)
                return -ENOMEM;
        r = net_ipam_format(l, n, &text);
        if (r < 0)
                return r;
        return fk_write_file_replace(path, text, strlen(text), 0600);
}

static bool slot_busy(const struct net_ipam_pool *pool, uint32_t slot,
                      const struct net_ipam_lease *l, size_t n, const uint32_t *in_use,
                      size_t n_in_use)
{
        uint32_t net = pool->base + (slot << NET_IPAM_SLOT_BITS);

        for (size_t i = 0; i < n; i++)
                if (l[i].slot == slot)
                        return true;
        for (size_t i = 0; i < n_in_use; i++)
                if ((in_use[i] & ~((1u << NET_IPAM_SLOT_BITS) - 1)) == net)
                        return true;
        return false;
}

int net_ipam_acquire(const char *dir, const struct net_ipam_pool *pool, const char *owner,
                     const uint32_t *in_use, size_t n_in_use, uint32_t *ret_slot)
{
        cleanup_close int lock = -1;
        cleanup_free struct net_ipam_lease *l = NULL;
        size_t n = 0;
        int r;

        if (!net_name_valid(owner) || strlen(owner) >= sizeof(l->owner))
                return -EINVAL;
        lock = ipam_lock(dir);
        if (lock < 0)
                return lock;
        r = ipam_load(dir, &l, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (strcmp(l[i].owner, owner) == 0) {
                        *ret_slot = l[i].slot;
                        return 0;
                }
        for (uint32_t slot = 0; slot < pool->n_slots; slot++) {
                if (slot_busy(pool, slot, l, n, in_use, n_in_use))
                        continue;
                r = lease_push(&l, &n, slot, owner);
                if (r < 0)
                        return r;
                r = ipam_store(dir, l, n);
                if (r < 0)
                        return r;
                *ret_slot = slot;
                return 0;
        }
        return -ENOSPC;
}

int net_ipam_lookup(const char *dir, const char *owner, uint32_t *ret_slot)
{
        cleanup_close int lock = -1;
        cleanup_free struct net_ipam_lease *l = NULL;
        size_t n = 0;
        int r;

        lock = ipam_lock(dir);
        if (lock < 0)
                return lock;
        r = ipam_load(dir, &l, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (strcmp(l[i].owner, owner) == 0) {
                        *ret_slot = l[i].slot;
                        return 0;
                }
        return -ENOENT;
}

int net_ipam_release(const char *dir, const char *owner)
{
        cleanup_close int lock = -1;
        cleanup_free struct net_ipam_lease *l = NULL;
        size_t n = 0, j = 0;
        int r;

        lock = ipam_lock(dir);
        if (lock < 0)
                return lock;
        r = ipam_load(dir, &l, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (strcmp(l[i].owner, owner) != 0)
                        l[j++] = l[i];
        if (j == n)
                return 0;
        return ipam_store(dir, l, j);
}

int net_ipam_list(const char *dir, struct net_ipam_lease **ret, size_t *ret_n)
{
        cleanup_close int lock = -1;

        lock = ipam_lock(dir);
        if (lock < 0)
                return lock;
        return ipam_load(dir, ret, ret_n);
}
