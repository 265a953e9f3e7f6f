/* SPDX-License-Identifier: MIT */
/* forklet delete NAME | -f FILE...: deletes sessions; the daemon stops the VM and removes its
 * files in the background (forklet wait NAME --for=Deleted waits for that). */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "manifest/manifest.h"

#include <stdio.h>
#include <stdlib.h>

static int delete_one(const struct cli *c, const char *ns, const char *name)
{
        struct cli c2 = {.socket = c->socket, .namespace = ns};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        cleanup_free char *path = NULL;
        int ret = CLI_EXIT_OK;

        if (cli_session_path(&c2, name, NULL, &path) < 0)
                return CLI_EXIT_FAILURE;
        if (cli_request(c, "DELETE", path, NULL, &resp, &err) < 0) {
                fprintf(stderr, "forklet delete: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        if (resp.status == 200)
                printf("session/%s deleted\n", name);
        else if (resp.status == 404)
                printf("session/%s already gone\n", name); /* delete is idempotent */
        else {
                cli_print_api_error("forklet delete", &resp);
                ret = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        return ret;
}

static int delete_manifest(const struct cli *c, const struct cli_manifest_doc *d)
{
        return delete_one(c, d->m->namespace, d->m->name);
}

int cli_delete(const struct cli *c, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct fk_error err = {0};
        int ret = CLI_EXIT_OK;

        if (cli_parse_files(argc, argv, "delete", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (a.name)
                ret = delete_one(c, c->namespace, a.name);
        for (size_t i = 0; i < a.n_files; i++)
                if (cli_for_each_manifest(c, a.files[i], delete_manifest) != CLI_EXIT_OK)
                        ret = CLI_EXIT_FAILURE;
        free(a.files);
        return ret;
}
