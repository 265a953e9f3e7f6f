/* SPDX-License-Identifier: MIT */
/* forklet logs [--previous] NAME: prints the session's serial console log (its last MiB) via
 * the API; --previous the one before (the previous boot's, or what rotation moved aside). The
 * guest wrote it: on a terminal, its control bytes are shown escaped. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int cli_write_for_terminal(int fd, const void *data, size_t size)
{
        const unsigned char *in = data;
        cleanup_free char *out = malloc(size * 4 + 1);
        size_t n = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < size; i++) {
                unsigned char b = in[i];

                if (b == '\n' || b == '\t' || (b >= 0x20 && b != 0x7f) ||
                    (b == '\r' && i + 1 < size && in[i + 1] == '\n'))
                        out[n++] = (char)b;
                else
                        n += (size_t)snprintf(out + n, 5, "\\x%02x", b);
        }
        return fk_write_all(fd, out, n);
}

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
        if (resp.status == 200 && isatty(STDOUT_FILENO))
                (void)cli_write_for_terminal(STDOUT_FILENO, resp.body ?: "", resp.size);
        else if (resp.status == 200)
                (void)fk_write_all(STDOUT_FILENO, resp.body ?: "", resp.size);
        else {
                cli_print_api_error("forklet logs", &resp);
                ret = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        return ret;
}
