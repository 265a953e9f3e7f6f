/* SPDX-License-Identifier: MIT */
/* forklet node [-o json|yaml]: the node's accelerator, cgroups, capacity (allocatable, used,
 * free) and how many more sessions of each size class fit. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

int cli_parse_node(int argc, char **argv, enum cli_output *ret, struct fk_error *err)
{
        enum cli_output o = CLI_OUTPUT_TABLE;

        for (int i = 1; i < argc; i++) {
                const char *v = NULL;

                if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0)
                        v = i + 1 < argc ? argv[++i] : "";
                else if (strncmp(argv[i], "--output=", 9) == 0)
                        v = argv[i] + 9;
                else
                        return fk_error_set(err, -EINVAL, "node: unexpected argument \"%s\"",
                                            argv[i]);
                if (strcmp(v, "json") == 0)
                        o = CLI_OUTPUT_JSON;
                else if (strcmp(v, "yaml") == 0)
                        o = CLI_OUTPUT_YAML;
                else
                        return fk_error_set(err, -EINVAL, "-o: unknown format \"%s\" (json, yaml)",
                                            v);
        }
        *ret = o;
        return 0;
}

static long long num(const json_t *obj, const char *key)
{
        return (long long)json_integer_value(json_object_get(obj, key));
}

static void print_amounts(const char *what, const json_t *a)
{
        printf("  %-12s %6lld vCPU  %8lld MiB  %5lld sessions\n", what, num(a, "vcpus"),
               num(a, "memoryMiB"), num(a, "sessions"));
}

static void print_node(const json_t *j)
{
        json_t *cap = json_object_get(j, "capacity"), *cg = json_object_get(j, "cgroups"), *c;
        json_t *host = json_object_get(cap, "host");
        size_t i;

        printf("Node:       %s (accel %s)\n", json_string_value(json_object_get(j, "nodeName")),
               json_string_value(json_object_get(j, "accel")));
        if (json_is_true(json_object_get(cg, "enabled")))
                printf("Cgroups:    %s under %s\n",
                       json_string_value(json_object_get(cg, "version")),
                       json_string_value(json_object_get(cg, "parent")));
        else
                printf("Cgroups:    disabled (sessions run without limits)\n");
        printf("Host:       %lld CPUs, %lld MiB (reserve %lld MiB, CPU overcommit %lld%%, QEMU "
               "overhead %lld MiB per session)\nCapacity:\n",
               num(host, "cpus"), num(host, "memoryMiB"), num(cap, "reserveMemoryMiB"),
               num(cap, "cpuOvercommitPercent"), num(cap, "qemuOverheadMiB"));
        print_amounts("allocatable", json_object_get(cap, "allocatable"));
        print_amounts("used", json_object_get(cap, "used"));
        print_amounts("free", json_object_get(cap, "free"));
        printf("Size classes:\n  %-12s %5s %9s %10s %s\n", "NAME", "VCPUS", "RAM MiB", "CHARGE MiB",
               "FITS");
        json_array_foreach(json_object_get(cap, "sizeClasses"), i, c)
        {
                printf("  %-12s %5lld %9lld %10lld %lld\n",
                       json_string_value(json_object_get(c, "name")), num(c, "vcpus"),
                       num(c, "memoryMiB"), num(c, "chargeMiB"), num(c, "fits"));
        }
}

int cli_node(const struct cli *c, int argc, char **argv)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        cleanup_free char *text = NULL;
        enum cli_output o;
        json_t *j;

        if (cli_parse_node(argc, argv, &o, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (cli_request(c, "GET", "/api/v1alpha1/node", NULL, &resp, &err) < 0) {
                fprintf(stderr, "forklet node: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        j = resp.status == 200 ? json_loads(resp.body, 0, NULL) : NULL;
        if (!j) {
                cli_print_api_error("forklet node", &resp);
                cli_response_done(&resp);
                return CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        if (o == CLI_OUTPUT_TABLE)
                print_node(j);
        else if (o == CLI_OUTPUT_JSON && (text = json_dumps(j, JSON_INDENT(2))))
                puts(text);
        else if (o == CLI_OUTPUT_YAML && manifest_json_to_yaml(j, &text) >= 0)
                fputs(text, stdout);
        json_decref(j);
        return o == CLI_OUTPUT_TABLE || text ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
