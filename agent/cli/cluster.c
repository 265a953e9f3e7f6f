/* SPDX-License-Identifier: MIT */
/* forklet --etcd: the cluster-mode dispatcher. apply/get/delete/wait go to etcd; node-local
 * verbs (exec, logs, describe, and later checkpoint/fork/port-forward) are routed to the API
 * socket that the node running the named session publishes in its status. */
#include "agent/cli/cluster-internal.h"
#include "agent/cluster.h"
#include "agent/etcd/etcd.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static json_t *ensure_session(json_t *all, const struct cluster_key *k)
{
        char id[2 * CLUSTER_NAME_MAX + 2];
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
                struct cluster_key ck;
                json_t *s;

                cluster_key_parse(k->prefix, kvs->kvs[i].key, &ck);
                if (ck.kind < CLUSTER_KEY_SESSION_SPEC || !(s = ensure_session(raw, &ck)))
                        continue;
                if (ck.kind == CLUSTER_KEY_SESSION_NODE)
                        json_object_set_new(s, "node", json_string(kvs->kvs[i].value));
                else
                        json_object_set_new(s,
                                            ck.kind == CLUSTER_KEY_SESSION_SPEC ? "spec" : "status",
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
                        struct cluster_key ck;
                        json_t *n;

                        cluster_key_parse(k->prefix, kvs->kvs[i].key, &ck);
                        if (pass == 0 && ck.kind == CLUSTER_KEY_NODE_STATUS) {
                                n = json_loads(kvs->kvs[i].value, 0, NULL);
                                if (json_is_object(n))
                                        json_object_set_new(n, "ready", json_false());
                                json_object_set_new(out, ck.name, n ? n : json_object());
                        } else if (pass == 1 && ck.kind == CLUSTER_KEY_NODE_LEASE &&
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

/* The API socket of the node running session ns/name. */
static int route(struct cli_cluster *k, const char *name, char **ret, struct fk_error *err)
{
        cleanup_free char *key = NULL, *nkey = NULL;
        struct etcd_kvs *kvs = NULL;
        json_t *j = NULL;
        const char *sock;
        int r;

        if (cluster_session_key(k->prefix, k->ns, name, "node", &key) < 0)
                return -ENOMEM;
        r = etcd_range(k->etcd, key, NULL, 0, &kvs, NULL, err);
        if (r >= 0 && kvs->n == 0)
                r = fk_error_set(err, -ENOENT, "session %s/%s is not placed on a node (yet)", k->ns,
                                 name);
        if (r >= 0 && cluster_node_key(k->prefix, kvs->kvs[0].value, "status", &nkey) < 0)
                r = -ENOMEM;
        etcd_kvs_free(kvs);
        kvs = NULL;
        if (r >= 0)
                r = etcd_range(k->etcd, nkey, NULL, 0, &kvs, NULL, err);
        if (r >= 0 && kvs->n == 1)
                j = json_loads(kvs->kvs[0].value, 0, NULL);
        sock = json_string_value(json_object_get(json_object_get(j, "api"), "socket"));
        if (r >= 0 && !sock)
                r = fk_error_set(err, -ENOENT, "the node of %s/%s publishes no API socket", k->ns,
                                 name);
        if (r >= 0 && !(*ret = strdup(sock)))
                r = -ENOMEM;
        json_decref(j);
        etcd_kvs_free(kvs);
        return r;
}

/* The first positional argument after the verb that names a placed session; NULL if none. */
static const char *session_arg(struct cli_cluster *k, int argc, char **argv, char **ret_socket)
{
        for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
                struct fk_error err = {0};

                if (argv[i][0] == '-')
                        continue;
                if (route(k, argv[i], ret_socket, &err) >= 0)
                        return argv[i];
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
        cleanup_free char *sock = NULL;
        struct cli_cluster k;
        struct cli c2 = *c;
        int ret;

        if (strcmp(cmd->name, "validate") == 0)
                return cmd->run(c, argc, argv);
        if (cli_cluster_open(c, &k) < 0)
                return CLI_EXIT_FAILURE;
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
                if (strcmp(cmd->name, verbs[i].verb) == 0) {
                        ret = verbs[i].fn(&k, argc, argv);
                        cli_cluster_close(&k);
                        return ret;
                }
        if (!session_arg(&k, argc, argv, &sock)) {
                fprintf(stderr,
                        "forklet %s: cluster mode: no placed session named in the arguments "
                        "(namespace %s)\n",
                        cmd->name, k.ns);
                cli_cluster_close(&k);
                return CLI_EXIT_FAILURE;
        }
        cli_cluster_close(&k);
        c2.socket = sock;
        c2.etcd = NULL;
        return cmd->run(&c2, argc, argv);
}
