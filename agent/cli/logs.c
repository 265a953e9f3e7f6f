/* SPDX-License-Identifier: MIT */
/* forklet logs [--previous] NAME: prints the session's serial console log (its last MiB) via
 * the API; --previous the one before (the previous boot's, or what rotation moved aside). */
#include "agent/cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int cli_logs(const struct cli *c, int argc, char **argv)
{
        struct cli_files_args a = {0};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        cleanup_free char *path = NULL;
        int ret = CLI_EXIT_OK;

        if (cli_parse_files(argc, argv, "logs", &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        free(a.files);
        if (cli_session_path(c, a.name, a.previous ? "/log?previous=1" : "/log", &path) < 0 ||
            cli_request(c, "GET", path, NULL, &resp, &err) < 0) {
                fprintf(stderr, "forklet logs: %s\n", err.msg[0] ? err.msg : "out of memory");
                return CLI_EXIT_FAILURE;
        }
        if (resp.status == 200)
                (void)fk_write_all(STDOUT_FILENO, resp.body ?: "", resp.size);
        else {
                cli_print_api_error("forklet logs", &resp);
                ret = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        return ret;
}
