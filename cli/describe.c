/* SPDX-License-Identifier: MIT */
/* forklet describe NAME: the session's metadata, spec summary, status, conditions and its place
 * in its lineage, in a form meant for people (get -o json is the one meant for programs). */
#include "cli/cli.h"
#include "common/cleanup.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *str(const json_t *obj, const char *key)
{
        const char *s = json_string_value(json_object_get(obj, key));

        return s ? s : "-";
}

static void print_conditions(const json_t *status)
{
        json_t *conds = json_object_get(status, "conditions"), *c;
        size_t i;

        printf("Conditions:\n  %-14s %-7s %-12s %-21s %s\n", "TYPE", "STATUS", "REASON", "SINCE",
               "MESSAGE");
        json_array_foreach(conds, i, c)
        {
                printf("  %-14s %-7s %-12s %-21s %s\n", str(c, "type"), str(c, "status"),
                       str(c, "reason"), str(c, "lastTransitionTime"), str(c, "message"));
        }
}

static void print_events(const json_t *status)
{
        json_t *events = json_object_get(status, "events"), *e;
        size_t i;

        if (!json_array_size(events))
                return;
        printf("Events:\n  %-21s %-8s %-20s %s\n", "TIME", "TYPE", "REASON", "MESSAGE");
        json_array_foreach(events, i, e)
                printf("  %-21s %-8s %-20s %s\n", str(e, "time"), str(e, "type"), str(e, "reason"),
                       str(e, "message"));
}

static void print_network(const json_t *n)
{
        const json_t *dns = json_object_get(n, "dns");

        if (!json_is_string(json_object_get(n, "netns")))
                return;
        printf("Network:      netns %s, guest %s, uplink %s, egress %s\n", str(n, "netns"),
               str(n, "guestIP"), str(n, "uplinkAddress"), str(n, "egress"));
        if (json_is_object(dns))
                printf("Resolver:     %s: %lld queries, %lld refused, %lld forwarded, %lld "
                       "addresses learned\n",
                       str(n, "resolver"),
                       (long long)json_integer_value(json_object_get(dns, "queries")),
                       (long long)json_integer_value(json_object_get(dns, "refused")),
                       (long long)json_integer_value(json_object_get(dns, "forwarded")),
                       (long long)json_integer_value(json_object_get(dns, "learned")));
}

/* status.identity: what this machine shares with others because memory was copied. */
static void print_identity(const json_t *id)
{
        const json_t *v;
        size_t i;

        if (!json_is_object(id))
                return;
        printf("Identity:     fork id %s, from checkpoint %s, kernel reseeded %s\n",
               json_is_string(json_object_get(id, "forkId")) ? str(id, "forkId") : "-",
               json_is_string(json_object_get(id, "checkpoint")) ? str(id, "checkpoint") : "-",
               json_is_true(json_object_get(id, "kernelReseeded")) ? "yes" : "NO");
        printf("  Inherited secrets (copied):");
        json_array_foreach(json_object_get(id, "inheritedSecrets"), i, v)
                printf(" %s", json_string_value(v));
        printf("%s\n  Minted secrets (new):",
               json_array_size(json_object_get(id, "inheritedSecrets")) ? "" : " -");
        json_array_foreach(json_object_get(id, "mintedSecrets"), i, v)
                printf(" %s", json_string_value(v));
        printf("%s\n", json_array_size(json_object_get(id, "mintedSecrets")) ? "" : " -");
}

/* status.lastFailure: why the last VM died and what its console said last. */
static void print_last_failure(const json_t *f)
{
        const json_t *line;
        size_t i;

        if (!json_is_object(f))
                return;
        printf("Last failure: %s %s: %s\n", str(f, "time"), str(f, "reason"), str(f, "message"));
        if (!json_array_size(json_object_get(f, "consoleTail")))
                return;
        printf("  Console (last %zu lines):\n", json_array_size(json_object_get(f, "consoleTail")));
        json_array_foreach(json_object_get(f, "consoleTail"), i, line)
                printf("    %s\n", json_string_value(line));
}

static void describe(const json_t *s)
{
        json_t *meta = json_object_get(s, "metadata"), *spec = json_object_get(s, "spec");
        json_t *st = json_object_get(s, "status"), *vm = json_object_get(st, "vm");
        json_t *res = json_object_get(st, "resources");

        printf("Name:         %s\nNamespace:    %s\nSource:       %s\n", str(meta, "name"),
               str(meta, "namespace"), str(meta, "source"));
        printf("Created:      %s\n", str(meta, "creationTimestamp"));
        if (json_object_get(meta, "deletionTimestamp"))
                printf("Deleting:     since %s\n", str(meta, "deletionTimestamp"));
        printf("Generation:   %lld (observed %lld)\n",
               (long long)json_integer_value(json_object_get(meta, "generation")),
               (long long)json_integer_value(json_object_get(st, "observedGeneration")));
        printf("Spec:         sizeClass %s, image %s, state %s\n", str(spec, "sizeClass"),
               str(spec, "image"), str(spec, "state"));
        printf("Phase:        %s\n", str(st, "phase"));
        if (json_is_object(vm))
                printf("VM:           pid %lld, accel %s\n",
                       (long long)json_integer_value(json_object_get(vm, "pid")), str(vm, "accel"));
        printf("Started:      %s\n", str(st, "startedAt"));
        if (json_is_string(json_object_get(st, "cgroup")))
                printf("Cgroup:       %s\n", str(st, "cgroup"));
        if (json_is_object(res))
                printf("Resources:    cpu %.3f s, memory %lld MiB (peak %lld MiB), %lld pids, "
                       "%lld OOM kills\n",
                       (double)json_integer_value(json_object_get(res, "cpuUsageNs")) / 1e9,
                       (long long)json_integer_value(json_object_get(res, "memoryCurrent")) >> 20,
                       (long long)json_integer_value(json_object_get(res, "memoryPeak")) >> 20,
                       (long long)json_integer_value(json_object_get(res, "pids")),
                       (long long)json_integer_value(json_object_get(res, "oomKills")));
        print_network(json_object_get(st, "network"));
        print_identity(json_object_get(st, "identity"));
        print_conditions(st);
        print_last_failure(json_object_get(st, "lastFailure"));
        print_events(st);
}

/* Where the session stands in its lineage: what it was forked from, its forks, and the tree
 * from its topmost ancestor with its own row marked. Best effort: a failed list prints no tree. */
static void print_lineage(const struct cli *c, const json_t *s)
{
        json_t *st = json_object_get(s, "status"), *of = json_object_get(st, "forkOf"), *f;
        const char *name = str(json_object_get(s, "metadata"), "name");
        cleanup_free char *text = NULL;
        struct fk_error err = {0};
        json_t *list = NULL;
        size_t i;

        if (json_is_object(of))
                printf("Fork of:      %s, checkpoint %s\n", str(of, "session"),
                       str(of, "checkpoint"));
        printf("Forks:       ");
        json_array_foreach(json_object_get(st, "forks"), i, f)
                printf("%s %s", i ? "," : "", json_string_value(f));
        printf("%s\n", json_array_size(json_object_get(st, "forks")) ? "" : " -");
        if (!json_is_object(of) && !json_array_size(json_object_get(st, "checkpoints")))
                return; /* nothing to draw but the session itself */
        if (cli_get_namespace_list(c, &list, &err) < 0) {
                printf("Lineage:      - (%s)\n", err.msg);
                return;
        }
        if (cli_tree_render(list,
                            &(struct cli_tree_opts){.ns = c->namespace,
                                                    .root = cli_tree_root(list, c->namespace, name),
                                                    .mark = name,
                                                    .indent = "  ",
                                                    .now_s = (long long)time(NULL)},
                            &text) >= 0)
                printf("Lineage:\n%s", text);
        json_decref(list);
}

int cli_describe(const struct cli *c, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct fk_error err = {0};
        json_t *j = NULL;

        if (cli_parse_files(argc, argv, "describe", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        free(a.files);
        if (cli_get_session(c, a.name, &j, &err) < 0) {
                fprintf(stderr, "forklet describe: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        describe(j);
        print_lineage(c, j);
        json_decref(j);
        return CLI_EXIT_OK;
}
