/* SPDX-License-Identifier: MIT */
/* forklet mcp, inside cli/: the JSON-RPC 2.0 server of the Model Context Protocol (mcp.c), the
 * tool table with its argument schemas (mcp-tools.c, mcp-guest.c) and the helpers they share
 * (mcp-schema.c). Used by those files and their unit test only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cli/cli.h"
#include "common/cleanup.h"

/* jansson's own json_decrefp (it backs json_auto_t) */
#define cleanup_decref _cleanup_(json_decrefp)

/* The MCP revision this server speaks (also the answer to a client asking for another). */
#define MCP_PROTOCOL_VERSION "2025-06-18"
/* The longest message read (a write_file of 64 MiB, base64, and its envelope). */
#define MCP_MAX_MESSAGE (96u * 1024 * 1024)

/* JSON-RPC 2.0 error codes. */
enum {
        MCP_PARSE_ERROR = -32700,
        MCP_INVALID_REQUEST = -32600,
        MCP_METHOD_NOT_FOUND = -32601,
        MCP_INVALID_PARAMS = -32602,
        MCP_INTERNAL_ERROR = -32603,
};

/* ---- tools ---------------------------------------------------------------------------------- */

enum mcp_type {
        MCP_T_STRING,
        MCP_T_NAME, /* a string that is a DNS-1123 label (session and namespace names) */
        MCP_T_INTEGER,
        MCP_T_BOOLEAN,
        MCP_T_STRINGS, /* a non-empty array of strings */
};

/* One property of a tool's arguments: drives both the JSON Schema in tools/list and the check
 * of tools/call arguments, so the two cannot disagree. */
struct mcp_param {
        const char *name;
        enum mcp_type type;
        bool required;
        const char *description;
        long long min, max;         /* MCP_T_INTEGER: inclusive bounds */
        long long def;              /* MCP_T_INTEGER: the default, shown in the schema */
        const char *const *choices; /* MCP_T_STRING: allowed values (NULL-terminated) or NULL */
};

/* What a tool call produced: either structured (an object, sent as structuredContent and as
 * its JSON text) or error (a message, sent as a tool result with isError: true). Both owned. */
struct mcp_result {
        json_t *structured;
        char *error;
};
void mcp_result_done(struct mcp_result *r);

enum {
        MCP_HINT_READ_ONLY = 1u << 0,
        MCP_HINT_DESTRUCTIVE = 1u << 1,
        MCP_HINT_IDEMPOTENT = 1u << 2,
};

struct mcp_tool {
        const char *name;
        const char *title;
        const char *description;
        const struct mcp_param *params; /* terminated by an entry with a NULL name */
        unsigned hints;                 /* MCP_HINT_* */
        /* args were checked against params. Fills ret; returns 0, or -errno when the call
         * could not be carried out at all (out of memory: a JSON-RPC internal error). */
        int (*call)(const struct cli *c, json_t *args, struct mcp_result *ret);
};

#define MCP_MAX_WAIT_S 900 /* the most a tool's wait_seconds may ask */

/* NULL-name terminated; tool handlers live in mcp-tools.c, mcp-guest.c and mcp-snapshot.c. */
extern const struct mcp_tool mcp_tools[];
const struct mcp_tool *mcp_tool_find(const char *name);

/* The guest tools (mcp-guest.c), for the table. */
extern const struct mcp_param mcp_exec_params[], mcp_read_file_params[], mcp_write_file_params[];
int mcp_tool_exec(const struct cli *c, json_t *args, struct mcp_result *r);
int mcp_tool_read_file(const struct cli *c, json_t *args, struct mcp_result *r);
int mcp_tool_write_file(const struct cli *c, json_t *args, struct mcp_result *r);
/* The snapshot tools (mcp-snapshot.c), for the table. */
extern const struct mcp_param mcp_snapshot_create_params[], mcp_snapshot_list_params[],
        mcp_snapshot_delete_params[], mcp_restore_params[];
int mcp_tool_snapshot_create(const struct cli *c, json_t *args, struct mcp_result *r);
int mcp_tool_snapshot_list(const struct cli *c, json_t *args, struct mcp_result *r);
int mcp_tool_snapshot_delete(const struct cli *c, json_t *args, struct mcp_result *r);
int mcp_tool_restore(const struct cli *c, json_t *args, struct mcp_result *r);

/* The tools/list entry of t (new reference; NULL on ENOMEM). */
json_t *mcp_tool_json(const struct mcp_tool *t);
/* Checks args (an object or NULL) against t->params: required present, types, bounds, choices,
 * no unknown keys. -EINVAL with msg naming the argument. */
int mcp_tool_check_args(const struct mcp_tool *t, const json_t *args, char *msg, size_t size);

/* Argument accessors for handlers (after the check): the value, or the param's default. */
const char *mcp_arg_string(const json_t *args, const char *name, const char *def);
long long mcp_arg_int(const struct mcp_tool *t, const json_t *args, const char *name);

/* A JSON string of guest bytes: valid UTF-8 as it is, every invalid byte as U+FFFD (then
 * *ret_lossy is set, if given). NULL on ENOMEM. */
json_t *mcp_text_json(const void *data, size_t size, bool *ret_lossy);

/* Result helpers; each returns 0 (a tool error is a result, not a failure) or -ENOMEM. */
int mcp_result_ok(struct mcp_result *r, json_t *structured); /* steals structured */
int mcp_result_error(struct mcp_result *r, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* A tool error from an API reply: "what: MESSAGE" plus the reply's details, one a line. */
int mcp_result_api_error(struct mcp_result *r, const char *what, const struct cli_response *resp);

/* The API's namespace for a call: args.namespace, else the CLI's -n (c2 is filled from c). */
void mcp_cli_for(const struct cli *c, const json_t *args, struct cli *c2);
/* A 2xx reply of forkletd's API. */
struct mcp_reply {
        long status;  /* HTTP status (also set when the call failed with one) */
        json_t *body; /* owned: the parsed reply, an empty object for an empty body */
        char *apply;  /* owned X-Forklet-Apply (created, configured, unchanged) or NULL */
};
void mcp_reply_done(struct mcp_reply *rep);
/* One API request with a JSON body (stolen; NULL: none). 0 on 2xx with rep filled; 1 when it
 * failed (transport or API: r holds the tool error, rep->status the HTTP status or 0);
 * -ENOMEM. */
int mcp_api_call(const struct cli *c, const char *what, const char *method, const char *path,
                 json_t *body, struct mcp_reply *rep, struct mcp_result *r);
/* DELETE path, idempotent: a 404 is "already gone" (*ret_result, else "deleted"), or with
 * gone_id only one whose message names gone_id and no other owner. 0, 1 for a tool error in r,
 * -ENOMEM. */
int mcp_delete_call(const struct cli *c2, const char *what, const char *path, const char *gone_id,
                    struct mcp_result *r, const char **ret_result);
/* mcp_wait_running for up to wait_s, into out: "phases" and "running". 0, 1 when one went
 * Failed (r holds the error), -ENOMEM. */
int mcp_wait_into(const struct cli *c, json_t *names, long long wait_s, json_t *out,
                  struct mcp_result *r);
/* Polls sessions names (an array of strings) until every one is Running, one is Failed, or
 * timeout_s passed. Sets *ret_phases to {name: phase} (new reference). 1 all Running, 0 timed
 * out, -1 one Failed (r holds the error with the Ready condition's message), -ENOMEM. */
int mcp_wait_running(const struct cli *c, const json_t *names, unsigned timeout_s,
                     json_t **ret_phases, struct mcp_result *r);

/* ---- the server ----------------------------------------------------------------------------- */

/* Plain state of one connection; owns nothing. */
struct mcp_server {
        const struct cli *cli; /* borrowed: where the API is */
        bool initialized;      /* initialize was answered */
        bool client_ready;     /* notifications/initialized arrived */
};
void mcp_server_init(struct mcp_server *s, const struct cli *c);

/* Handles one message (msg need not be NUL-terminated). *ret_reply is the reply (owned, one
 * line without the newline) or NULL when nothing is to be sent (a notification, a response).
 * Returns 0 or -ENOMEM. Does not log. */
int mcp_server_handle(struct mcp_server *s, const char *msg, size_t size, char **ret_reply);

/* Where messages come from and go to (stdio, or a test's fake). */
struct mcp_transport {
        /* The next message: 1 with *ret (owned, NUL-terminated, without the newline), 0 at the
         * end of input, -EMSGSIZE for a message over MCP_MAX_MESSAGE (skipped), other -errno. */
        int (*read)(void *userdata, char **ret, size_t *ret_size);
        /* Writes one whole message line (data ends with '\n'). */
        int (*write)(void *userdata, const char *data, size_t size);
        void *userdata;
};

/* Serves messages until the end of input: 0 then, -errno on a transport failure (not logged).
 * An oversized message is answered with a parse error and serving goes on. */
int mcp_serve(struct mcp_server *s, const struct mcp_transport *t);

/* The stdio transport: newline-delimited messages on in, replies on out. */
struct mcp_fd_transport {
        int in, out;
        char *buf; /* owned: bytes read and not yet handed out */
        size_t len, cap;
        size_t scanned; /* buf[0..scanned) holds no newline */
        bool eof, skipping;
};
void mcp_fd_transport_init(struct mcp_fd_transport *ft, int in, int out, struct mcp_transport *ret);
void mcp_fd_transport_done(struct mcp_fd_transport *ft);
