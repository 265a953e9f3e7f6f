/* SPDX-License-Identifier: MIT */
/* Test driver for the net module: runs one operation (setup, update, allow-addr, teardown,
 * orphans) through the public API so shell tests can check the result with ip and nft. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "net/net.h"

#define MAX_ENTRIES 4096

struct tool {
        struct net_node_config node;
        struct net_egress_entry allow[MAX_ENTRIES];
        struct net_cidr deny[64];
        size_t n_allow, n_deny;
        bool ipv6;
};

/* "name:HOST[:PORT]", "CIDR[:PORT]" (v4) or "[CIDR]:PORT" / "CIDR" (v6). */
static int parse_entry(const char *s, struct net_egress_entry *e)
{
        char buf[128];
        char *port = NULL;

        *e = (struct net_egress_entry){};
        if (strlen(s) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, s);
        if (strncmp(buf, "name:", 5) == 0) {
                e->kind = NET_EGRESS_NAME;
                port = strchr(buf + 5, ':');
                e->port = port ? (uint16_t)atoi(port + 1) : 0;
                return 0;
        }
        e->kind = NET_EGRESS_CIDR;
        if (buf[0] == '[') {
                char *close = strchr(buf, ']');

                if (!close || close[1] != ':')
                        return -EINVAL;
                *close = 0;
                e->port = (uint16_t)atoi(close + 2);
                return net_cidr_parse(buf + 1, &e->cidr);
        }
        if (strchr(buf, '.') && (port = strchr(buf, ':'))) {
                *port = 0;
                e->port = (uint16_t)atoi(port + 1);
        }
        return net_cidr_parse(buf, &e->cidr);
}

static int parse_opts(struct tool *t, int argc, char **argv)
{
        static const struct option opts[] = {
                {"state", required_argument, NULL, 's'},
                {"pool", required_argument, NULL, 'p'},
                {"uplink", required_argument, NULL, 'u'},
                {"prefix", required_argument, NULL, 'x'},
                {"deny", required_argument, NULL, 'd'},
                {"ipv6", no_argument, NULL, '6'},
                {},
        };
        int c;

        t->node.uplink_pool = "198.18.0.0/16";
        while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        t->node.state_dir = optarg;
                        break;
                case 'p':
                        t->node.uplink_pool = optarg;
                        break;
                case 'u':
                        t->node.uplink_interface = optarg;
                        break;
                case 'x':
                        t->node.link_prefix = optarg;
                        break;
                case 'd':
                        if (t->n_deny >= 64 || net_cidr_parse(optarg, &t->deny[t->n_deny++]) < 0)
                                return -EINVAL;
                        break;
                case '6':
                        t->ipv6 = true;
                        break;
                default:
                        return -EINVAL;
                }
        }
        return optind;
}

/* Runs argv in a child that joins the session netns with net_join_netns (as QEMU's pre-exec
 * hook does); returns the child's exit status or -errno. */
static int exec_in(struct net_session *s, char **argv)
{
        int status, nsfd = net_session_netns_fd(s);
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (net_join_netns(nsfd) < 0)
                        _exit(126);
                execvp(argv[0], argv);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

static int run(struct tool *t, const char *verb, const char *name, char **rest, int n_rest)
{
        struct net_session_config c = {.node = &t->node, .name = name};
        struct net_session *s = NULL;
        struct fk_error err = {};
        int r;

        if (strcmp(verb, "orphans") == 0) {
                r = net_cleanup_orphans(&t->node, name, rest, &err);
                if (r >= 0)
                        printf("removed %d\n", r);
                goto out;
        }
        char **extra = rest + n_rest;
        int n_extra = 0;

        for (int i = 0; i < n_rest; i++)
                if (strcmp(rest[i], "--") == 0) {
                        extra = rest + i + 1;
                        n_extra = n_rest - i - 1;
                        n_rest = i;
                }
        for (int i = 0; i < n_rest; i++)
                if (t->n_allow >= MAX_ENTRIES || parse_entry(rest[i], &t->allow[t->n_allow++]))
                        return fprintf(stderr, "bad allow entry %s\n", rest[i]), 2;
        c.egress = (struct net_egress_policy){t->allow, t->n_allow, t->deny, t->n_deny, t->ipv6};
        r = net_session_setup(&c, &s, &err);
        if (r < 0)
                goto out;
        if (strcmp(verb, "setup") == 0) {
                printf("netns=%s host_if=%s uplink_host=%s uplink_netns=%s\n", net_session_name(s),
                       net_session_host_ifname(s), net_session_uplink_host(s),
                       net_session_uplink_netns(s));
        } else if (strcmp(verb, "update") == 0) {
                r = net_egress_update(s, &c.egress, &err);
        } else if (strcmp(verb, "allow-addr") == 0 && n_extra >= 2) {
                /* allow-addr ADDR TTL [PORT]: ADDR/PORT must be in a name entry of the policy */
                uint8_t a[16];
                int fam = strchr(extra[0], ':') ? AF_INET6 : AF_INET;
                uint16_t port = n_extra > 2 ? (uint16_t)atoi(extra[2]) : 0;

                if (inet_pton(fam, extra[0], a) != 1)
                        r = fk_error_set(&err, -EINVAL, "bad address %s", extra[0]);
                else
                        r = net_egress_allow_addr_port(s, fam, a, port, (uint32_t)atoi(extra[1]));
                if (r < 0 && err.code == 0)
                        fk_error_set(&err, r, "allow %s: %s", extra[0], strerror(-r));
        } else if (strcmp(verb, "exec") == 0 && n_extra >= 1) {
                r = exec_in(s, extra);
                if (r < 0)
                        fk_error_set(&err, r, "exec %s: %s", extra[0], strerror(-r));
        } else if (strcmp(verb, "teardown") == 0) {
                r = net_session_teardown(s, &err);
        } else {
                r = fk_error_set(&err, -EINVAL, "unknown verb %s", verb);
        }
        net_session_free(s);
out:
        if (r < 0) {
                fprintf(stderr, "net-tool %s %s: %s\n", verb, name, err.msg);
                return 1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        static struct tool t;
        int i = parse_opts(&t, argc, argv);

        if (i < 0 || argc - i < 2 || !t.node.state_dir) {
                fprintf(stderr, "usage: net-tool --state DIR [--pool CIDR] [--uplink IF] "
                                "[--prefix P] [--deny CIDR]... [--ipv6] VERB NAME [ARGS...]\n"
                                "verbs: setup|update NAME [ENTRY...], allow-addr NAME ENTRY... "
                                "-- ADDR TTL [PORT], exec NAME ENTRY... -- CMD..., teardown NAME, "
                                "orphans PREFIX [KEEP...]\n");
                return 2;
        }
        return run(&t, argv[i], argv[i + 1], argv + i + 2, argc - i - 2);
}
