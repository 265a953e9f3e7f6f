/* SPDX-License-Identifier: MIT */
/* forklet validate -f FILE... [--config NODE.yaml]: offline manifest check; every error is
 * printed. Exit 0 valid, 1 invalid, 2 usage. */
#include "cli/cli.h"
#include "manifest/manifest.h"

#include <stdio.h>
#include <stdlib.h>

static int load_config(const char *path, struct node_config **ret)
{
        struct manifest_diag diag = {0};
        int r;

        r = node_config_load_file(path, ret, &diag);
        for (size_t i = 0; i < diag.n; i++)
                fprintf(stderr, "%s\n", diag.messages[i]);
        if (r < 0 && diag.n == 0)
                fprintf(stderr, "%s: cannot load node config\n", path);
        manifest_diag_done(&diag);
        return r;
}

static bool validate_file(const char *path, const struct node_config *cfg)
{
        struct manifest_diag diag = {0};
        struct session_manifest **v = NULL;
        size_t n = 0;
        int r;

        r = manifest_load_sessions_file(path, cfg, &v, &n, &diag);
        if (r < 0) {
                for (size_t i = 0; i < diag.n; i++)
                        fprintf(stderr, "%s\n", diag.messages[i]);
                if (diag.n == 0)
                        fprintf(stderr, "%s: invalid\n", path);
                manifest_diag_done(&diag);
                return false;
        }
        for (size_t i = 0; i < n; i++) {
                printf("%s: session/%s valid\n", path, v[i]->name);
                session_manifest_free(v[i]);
        }
        free(v);
        manifest_diag_done(&diag);
        return true;
}

int cli_validate(const struct cli *c, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct node_config *cfg = NULL;
        struct fk_error err = {0};
        bool ok = true;

        (void)c;
        if (cli_parse_files(argc, argv, "validate", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (a.config && load_config(a.config, &cfg) < 0) {
                free(a.files);
                return CLI_EXIT_FAILURE;
        }
        for (size_t i = 0; i < a.n_files; i++)
                ok = validate_file(a.files[i], cfg) && ok;
        node_config_free(cfg);
        free(a.files);
        return ok ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
