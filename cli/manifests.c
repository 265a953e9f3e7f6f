/* SPDX-License-Identifier: MIT */
/* Shared by the verbs that take -f FILE: load every Session of a manifest file (printing the
 * validation messages) and run a verb's action on each. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file's text, or NULL (messages then come without positions): read once more after
 * manifest_load_sessions_file(), which reported any read error already. */
static char *read_source(const char *file, size_t *ret_size)
{
        char *buf = NULL;

        if (fk_read_file(file, MANIFEST_MAX_FILE_SIZE, &buf, ret_size) < 0)
                return NULL;
        return buf;
}

int cli_for_each_manifest(const struct cli *c, const char *file,
                          int (*fn)(const struct cli *c, const struct cli_manifest_doc *d))
{
        struct manifest_diag diag = {0};
        struct session_manifest **v = NULL;
        cleanup_free char *buf = NULL;
        size_t n = 0, size = 0;
        int ret = CLI_EXIT_OK;

        if (manifest_load_sessions_file(file, NULL, &v, &n, &diag) < 0) {
                for (size_t i = 0; i < diag.n; i++)
                        fprintf(stderr, "%s\n", diag.messages[i]);
                if (diag.n == 0)
                        fprintf(stderr, "%s: cannot load\n", file);
                manifest_diag_done(&diag);
                return CLI_EXIT_FAILURE;
        }
        buf = read_source(file, &size);
        for (size_t i = 0; i < n; i++) {
                struct cli_manifest_doc d = {
                        .m = v[i], .file = file, .buf = buf, .size = size, .index = i};

                if (fn(c, &d) != CLI_EXIT_OK)
                        ret = CLI_EXIT_FAILURE;
                session_manifest_free(v[i]);
        }
        free(v);
        manifest_diag_done(&diag);
        return ret;
}
