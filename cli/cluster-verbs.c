/* SPDX-License-Identifier: MIT */
/* forklet --etcd apply|get|delete|wait: sessions as the control plane holds them (spec,
 * placement, status written back by the nodes) and `get nodes` (Ready while the lease lives). */
#include "core/cluster/cluster.h"
#include "cli/cluster-internal.h"
#include "core/core.h"
#include "etcd/etcd.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int apply_one(struct cli_cluster *k, const struct session_manifest *m)
{
        cleanup_free char *key = NULL, *text = NULL;
        struct etcd_kvs *kvs = NULL;
        struct fk_error err = {0};
        json_t *j = session_manifest_to_json(m);
        const char *result = "created";
        int r;

        text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text || core_cluster_session_key(k->prefix, m->namespace, m->name, "spec", &key) < 0)
                return CLI_EXIT_FAILURE;
        r = etcd_range(k->etcd, key, NULL, 0, &kvs, NULL, &err);
        if (r >= 0 && kvs->n == 1)
                result = strcmp(kvs->kvs[0].value, text) == 0 ? "unchanged" : "configured";
        etcd_kvs_free(kvs);
        if (r >= 0 && strcmp(result, "unchanged") != 0)
                r = etcd_put(k->etcd, key, text, strlen(text), 0, NULL, &err);
        if (r < 0) {
                fprintf(stderr, "forklet apply: session/%s: %s\n", m->name, err.msg);
                return CLI_EXIT_FAILURE;
        }
        printf("session/%s %s\n", m->name, result);
        return CLI_EXIT_OK;
}

int cli_cluster_apply(struct cli_cluster *k, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct fk_error err = {0};
        int ret = CLI_EXIT_OK;

        if (cli_parse_files(argc, argv, "apply", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        for (size_t f = 0; f < a.n_files; f++) {
                struct manifest_diag diag = {0};
                struct session_manifest **v = NULL;
                size_t n = 0;

                if (manifest_load_sessions_file(a.files[f], NULL, &v, &n, &diag) < 0) {
                        for (size_t i = 0; i < diag.n; i++)
                                fprintf(stderr, "%s\n", diag.messages[i]);
                        ret = CLI_EXIT_FAILURE;
                }
                for (size_t i = 0; i < n; i++) {
                        if (apply_one(k, v[i]) != CLI_EXIT_OK)
                                ret = CLI_EXIT_FAILURE;
                        session_manifest_free(v[i]);
                }
                free(v);
                manifest_diag_done(&diag);
        }
        free(a.files);
        return ret;
}

static int print_json(const json_t *j, enum cli_output o)
{
        cleanup_free char *text = NULL;

        if (o == CLI_OUTPUT_YAML && manifest_json_to_yaml(j, &text) >= 0)
                fputs(text, stdout);
        else if (o == CLI_OUTPUT_JSON && (text = json_dumps(j, JSON_INDENT(2))))
                puts(text);
        return text ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

static void session_row(const json_t *s)
{
        json_t *st = json_object_get(s, "status");
        const char *node = json_string_value(json_object_get(st, "nodeName"));
        json_t *pid = json_object_get(json_object_get(st, "vm"), "pid");
        char pidbuf[32] = "-";

        if (json_is_integer(pid) && json_integer_value(pid) > 0)
                snprintf(pidbuf, sizeof(pidbuf), "%lld", (long long)json_integer_value(pid));
        printf("%-24s %-16s %-10s %s\n",
               json_string_value(json_object_get(json_object_get(s, "metadata"), "name")),
               node ? node : "-", json_string_value(json_object_get(st, "phase")), pidbuf);
}

static int get_sessions(struct cli_cluster *k, const struct cli_get_args *a)
{
        struct fk_error err = {0};
        json_t *all = NULL, *s, *list;
        char id[2 * CORE_CLUSTER_NAME_MAX + 2];
        const char *key;
        int ret;

        if (cli_cluster_sessions(k, &all, &err) < 0) {
                fprintf(stderr, "forklet get: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        snprintf(id, sizeof(id), "%s/%s", k->ns, a->name ? a->name : "");
        if (!a->list && !json_object_get(all, id)) {
                fprintf(stderr, "forklet get: session %s not found\n", id);
                json_decref(all);
                return CLI_EXIT_FAILURE;
        }
        if (!a->list && a->output != CLI_OUTPUT_TABLE)
                ret = print_json(json_object_get(all, id), a->output);
        else if (a->output != CLI_OUTPUT_TABLE) {
                list = json_pack("{s:s, s:[]}", "kind", "SessionList", "items");
                json_object_foreach(all, key, s)
                        json_array_append(json_object_get(list, "items"), s);
                ret = print_json(list, a->output);
                json_decref(list);
        } else {
                printf("%-24s %-16s %-10s %s\n", "NAME", "NODE", "PHASE", "PID");
                json_object_foreach(all, key, s) if (!a->list ? !strcmp(key, id)
                                                              : !strncmp(key, id, strlen(id)))
                        session_row(s);
                ret = CLI_EXIT_OK;
        }
        json_decref(all);
        return ret;
}

static void node_row(const char *name, const json_t *n)
{
        json_t *cap = json_object_get(n, "capacity"), *use = json_object_get(n, "usage");
        json_t *labels = json_object_get(n, "labels"), *v;
        char lbl[256] = "", *p = lbl;
        const char *key;

        json_object_foreach(labels, key, v) p += snprintf(
                p, sizeof(lbl) - (size_t)(p - lbl) > 1 ? sizeof(lbl) - (size_t)(p - lbl) : 1,
                "%s%s=%s", p == lbl ? "" : ",", key, json_string_value(v));
        printf("%-16s %-9s %4lld/%-5lld %7lld/%-8lld %s\n", name,
               json_is_true(json_object_get(n, "ready")) ? "Ready" : "NotReady",
               (long long)json_integer_value(json_object_get(use, "sessions")),
               (long long)json_integer_value(json_object_get(cap, "sessions")),
               (long long)json_integer_value(json_object_get(use, "memoryMiB")),
               (long long)json_integer_value(json_object_get(cap, "memoryMiB")),
               lbl[0] ? lbl : "-");
}

static int get_nodes(struct cli_cluster *k, enum cli_output o)
{
        struct fk_error err = {0};
        json_t *all = NULL, *n;
        const char *name;
        int ret = CLI_EXIT_OK;

        if (cli_cluster_nodes(k, &all, &err) < 0) {
                fprintf(stderr, "forklet get nodes: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        if (o != CLI_OUTPUT_TABLE)
                ret = print_json(all, o);
        else {
                printf("%-16s %-9s %10s %16s %s\n", "NAME", "STATUS", "SESSIONS", "MEMORY(MiB)",
                       "LABELS");
                json_object_foreach(all, name, n) node_row(name, n);
        }
        json_decref(all);
        return ret;
}

int cli_cluster_get(struct cli_cluster *k, int argc, char **argv)
{
        cleanup_free char **args = calloc((size_t)argc + 1, sizeof(*args));
        struct cli_get_args a = {0};
        struct fk_error err = {0};
        bool nodes = argc > 1 && (!strcmp(argv[1], "nodes") || !strcmp(argv[1], "node"));

        if (!args)
                return CLI_EXIT_FAILURE;
        memcpy(args, argv, (size_t)argc * sizeof(*args));
        if (nodes)
                args[1] = (char *)"sessions"; /* same -o parsing */
        if (cli_parse_get(argc, args, &a, &err) < 0) {
                fprintf(stderr, "forklet %s (cluster mode also has: get nodes)\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        return nodes ? get_nodes(k, a.output) : get_sessions(k, &a);
}

static int delete_one(struct cli_cluster *k, const char *ns, const char *name)
{
        cleanup_free char *dir = NULL;
        struct fk_error err = {0};
        int64_t n = 0;

        if (core_cluster_session_key(k->prefix, ns, name, "", &dir) < 0 ||
            etcd_delete(k->etcd, dir, ETCD_PREFIX, &n, &err) < 0) {
                fprintf(stderr, "forklet delete: %s\n", err.msg[0] ? err.msg : "out of memory");
                return CLI_EXIT_FAILURE;
        }
        if (n == 0) {
                fprintf(stderr, "forklet delete: session %s/%s not found\n", ns, name);
                return CLI_EXIT_FAILURE;
        }
        printf("session/%s deleted\n", name);
        return CLI_EXIT_OK;
}

int cli_cluster_delete(struct cli_cluster *k, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct fk_error err = {0};
        int ret = CLI_EXIT_OK;

        if (cli_parse_files(argc, argv, "delete", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (a.name)
                ret = delete_one(k, k->ns, a.name);
        for (size_t f = 0; f < a.n_files; f++) {
                struct manifest_diag diag = {0};
                struct session_manifest **v = NULL;
                size_t n = 0;

                if (manifest_load_sessions_file(a.files[f], NULL, &v, &n, &diag) < 0)
                        ret = CLI_EXIT_FAILURE;
                for (size_t i = 0; i < n; i++) {
                        if (delete_one(k, v[i]->namespace, v[i]->name) != CLI_EXIT_OK)
                                ret = CLI_EXIT_FAILURE;
                        session_manifest_free(v[i]);
                }
                free(v);
                manifest_diag_done(&diag);
        }
        free(a.files);
        return ret;
}

/* 1: the session is in phase want (or gone, for "Deleted"), 0: not yet. */
static int wait_check(json_t *all, const char *id, const char *want)
{
        json_t *s = json_object_get(all, id);
        const char *phase =
                json_string_value(json_object_get(json_object_get(s, "status"), "phase"));

        if (!strcmp(want, "Deleted"))
                return s == NULL;
        if (!s || !phase)
                return 0;
        return strcmp(phase, want) == 0 ? 1 : 0;
}

int cli_cluster_wait(struct cli_cluster *k, int argc, char **argv)
{
        struct cli_wait_args a = {0};
        struct fk_error err = {0};
        char id[2 * CORE_CLUSTER_NAME_MAX + 2];
        uint64_t deadline;
        int got = 0;

        if (cli_parse_wait(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        snprintf(id, sizeof(id), "%s/%s", k->ns, a.name);
        deadline = fk_now_mono_ns() + (uint64_t)a.timeout_s * 1000000000ull;
        do {
                json_t *all = NULL;

                if (cli_cluster_sessions(k, &all, &err) >= 0)
                        got = wait_check(all, id, a.phase);
                json_decref(all);
                if (got)
                        break;
                usleep(300 * 1000);
        } while (fk_now_mono_ns() < deadline);
        if (got <= 0) {
                fprintf(stderr, "forklet wait: %s did not reach %s within %u s\n", id, a.phase,
                        a.timeout_s);
                return CLI_EXIT_FAILURE;
        }
        printf("session/%s %s\n", a.name, a.phase);
        return CLI_EXIT_OK;
}
