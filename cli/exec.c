/* SPDX-License-Identifier: MIT */
/* forklet exec NAME [-i] [--detach] [--timeout=S] -- CMD...: guest stdout/stderr to ours, exit
 * status = the guest command's (128+N for a signal, 127 when it could not be started). */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "core/core.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* base64 grows 4/3; stay under the server's body limit. */
#define EXEC_MAX_STDIN (CORE_API_MAX_BODY / 4 * 3 - 65536)

struct exec_state {
        int exit; /* -1 until the final line */
        bool detach;
};

static int on_line(const char *line, void *userdata)
{
        struct exec_state *st = userdata;
        json_t *j = json_loads(line, 0, NULL), *v;
        void *data = NULL;
        size_t size = 0;

        if (!j)
                return 0;
        if ((v = json_object_get(j, "data")) && json_is_string(v) &&
            fk_base64_decode(json_string_value(v), json_string_length(v), &data, &size) >= 0) {
                const char *stream = json_string_value(json_object_get(j, "stream")) ?: "";

                (void)fk_write_all(strcmp(stream, "stderr") == 0 ? STDERR_FILENO : STDOUT_FILENO,
                                   data, size);
                free(data);
        } else if ((v = json_object_get(j, "exit_code")))
                st->exit = (int)json_integer_value(v);
        else if ((v = json_object_get(j, "signal")))
                st->exit = 128 + (int)json_integer_value(v);
        if (json_is_true(json_object_get(j, "timed_out")))
                fprintf(stderr, "forklet exec: timed out; the command was killed\n");
        if (json_is_true(json_object_get(j, "output_capped")))
                fprintf(stderr, "forklet exec: output was cut at the size limit\n");
        else if ((v = json_object_get(j, "pid"))) {
                printf("%lld\n", (long long)json_integer_value(v));
                st->exit = 0;
        } else if ((v = json_object_get(j, "error"))) {
                fprintf(stderr, "forklet exec: %s\n", json_string_value(v) ?: "error");
                st->exit = json_integer_value(json_object_get(j, "errno")) == ENOENT ? 127 : 126;
        }
        json_decref(j);
        return 0;
}

static int build_body(const struct cli_exec_args *a, char **ret)
{
        json_t *j = json_pack("{s:[], s:b, s:I}", "argv", "detach", a->detach, "timeout_ms",
                              (json_int_t)a->timeout_s * 1000);
        cleanup_free char *in = NULL;
        char *b64 = NULL;
        size_t n = 0;
        int r = 0;

        if (!j)
                return -ENOMEM;
        if (a->output_cap)
                json_object_set_new(j, "output_cap", json_integer((json_int_t)a->output_cap));
        for (char **p = a->argv; *p; p++)
                json_array_append_new(json_object_get(j, "argv"), json_string(*p));
        if (a->stdin_ && (r = fk_read_fd(STDIN_FILENO, EXEC_MAX_STDIN, &in, &n)) >= 0 &&
            (r = fk_base64_encode(in, n, &b64)) >= 0)
                json_object_set_new(j, "stdin", json_string(b64));
        free(b64);
        *ret = r >= 0 ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return r < 0 ? r : *ret ? 0 : -ENOMEM;
}

int cli_exec(const struct cli *c, int argc, char **argv)
{
        struct exec_state st = {.exit = -1};
        struct cli_exec_args a = {0};
        struct cli_response resp = {0};
        struct fk_error err = {0};
        cleanup_free char *body = NULL, *path = NULL;
        int r;

        if (cli_parse_exec(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        st.detach = a.detach;
        r = build_body(&a, &body);
        if (r < 0 || cli_session_path(c, a.name, "/exec", &path) < 0) {
                fprintf(stderr, "forklet exec: %s\n",
                        r == -EFBIG ? "stdin too large" : strerror(r < 0 ? -r : ENOMEM));
                return CLI_EXIT_FAILURE;
        }
        if (cli_request_lines(c, "POST", path, body, on_line, &st, &resp, &err) < 0) {
                fprintf(stderr, "forklet exec: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        fflush(stdout);
        if (resp.status != 200) {
                cli_print_api_error("forklet exec", &resp);
                cli_response_done(&resp);
                return CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        if (st.exit < 0) {
                fprintf(stderr, "forklet exec: the stream ended without an exit status\n");
                return CLI_EXIT_FAILURE;
        }
        return st.exit;
}
