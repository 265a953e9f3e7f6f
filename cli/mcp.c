/* SPDX-License-Identifier: MIT */
/* forklet mcp: a Model Context Protocol server on stdio. JSON-RPC 2.0 messages, one per line;
 * a method table (initialize, ping, tools/list, tools/call) in front of the tool table, whose
 * handlers call forkletd's API through the CLI's HTTP client. */
#include "cli/mcp-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FORKLET_VERSION
#define FORKLET_VERSION "0"
#endif

#define MCP_INSTRUCTIONS                                                                           \
        "forklet runs sessions: small QEMU microVMs on this node, described by Session "           \
        "manifests. Create one with create_session (wait_seconds waits until it is Running), "     \
        "run commands in it with exec, move files with read_file and write_file. "                 \
        "checkpoint_create saves a running session's memory and disk; fork starts copies of it "   \
        "from a checkpoint, rollback returns the session to one."

/* A JSON-RPC error to send instead of a result. */
struct rpc_error {
        int code;
        char msg[512];
};

static int rpc_fail(struct rpc_error *e, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int rpc_fail(struct rpc_error *e, int code, const char *fmt, ...)
{
        va_list ap;

        e->code = code;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        return 1;
}

/* Method handlers: 0 with *ret (new reference), 1 with e filled, or -ENOMEM. */
typedef int (*rpc_method_fn)(struct mcp_server *s, json_t *params, json_t **ret,
                             struct rpc_error *e);

static int m_initialize(struct mcp_server *s, json_t *params, json_t **ret, struct rpc_error *e)
{
        const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

        if (!asked)
                return rpc_fail(e, MCP_INVALID_PARAMS,
                                "initialize: params.protocolVersion (a string such as \"%s\") "
                                "is required",
                                MCP_PROTOCOL_VERSION);
        /* Only one revision is spoken: a client asking for another gets ours and decides. */
        *ret = json_pack("{s:s, s:{s:{}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
                         MCP_PROTOCOL_VERSION, "capabilities", "tools", "serverInfo", "name",
                         "forklet", "title", "forklet microVM sessions", "version", FORKLET_VERSION,
                         "instructions", MCP_INSTRUCTIONS);
        if (!*ret)
                return -ENOMEM;
        s->initialized = true;
        return 0;
}

static int m_ping(struct mcp_server *s, json_t *params, json_t **ret, struct rpc_error *e)
{
        (void)s, (void)params, (void)e;
        *ret = json_object();
        return *ret ? 0 : -ENOMEM;
}

static int m_tools_list(struct mcp_server *s, json_t *params, json_t **ret, struct rpc_error *e)
{
        json_t *tools = json_array(), *t;

        (void)s, (void)params, (void)e; /* one page: a cursor is never handed out */
        for (const struct mcp_tool *tool = mcp_tools; tools && tool->name; tool++) {
                t = mcp_tool_json(tool);
                if (!t || json_array_append_new(tools, t) < 0) {
                        json_decref(tools);
                        return -ENOMEM;
                }
        }
        *ret = tools ? json_pack("{s:o}", "tools", tools) : NULL;
        return *ret ? 0 : -ENOMEM;
}

/* The CallToolResult of r: its text (the structured JSON, or the error) and, on success, the
 * structured content itself (the spec asks for both for clients of either kind). */
static json_t *call_result(const struct mcp_result *r)
{
        cleanup_free char *text =
                r->structured ? json_dumps(r->structured, JSON_INDENT(2) | JSON_PRESERVE_ORDER)
                              : NULL;
        json_t *j;

        if (!r->error && !text)
                return NULL;
        j = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                      r->error ? r->error : text, "isError", r->error != NULL);
        if (j && !r->error && json_object_set(j, "structuredContent", r->structured) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

static int m_tools_call(struct mcp_server *s, json_t *params, json_t **ret, struct rpc_error *e)
{
        const char *name = json_string_value(json_object_get(params, "name"));
        json_t *args = json_object_get(params, "arguments");
        struct mcp_result res = {0};
        const struct mcp_tool *t;
        json_t *empty = NULL;
        char msg[400];
        int r;

        if (!name)
                return rpc_fail(e, MCP_INVALID_PARAMS,
                                "tools/call: params.name (the tool's name) is required");
        t = mcp_tool_find(name);
        if (!t)
                return rpc_fail(e, MCP_INVALID_PARAMS,
                                "tools/call: unknown tool \"%s\" (tools/list names them)", name);
        if (args && !json_is_object(args))
                return rpc_fail(e, MCP_INVALID_PARAMS,
                                "tools/call %s: params.arguments must be an object", name);
        if (mcp_tool_check_args(t, args, msg, sizeof(msg)) < 0)
                return rpc_fail(e, MCP_INVALID_PARAMS, "tools/call %s: arguments.%s", name, msg);
        if (!args && !(args = empty = json_object()))
                return -ENOMEM;
        r = t->call(s->cli, args, &res);
        json_decref(empty);
        if (r >= 0)
                *ret = call_result(&res);
        mcp_result_done(&res);
        if (r < 0)
                return rpc_fail(e, MCP_INTERNAL_ERROR, "tools/call %s: %s", name, strerror(-r));
        return *ret ? 0 : -ENOMEM;
}

static const struct {
        const char *name;
        rpc_method_fn fn;
} methods[] = {
        {"initialize", m_initialize},
        {"ping", m_ping},
        {"tools/list", m_tools_list},
        {"tools/call", m_tools_call},
};

void mcp_server_init(struct mcp_server *s, const struct cli *c)
{
        *s = (struct mcp_server){.cli = c};
}

/* id is borrowed; NULL sends "id": null (the request's id could not be read). */
static int reply_error(const json_t *id, int code, const char *msg, char **ret)
{
        json_t *j = json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
                              "code", code, "message", msg);

        *ret = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return *ret ? 0 : -ENOMEM;
}

static int reply_result(const json_t *id, json_t *result, char **ret)
{
        json_t *j = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);

        *ret = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return *ret ? 0 : -ENOMEM;
}

/* A notification: nothing is ever answered. initialized is remembered; cancelled and the rest
 * are ignored (calls run one at a time, so a cancelled one has already been answered). */
static void notification(struct mcp_server *s, const char *method)
{
        if (strcmp(method, "notifications/initialized") == 0)
                s->client_ready = true;
}

static int request(struct mcp_server *s, json_t *msg, const json_t *id, const char *method,
                   char **ret)
{
        json_t *params = json_object_get(msg, "params"), *result = NULL;
        struct rpc_error e = {0};
        int r;

        if (params && !json_is_object(params))
                return reply_error(id, MCP_INVALID_PARAMS, "params must be an object", ret);
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
                if (strcmp(methods[i].name, method) != 0)
                        continue;
                r = methods[i].fn(s, params, &result, &e);
                if (r < 0)
                        return r;
                if (r > 0)
                        return reply_error(id, e.code, e.msg, ret);
                return reply_result(id, result, ret);
        }
        snprintf(e.msg, sizeof(e.msg), "method not found: %s", method);
        return reply_error(id, MCP_METHOD_NOT_FOUND, e.msg, ret);
}

int mcp_server_handle(struct mcp_server *s, const char *text, size_t size, char **ret_reply)
{
        cleanup_decref json_t *msg = NULL;
        const char *method;
        json_error_t jerr;
        char buf[300];
        json_t *id;

        *ret_reply = NULL;
        msg = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        if (!msg) {
                snprintf(buf, sizeof(buf), "parse error at line %d column %d: %s", jerr.line,
                         jerr.column, jerr.text);
                return reply_error(NULL, MCP_PARSE_ERROR, buf, ret_reply);
        }
        if (json_is_array(msg))
                return reply_error(NULL, MCP_INVALID_REQUEST,
                                   "batches are not part of MCP " MCP_PROTOCOL_VERSION
                                   ": send one message a line",
                                   ret_reply);
        id = json_object_get(msg, "id");
        if (id && !json_is_string(id) && !json_is_integer(id))
                return reply_error(NULL, MCP_INVALID_REQUEST, "id must be a string or an integer",
                                   ret_reply);
        if (!json_is_object(msg) ||
            strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0") != 0)
                return reply_error(id, MCP_INVALID_REQUEST,
                                   "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\" is required)",
                                   ret_reply);
        method = json_string_value(json_object_get(msg, "method"));
        if (!method && id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
                return 0; /* a response: this server sends no requests, nothing to match */
        if (!method)
                return reply_error(id, MCP_INVALID_REQUEST, "method (a string) is required",
                                   ret_reply);
        if (!id) {
                notification(s, method);
                return 0;
        }
        return request(s, msg, id, method, ret_reply);
}

int mcp_serve(struct mcp_server *s, const struct mcp_transport *t)
{
        char *msg, *reply;
        size_t size;
        int r;

        for (;;) {
                msg = NULL;
                reply = NULL;
                r = t->read(t->userdata, &msg, &size);
                if (r == 0)
                        return 0;
                if (r == -EMSGSIZE)
                        r = reply_error(NULL, MCP_PARSE_ERROR,
                                        "message longer than the limit of 96 MiB: skipped", &reply);
                else if (r > 0)
                        r = mcp_server_handle(s, msg, size, &reply);
                free(msg);
                if (r >= 0 && reply) {
                        size = strlen(reply);
                        reply[size] = '\n'; /* replaces the NUL: written by length */
                        r = t->write(t->userdata, reply, size + 1);
                }
                free(reply);
                if (r < 0)
                        return r;
        }
}

/* ---- the stdio transport -------------------------------------------------------------------- */

#define MCP_READ_CHUNK 65536

/* Hands out buf[0..n) as a message (a trailing CR dropped) and keeps what follows skip. */
static int take_line(struct mcp_fd_transport *ft, size_t n, size_t skip, char **ret,
                     size_t *ret_size)
{
        size_t len = n;
        char *line;

        while (len > 0 && ft->buf[len - 1] == '\r')
                len--;
        line = malloc(len + 1);
        if (!line)
                return -ENOMEM;
        memcpy(line, ft->buf, len);
        line[len] = '\0';
        memmove(ft->buf, ft->buf + skip, ft->len - skip);
        ft->len -= skip;
        ft->scanned = 0;
        if (len == 0) { /* a blank line carries no message */
                free(line);
                return 0;
        }
        *ret = line;
        *ret_size = len;
        return 1;
}

/* Reads more input into buf; sets eof at the end. */
static int fill(struct mcp_fd_transport *ft)
{
        ssize_t n;
        char *p;

        if (ft->cap - ft->len < MCP_READ_CHUNK) {
                /* doubling: a 96 MiB message costs 11 copies, not 1536 (an allocator that
                 * moves on realloc, as ASan's does, made that quadratic); never more than a
                 * message and a chunk (len <= MCP_MAX_MESSAGE here) */
                size_t cap = ft->cap ? ft->cap * 2 : MCP_READ_CHUNK;

                if (cap > MCP_MAX_MESSAGE + MCP_READ_CHUNK)
                        cap = MCP_MAX_MESSAGE + MCP_READ_CHUNK;
                if (cap < ft->len + MCP_READ_CHUNK)
                        cap = ft->len + MCP_READ_CHUNK;
                p = realloc(ft->buf, cap);
                if (!p)
                        return -ENOMEM;
                ft->buf = p;
                ft->cap = cap;
        }
        do
                n = read(ft->in, ft->buf + ft->len, MCP_READ_CHUNK);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        ft->eof = n == 0;
        ft->len += (size_t)n;
        return 0;
}

static int fd_read(void *userdata, char **ret, size_t *ret_size)
{
        struct mcp_fd_transport *ft = userdata;
        bool skipped;
        char *nl;
        int r;

        for (;;) {
                nl = memchr(ft->buf ? ft->buf + ft->scanned : "", '\n', ft->len - ft->scanned);
                if (nl) {
                        size_t n = (size_t)(nl - ft->buf);

                        skipped = ft->skipping;
                        ft->skipping = false;
                        r = take_line(ft, skipped ? 0 : n, n + 1, ret, ret_size);
                        if (r != 0 && !skipped)
                                return r;
                        continue;
                }
                ft->scanned = ft->len;
                if (ft->len > MCP_MAX_MESSAGE) {
                        skipped = ft->skipping;
                        ft->len = ft->scanned = 0;
                        ft->skipping = true;
                        if (!skipped)
                                return -EMSGSIZE;
                }
                if (ft->eof) {
                        if (ft->skipping || ft->len == 0)
                                return 0;
                        r = take_line(ft, ft->len, ft->len, ret, ret_size); /* no last newline */
                        if (r != 0)
                                return r;
                        continue;
                }
                r = fill(ft);
                if (r < 0)
                        return r;
        }
}

static int fd_write(void *userdata, const char *data, size_t size)
{
        struct mcp_fd_transport *ft = userdata;

        return fk_write_all(ft->out, data, size);
}

void mcp_fd_transport_init(struct mcp_fd_transport *ft, int in, int out, struct mcp_transport *ret)
{
        *ft = (struct mcp_fd_transport){.in = in, .out = out};
        *ret = (struct mcp_transport){.read = fd_read, .write = fd_write, .userdata = ft};
}

void mcp_fd_transport_done(struct mcp_fd_transport *ft)
{
        free(ft->buf);
        *ft = (struct mcp_fd_transport){.in = -1, .out = -1};
}

int cli_mcp(const struct cli *c, int argc, char **argv)
{
        struct mcp_fd_transport ft;
        struct mcp_transport t;
        struct mcp_server s;
        int r;

        if (argc > 1) {
                fprintf(stderr, "forklet mcp: takes no arguments (usage: forklet [--socket PATH] "
                                "mcp); the MCP client speaks on stdin and stdout\n");
                return CLI_EXIT_USAGE;
        }
        if (c->etcd && *c->etcd) {
                fprintf(stderr, "forklet mcp: cluster mode (--etcd, FORKLET_ETCD) is not "
                                "supported: point --socket or --server at one node\n");
                return CLI_EXIT_USAGE;
        }
        (void)argv;
        signal(SIGPIPE, SIG_IGN); /* a client gone: the write fails with EPIPE and we stop */
        mcp_server_init(&s, c);
        mcp_fd_transport_init(&ft, STDIN_FILENO, STDOUT_FILENO, &t);
        r = mcp_serve(&s, &t);
        mcp_fd_transport_done(&ft);
        if (r < 0 && r != -EPIPE) {
                fprintf(stderr, "forklet mcp: stdio: %s\n", strerror(-r));
                return CLI_EXIT_FAILURE;
        }
        return CLI_EXIT_OK;
}
