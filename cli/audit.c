/* SPDX-License-Identifier: MIT */
/* forklet audit verify [--file PATH] [-o json|yaml]: checks the audit log's SHA-256 chain,
 * locally when --file is given, else the daemon checks its own log. Names the first bad line. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "core/core.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_audit(int argc, char **argv, struct cli_audit_args *ret, struct fk_error *err)
{
        struct cli_audit_args a = {0};

        if (argc < 2 || strcmp(argv[1], "verify") != 0)
                return fk_error_set(err, -EINVAL, "audit: expected \"verify\"");
        for (int i = 2; i < argc; i++) {
                const char *v = NULL;

                if (strncmp(argv[i], "--file=", 7) == 0)
                        a.file = argv[i] + 7;
                else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc)
                        a.file = argv[++i];
                else if (strncmp(argv[i], "--output=", 9) == 0)
                        v = argv[i] + 9;
                else if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) &&
                         i + 1 < argc)
                        v = argv[++i];
                else
                        return fk_error_set(err, -EINVAL, "audit verify: unexpected \"%s\"",
                                            argv[i]);
                if (v && strcmp(v, "json") == 0)
                        a.output = CLI_OUTPUT_JSON;
                else if (v && strcmp(v, "yaml") == 0)
                        a.output = CLI_OUTPUT_YAML;
                else if (v)
                        return fk_error_set(err, -EINVAL, "-o: unknown format \"%s\" (json, yaml)",
                                            v);
        }
        *ret = a;
        return 0;
}

/* Checks the chain of the file at path line by line (the check forkletd makes of its own log).
 * 0, -EBADMSG with *ret_bad_line, or another -errno; err says why. */
static int verify_file(const char *path, size_t *ret_lines, size_t *ret_bad_line,
                       struct fk_error *err)
{
        cleanup_fclose FILE *f = fopen(path, "re");

        if (!f)
                return fk_error_set(err, -errno, "open %s: %m", path);
        return core_audit_verify(f, ret_lines, ret_bad_line, err);
}

/* The report as the daemon would send it, from a local check. */
static json_t *verify_local(const char *path)
{
        struct fk_error err = {0};
        size_t lines = 0, bad = 0;
        int r;

        r = verify_file(path, &lines, &bad, &err);
        if (r < 0 && r != -EBADMSG) {
                fprintf(stderr, "forklet audit verify: %s\n", err.msg);
                return NULL;
        }
        return json_pack("{s:s, s:s, s:b, s:I, s:I, s:s}", "kind", "AuditVerify", "path", path,
                         "ok", r >= 0, "lines", (json_int_t)lines, "badLine", (json_int_t)bad,
                         "message", r >= 0 ? "chain intact" : err.msg);
}

static json_t *verify_remote(const struct cli *c)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        json_t *j = NULL;

        if (cli_request(c, "GET", "/api/v1alpha1/audit/verify", NULL, &resp, &err) < 0) {
                fprintf(stderr, "forklet audit verify: %s\n", err.msg);
                return NULL;
        }
        if (resp.status == 200)
                j = json_loads(resp.body, 0, NULL);
        if (!j)
                cli_print_api_error("forklet audit verify", &resp);
        cli_response_done(&resp);
        return j;
}

static void print_report(const json_t *j, enum cli_output o)
{
        cleanup_free char *text = NULL;
        const char *path = json_string_value(json_object_get(j, "path"));

        if (o == CLI_OUTPUT_YAML && manifest_json_to_yaml(j, &text) >= 0)
                fputs(text, stdout);
        else if (o == CLI_OUTPUT_JSON && (text = json_dumps(j, JSON_INDENT(2))))
                puts(text);
        else if (json_is_true(json_object_get(j, "ok")))
                printf("%s: %lld lines, chain intact\n", path,
                       (long long)json_integer_value(json_object_get(j, "lines")));
        else
                printf("%s: BROKEN at %s\n", path,
                       json_string_value(json_object_get(j, "message")));
}

int cli_audit(const struct cli *c, int argc, char **argv)
{
        struct cli_audit_args a;
        struct fk_error err = {0};
        json_t *j;
        int ret;

        if (cli_parse_audit(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        j = a.file ? verify_local(a.file) : verify_remote(c);
        if (!j)
                return CLI_EXIT_FAILURE;
        print_report(j, a.output);
        ret = json_is_true(json_object_get(j, "ok")) ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
        json_decref(j);
        return ret;
}
