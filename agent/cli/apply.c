/* SPDX-License-Identifier: MIT */
/* forklet apply -f FILE...: parse locally (errors with file:line:col), send each Session as
 * JSON, print "session/NAME created|configured|unchanged". */
#include "agent/cli/cli.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static int apply_one(const struct cli *c, const struct session_manifest *m)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        cleanup_free char *body = NULL, *path = NULL;
        json_t *j = session_manifest_to_json(m);
        int ret = CLI_EXIT_OK;

        body = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!body || asprintf(&path, "/api/v1alpha1/namespaces/%s/sessions", m->namespace) < 0) {
                fprintf(stderr, "forklet apply: out of memory\n");
                return CLI_EXIT_FAILURE;
        }
        if (cli_request(c, "POST", path, body, &resp, &err) < 0) {
                fprintf(stderr, "forklet apply: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        if (resp.status == 200 || resp.status == 201)
                printf("session/%s %s\n", m->name, resp.apply ? resp.apply : "configured");
        else {
                char what[128];

                snprintf(what, sizeof(what), "forklet apply: session/%s", m->name);
                cli_print_api_error(what, &resp);
                ret = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        return ret;
}

static int apply_file(const struct cli *c, const char *file)
{
        struct manifest_diag diag = {0};
        struct session_manifest **v = NULL;
        size_t n = 0;
        int ret = CLI_EXIT_OK;

        if (manifest_load_sessions_file(file, NULL, &v, &n, &diag) < 0) {
                for (size_t i = 0; i < diag.n; i++)
                        fprintf(stderr, "%s\n", diag.messages[i]);
                if (diag.n == 0)
                        fprintf(stderr, "%s: cannot load\n", file);
                manifest_diag_done(&diag);
                return CLI_EXIT_FAILURE;
        }
        for (size_t i = 0; i < n; i++) {
                if (apply_one(c, v[i]) != CLI_EXIT_OK)
                        ret = CLI_EXIT_FAILURE;
                session_manifest_free(v[i]);
        }
        free(v);
        manifest_diag_done(&diag);
        return ret;
}

int cli_apply(const struct cli *c, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct fk_error err = {0};
        int ret = CLI_EXIT_OK;

        if (cli_parse_files(argc, argv, "apply", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        for (size_t i = 0; i < a.n_files; i++)
                if (apply_file(c, a.files[i]) != CLI_EXIT_OK)
                        ret = CLI_EXIT_FAILURE;
        free(a.files);
        return ret;
}
