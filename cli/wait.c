/* SPDX-License-Identifier: MIT */
/* forklet wait NAME --for=PHASE --timeout=S: polls the session; 0 when the phase is reached,
 * 1 on timeout, when it went Failed for good (with the reason; restartPolicy OnFailure keeps
 * waiting) or at once when there is no such session (404). --for=Deleted waits for it to go
 * (at once when it is not there). */
#include "cli/cli.h"
#include "core/core.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define WAIT_POLL_MS 250

/* The Ready condition's message, for telling why a session failed. */
static const char *ready_message(const json_t *s)
{
        json_t *conds = json_object_get(json_object_get(s, "status"), "conditions"), *v;
        size_t i;

        json_array_foreach(conds, i, v)
        {
                if (strcmp(json_string_value(json_object_get(v, "type")) ?: "", "Ready") == 0)
                        return json_string_value(json_object_get(v, "message"));
        }
        return NULL;
}

/* A Failed session with restartPolicy OnFailure will be booted again: keep waiting. */
static bool restarts(const json_t *s)
{
        const char *p =
                json_string_value(json_object_get(json_object_get(s, "spec"), "restartPolicy"));

        return p && strcmp(p, "OnFailure") == 0;
}

/* 1 reached, 0 not yet, -1 failed for good (message printed). */
static int check(const struct cli *c, const struct cli_wait_args *a, bool deleted)
{
        struct fk_error err = {0};
        json_t *j = NULL;
        const char *phase;
        int r;

        r = cli_get_session(c, a->name, &j, &err);
        if (r == -ENOENT && deleted)
                return 1;
        if (r == -ENOENT) {
                fprintf(stderr, "forklet wait: %s\n", err.msg);
                return -1;
        }
        if (r < 0) {
                fprintf(stderr, "forklet wait: %s\n", err.msg);
                return r == -ECONNREFUSED ? -1 : 0;
        }
        phase = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
        r = 0;
        if (!deleted && phase && strcmp(phase, a->phase) == 0)
                r = 1;
        else if (!deleted && phase && strcmp(phase, "Failed") == 0 && !restarts(j)) {
                fprintf(stderr, "forklet wait: session/%s is Failed: %s\n", a->name,
                        ready_message(j) ?: "no reason recorded");
                r = -1;
        }
        json_decref(j);
        return r;
}

int cli_wait(const struct cli *c, int argc, char **argv)
{
        struct cli_wait_args a = {0};
        struct fk_error err = {0};
        uint64_t deadline;
        bool deleted;
        int r;

        if (cli_parse_wait(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        deleted = strcmp(a.phase, "Deleted") == 0 || strcmp(a.phase, "delete") == 0;
        if (!deleted && session_phase_from_string(a.phase) == _SESSION_PHASE_INVALID) {
                fprintf(stderr,
                        "forklet wait: --for: unknown phase \"%s\" (Pending, Starting, "
                        "Running, Paused, Stopped, Failed, Deleted)\n",
                        a.phase);
                return CLI_EXIT_USAGE;
        }
        deadline = fk_now_mono_ns() + (uint64_t)a.timeout_s * 1000000000ull;
        for (;;) {
                r = check(c, &a, deleted);
                if (r > 0) {
                        printf("session/%s %s\n", a.name, deleted ? "deleted" : a.phase);
                        return CLI_EXIT_OK;
                }
                if (r < 0)
                        return CLI_EXIT_FAILURE;
                if (fk_now_mono_ns() >= deadline)
                        break;
                nanosleep(&(struct timespec){.tv_nsec = WAIT_POLL_MS * 1000000L}, NULL);
        }
        fprintf(stderr, "forklet wait: timed out after %us waiting for session/%s to be %s\n",
                a.timeout_s, a.name, a.phase);
        return CLI_EXIT_FAILURE;
}
