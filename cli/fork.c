/* SPDX-License-Identifier: MIT */
/* forklet checkpoint create|list|delete, fork, rollback, snapshot create|list|inspect|delete,
 * restore: one request each to the fork-engine resources of a session (or, for a snapshot once
 * taken, of its namespace); prints ids and names on stdout. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FORK_PROGRESS_MAX_S 600
#define CK_WAIT_MAX_S       600

/* One request; on 2xx *ret gets the parsed body (new reference), else the error is printed. */
static int call(const struct cli *c, const char *what, const char *method, const char *name,
                const char *suffix, json_t *body, json_t **ret)
{
        cleanup_free char *path = NULL, *text = body ? json_dumps(body, 0) : NULL;
        struct cli_response resp = {0};
        struct fk_error err = {0};
        int ret_code = CLI_EXIT_OK;

        json_decref(body);
        /* no session: a resource of the namespace (its snapshots) */
        if (name ? cli_session_path(c, name, suffix, &path) < 0
                 : fk_asprintf(&path, "/api/v1alpha1/namespaces/%s%s", c->namespace, suffix) < 0)
                return CLI_EXIT_FAILURE;
        if (cli_request(c, method, path, text, &resp, &err) < 0) {
                fprintf(stderr, "%s: %s\n", what, err.msg);
                return CLI_EXIT_FAILURE;
        }
        if (resp.status / 100 != 2) {
                cli_print_api_error(what, &resp);
                ret_code = CLI_EXIT_FAILURE;
        } else if (!(*ret = json_loads(resp.body ? resp.body : "", 0, NULL))) {
                fprintf(stderr, "%s: unreadable reply\n", what);
                ret_code = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        return ret_code;
}

static void print_size(uint64_t b, char *buf, size_t size)
{
        if (b >= 1024ull * 1048576)
                snprintf(buf, size, "%.1fGi", (double)b / (1024.0 * 1048576));
        else
                snprintf(buf, size, "%.1fMi", (double)b / 1048576.0);
}

static int print_list(json_t *j, enum cli_output o)
{
        json_t *items = json_object_get(j, "items"), *m;
        size_t i;

        if (o == CLI_OUTPUT_JSON) {
                char *t = json_dumps(j, JSON_INDENT(2));
                printf("%s\n", t ? t : "{}");
                free(t);
                return CLI_EXIT_OK;
        }
        printf("%-20s %-12s %-8s %-9s %-9s %-8s %-16s %s\n", "ID", "NAME", "AGE", "SIZE", "RAM",
               "STATUS", "MODE/PAUSE", "PARENT");
        json_array_foreach(items, i, m)
        {
                char created[64], age[16], size[16], ram[16];
                const char *name = json_string_value(json_object_get(m, "name"));
                const char *parent = json_string_value(json_object_get(m, "parent"));

                fk_format_rfc3339((uint64_t)json_integer_value(json_object_get(m, "createdNs")),
                                  created, sizeof(created));
                cli_format_age(created, (long long)time(NULL), age, sizeof(age));
                print_size((uint64_t)json_integer_value(json_object_get(m, "sizeBytes")), size,
                           sizeof(size));
                print_size((uint64_t)json_integer_value(json_object_get(m, "ramBytes")), ram,
                           sizeof(ram));
                const char *st = json_string_value(json_object_get(m, "status"));
                const char *mode = json_string_value(json_object_get(m, "mode"));
                char pause[32];

                snprintf(pause, sizeof(pause), "%s/%.1fms", mode ? mode : "stop-copy",
                         (double)json_integer_value(json_object_get(m, "pauseNs")) / 1e6);
                printf("%-20s %-12s %-8s %-9s %-9s %-8s %-16s %s\n",
                       json_string_value(json_object_get(m, "id")), name ? name : "-", age, size,
                       ram, st ? st : "Ready", pause, parent ? parent : "-");
        }
        return CLI_EXIT_OK;
}

/* One checkpoint or snapshot as YAML (default) or JSON, with created as RFC 3339. */
static int print_one(json_t *m, enum cli_output o)
{
        cleanup_free char *text = NULL;
        char created[64];

        if (json_object_get(m, "createdNs")) {
                fk_format_rfc3339((uint64_t)json_integer_value(json_object_get(m, "createdNs")),
                                  created, sizeof(created));
                json_object_set_new(m, "created", json_string(created));
        }
        if (o == CLI_OUTPUT_JSON)
                text = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
        else if (manifest_json_to_yaml(m, &text) < 0)
                text = NULL;
        if (!text)
                return CLI_EXIT_FAILURE;
        printf("%s%s", text, o == CLI_OUTPUT_JSON ? "\n" : "");
        return CLI_EXIT_OK;
}

/* The snapshots of the namespace: who uses each (the sessions whose disk it is under). */
static int print_snapshots(json_t *j, enum cli_output o)
{
        json_t *m;
        size_t i;

        if (o != CLI_OUTPUT_TABLE)
                return print_one(j, o);
        printf("%-22s %-16s %-8s %-9s %s\n", "ID", "SESSION", "AGE", "SIZE", "USED BY");
        json_array_foreach(json_object_get(j, "items"), i, m)
        {
                const char *created = json_string_value(json_object_get(m, "created"));
                cleanup_free char *users = NULL;
                char age[16], size[16];
                json_t *u;
                size_t k;

                cli_format_age(created ? created : "", (long long)time(NULL), age, sizeof(age));
                print_size((uint64_t)json_integer_value(json_object_get(m, "sizeBytes")), size,
                           sizeof(size));
                json_array_foreach(json_object_get(m, "usedBy"), k, u)
                {
                        if (fk_list_append(&users, ",", json_string_value(u)) < 0)
                                break;
                }
                printf("%-22s %-16s %-8s %-9s %s\n", json_string_value(json_object_get(m, "id")),
                       json_string_value(json_object_get(m, "session")), age, size,
                       users ? users : "-");
        }
        return CLI_EXIT_OK;
}

/* The phase of session name, or NULL (caller frees). */
static char *phase_of(const struct cli *c, const char *name)
{
        cleanup_free char *path = NULL;
        struct cli_response resp = {0};
        struct fk_error err = {0};
        char *phase = NULL;
        json_t *j;

        if (cli_session_path(c, name, "", &path) < 0 ||
            cli_request(c, "GET", path, NULL, &resp, &err) < 0 || resp.status != 200) {
                cli_response_done(&resp);
                return NULL;
        }
        j = json_loads(resp.body, 0, NULL);
        const char *p = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
        if (p)
                phase = strdup(p);
        json_decref(j);
        cli_response_done(&resp);
        return phase;
}

/* On a terminal, forking N shows the forks coming up ("3/5 Running") until all are Running or
 * Failed, or FORK_PROGRESS_MAX_S passed; scripts (no TTY) get the names at once, as before. */
static void fork_progress(const struct cli *c, json_t *names)
{
        size_t n = json_array_size(names), i;
        json_t *v;

        if (n == 0 || !isatty(STDERR_FILENO))
                return;
        for (unsigned t = 0; t < FORK_PROGRESS_MAX_S * 4; t++) {
                unsigned running = 0, failed = 0;

                json_array_foreach(names, i, v)
                {
                        cleanup_free char *ph = phase_of(c, json_string_value(v));

                        running += ph && strcmp(ph, "Running") == 0;
                        failed += ph && strcmp(ph, "Failed") == 0;
                }
                fprintf(stderr, "\rforks: %u/%zu Running, %u Failed", running, n, failed);
                if (running + failed == n)
                        break;
                usleep(250000);
        }
        fputc('\n', stderr);
}

/* checkpoint create --wait: until the checkpoint is Ready (its RAM file complete). */
static int wait_ready(const struct cli *c, const char *name, const char *id)
{
        cleanup_free char *suffix = NULL;

        if (fk_asprintf(&suffix, "/checkpoints/%s", id) < 0)
                return CLI_EXIT_FAILURE;
        for (unsigned t = 0; t < CK_WAIT_MAX_S * 20; t++) {
                json_t *m = NULL;
                const char *st;
                int r = call(c, "forklet checkpoint create --wait", "GET", name, suffix, NULL, &m);

                if (r != CLI_EXIT_OK)
                        return r; /* gone: its write failed (the session's events say why) */
                st = json_string_value(json_object_get(m, "status"));
                r = !st || strcmp(st, "Writing") != 0;
                json_decref(m);
                if (r)
                        return CLI_EXIT_OK;
                usleep(50000);
        }
        fprintf(stderr, "forklet checkpoint create --wait: %s still Writing after %d s\n", id,
                CK_WAIT_MAX_S);
        return CLI_EXIT_FAILURE;
}

static int run(const struct cli *c, const struct cli_fork_args *a, json_t **out)
{
        cleanup_free char *suffix = NULL;

        switch (a->verb) {
        case CLI_CHECKPOINT_CREATE:
                return call(c, "forklet checkpoint create", "POST", a->name, "/checkpoints",
                            json_object(), out);
        case CLI_CHECKPOINT_LIST:
                return call(c, "forklet checkpoint list", "GET", a->name, "/checkpoints", NULL,
                            out);
        case CLI_CHECKPOINT_INSPECT:
                if (fk_asprintf(&suffix, "/checkpoints/%s", a->id) < 0)
                        return CLI_EXIT_FAILURE;
                return call(c, "forklet checkpoint inspect", "GET", a->name, suffix, NULL, out);
        case CLI_CHECKPOINT_DELETE:
                if (fk_asprintf(&suffix, "/checkpoints/%s%s", a->id,
                                a->cascade ? "?cascade=true" : "") < 0)
                        return CLI_EXIT_FAILURE;
                return call(c, "forklet checkpoint delete", "DELETE", a->name, suffix, NULL, out);
        case CLI_FORK:
                return call(c, "forklet fork", "POST", a->name, "/forks",
                            json_pack("{s:s, s:i}", "from", a->id, "count", (int)a->count), out);
        case CLI_ROLLBACK:
                return call(c, "forklet rollback", "POST", a->name, "/rollback",
                            json_pack("{s:s}", "checkpoint", a->id), out);
        case CLI_SNAPSHOT_CREATE:
                return call(c, "forklet snapshot create", "POST", a->name, "/snapshots",
                            json_object(), out);
        case CLI_SNAPSHOT_LIST:
                return call(c, "forklet snapshot list", "GET", NULL, "/snapshots", NULL, out);
        case CLI_SNAPSHOT_INSPECT:
        case CLI_SNAPSHOT_DELETE:
                if (fk_asprintf(&suffix, "/snapshots/%s", a->id) < 0)
                        return CLI_EXIT_FAILURE;
                return a->verb == CLI_SNAPSHOT_DELETE ? call(c, "forklet snapshot delete", "DELETE",
                                                             NULL, suffix, NULL, out)
                                                      : call(c, "forklet snapshot inspect", "GET",
                                                             NULL, suffix, NULL, out);
        default:
                return call(c, "forklet restore", "POST", a->name, "/restore",
                            json_pack("{s:s}", "snapshot", a->id), out);
        }
}

int cli_fork_engine(const struct cli *c, int argc, char **argv)
{
        struct cli_fork_args a;
        struct fk_error err = {0};
        json_t *out = NULL, *v;
        size_t i;
        int r;

        if (cli_parse_fork(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        r = run(c, &a, &out);
        if (r != CLI_EXIT_OK)
                return r;
        switch (a.verb) {
        case CLI_CHECKPOINT_LIST:
                r = print_list(out, a.output);
                break;
        case CLI_CHECKPOINT_DELETE:
                printf("checkpoint/%s deleted\n", a.id);
                break;
        case CLI_CHECKPOINT_INSPECT:
        case CLI_SNAPSHOT_INSPECT:
                r = print_one(out, a.output);
                break;
        case CLI_SNAPSHOT_LIST:
                r = print_snapshots(out, a.output);
                break;
        case CLI_SNAPSHOT_DELETE:
                printf("snapshot/%s deleted\n", a.id);
                break;
        case CLI_FORK:
                json_array_foreach(json_object_get(out, "names"), i, v)
                        printf("%s\n", json_string_value(v));
                fflush(stdout);
                fork_progress(c, json_object_get(out, "names"));
                break;
        case CLI_ROLLBACK:
                printf("session/%s rolled back to %s\n", a.name, a.id);
                break;
        case CLI_RESTORE:
                printf("session/%s created from %s\n", a.name, a.id);
                break;
        default:
                printf("%s\n", json_string_value(json_object_get(out, "id")));
                fflush(stdout);
                if (a.verb == CLI_CHECKPOINT_CREATE && a.wait)
                        r = wait_ready(c, a.name,
                                       json_string_value(json_object_get(out, "id")) ?: "");
        }
        json_decref(out);
        return r;
}
