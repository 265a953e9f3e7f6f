/* SPDX-License-Identifier: MIT */
/* Egress rule-apply benchmark: builds and applies (one nftables transaction, replacing the table)
 * the session policy with 1, 100 and 1000 allow entries in a throwaway netns; prints medians and
 * the ratio to the 1-entry baseline measured in the same run. Root; exits 77 otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

#define REPS 15

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp_u64);
        return v[n / 2];
}

/* n entries: 100.64.0.0 + i as /32, every fourth one restricted to port 443 */
static struct net_egress_entry *entries(size_t n)
{
        struct net_egress_entry *v = calloc(n, sizeof(*v));

        for (size_t i = 0; v && i < n; i++) {
                uint32_t a = htonl(0x64400000u + (uint32_t)i);

                v[i].kind = NET_EGRESS_CIDR;
                v[i].cidr.family = AF_INET;
                v[i].cidr.prefix_len = 32;
                memcpy(v[i].cidr.addr, &a, 4);
                v[i].port = i % 4 == 3 ? 443 : 0;
        }
        return v;
}

static int measure(int nsfd, size_t n, uint64_t *ret_build, uint64_t *ret_apply, uint32_t *ret_msgs)
{
        struct net_egress_entry *allow = entries(n);
        struct net_egress_policy pol = {.allow = allow, .n_allow = n};
        struct net_cidr pool;
        struct net_nft_session_params p = {.table = NET_NFT_TABLE, .policy = &pol, .pool = &pool};
        uint64_t build[REPS], apply[REPS];
        int r = 0;

        if (!allow || net_cidr_parse("198.18.0.0/16", &pool) < 0)
                return -ENOMEM;
        for (int i = 0; i < REPS && r >= 0; i++) {
                struct net_nft_batch b;
                uint64_t t0 = fk_now_mono_ns(), t1;

                r = net_nft_build_session(&p, 1, &b);
                if (r < 0)
                        break;
                t1 = fk_now_mono_ns();
                r = net_nft_send(nsfd, &b);
                apply[i] = fk_now_mono_ns() - t1;
                build[i] = t1 - t0;
                *ret_msgs = b.n_msgs;
                net_nft_batch_done(&b);
        }
        free(allow);
        if (r < 0)
                return r;
        *ret_build = median(build, REPS);
        *ret_apply = median(apply, REPS);
        return 0;
}

int main(void)
{
        static const size_t sizes[] = {1, 100, 1000};
        char name[64];
        uint64_t base = 0;
        struct fk_error err = {};
        int nsfd, r = 0;

        if (geteuid() != 0) {
                fprintf(stderr, "bench-net: SKIP: needs root (netns + nftables)\n");
                return 77;
        }
        snprintf(name, sizeof(name), "fkbench-%d", (int)getpid());
        if (net_netns_create(name, &err) < 0) {
                fprintf(stderr, "bench-net: %s\n", err.msg);
                return 1;
        }
        nsfd = net_netns_open(name);
        printf("egress rule apply (one transaction replacing table inet %s), median of %d\n\n",
               NET_NFT_TABLE, REPS);
        printf("| allow entries | nft messages | build ms | apply ms | total ms | vs 1 entry |\n");
        printf("|--------------:|-------------:|---------:|---------:|---------:|-----------:|\n");
        for (size_t i = 0; i < 3 && nsfd >= 0 && r >= 0; i++) {
                uint64_t build, apply;
                uint32_t msgs = 0;

                r = measure(nsfd, sizes[i], &build, &apply, &msgs);
                if (r < 0)
                        break;
                if (i == 0)
                        base = build + apply;
                printf("| %13zu | %12u | %8.3f | %8.3f | %8.3f | %9.1fx |\n", sizes[i], msgs,
                       build / 1e6, apply / 1e6, (build + apply) / 1e6,
                       (double)(build + apply) / (double)(base ? base : 1));
        }
        if (nsfd >= 0)
                close(nsfd);
        (void)net_netns_delete(name);
        if (nsfd < 0 || r < 0) {
                fprintf(stderr, "bench-net: %s\n", strerror(nsfd < 0 ? -nsfd : -r));
                return 1;
        }
        return 0;
}
