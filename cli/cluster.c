/* SPDX-License-Identifier: MIT */
/* forklet --etcd: the cluster-mode dispatcher. apply/get/delete/wait go to etcd; node-local
 * verbs (exec, logs, describe, checkpoint, fork, ...) are routed to the node running the named
 * session: its API socket when that node is this host, else its published https api.url. */
#include "core/cluster/cluster.h"
#include "cli/cluster-internal.h"
#include "core/core.h"
#include "etcd/etcd.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

int cli_cluster_open(const struct cli *c, struct cli_cluster *ret)
{
        const struct etcd_options eo = {.request_timeout_ms = 5000, .attempts = 2};
        char **eps = NULL, *copy = strdup(c->etcd), *save = NULL;
        struct fk_error err = {0};
        int r = copy ? 0 : -ENOMEM;

        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && r >= 0;
             t = strtok_r(NULL, ",", &save))
                r = fk_strv_push(&eps, t);
        free(copy);
        *ret = (struct cli_cluster){.prefix = c->etcd_prefix && *c->etcd_prefix ? c->etcd_prefix
                                                                                : "/forklet",
                                    .ns = c->namespace};
        if (r >= 0 && !eps)
                r = fk_error_set(&err, -EINVAL, "--etcd: no endpoint given");
        if (r >= 0)
                r = etcd_client_new((const char *const *)eps, &eo, &ret->etcd, &err);
        fk_strv_free(eps);
        if (r < 0)
                fprintf(stderr, "forklet: etcd: %s\n", err.msg[0] ? err.msg : strerror(-r));
        return r;
}

void cli_cluster_close(struct cli_cluster *k)
{
        k->etcd = etcd_client_free(k->etcd);
}

static json_t *ensure_session(json_t *all, const struct core_cluster_key *k)
{
        char id[2 * CORE_CLUSTER_NAME_MAX + 2];
        json_t *s;

        snprintf(id, sizeof(id), "%s/%s", k->ns, k->name);
        s = json_object_get(all, id);
        if (!s) {
                s = json_object();
                json_object_set_new(all, id, s);
        }
        return s;
}

int cli_cluster_sessions(struct cli_cluster *k, json_t **ret, struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        struct etcd_kvs *kvs = NULL;
        json_t *raw = json_object(), *out = json_object(), *v;
        const char *id;
        int r;

        if (!raw || !out || fk_asprintf(&dir, "%s/sessions/", k->prefix) < 0)
                r = -ENOMEM;
        else
                r = etcd_range(k->etcd, dir, NULL, ETCD_PREFIX, &kvs, NULL, err);
        for (size_t i = 0; r >= 0 && i < kvs->n; i++) {
                struct core_cluster_key ck;
                json_t *s;

                core_cluster_key_parse(k->prefix, kvs->kvs[i].key, &ck);
                if (ck.kind < CORE_CLUSTER_KEY_SESSION_SPEC || !(s = ensure_session(raw, &ck)))
                        continue;
                if (ck.kind == CORE_CLUSTER_KEY_SESSION_NODE)
                        json_object_set_new(s, "node", json_string(kvs->kvs[i].value));
                else
                        json_object_set_new(
                                s, ck.kind == CORE_CLUSTER_KEY_SESSION_SPEC ? "spec" : "status",
                                json_loads(kvs->kvs[i].value, 0, NULL));
        }
        etcd_kvs_free(kvs);
        json_object_foreach(raw, id, v)
        {
                json_t *sess = json_object_get(v, "spec"), *st = json_object_get(v, "status");
                json_t *node = json_object_get(v, "node");

                if (!json_is_object(sess))
                        continue; /* status left over from a deleted session */
                st = json_is_object(st) ? json_incref(st) : json_pack("{s:s}", "phase", "Pending");
                if (node && !json_object_get(st, "nodeName"))
                        json_object_set(st, "nodeName", node);
                json_object_set_new(sess, "status", st);
                json_object_set(out, id, sess);
        }
        json_decref(raw);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        *ret = out;
        return 0;
}

int cli_cluster_nodes(struct cli_cluster *k, json_t **ret, struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        struct etcd_kvs *kvs = NULL;
        json_t *out = json_object();
        int r;

        if (!out || fk_asprintf(&dir, "%s/nodes/", k->prefix) < 0)
                r = -ENOMEM;
        else
                r = etcd_range(k->etcd, dir, NULL, ETCD_PREFIX, &kvs, NULL, err);
        for (size_t pass = 0; r >= 0 && pass < 2; pass++)
                for (size_t i = 0; i < kvs->n; i++) {
                        struct core_cluster_key ck;
                        json_t *n;

                        core_cluster_key_parse(k->prefix, kvs->kvs[i].key, &ck);
                        if (pass == 0 && ck.kind == CORE_CLUSTER_KEY_NODE_STATUS) {
                                n = json_loads(kvs->kvs[i].value, 0, NULL);
                                if (json_is_object(n))
                                        json_object_set_new(n, "ready", json_false());
                                json_object_set_new(out, ck.name, n ? n : json_object());
                        } else if (pass == 1 && ck.kind == CORE_CLUSTER_KEY_NODE_LEASE &&
                                   (n = json_object_get(out, ck.name)))
                                json_object_set_new(n, "ready", json_true());
                }
        etcd_kvs_free(kvs);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        *ret = out;
        return 0;
}

struct route {
        char *socket, *url, *pin; /* owned; socket or url set */
};

static void route_done(struct route *r)
{
        free(r->socket);
        free(r->url);
        free(r->pin);
        *r = (struct route){0};
}

/* True when a unix socket at path accepts a connection from here. */
static bool socket_reachable(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = -1;

        if (strlen(path) >= sizeof(sa.sun_path))
                return false;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        return fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

/* From a node's published api: its socket when the node is this host (api.hostID, or no
 * hostID from an older forkletd) and the socket answers here; else its https api.url. */
static int pick(const char *node, const json_t *api, struct route *ret, struct fk_error *err)
{
        const char *sock = json_string_value(json_object_get(api, "socket"));
        const char *url = json_string_value(json_object_get(api, "url"));
        const char *pin = json_string_value(json_object_get(api, "pinnedPublicKey"));
        const char *host = json_string_value(json_object_get(api, "hostID"));
        char me[FK_HOST_ID_SIZE] = "";

        (void)fk_host_id(me);
        if (sock && (!host || strcmp(host, me) == 0) && socket_reachable(sock))
                return (ret->socket = strdup(sock)) ? 0 : -ENOMEM;
        if (!url)
                return fk_error_set(err, -EHOSTUNREACH,
                                    "node %s publishes no api.url and its socket %s is not "
                                    "reachable from here (give the node api.listen, api.tlsCert "
                                    "and api.tlsKey, or run forklet on that host)",
                                    node, sock ? sock : "(none)");
        if (!(ret->url = strdup(url)) || (pin && !(ret->pin = strdup(pin))))
                return -ENOMEM;
        return 0;
}

/* Where to reach the node running session ns/name. */
static int route(struct cli_cluster *k, const char *name, struct route *ret, struct fk_error *err)
{
        cleanup_free char *key = NULL, *nkey = NULL, *node = NULL;
        struct etcd_kvs *kvs = NULL;
        json_t *j = NULL;
        int r;

        if (core_cluster_session_key(k->prefix, k->ns, name, "node", &key) < 0)
                return -ENOMEM;
        r = etcd_range(k->etcd, key, NULL, 0, &kvs, NULL, err);
        if (r >= 0 && kvs->n == 0)
                r = fk_error_set(err, -ENOENT, "session %s/%s is not placed on a node (yet)", k->ns,
                                 name);
        if (r >= 0 && (!(node = strdup(kvs->kvs[0].value)) ||
                       core_cluster_node_key(k->prefix, node, "status", &nkey) < 0))
                r = -ENOMEM;
        etcd_kvs_free(kvs);
        kvs = NULL;
        if (r >= 0)
                r = etcd_range(k->etcd, nkey, NULL, 0, &kvs, NULL, err);
        if (r >= 0 && kvs->n == 1)
                j = json_loads(kvs->kvs[0].value, 0, NULL);
        if (r >= 0 && !json_is_object(json_object_get(j, "api")))
                r = fk_error_set(err, -EHOSTUNREACH, "the node %s of %s/%s publishes no API", node,
                                 k->ns, name);
        if (r >= 0)
                r = pick(node, json_object_get(j, "api"), ret, err);
        json_decref(j);
        etcd_kvs_free(kvs);
        if (r < 0)
                route_done(ret);
        return r;
}

/* The first positional argument after the verb that names a placed session; NULL if none
 * (a placed session whose node cannot be reached is reported here). */
static const char *session_arg(struct cli_cluster *k, int argc, char **argv, struct route *ret,
                               bool *reported)
{
        for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
                struct fk_error err = {0};
                int r;

                if (argv[i][0] == '-')
                        continue;
                r = route(k, argv[i], ret, &err);
                if (r >= 0)
                        return argv[i];
                if (r == -EHOSTUNREACH) {
                        fprintf(stderr, "forklet %s: %s\n", argv[0], err.msg);
                        *reported = true;
                        return NULL;
                }
        }
        return NULL;
}

int cli_cluster_run(const struct cli *c, const struct cli_command *cmd, int argc, char **argv)
{
        static const struct {
                const char *verb;
                int (*fn)(struct cli_cluster *k, int argc, char **argv);
        } verbs[] = {
                {"apply", cli_cluster_apply},
                {"get", cli_cluster_get},
                {"delete", cli_cluster_delete},
                {"wait", cli_cluster_wait},
        };
        _cleanup_(route_done) struct route rt = {0};
        struct cli_cluster k;
        struct cli c2 = *c;
        bool reported = false;
        int ret;

        if (strcmp(cmd->name, "validate") == 0 || strcmp(cmd->name, "mcp") == 0)
                return cmd->run(c, argc, argv);
        if (cli_cluster_open(c, &k) < 0)
                return CLI_EXIT_FAILURE;
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
                if (strcmp(cmd->name, verbs[i].verb) == 0) {
                        ret = verbs[i].fn(&k, argc, argv);
                        cli_cluster_close(&k);
                        return ret;
                }
        if (!session_arg(&k, argc, argv, &rt, &reported)) {
                cli_cluster_close(&k);
                if (reported)
                        return CLI_EXIT_FAILURE;
                fprintf(stderr,
                        "forklet %s: cluster mode: no placed session named in the arguments "
                        "(namespace %s)\n",
                        cmd->name, k.ns);
                return CLI_EXIT_FAILURE;
        }
        cli_cluster_close(&k);
        c2.etcd = NULL;
        c2.socket = rt.socket ? rt.socket : c->socket;
        c2.server = rt.url; /* NULL: the socket */
        if (rt.url && !c->pin)
                c2.pin = rt.pin; /* the node's published key, unless --pinned-public-key */
        return cmd->run(&c2, argc, argv);
}
