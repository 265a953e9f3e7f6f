/* SPDX-License-Identifier: MIT */
/* forklet image pull REF: starts (or joins) the node's pull of REF and follows it until the
 * image is in the store or the pull failed; on a terminal a progress bar on stderr. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PULL_POLL_MS  300
#define PULL_MAX_WAIT (6 * 3600) /* seconds: a bound, not an expectation */
#define BAR_WIDTH     30

void cli_image_bar(char *buf, size_t size, long long done, long long total)
{
        char bar[BAR_WIDTH + 1];
        int fill = total > 0 ? (int)(done * BAR_WIDTH / total) : 0;

        fill = fill < 0 ? 0 : fill > BAR_WIDTH ? BAR_WIDTH : fill;
        memset(bar, '#', (size_t)fill);
        memset(bar + fill, '.', (size_t)(BAR_WIDTH - fill));
        bar[BAR_WIDTH] = '\0';
        if (total > 0)
                snprintf(buf, size, "[%s] %5.1f of %.1f MiB", bar, (double)done / 1048576.0,
                         (double)total / 1048576.0);
        else
                snprintf(buf, size, "[%s] %5.1f MiB", bar, (double)done / 1048576.0);
}

static json_t *post(const struct cli *c, const char *body, long *ret_status)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        json_t *j = NULL;

        if (cli_request(c, "POST", "/api/v1alpha1/images", body, &resp, &err) < 0) {
                fprintf(stderr, "forklet image pull: %s\n", err.msg);
                return NULL;
        }
        *ret_status = resp.status;
        if (resp.status / 100 == 2)
                j = json_loads(resp.body, 0, NULL);
        if (!j)
                cli_print_api_error("image pull", &resp);
        cli_response_done(&resp);
        return j;
}

int cli_image_pull(const struct cli *c, const char *ref)
{
        bool tty = isatty(2) == 1;
        cleanup_free char *start = NULL, *poll = NULL;
        json_t *req = json_pack("{s:s}", "reference", ref);
        const char *state = "Pulling";
        long status = 0;
        char line[128];
        json_t *j = NULL;

        start = req ? json_dumps(req, 0) : NULL;
        if (req)
                json_object_set_new(req, "poll", json_true());
        poll = req ? json_dumps(req, 0) : NULL;
        json_decref(req);
        if (!start || !poll)
                return CLI_EXIT_FAILURE;
        j = post(c, start, &status);
        for (unsigned i = 0; j && i < PULL_MAX_WAIT * 1000 / PULL_POLL_MS; i++) {
                state = json_string_value(json_object_get(j, "state"));
                if (!state || strcmp(state, "Pulling") != 0)
                        break;
                if (tty) {
                        cli_image_bar(line, sizeof(line),
                                      json_integer_value(json_object_get(j, "bytesDone")),
                                      json_integer_value(json_object_get(j, "bytesTotal")));
                        fprintf(stderr, "\r%s %s", ref, line);
                }
                nanosleep(&(struct timespec){0, PULL_POLL_MS * 1000000L}, NULL);
                json_decref(j);
                j = post(c, poll, &status);
        }
        if (tty && j)
                fprintf(stderr, "\n");
        if (!j)
                return CLI_EXIT_FAILURE;
        if (!state || strcmp(state, "Ready") != 0) {
                fprintf(stderr, "forklet image pull: %s: %s\n", ref,
                        json_string_value(json_object_get(j, "message")));
                json_decref(j);
                return CLI_EXIT_FAILURE;
        }
        printf("%s %s\n", ref, json_string_value(json_object_get(j, "digest")));
        json_decref(j);
        return CLI_EXIT_OK;
}
