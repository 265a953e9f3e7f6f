/* SPDX-License-Identifier: MIT */
/* The real session network for forkletd over net/: netns, links, egress table and resolver per
 * session, built from the manifest (spec.egress -> net entries and resolver names), the boot
 * parameters that put QEMU inside the netns, status, teardown and orphan cleanup. */
#include "agent/net/net.h"
#include "agent/vm/vm.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "net/net.h"

#include <errno.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define AGENT_NET_DENY_MAX 64

struct agent_net {
        struct net_session *ns;
        struct net_dns *dns;
        int nsfd; /* borrowed from ns, read by the pre-exec hook */
        bool open;
        size_t n_allow;
        char netns[NET_NAME_MAX + 1];
};

/* FNV-1a, to keep names short and node-specific. */
static uint32_t hash32(const char *s)
{
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 16777619u;
        return h;
}

/* Netns names are "fk<hash of stateDir>-<key>", so orphan cleanup of one node never touches
 * another forkletd's sessions on the same host. Keys too long for a netns name are shortened
 * with a hash of the whole key. */
int agent_net_name(const struct node_config *cfg, const char *key, char *buf, size_t size)
{
        char prefix[16];
        size_t room;

        agent_net_prefix(cfg, prefix, sizeof(prefix));
        room = NET_NAME_MAX - strlen(prefix);
        if (strlen(key) <= room)
                return snprintf(buf, size, "%s%s", prefix, key) < (int)size ? 0 : -ENAMETOOLONG;
        return snprintf(buf, size, "%s%.*s-%08x", prefix, (int)(room - 9), key, hash32(key)) <
                               (int)size
                       ? 0
                       : -ENAMETOOLONG;
}

void agent_net_prefix(const struct node_config *cfg, char *buf, size_t size)
{
        snprintf(buf, size, "fk%06x-", hash32(cfg->state_dir) & 0xffffff);
}

static void node_config_net(const struct node_config *cfg, struct net_node_config *ret,
                            char link_prefix[8])
{
        snprintf(link_prefix, 8, "f%04x", hash32(cfg->state_dir) & 0xffff);
        *ret = (struct net_node_config){
                .state_dir = cfg->state_dir,
                .uplink_pool = cfg->uplink_pool,
                .uplink_interface = cfg->uplink_interface,
                .link_prefix = link_prefix,
        };
}

/* The node's own addresses (not loopback): always denied to guests. */
static size_t node_addresses(struct net_cidr *v, size_t max)
{
        struct ifaddrs *ifa = NULL;
        size_t n = 0;

        if (getifaddrs(&ifa) < 0)
                return 0;
        for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
                if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
                        continue;
                v[n] = (struct net_cidr){.family = AF_INET, .prefix_len = 32};
                memcpy(v[n].addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
                if (v[n].addr[0] != 127)
                        n++;
        }
        freeifaddrs(ifa);
        return n;
}

/* spec.egress -> net entries (names become resolver-filled sets) and resolver rules. */
static int convert_egress(const struct session_manifest *m, struct net_egress_entry **ret_allow,
                          struct net_dns_rule **ret_rules, size_t *ret_n_rules)
{
        size_t n = m ? m->n_egress : 0, k = 0;
        struct net_egress_entry *allow = calloc(n + 1, sizeof(*allow));
        struct net_dns_rule *rules = calloc(n + 1, sizeof(*rules));

        if (!allow || !rules) {
                free(allow);
                free(rules);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                const struct egress_rule *e = &m->egress[i];

                allow[i].port = e->port;
                if (e->kind == EGRESS_CIDR) {
                        allow[i].kind = NET_EGRESS_CIDR;
                        allow[i].cidr.family = e->family;
                        allow[i].cidr.prefix_len = e->prefix_len;
                        memcpy(allow[i].cidr.addr, e->addr, sizeof(allow[i].cidr.addr));
                        continue;
                }
                allow[i].kind = NET_EGRESS_NAME;
                rules[k++] = (struct net_dns_rule){
                        .name = e->host, .wildcard = e->kind == EGRESS_WILDCARD, .port = e->port};
        }
        *ret_allow = allow;
        *ret_rules = rules;
        *ret_n_rules = k;
        return 0;
}

/* A manifest's egress as net wants it (owned arrays; p points into them). */
struct policy {
        struct net_egress_entry *allow;
        struct net_dns_rule *rules;
        size_t n_rules;
        struct net_cidr deny[AGENT_NET_DENY_MAX];
        struct net_egress_policy p;
};

static void policy_done(struct policy *pol)
{
        free(pol->allow);
        free(pol->rules);
}

static int policy_build(const struct session_manifest *m, struct policy *pol)
{
        int r;

        r = convert_egress(m, &pol->allow, &pol->rules, &pol->n_rules);
        if (r < 0)
                return r;
        pol->p = (struct net_egress_policy){
                .allow = pol->allow,
                .n_allow = m ? m->n_egress : 0,
                .deny = pol->deny,
                .n_deny = node_addresses(pol->deny, AGENT_NET_DENY_MAX),
        };
        return 0;
}

static int apply_policy(struct agent_net *n, const struct session_manifest *m, struct fk_error *err)
{
        struct policy pol;
        int r;

        r = policy_build(m, &pol);
        if (r < 0)
                return fk_error_set(err, r, "out of memory");
        r = net_dns_set_policy(n->dns, pol.rules, pol.n_rules, &pol.p, err);
        if (r >= 0) {
                n->open = pol.p.n_allow == 0;
                n->n_allow = pol.p.n_allow;
        }
        policy_done(&pol);
        return r;
}

static void net_release(void *net)
{
        struct agent_net *n = net;

        if (!n)
                return;
        net_dns_stop(n->dns);
        net_session_free(n->ns);
        free(n);
}

/* Re-attach after a restart: what the resolver had learned is kept (or why not). */
static void log_restored(const char *key, const struct net_session *ns)
{
        size_t n = 0;
        int r = net_session_restored(ns, &n);

        if (r < 0)
                log_warning("session %s: could not read the learned addresses back (%s): the "
                            "guest has to resolve again",
                            key, strerror(-r));
        else if (n > 0)
                log_info("session %s: kept %zu address(es) the resolver had learned", key, n);
}

static int net_setup(const struct node_config *cfg, const char *key,
                     const struct session_manifest *m, void **ret, struct fk_error *err)
{
        struct net_node_config node;
        struct net_session_config sc;
        struct net_dns_config dc = {.upstreams = cfg->dns, .ttl_floor_s = cfg->dns_min_ttl_s};
        struct policy pol;
        char link_prefix[8];
        struct agent_net *n = calloc(1, sizeof(*n));
        int r;

        if (!n)
                return fk_error_set(err, -ENOMEM, "out of memory");
        node_config_net(cfg, &node, link_prefix);
        r = agent_net_name(cfg, key, n->netns, sizeof(n->netns));
        if (r < 0) {
                free(n);
                return fk_error_set(err, r, "netns name for %s: %s", key, strerror(-r));
        }
        /* Set up with the real policy (re-attaching to a running VM's netns must never open
         * it, not even for a moment); the resolver then gets its names with the same policy. */
        r = policy_build(m, &pol);
        if (r < 0) {
                free(n);
                return fk_error_set(err, r, "out of memory");
        }
        sc = (struct net_session_config){.node = &node,
                                         .name = n->netns,
                                         .egress = pol.p,
                                         .names = pol.rules,
                                         .n_names = pol.n_rules};
        r = net_session_setup(&sc, &n->ns, err);
        policy_done(&pol);
        if (r >= 0) {
                log_restored(key, n->ns);
                n->nsfd = net_session_netns_fd(n->ns);
                r = net_dns_start(n->ns, &dc, &n->dns, err);
        }
        if (r >= 0)
                r = apply_policy(n, m, err);
        if (r < 0) {
                /* Kernel state stays: it may be a running VM's (re-attach after a restart);
                 * the next setup reuses it, delete or orphan cleanup removes it. */
                net_release(n);
                return r;
        }
        *ret = n;
        return 0;
}

static int net_update(void *net, const struct session_manifest *m, struct fk_error *err)
{
        return apply_policy(net, m, err);
}

static int join_netns(void *userdata)
{
        return net_join_netns(*(const int *)userdata);
}

static void net_boot_params(void *net, struct agent_boot_params *p)
{
        struct agent_net *n = net;

        if (p->n_pre_exec < AGENT_PRE_EXEC_MAX)
                p->pre_exec[p->n_pre_exec++] =
                        (struct agent_pre_exec){join_netns, &n->nsfd, "join netns"};
        p->tap = NET_TAP_NAME;
        p->mac = NET_GUEST_MAC;
        p->append = "forklet.ip=" NET_GUEST_IPV4 "/24 forklet.gw=" NET_GATEWAY_IPV4
                    " forklet.dns=" NET_RESOLVER_IPV4;
}

static json_t *net_status(void *net)
{
        struct agent_net *n = net;
        struct net_dns_stats st;

        net_dns_get_stats(n->dns, &st);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}}", "netns",
                         n->netns, "uplinkAddress", net_session_uplink_netns(n->ns), "hostAddress",
                         net_session_uplink_host(n->ns), "guestIP", NET_GUEST_IPV4, "resolver",
                         NET_RESOLVER_IPV4, "egress", n->open ? "open" : "restricted", "dns",
                         "queries", (json_int_t)st.queries, "refused", (json_int_t)st.refused,
                         "forwarded", (json_int_t)st.forwarded, "learned", (json_int_t)st.learned);
}

static int net_netns_fd(void *net)
{
        return ((struct agent_net *)net)->nsfd;
}

static int net_teardown(void *net, struct fk_error *err)
{
        struct agent_net *n = net;
        int r;

        net_dns_stop(TAKE_PTR(n->dns));
        r = net_session_teardown(n->ns, err);
        net_release(n);
        return r;
}

static int net_cleanup(const struct node_config *cfg, char *const *keep_keys, struct fk_error *err)
{
        struct net_node_config node;
        char link_prefix[8], prefix[16];
        char **keep = NULL;
        int r = 0;

        node_config_net(cfg, &node, link_prefix);
        agent_net_prefix(cfg, prefix, sizeof(prefix));
        for (size_t i = 0; keep_keys && keep_keys[i] && r >= 0; i++) {
                char name[NET_NAME_MAX + 1];

                r = agent_net_name(cfg, keep_keys[i], name, sizeof(name));
                if (r >= 0)
                        r = fk_strv_push(&keep, name);
        }
        if (r >= 0)
                r = net_cleanup_orphans(&node, prefix, keep, err);
        else
                fk_error_set(err, r, "out of memory");
        fk_strv_free(keep);
        return r;
}

const struct agent_net_ops agent_net_ops_real = {
        .setup = net_setup,
        .update = net_update,
        .boot_params = net_boot_params,
        .status = net_status,
        .netns_fd = net_netns_fd,
        .teardown = net_teardown,
        .free = net_release,
        .cleanup = net_cleanup,
};
