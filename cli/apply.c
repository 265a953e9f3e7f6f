/* SPDX-License-Identifier: MIT */
/* forklet apply -f FILE...: parse locally (errors with file:line:col), send each Session as
 * JSON, print "session/NAME created|configured|unchanged"; what the daemon refuses is printed
 * against the file's line and column too. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static int apply_one(const struct cli *c, const struct cli_manifest_doc *d)
{
        const struct session_manifest *m = d->m;
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
                cli_print_api_error_at(what, &resp, d);
                ret = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
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
                if (cli_for_each_manifest(c, a.files[i], apply_one) != CLI_EXIT_OK)
                        ret = CLI_EXIT_FAILURE;
        free(a.files);
        return ret;
}
