/* SPDX-License-Identifier: MIT */
/* Shared by the verbs that take -f FILE: load every Session of a manifest file (printing the
 * validation messages) and run a verb's action on each. */
#include "cli/cli.h"
#include "manifest/manifest.h"

#include <stdio.h>
#include <stdlib.h>

int cli_for_each_manifest(const struct cli *c, const char *file,
                          int (*fn)(const struct cli *c, const struct session_manifest *m))
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
                if (fn(c, v[i]) != CLI_EXIT_OK)
                        ret = CLI_EXIT_FAILURE;
                session_manifest_free(v[i]);
        }
        free(v);
        manifest_diag_done(&diag);
        return ret;
}
