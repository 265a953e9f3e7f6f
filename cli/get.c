/* SPDX-License-Identifier: MIT */
/* forklet get sessions | session NAME [-o json|yaml]: a NAME PHASE PID AGE table by default. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int print_json(const json_t *j, enum cli_output o)
{
        cleanup_free char *text = NULL;

        if (o == CLI_OUTPUT_YAML) {
                if (manifest_json_to_yaml(j, &text) < 0)
                        return CLI_EXIT_FAILURE;
                fputs(text, stdout);
                return CLI_EXIT_OK;
        }
        text = json_dumps(j, JSON_INDENT(2));
        if (!text)
                return CLI_EXIT_FAILURE;
        puts(text);
        return CLI_EXIT_OK;
}

static void print_row(const json_t *s, long long now)
{
        json_t *meta = json_object_get(s, "metadata"), *status = json_object_get(s, "status");
        const char *phase = json_string_value(json_object_get(status, "phase"));
        json_t *pid = json_object_get(json_object_get(status, "vm"), "pid");
        char age[32], pidbuf[32] = "-";

        if (json_is_integer(pid) && json_integer_value(pid) > 0)
                snprintf(pidbuf, sizeof(pidbuf), "%lld", (long long)json_integer_value(pid));
        cli_format_age(json_string_value(json_object_get(meta, "creationTimestamp")), now, age,
                       sizeof(age));
        printf("%-24s %-10s %-8s %s\n", json_string_value(json_object_get(meta, "name")),
               phase ? phase : "-", pidbuf, age);
}

static int get_list(const struct cli *c, enum cli_output o)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        json_t *j, *items, *v;
        size_t i;
        int ret;

        if (cli_request(c, "GET", "/api/v1alpha1/sessions", NULL, &resp, &err) < 0) {
                fprintf(stderr, "forklet get: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        j = resp.status == 200 ? json_loads(resp.body, 0, NULL) : NULL;
        if (!j) {
                cli_print_api_error("forklet get sessions", &resp);
                cli_response_done(&resp);
                return CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        if (o != CLI_OUTPUT_TABLE) {
                ret = print_json(j, o);
                json_decref(j);
                return ret;
        }
        items = json_object_get(j, "items");
        printf("%-24s %-10s %-8s %s\n", "NAME", "PHASE", "PID", "AGE");
        json_array_foreach(items, i, v) print_row(v, (long long)time(NULL));
        json_decref(j);
        return CLI_EXIT_OK;
}

int cli_get(const struct cli *c, int argc, char **argv)
{
        struct cli_get_args a = {0};
        struct fk_error err = {0};
        json_t *j = NULL;
        int ret;

        if (cli_parse_get(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (a.list)
                return get_list(c, a.output);
        if (cli_get_session(c, a.name, &j, &err) < 0) {
                fprintf(stderr, "forklet get: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        if (a.output == CLI_OUTPUT_TABLE) {
                printf("%-24s %-10s %-8s %s\n", "NAME", "PHASE", "PID", "AGE");
                print_row(j, (long long)time(NULL));
                ret = CLI_EXIT_OK;
        } else
                ret = print_json(j, a.output);
        json_decref(j);
        return ret;
}
