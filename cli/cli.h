/* SPDX-License-Identifier: MIT */
/* The forklet CLI: the command table, per-verb argument parsers (pure, unit-tested) and the
 * HTTP client that talks to forkletd over its unix socket (native) or HTTPS (libcurl). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct json_t json_t; /* jansson */

#define CLI_DEFAULT_SOCKET "/run/forklet/api.sock"

/* Exit codes of every verb (exec returns the guest command's status instead). */
enum {
        CLI_EXIT_OK = 0,
        CLI_EXIT_FAILURE = 1,
        CLI_EXIT_USAGE = 2,
};

/* Global options, parsed before the verb. Strings are borrowed from argv/environ. */
struct cli {
        const char *socket;    /* --socket, $FORKLET_SOCKET, or CLI_DEFAULT_SOCKET */
        const char *namespace; /* -n/--namespace, default "default" */
        /* cluster mode (cli/cluster*.c): --etcd URL[,URL] or $FORKLET_ETCD; NULL: off */
        const char *etcd;
        const char *etcd_prefix; /* --etcd-prefix, $FORKLET_ETCD_PREFIX, default /forklet */
        /* forkletd's TCP listener instead of the socket (cli/remote.c): --server URL or
         * $FORKLET_SERVER (https://HOST:PORT); NULL: the unix socket. Cluster mode sets it to
         * the node's published api.url when the node's socket is not reachable here. */
        const char *server;
        const char *token_file; /* --token-file, $FORKLET_TOKEN_FILE: the bearer token */
        const char *ca;         /* --ca, $FORKLET_CA: PEM CA that signed the server cert */
        /* --pinned-public-key "sha256//BASE64" (cluster mode: the node's published one) */
        const char *pin;
        const char *cert, *key; /* --cert/--key, $FORKLET_CERT/KEY: client cert (mutual TLS) */
};

/* Where requests go, for messages: the socket path or the server URL. */
const char *cli_target(const struct cli *c);
/* Fills the TLS options left NULL from $FORKLET_SERVER, $FORKLET_TOKEN_FILE, $FORKLET_CA,
 * $FORKLET_CERT, $FORKLET_KEY. */
void cli_global_env(struct cli *c);

struct cli_command {
        const char *name;
        int (*run)(const struct cli *c, int argc, char **argv); /* argv[0] is the verb */
        const char *usage;
        const char *help; /* what the verb does and its options, for `forklet VERB --help` */
};
/* NULL-name terminated table of all verbs. */
extern const struct cli_command cli_commands[];
const struct cli_command *cli_command_find(const char *name);

/* Parses global options up to the verb; *ret_verb_index is the verb's index in argv (argc when
 * absent). -EINVAL with err naming the argument. env_socket is $FORKLET_SOCKET or NULL. */
int cli_parse_global(int argc, char **argv, const char *env_socket, struct cli *ret,
                     int *ret_verb_index, struct fk_error *err);

/* ---- per-verb arguments (argv[0] is the verb) -------------------------------------------------
 */

enum cli_output {
        CLI_OUTPUT_TABLE,
        CLI_OUTPUT_JSON,
        CLI_OUTPUT_YAML,
};

struct cli_get_args {
        bool list;        /* get sessions */
        const char *name; /* get session NAME */
        enum cli_output output;
};
int cli_parse_get(int argc, char **argv, struct cli_get_args *ret, struct fk_error *err);

struct cli_wait_args {
        const char *name;
        const char *phase; /* a phase name, or "Deleted" */
        unsigned timeout_s;
};
int cli_parse_wait(int argc, char **argv, struct cli_wait_args *ret, struct fk_error *err);

struct cli_exec_args {
        const char *name;
        bool stdin_;
        bool detach;
        unsigned timeout_s; /* 0: none */
        size_t output_cap;  /* --output-cap BYTES (K/M/G suffixes); 0: the guest's default */
        char **argv;        /* borrowed slice of the input argv, NULL-terminated */
};
int cli_parse_exec(int argc, char **argv, struct cli_exec_args *ret, struct fk_error *err);

struct cli_files_args {
        const char **files; /* owned array (strings borrowed), n_files entries */
        size_t n_files;
        const char *name;   /* delete/logs NAME */
        const char *config; /* validate --config */
        bool previous;      /* logs --previous: the log before the current one */
};
/* validate -f F... [--config C]; apply -f F...; delete NAME | -f F...; logs [-p] NAME;
 * describe NAME; tree NAME.
 * verb selects what is allowed. Caller frees ret->files. */
int cli_parse_files(int argc, char **argv, const char *verb, struct cli_files_args *ret,
                    struct fk_error *err);

struct cli_audit_args {
        const char *file; /* --file: verify locally; NULL: ask the daemon */
        enum cli_output output;
};
/* audit verify [--file PATH] [-o json|yaml] */
int cli_parse_audit(int argc, char **argv, struct cli_audit_args *ret, struct fk_error *err);
struct cli_portforward_args {
        const char *name;
        uint16_t local, remote;
};
/* port-forward NAME LOCAL:REMOTE (both 1..65535). */
int cli_parse_portforward(int argc, char **argv, struct cli_portforward_args *ret,
                          struct fk_error *err);
/* What port-forward makes of a look at its session: session is its GET (NULL: gone), created
 * its metadata.creationTimestamp when the forward began. CLOSE once it is gone, replaced (a new
 * creationTimestamp), being deleted, Stopped or Failed, with why[] saying which; SERVE while
 * Running; WAIT in Pending, Starting and Paused, which a rollback or a restart passes through. */
enum cli_pf_verdict { CLI_PF_SERVE, CLI_PF_WAIT, CLI_PF_CLOSE };
enum cli_pf_verdict cli_portforward_verdict(const json_t *session, const char *created, char *why,
                                            size_t size);

/* Fork-engine verbs: checkpoint create|list NAME, checkpoint delete NAME ID [--cascade],
 * checkpoint inspect NAME ID, fork NAME --from ID --count N, rollback NAME ID, snapshot create
 * NAME, snapshot list|inspect ID|delete ID, restore SNAP --name NEW. Strings borrowed from
 * argv. */
enum cli_fork_verb {
        CLI_CHECKPOINT_CREATE,
        CLI_CHECKPOINT_LIST,
        CLI_CHECKPOINT_DELETE,
        CLI_CHECKPOINT_INSPECT,
        CLI_FORK,
        CLI_ROLLBACK,
        CLI_SNAPSHOT_CREATE,
        CLI_SNAPSHOT_LIST,
        CLI_SNAPSHOT_INSPECT,
        CLI_SNAPSHOT_DELETE,
        CLI_RESTORE,
};
struct cli_fork_args {
        enum cli_fork_verb verb;
        const char *name; /* session (restore: the new session) */
        const char *id;   /* checkpoint or snapshot id */
        unsigned count;
        bool cascade;
        bool wait;              /* checkpoint create: until Ready */
        enum cli_output output; /* checkpoint and snapshot list/inspect -o json|yaml */
};
int cli_parse_fork(int argc, char **argv, struct cli_fork_args *ret, struct fk_error *err);
#define CLI_ACTION_DEFAULT_TIMEOUT_S 180

/* pause|resume|stop|start NAME [--no-wait] [--timeout=S] (argv[0] is the verb). */
struct cli_action_args {
        const char *name;
        bool wait;          /* default: wait until the phase is reached */
        unsigned timeout_s; /* default CLI_ACTION_DEFAULT_TIMEOUT_S */
};
int cli_parse_action(int argc, char **argv, struct cli_action_args *ret, struct fk_error *err);

/* cp SRC DST: exactly one side is NAME:/abs/path, the other a local file or "-". */
struct cli_cp_args {
        const char *session;  /* points at session_buf */
        const char *guest;    /* guest path (absolute), borrowed from argv */
        const char *local;    /* local path or "-", borrowed from argv */
        bool upload;          /* local -> guest */
        char session_buf[64]; /* storage for session */
};
int cli_parse_cp(int argc, char **argv, struct cli_cp_args *ret, struct fk_error *err);

/* ---- client --------------------------------------------------------------------------------- */

struct cli_response {
        long status; /* HTTP status */
        char *body;  /* owned, NUL-terminated */
        size_t size;
        char *apply; /* owned X-Forklet-Apply value or NULL */
};
void cli_response_done(struct cli_response *r);

/* One request; body may be NULL. Transport failures return -errno with err saying that the
 * daemon cannot be reached; HTTP errors are in ret->status. */
int cli_request(const struct cli *c, const char *method, const char *path, const char *body,
                struct cli_response *ret, struct fk_error *err);
/* A streamed request: line_fn is called for each complete line of the body (NUL-terminated,
 * without the newline). A non-2xx answer is collected into ret instead. */
int cli_request_lines(const struct cli *c, const char *method, const char *path, const char *body,
                      int (*line_fn)(const char *line, void *ud), void *ud,
                      struct cli_response *ret, struct fk_error *err);
/* Like cli_request with a binary body of size bytes (application/octet-stream). */
int cli_request_raw(const struct cli *c, const char *method, const char *path, const void *body,
                    size_t size, struct cli_response *ret, struct fk_error *err);
/* One Session of a manifest file and where it came from (for messages against the file). */
struct session_manifest;
struct cli_manifest_doc {
        const struct session_manifest *m;
        const char *file; /* as given on the command line */
        const char *buf;  /* the file's text */
        size_t size;
        size_t index; /* its document in the file (0-based) */
};
/* Loads every Session of file (validation messages go to stderr: CLI_EXIT_FAILURE) and calls fn
 * on each; CLI_EXIT_FAILURE if any call failed, else CLI_EXIT_OK. */
int cli_for_each_manifest(const struct cli *c, const char *file,
                          int (*fn)(const struct cli *c, const struct cli_manifest_doc *d));
/* URL-escapes s for a query value (caller frees). */
int cli_url_escape(const char *s, char **ret);
/* Prints an API error reply ({message, details}) to stderr, prefixed with what. */
void cli_print_api_error(const char *what, const struct cli_response *r);
/* The same for a reply about doc: the daemon's validation messages ("<json>: PATH: ...") are
 * printed against doc's file, line and column. */
void cli_print_api_error_at(const char *what, const struct cli_response *r,
                            const struct cli_manifest_doc *doc);
/* "/api/v1alpha1/namespaces/NS/sessions/NAME" + suffix (caller frees). */
int cli_session_path(const struct cli *c, const char *name, const char *suffix, char **ret);
/* GET a session as JSON (new reference); -ENOENT when 404 (nothing printed). */
int cli_get_session(const struct cli *c, const char *name, json_t **ret, struct fk_error *err);

/* Age of an RFC 3339 timestamp relative to now_s ("42s", "5m", "3h", "2d"); "-" if unknown. */
void cli_format_age(const char *rfc3339, long long now_s, char *buf, size_t size);

/* ---- lineage (cli/tree.c) ------------------------------------------------------------------ */

struct cli_tree_opts {
        const char *ns;     /* the namespace whose sessions are drawn */
        const char *root;   /* the session at the top */
        const char *mark;   /* a session whose row says "<- this session", or NULL */
        const char *indent; /* put before every line, or NULL */
        long long now_s;    /* for the AGE column */
};
/* Draws the lineage under o->root from a SessionList (the API's list reply) as a NAME PHASE AGE
 * table with ├─ └─ │ connectors: a session's checkpoints under the checkpoint they came from
 * (status.checkpoints[].parent) or under the session, forks under the checkpoint they were
 * made from (status.forkOf), their checkpoints and forks below them, oldest first. *ret is an
 * owned string. -ENOENT: o->root is not in the list; -ENOMEM. Pure, does not log. */
int cli_tree_render(const json_t *list, const struct cli_tree_opts *o, char **ret);
/* The topmost ancestor of name in the list (following status.forkOf while the parent is
 * listed), borrowed from list; NULL when name is not listed. */
const char *cli_tree_root(const json_t *list, const char *ns, const char *name);
/* GET the SessionList of c->namespace (new reference); errors in err. */
int cli_get_namespace_list(const struct cli *c, json_t **ret, struct fk_error *err);

/* Cluster mode: apply/get/delete/wait against etcd; node-local verbs (exec, logs, ...) run
 * against the API of the node the named session is placed on. */
int cli_cluster_run(const struct cli *c, const struct cli_command *cmd, int argc, char **argv);

/* verbs */
int cli_validate(const struct cli *c, int argc, char **argv);
int cli_apply(const struct cli *c, int argc, char **argv);
int cli_get(const struct cli *c, int argc, char **argv);
int cli_wait(const struct cli *c, int argc, char **argv);
int cli_exec(const struct cli *c, int argc, char **argv);
int cli_delete(const struct cli *c, int argc, char **argv);
int cli_logs(const struct cli *c, int argc, char **argv);
/* Writes guest bytes meant for a terminal: newlines, tabs and printable bytes (UTF-8 included)
 * as they are, a CR only before a LF, every other control byte (ESC, BEL, a lone CR...) as
 * \xNN, so a guest cannot drive the user's terminal. Returns 0 or -errno. */
int cli_write_for_terminal(int fd, const void *data, size_t size);
int cli_describe(const struct cli *c, int argc, char **argv);
int cli_tree(const struct cli *c, int argc, char **argv);
int cli_audit(const struct cli *c, int argc, char **argv);
int cli_node(const struct cli *c, int argc, char **argv);
/* node [-o json|yaml]. Pure. */
int cli_parse_node(int argc, char **argv, enum cli_output *ret, struct fk_error *err);
int cli_fork_engine(const struct cli *c, int argc, char **argv); /* the verbs above */
int cli_action(const struct cli *c, int argc, char **argv);      /* pause|resume|stop|start */
int cli_cp(const struct cli *c, int argc, char **argv);
int cli_portforward(const struct cli *c, int argc, char **argv);
int cli_mcp(const struct cli *c, int argc, char **argv); /* cli/mcp.c */

/* forklet kubeconfig (cli/kubeconfig.c). Strings borrowed from argv. */
struct cli_kubeconfig_args {
        const char *config, *server, *ca, *token_file, *name;
};
int cli_parse_kubeconfig(int argc, char **argv, struct cli_kubeconfig_args *ret,
                         struct fk_error *err);
/* Pure: the kubeconfig text (cluster, context and user all called name; ca_pem may be NULL). */
int cli_kubeconfig_render(const char *name, const char *server, const char *ca_pem,
                          const char *token, const char *ns, char **ret);
int cli_kubeconfig(const struct cli *c, int argc, char **argv);

/* image list|pull|inspect|rm (cli/image.c, cli/image-pull.c). */
struct cli_image_args {
        const char *verb;  /* list, pull, inspect, rm */
        const char *image; /* a reference or a digest (prefix); NULL for list */
        bool json;         /* -o json */
};
int cli_parse_image(int argc, char **argv, struct cli_image_args *ret, struct fk_error *err);
int cli_image(const struct cli *c, int argc, char **argv);
int cli_image_pull(const struct cli *c, const char *ref);
/* "[####......] 1.0 of 3.0 MiB" into buf. Pure. */
void cli_image_bar(char *buf, size_t size, long long done, long long total);
