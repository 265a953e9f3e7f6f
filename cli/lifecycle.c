/* SPDX-License-Identifier: MIT */
/* forklet pause|resume|stop|start NAME [--no-wait] [--timeout=S]: sets the session's
 * spec.state (Paused, Running, Stopped, Running) through the API and, unless --no-wait, waits
 * until the phase is reached. Repeating a verb is a no-op that succeeds. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>

static const char *done_word(const char *verb)
{
        static const char *const t[][2] = {
                {"pause", "paused"},
                {"resume", "resumed"},
                {"stop", "stopped"},
                {"start", "started"},
        };

        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                if (strcmp(t[i][0], verb) == 0)
                        return t[i][1];
        return verb;
}

int cli_action(const struct cli *c, int argc, char **argv)
{
        struct cli_action_args a = {0};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        cleanup_free char *path = NULL, *suffix = NULL;
        int ret = CLI_EXIT_OK;

        if (cli_parse_action(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (fk_asprintf(&suffix, "/%s?wait=%u", argv[0], a.wait ? a.timeout_s : 0) < 0 ||
            cli_session_path(c, a.name, suffix, &path) < 0) {
                fprintf(stderr, "forklet %s: out of memory\n", argv[0]);
                return CLI_EXIT_FAILURE;
        }
        if (cli_request(c, "POST", path, NULL, &resp, &err) < 0) {
                fprintf(stderr, "forklet %s: %s\n", argv[0], err.msg);
                return CLI_EXIT_FAILURE;
        }
        if (resp.status == 200)
                printf("session/%s %s%s\n", a.name, done_word(argv[0]),
                       resp.apply && strcmp(resp.apply, "unchanged") == 0 ? " (unchanged)" : "");
        else {
                char what[64];

                snprintf(what, sizeof(what), "forklet %s", argv[0]);
                cli_print_api_error(what, &resp);
                ret = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        return ret;
}
