/* SPDX-License-Identifier: MIT */
/* Added TCP connect latency of the egress policy: a guest stand-in netns on a real session
 * network (bridge, veth uplink, NAT) connects to a server netns through each policy shape; open
 * egress is the baseline measured in the same run. Root; runs in its own netns (exit 77 else). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/socket.h>

#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

#define CONNECTS 300
#define SERVER   "192.0.2.2"

struct env {
        char state[64], inet[48], guest[48], session[48];
        int inet_fd, guest_fd, listen_fd;
        struct net_node_config node;
        struct net_session *s;
};

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static uint32_t ip4(const char *s)
{
        struct in_addr a;

        inet_pton(AF_INET, s, &a);
        return a.s_addr;
}

static void *acceptor(void *userdata)
{
        int lfd = *(int *)userdata;

        for (;;) {
                int fd = accept(lfd, NULL, NULL);

                if (fd < 0)
                        return NULL;
                close(fd);
        }
}

/* node <-> inet veth, the session, the guest stand-in on br0 and the server. */
static int env_setup(struct env *e, struct fk_error *err)
{
        struct nl_sock *node = NULL, *in = NULL, *gs = NULL, *ss = NULL;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
        struct net_session_config sc = {.node = &e->node, .name = e->session};
        int r;

        r = net_netns_create(e->inet, err);
        if (r >= 0)
                r = net_netns_create(e->guest, err);
        if (r < 0)
                return r;
        e->inet_fd = net_netns_open(e->inet);
        e->guest_fd = net_netns_open(e->guest);
        r = net_nl_open(-1, &node);
        if (r >= 0)
                r = net_nl_open(e->inet_fd, &in);
        if (r >= 0)
                r = net_nl_open(e->guest_fd, &gs);
        if (r >= 0 && (r = net_link_set_up(node, "lo")) >= 0 &&
            (r = net_link_add_veth(node, "bup", "eth0", e->inet_fd)) >= 0 &&
            (r = net_addr_add4(node, "bup", ip4("192.0.2.1"), 30)) >= 0 &&
            (r = net_link_set_up(node, "bup")) >= 0 &&
            (r = net_addr_add4(in, "eth0", ip4(SERVER), 30)) >= 0 &&
            (r = net_link_set_up(in, "eth0")) >= 0)
                r = net_session_setup(&sc, &e->s, err);
        if (r >= 0)
                r = net_nl_open(net_session_netns_fd(e->s), &ss);
        if (r >= 0 && (r = net_link_add_veth(ss, "gx", "eth0", e->guest_fd)) >= 0 &&
            (r = net_link_set_master(ss, "gx", NET_BRIDGE_NAME)) >= 0 &&
            (r = net_link_set_up(ss, "gx")) >= 0 &&
            (r = net_addr_add4(gs, "eth0", ip4(NET_GUEST_IPV4), 24)) >= 0 &&
            (r = net_link_set_up(gs, "eth0")) >= 0)
                r = net_route_default4(gs, ip4(NET_GATEWAY_IPV4));
        if (r >= 0)
                r = e->listen_fd = net_netns_socket(e->inet_fd, AF_INET, SOCK_STREAM, 0);
        sa.sin_addr.s_addr = ip4(SERVER);
        if (r >= 0 && (bind(e->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                       listen(e->listen_fd, 512) < 0))
                r = -errno;
        nl_socket_free(node);
        nl_socket_free(in);
        nl_socket_free(gs);
        nl_socket_free(ss);
        if (r < 0 && !err->msg[0])
                fk_error_set(err, r, "set up the bench network: %s", strerror(-r));
        return r;
}

static void env_teardown(struct env *e)
{
        struct fk_error err = {0};

        if (e->listen_fd >= 0) {
                shutdown(e->listen_fd, SHUT_RDWR);
                close(e->listen_fd);
        }
        if (e->s) {
                (void)net_session_teardown(e->s, &err);
                net_session_free(e->s);
        }
        if (e->inet_fd >= 0)
                close(e->inet_fd);
        if (e->guest_fd >= 0)
                close(e->guest_fd);
        (void)net_netns_delete(e->inet);
        (void)net_netns_delete(e->guest);
        (void)fk_rm_rf(e->state);
}

/* CONNECTS connects from the guest stand-in; median and p90 in microseconds. -ECONNREFUSED /
 * -ETIMEDOUT when the policy blocks the server. */
static int measure(struct env *e, double *ret_p50, double *ret_p90)
{
        static uint64_t t[CONNECTS];
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
        struct timeval tv = {.tv_sec = 2};

        sa.sin_addr.s_addr = ip4(SERVER);
        for (int i = 0; i < CONNECTS; i++) {
                int fd = net_netns_socket(e->guest_fd, AF_INET, SOCK_STREAM, 0);
                uint64_t t0;
                int r = 0;

                if (fd < 0)
                        return fd;
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                t0 = fk_now_mono_ns();
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                        r = errno == EINPROGRESS ? -ETIMEDOUT : -errno;
                t[i] = fk_now_mono_ns() - t0;
                close(fd);
                if (r < 0)
                        return r;
        }
        qsort(t, CONNECTS, sizeof(t[0]), cmp_u64);
        *ret_p50 = (double)t[CONNECTS / 2] / 1e3;
        *ret_p90 = (double)t[CONNECTS * 9 / 10] / 1e3;
        return 0;
}

/* n CIDR entries 100.64.x.y/32 before the server's own (the last one: worst case). */
static int policy_cidrs(struct env *e, size_t n)
{
        struct net_egress_entry *v = calloc(n + 1, sizeof(*v));
        struct net_egress_policy p = {.allow = v, .n_allow = n + 1};
        struct fk_error err = {0};
        int r;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint32_t a = htonl(0x64400000u + (uint32_t)i);

                v[i] = (struct net_egress_entry){.kind = NET_EGRESS_CIDR};
                v[i].cidr = (struct net_cidr){.family = AF_INET, .prefix_len = 32};
                memcpy(v[i].cidr.addr, &a, 4);
        }
        v[n].kind = NET_EGRESS_CIDR;
        r = net_cidr_parse(SERVER "/32", &v[n].cidr);
        if (r >= 0)
                r = net_egress_update(e->s, &p, &err);
        free(v);
        return r;
}

/* a name entry whose set holds n learned addresses, the server's among them */
static int policy_names(struct env *e, size_t n)
{
        struct net_egress_entry name = {.kind = NET_EGRESS_NAME};
        struct net_egress_policy p = {.allow = &name, .n_allow = 1};
        struct fk_error err = {0};
        uint32_t a = ip4(SERVER);
        int r;

        r = net_egress_update(e->s, &p, &err);
        for (size_t i = 1; i < n && r >= 0; i++) {
                uint32_t x = htonl(0x64400000u + (uint32_t)i);

                r = net_egress_allow_addr(e->s, AF_INET, &x, 600);
        }
        if (r >= 0)
                r = net_egress_allow_addr(e->s, AF_INET, &a, 600);
        return r;
}

static int run(struct env *e)
{
        static const struct {
                const char *label;
                int kind; /* 0 open, 1 cidrs, 2 names */
                size_t n;
        } shapes[] = {
                {"open egress (baseline)", 0, 0}, {"1 CIDR", 1, 0},
                {"100 CIDRs, match last", 1, 99}, {"1000 CIDRs, match last", 1, 999},
                {"name, set of 1", 2, 1},         {"name, set of 1000", 2, 1000},
                {"open egress (again)", 0, 0},
        };
        struct net_egress_policy open = {0};
        struct fk_error err = {0};
        double base = 0, w50, w90;
        int r;

        r = measure(e, &w50, &w90); /* warm-up: ARP, route and socket caches */

        printf("TCP connect latency from a guest stand-in through the session netns (%d "
               "connects each)\n\n",
               CONNECTS);
        printf("| policy                  | p50 us | p90 us | p50 vs open |\n");
        printf("|-------------------------|-------:|-------:|------------:|\n");
        for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]) && r >= 0; i++) {
                double p50 = 0, p90 = 0;

                if (shapes[i].kind == 0)
                        r = net_egress_update(e->s, &open, &err);
                else if (shapes[i].kind == 1)
                        r = policy_cidrs(e, shapes[i].n);
                else
                        r = policy_names(e, shapes[i].n);
                if (r >= 0)
                        r = measure(e, &p50, &p90);
                if (r < 0)
                        break;
                if (i == 0)
                        base = p50;
                printf("| %-23s | %6.0f | %6.0f | %10.2fx |\n", shapes[i].label, p50, p90,
                       base > 0 ? p50 / base : 0);
        }
        return r;
}

int main(void)
{
        struct env e = {.inet_fd = -1, .guest_fd = -1, .listen_fd = -1};
        struct fk_error err = {0};
        pthread_t t;
        int r;

        if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0) {
                fprintf(stderr, "bench-net-connect: SKIP: needs root (netns + nftables)\n");
                return 77;
        }
        snprintf(e.state, sizeof(e.state), "/tmp/fk-bench-net-%d", (int)getpid());
        snprintf(e.inet, sizeof(e.inet), "fkbc%d-inet", (int)getpid());
        snprintf(e.guest, sizeof(e.guest), "fkbc%d-g", (int)getpid());
        snprintf(e.session, sizeof(e.session), "fkbc%d-s", (int)getpid());
        e.node = (struct net_node_config){.state_dir = e.state,
                                          .uplink_pool = "198.18.0.0/16",
                                          .uplink_interface = "bup",
                                          .link_prefix = "bc"};
        r = fk_mkdir_p(e.state, 0700);
        if (r >= 0)
                r = env_setup(&e, &err);
        if (r >= 0)
                r = -pthread_create(&t, NULL, acceptor, &e.listen_fd);
        if (r >= 0) {
                r = run(&e);
                if (r < 0)
                        fk_error_set(&err, r, "measure: %s", strerror(-r));
        }
        env_teardown(&e);
        if (r < 0) {
                fprintf(stderr, "bench-net-connect: %s\n", err.msg);
                return 1;
        }
        return 0;
}
