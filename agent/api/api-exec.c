/* SPDX-License-Identifier: MIT */
/* POST .../sessions/NAME/exec: runs the command in a worker thread that writes JSON lines
 * into a pipe; the chunked response streams the pipe to the client as it fills. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define EXEC_BLOCK 65536

struct exec_job {
        struct agent_daemon *d;
        char ns[API_PATH_SEGMENT_MAX], name[API_PATH_SEGMENT_MAX];
        char **argv; /* owned */
        char **env;  /* owned */
        void *stdin_data;
        size_t stdin_size;
        unsigned timeout_ms;
        size_t output_cap;
        bool detach;
        int fd; /* write end of the pipe, owned */
};

static void exec_job_free(struct exec_job *j)
{
        fk_strv_free(j->argv);
        fk_strv_free(j->env);
        free(j->stdin_data);
        if (j->fd >= 0)
                close(j->fd);
        free(j);
}

/* Writes one JSON line (reference stolen). A gone client is not an error for the command. */
static void emit(struct exec_job *j, json_t *line)
{
        char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;

        json_decref(line);
        if (!text)
                return;
        if (j->fd >= 0 &&
            (fk_write_all(j->fd, text, strlen(text)) < 0 || fk_write_all(j->fd, "\n", 1) < 0)) {
                close(j->fd);
                j->fd = -1;
        }
        free(text);
}

static int on_output(int stream, const void *data, size_t size, void *userdata)
{
        struct exec_job *j = userdata;
        char *b64 = NULL;

        if (fk_base64_encode(data, size, &b64) < 0)
                return 0;
        emit(j, json_pack("{s:s, s:s}", "stream", stream == 2 ? "stderr" : "stdout", "data", b64));
        free(b64);
        return 0;
}

static json_t *result_json(const struct vmm_exec_result *res, bool detach)
{
        json_t *j;

        if (detach)
                return json_pack("{s:I}", "pid", (json_int_t)res->pid);
        if (res->signaled)
                j = json_pack("{s:i}", "signal", res->signal);
        else
                j = json_pack("{s:i}", "exit_code", res->exit_code);
        if (j && res->timed_out)
                json_object_set_new(j, "timed_out", json_true());
        if (j && res->output_capped)
                json_object_set_new(j, "output_capped", json_true());
        return j;
}

static void *exec_thread(void *userdata)
{
        struct exec_job *j = userdata;
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct vmm_exec_request req = {
                .argv = j->argv,
                .env = j->env,
                .stdin_data = j->stdin_data,
                .stdin_size = j->stdin_size,
                .timeout_ms = j->timeout_ms,
                .output_cap = j->output_cap,
                .detach = j->detach,
        };
        int r;

        r = agent_daemon_exec(j->d, j->ns, j->name, &req, on_output, j, &res, &err);
        if (r < 0)
                emit(j, json_pack("{s:s, s:i}", "error", err.msg[0] ? err.msg : strerror(-r),
                                  "errno", -r));
        else
                emit(j, result_json(&res, j->detach));
        exec_job_free(j);
        return NULL;
}

/* The response's side of the pipe. */
struct exec_reader {
        int fd; /* read end, owned */
        const atomic_bool *stopping;
        atomic_uint *open; /* the server's count of exec streams, this one included */
        bool told;         /* the shutdown line went out */
};

#define EXEC_STOP_POLL_MS 250
/* A newline first: it ends whatever line the stream was in the middle of. */
#define EXEC_STOP_LINE                                                                             \
        "\n{\"error\":\"forkletd is shutting down: the stream ends here, the command may still "   \
        "run in the guest\",\"errno\":108}\n"

/* Streams the pipe; when forkletd stops, ends the stream with an error line instead of
 * waiting for a command that may run for hours (MHD_stop_daemon waits for this thread). */
static ssize_t read_pipe(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct exec_reader *rd = cls;
        struct pollfd pfd = {.fd = rd->fd, .events = POLLIN};
        ssize_t n;

        (void)pos;
        for (;;) {
                if (rd->told)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                n = poll(&pfd, 1, EXEC_STOP_POLL_MS);
                if (n > 0)
                        break;
                if (n < 0 && errno != EINTR)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (atomic_load(rd->stopping) && max >= sizeof(EXEC_STOP_LINE) - 1) {
                        rd->told = true;
                        memcpy(buf, EXEC_STOP_LINE, sizeof(EXEC_STOP_LINE) - 1);
                        return (ssize_t)sizeof(EXEC_STOP_LINE) - 1;
                }
        }
        do
                n = read(rd->fd, buf, max);
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
        return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static void free_pipe(void *cls)
{
        struct exec_reader *rd = cls;

        close(rd->fd);
        if (rd->open)
                atomic_fetch_sub(rd->open, 1);
        free(rd);
}

static int env_push(struct exec_job *j, const char *key, json_t *v, struct fk_error *err)
{
        cleanup_free char *kv = NULL;
        int r;

        if (!json_is_string(v) || !*key || strchr(key, '='))
                return fk_error_set(err, -EINVAL, "env.%s: invalid entry", key);
        r = fk_asprintf(&kv, "%s=%s", key, json_string_value(v));
        return r < 0 ? r : fk_strv_push(&j->env, kv);
}

/* Parses {argv, env, stdin, timeout_ms, output_cap, detach} into j; err says what is wrong. */
static int parse_body(const char *body, size_t size, struct exec_job *j, struct fk_error *err)
{
        json_error_t jerr;
        json_t *b = json_loadb(body ? body : "", size, 0, &jerr), *v, *argv, *env;
        const char *key;
        size_t i;
        int r = 0;

        if (!json_is_object(b)) {
                json_decref(b);
                return fk_error_set(err, -EINVAL, "body must be a JSON object: %s", jerr.text);
        }
        argv = json_object_get(b, "argv");
        if (!json_is_array(argv) || json_array_size(argv) == 0)
                r = fk_error_set(err, -EINVAL, "argv: a non-empty array of strings is required");
        for (i = 0; r >= 0 && i < json_array_size(argv); i++) {
                v = json_array_get(argv, i);
                r = json_is_string(v) ? fk_strv_push(&j->argv, json_string_value(v))
                                      : fk_error_set(err, -EINVAL, "argv[%zu]: not a string", i);
        }
        env = json_object_get(b, "env");
        json_object_foreach(env, key, v)
        {
                if (r >= 0)
                        r = env_push(j, key, v, err);
        }
        v = json_object_get(b, "stdin");
        if (r >= 0 && json_is_string(v) &&
            fk_base64_decode(json_string_value(v), json_string_length(v), &j->stdin_data,
                             &j->stdin_size) < 0)
                r = fk_error_set(err, -EINVAL, "stdin: not valid base64");
        v = json_object_get(b, "timeout_ms");
        if (json_is_integer(v) && json_integer_value(v) >= 0)
                j->timeout_ms = (unsigned)json_integer_value(v);
        v = json_object_get(b, "output_cap");
        if (json_is_integer(v) && json_integer_value(v) > 0)
                j->output_cap = (size_t)json_integer_value(v);
        j->detach = json_is_true(json_object_get(b, "detach"));
        json_decref(b);
        return r;
}

static int start_stream(struct MHD_Connection *c, struct exec_job *j,
                        const struct api_exec_streams *es)
{
        struct MHD_Response *resp;
        struct exec_reader *rfd;
        pthread_attr_t attr;
        pthread_t t;
        int fds[2], r;

        rfd = calloc(1, sizeof(*rfd));
        if (!rfd || pipe2(fds, O_CLOEXEC) < 0) {
                free(rfd);
                exec_job_free(j);
                return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError", NULL,
                                       "pipe: %s", strerror(errno));
        }
        rfd->fd = fds[0];
        rfd->stopping = es->stopping;
        rfd->open = es->open;
        atomic_fetch_add(rfd->open, 1);
        j->fd = fds[1];
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, EXEC_BLOCK, read_pipe, rfd,
                                                 free_pipe);
        if (!resp) {
                free_pipe(rfd);
                exec_job_free(j);
                return MHD_NO;
        }
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &attr, exec_thread, j);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                exec_job_free(j); /* closes the write end: the stream ends empty */
                MHD_destroy_response(resp);
                return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError", NULL,
                                       "start exec thread: %s", strerror(r));
        }
        MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
}

int api_handle_exec(struct MHD_Connection *c, struct api_request *req,
                    const struct api_exec_streams *es)
{
        struct fk_error err = {0};
        struct exec_job *j;
        const char *reason;
        unsigned status;
        int r;

        if (strcmp(req->method, "POST") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "%s not allowed here", req->method);
        j = calloc(1, sizeof(*j));
        if (!j)
                return MHD_NO;
        j->fd = -1;
        j->d = req->d;
        strcpy(j->ns, req->route.ns);
        strcpy(j->name, req->route.name);
        r = parse_body(req->body, req->body_size, j, &err);
        if (r >= 0)
                r = agent_daemon_exec_check(req->d, j->ns, j->name, &err);
        if (r < 0) {
                exec_job_free(j);
                status = api_status_from_errno(r, &reason);
                return api_reply_error(c, status, reason, NULL, "%s", err.msg);
        }
        return start_stream(c, j, es);
}
