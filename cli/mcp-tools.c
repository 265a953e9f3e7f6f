/* SPDX-License-Identifier: MIT */
/* The MCP tool table: each tool's name, description, argument table (the inputSchema) and
 * handler; the session and fork-engine tools are here, exec and the file tools in mcp-guest.c.
 * Every handler is one or two calls to forkletd's API. */
#include "cli/mcp-internal.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define P_SESSION                                                                                  \
        {                                                                                          \
                .name = "session", .type = MCP_T_NAME, .required = true,                           \
                .description = "the session's name (metadata.name)"                                \
        }
#define P_NAMESPACE                                                                                \
        {                                                                                          \
                .name = "namespace", .type = MCP_T_NAME,                                           \
                .description = "the session's namespace (default: forklet's -n, else \"default\")" \
        }
#define P_CHECKPOINT(what)                                                                         \
        {                                                                                          \
                .name = "checkpoint", .type = MCP_T_STRING, .required = true,                      \
                .description = "the checkpoint id (ck_..., from checkpoint_create or "             \
                               "checkpoint_list) to " what                                         \
        }
#define P_WAIT(dflt, what)                                                                         \
        {                                                                                          \
                .name = "wait_seconds", .type = MCP_T_INTEGER, .min = 0, .max = MCP_MAX_WAIT_S,    \
                .def = (dflt), .description = "how long to wait until " what "; 0 returns at once" \
        }

/* The session path of args.session in args.namespace, with suffix. */
static int session_path(const struct cli *c, const json_t *args, const char *suffix, struct cli *c2,
                        char **ret)
{
        mcp_cli_for(c, args, c2);
        return cli_session_path(c2, mcp_arg_string(args, "session", ""), suffix, ret);
}

/* A few fields of a Session for lists. */
static json_t *summary(const json_t *s)
{
        json_t *meta = json_object_get(s, "metadata"), *spec = json_object_get(s, "spec");
        json_t *st = json_object_get(s, "status");

        return json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O*}", "name",
                         json_object_get(meta, "name"), "namespace",
                         json_object_get(meta, "namespace"), "phase", json_object_get(st, "phase"),
                         "image", json_object_get(spec, "image"), "sizeClass",
                         json_object_get(spec, "sizeClass"), "created",
                         json_object_get(meta, "creationTimestamp"), "forkOf",
                         json_object_get(st, "forkOf"));
}

static int t_list(const struct cli *c, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL;
        const char *ns = mcp_arg_string(args, "namespace", NULL);
        struct mcp_reply rep = {0};
        json_t *out = json_array(), *v;
        size_t i;
        int k;

        if (!out || (ns ? fk_asprintf(&path, "/api/v1alpha1/namespaces/%s/sessions", ns)
                        : fk_asprintf(&path, "/api/v1alpha1/sessions")) < 0) {
                json_decref(out);
                return -ENOMEM;
        }
        k = mcp_api_call(c, "list_sessions", "GET", path, NULL, &rep, r);
        json_array_foreach(json_object_get(rep.body, "items"), i, v)
                json_array_append_new(out, summary(v));
        mcp_reply_done(&rep);
        if (k != 0) {
                json_decref(out);
                return k < 0 ? k : 0;
        }
        return mcp_result_ok(r, json_pack("{s:o}", "sessions", out));
}

static int t_describe(const struct cli *c, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        struct cli c2;
        int k;

        if (session_path(c, args, NULL, &c2, &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "describe_session", "GET", path, NULL, &rep, r);
        if (k == 0)
                k = mcp_result_ok(r, json_incref(rep.body));
        mcp_reply_done(&rep);
        return k < 0 ? k : 0;
}

/* The one Session of a YAML text, or a tool error with every validation message. */
static int parse_manifest(const char *yaml, struct session_manifest **ret, struct mcp_result *r)
{
        struct manifest_diag diag = {0};
        struct session_manifest **v = NULL;
        cleanup_free char *text = NULL;
        size_t n = 0;
        int k;

        k = manifest_parse_sessions(yaml, strlen(yaml), "manifest", NULL, &v, &n, &diag);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                for (size_t i = 0; i < diag.n; i++) {
                        char *more = NULL;

                        if (fk_asprintf(&more, "%s\n%s", text ?: "", diag.messages[i]) < 0)
                                break;
                        free(text);
                        text = more;
                }
                manifest_diag_done(&diag);
                return mcp_result_error(r, "create_session: the manifest is not valid:%s",
                                        text ?: " (no message)");
        }
        manifest_diag_done(&diag);
        if (n == 1)
                *ret = v[0];
        else
                for (size_t i = 0; i < n; i++)
                        session_manifest_free(v[i]);
        free(v);
        if (n != 1)
                return mcp_result_error(r,
                                        "create_session: manifest: %zu Session documents; "
                                        "create_session takes one (call it once for each)",
                                        n);
        return 0;
}

/* After apply or fork: out gets "phases" and "running", after waiting up to wait_s for every
 * one of names to be Running. 1 when one Failed (r says why). */
int mcp_wait_into(const struct cli *c, json_t *names, long long wait_s, json_t *out,
                  struct mcp_result *r)
{
        json_t *phases = NULL;
        int k;

        k = mcp_wait_running(c, names, (unsigned)wait_s, &phases, r);
        if (k == -ENOMEM)
                return k;
        json_object_set_new(out, "phases", phases);
        json_object_set_new(out, "running", json_boolean(k == 1));
        return k < 0 ? 1 : 0;
}

static int t_create(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const struct mcp_tool *t = mcp_tool_find("create_session");
        struct session_manifest *m = NULL;
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        json_t *out, *names;
        struct cli c2 = *c;
        int k;

        k = parse_manifest(mcp_arg_string(args, "manifest", ""), &m, r);
        if (k < 0 || !m)
                return k;
        c2.namespace = m->namespace;
        k = fk_asprintf(&path, "/api/v1alpha1/namespaces/%s/sessions", m->namespace) < 0
                    ? -ENOMEM
                    : mcp_api_call(c, "create_session", "POST", path, session_manifest_to_json(m),
                                   &rep, r);
        out = k == 0 ? json_pack("{s:s, s:s, s:s, s:O?}", "name", m->name, "namespace",
                                 m->namespace, "result", rep.apply ?: "configured", "phase",
                                 json_object_get(json_object_get(rep.body, "status"), "phase"))
                     : NULL;
        names = out ? json_pack("[s]", m->name) : NULL;
        if (k == 0 && names && mcp_arg_int(t, args, "wait_seconds") > 0)
                k = mcp_wait_into(&c2, names, mcp_arg_int(t, args, "wait_seconds"), out, r);
        json_decref(names);
        session_manifest_free(m);
        mcp_reply_done(&rep);
        if (k == 0 && !r->error)
                return mcp_result_ok(r, out);
        json_decref(out);
        return k < 0 ? k : 0;
}

int mcp_delete_call(const struct cli *c2, const char *what, const char *path, const char *gone_id,
                    struct mcp_result *r, const char **ret_result)
{
        struct mcp_reply rep = {0};
        int k = mcp_api_call(c2, what, "DELETE", path, NULL, &rep, r);

        *ret_result = "deleted";
        if (k == 1 && rep.status == 404 &&
            (!gone_id ||
             (strstr(r->error ? r->error : "", gone_id) && !strstr(r->error, "belongs to")))) {
                mcp_result_done(r);
                *ret_result = "already gone";
                k = 0;
        }
        mcp_reply_done(&rep);
        return k;
}

static int t_delete(const struct cli *c, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL;
        const char *result;
        struct cli c2;
        int k;

        if (session_path(c, args, NULL, &c2, &path) < 0)
                return -ENOMEM;
        k = mcp_delete_call(&c2, "delete_session", path, NULL, r, &result);
        if (k != 0)
                return k < 0 ? k : 0;
        return mcp_result_ok(r, json_pack("{s:s, s:s, s:s}", "name",
                                          mcp_arg_string(args, "session", ""), "namespace",
                                          c2.namespace, "result", result));
}

/* pause and resume: the action with ?wait=, the phase after it. */
static int action(const struct cli *c, const char *verb, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL, *suffix = NULL;
        const struct mcp_tool *t = mcp_tool_find(verb);
        struct mcp_reply rep = {0};
        struct cli c2;
        int k;

        if (fk_asprintf(&suffix, "/%s?wait=%lld", verb, mcp_arg_int(t, args, "wait_seconds")) < 0 ||
            session_path(c, args, suffix, &c2, &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, verb, "POST", path, NULL, &rep, r);
        if (k == 0)
                k = mcp_result_ok(
                        r, json_pack("{s:s, s:s, s:O?, s:b}", "name",
                                     mcp_arg_string(args, "session", ""), "namespace", c2.namespace,
                                     "phase",
                                     json_object_get(json_object_get(rep.body, "status"), "phase"),
                                     "changed", !rep.apply || strcmp(rep.apply, "unchanged") != 0));
        mcp_reply_done(&rep);
        return k < 0 ? k : 0;
}

static int t_pause(const struct cli *c, json_t *args, struct mcp_result *r)
{
        return action(c, "pause", args, r);
}

static int t_resume(const struct cli *c, json_t *args, struct mcp_result *r)
{
        return action(c, "resume", args, r);
}

static int t_checkpoint_create(const struct cli *c, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        struct cli c2;
        int k;

        if (session_path(c, args, "/checkpoints", &c2, &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "checkpoint_create", "POST", path, json_object(), &rep, r);
        if (k == 0)
                k = mcp_result_ok(r, json_pack("{s:O?, s:s, s:s}", "id",
                                               json_object_get(rep.body, "id"), "session",
                                               mcp_arg_string(args, "session", ""), "namespace",
                                               c2.namespace));
        mcp_reply_done(&rep);
        return k < 0 ? k : 0;
}

static int t_checkpoint_list(const struct cli *c, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        struct cli c2;
        json_t *items, *v;
        char created[64];
        size_t i;
        int k;

        if (session_path(c, args, "/checkpoints", &c2, &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "checkpoint_list", "GET", path, NULL, &rep, r);
        items = json_object_get(rep.body, "items");
        json_array_foreach(items, i, v)
        {
                fk_format_rfc3339((uint64_t)json_integer_value(json_object_get(v, "createdNs")),
                                  created, sizeof(created));
                json_object_set_new(v, "created", json_string(created));
        }
        if (k == 0)
                k = mcp_result_ok(r,
                                  json_pack("{s:O}", "checkpoints", items ? items : json_array()));
        mcp_reply_done(&rep);
        return k < 0 ? k : 0;
}

static int t_checkpoint_delete(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const char *ck = mcp_arg_string(args, "checkpoint", "");
        bool cascade = json_is_true(json_object_get(args, "cascade"));
        cleanup_free char *path = NULL, *suffix = NULL;
        const char *result;
        struct cli c2;
        int k;

        /* the id goes into the URL: nothing but ck_ and hex digits, so no query rides on it */
        if (strncmp(ck, "ck_", 3) != 0 || !ck[3] ||
            strspn(ck + 3, "0123456789abcdef") != strlen(ck + 3))
                return mcp_result_error(r,
                                        "checkpoint \"%s\": not a checkpoint id (ck_ and hex "
                                        "digits, from checkpoint_list)",
                                        ck);
        if (fk_asprintf(&suffix, "/checkpoints/%s%s", ck, cascade ? "?cascade=true" : "") < 0 ||
            session_path(c, args, suffix, &c2, &path) < 0)
                return -ENOMEM;
        /* a checkpoint already gone, not a missing session nor another session's checkpoint */
        k = mcp_delete_call(&c2, "checkpoint_delete", path, ck, r, &result);
        if (k != 0)
                return k < 0 ? k : 0;
        return mcp_result_ok(r, json_pack("{s:s, s:s, s:s, s:s}", "session",
                                          mcp_arg_string(args, "session", ""), "namespace",
                                          c2.namespace, "checkpoint", ck, "result", result));
}

static int t_fork(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const struct mcp_tool *t = mcp_tool_find("fork");
        const char *ck = mcp_arg_string(args, "checkpoint", "");
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        json_t *out = NULL, *names;
        struct cli c2;
        int k;

        if (session_path(c, args, "/forks", &c2, &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "fork", "POST", path,
                         json_pack("{s:s, s:I}", "from", ck, "count",
                                   (json_int_t)mcp_arg_int(t, args, "count")),
                         &rep, r);
        names = json_object_get(rep.body, "names");
        if (k == 0 && !(out = json_pack("{s:O, s:s, s:s}", "names", names ?: json_array(),
                                        "checkpoint", ck, "namespace", c2.namespace)))
                k = -ENOMEM;
        if (k == 0 && names && mcp_arg_int(t, args, "wait_seconds") > 0)
                k = mcp_wait_into(&c2, names, mcp_arg_int(t, args, "wait_seconds"), out, r);
        mcp_reply_done(&rep);
        if (k == 0 && !r->error)
                return mcp_result_ok(r, out);
        json_decref(out);
        return k < 0 ? k : 0;
}

static int t_rollback(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const char *ck = mcp_arg_string(args, "checkpoint", "");
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        struct cli c2;
        int k;

        if (session_path(c, args, "/rollback", &c2, &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "rollback", "POST", path, json_pack("{s:s}", "checkpoint", ck), &rep,
                         r);
        if (k == 0)
                k = mcp_result_ok(r, json_pack("{s:s, s:s, s:s, s:s}", "name",
                                               mcp_arg_string(args, "session", ""), "namespace",
                                               c2.namespace, "checkpoint", ck, "result",
                                               "rolled back"));
        mcp_reply_done(&rep);
        return k < 0 ? k : 0;
}

static const struct mcp_param p_namespace_only[] = {
        {.name = "namespace",
         .type = MCP_T_NAME,
         .description = "only the sessions of this namespace (default: every namespace)"},
        {0},
};
static const struct mcp_param p_session[] = {P_SESSION, P_NAMESPACE, {0}};
static const struct mcp_param p_create[] = {
        {.name = "manifest",
         .type = MCP_T_STRING,
         .required = true,
         .description = "one Session manifest as YAML text (apiVersion: forklet.dev/v1alpha1, "
                        "kind: Session, metadata.name, spec.sizeClass, spec.image, ...); an "
                        "existing session of that name is updated"},
        P_WAIT(0, "the session is Running"),
        {0},
};
static const struct mcp_param p_action[] = {
        P_SESSION, P_NAMESPACE, P_WAIT(60, "the session reaches the phase"), {0}};
static const struct mcp_param p_fork[] = {
        P_SESSION,
        P_CHECKPOINT("start the forks from"),
        {.name = "count",
         .type = MCP_T_INTEGER,
         .min = 1,
         .max = 1000,
         .def = 1,
         .description = "how many forks (the node's capacity.maxForksPerSession caps it)"},
        P_WAIT(0, "every fork is Running"),
        P_NAMESPACE,
        {0},
};
static const struct mcp_param p_checkpoint_delete[] = {
        P_SESSION,
        P_CHECKPOINT("delete"),
        {.name = "cascade",
         .type = MCP_T_BOOLEAN,
         .description = "also delete the sessions forked from it (without: refused while there "
                        "are any, naming them)"},
        P_NAMESPACE,
        {0},
};
static const struct mcp_param p_rollback[] = {
        P_SESSION, P_CHECKPOINT("return the session to"), P_NAMESPACE, {0}};

const struct mcp_tool mcp_tools[] = {
        {"list_sessions", "List sessions",
         "List the sessions on this node: name, namespace, phase, image, size class, creation "
         "time and, for a fork, the session and checkpoint it came from.",
         p_namespace_only, MCP_HINT_READ_ONLY | MCP_HINT_IDEMPOTENT, t_list},
        {"describe_session", "Describe a session",
         "A session in full: metadata, spec and status (phase, conditions, VM, network, "
         "checkpoints, forks).",
         p_session, MCP_HINT_READ_ONLY | MCP_HINT_IDEMPOTENT, t_describe},
        {"create_session", "Create a session",
         "Create (or update) a session from a Session manifest in YAML. It boots in the "
         "background: phase Pending, Starting, then Running (set wait_seconds to wait).",
         p_create, MCP_HINT_IDEMPOTENT, t_create},
        {"delete_session", "Delete a session",
         "Delete a session: its VM is stopped and its files removed in the background. A "
         "session that does not exist is reported as already gone.",
         p_session, MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT, t_delete},
        {"exec", "Run a command in a session",
         "Run a command in a Running session's guest and return its stdout, stderr and exit "
         "code. argv is run as given (no shell: use [\"sh\", \"-c\", \"...\"] for one).",
         mcp_exec_params, 0, mcp_tool_exec},
        {"read_file", "Read a guest file",
         "Read a file of a Running session's guest (up to 64 MiB).", mcp_read_file_params,
         MCP_HINT_READ_ONLY | MCP_HINT_IDEMPOTENT, mcp_tool_read_file},
        {"write_file", "Write a guest file",
         "Write (create or replace) a file in a Running session's guest (up to 64 MiB).",
         mcp_write_file_params, MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT, mcp_tool_write_file},
        {"checkpoint_create", "Checkpoint a session",
         "Save a Running session's memory and disk as a checkpoint (the guest pauses briefly) "
         "and return its id, for fork and rollback.",
         p_session, 0, t_checkpoint_create},
        {"checkpoint_list", "List checkpoints",
         "The checkpoints of a session: id, name, creation time, size, parent.", p_session,
         MCP_HINT_READ_ONLY | MCP_HINT_IDEMPOTENT, t_checkpoint_list},
        {"checkpoint_delete", "Delete a checkpoint",
         "Delete a checkpoint of a session and free its memory file and disk layer. Refused while "
         "forks of it exist, unless cascade (then they are deleted too). A checkpoint already "
         "gone is reported as such.",
         p_checkpoint_delete, MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT, t_checkpoint_delete},
        {"snapshot_create", "Snapshot a session's files",
         "Save a Running session's workspace disk (files only, not memory or processes) as a "
         "snapshot that outlives the session, and return its id, for restore.",
         mcp_snapshot_create_params, 0, mcp_tool_snapshot_create},
        {"snapshot_list", "List snapshots",
         "The snapshots of a namespace's sessions: id, session, creation time, size, and the "
         "sessions whose disk is over each (usedBy).",
         mcp_snapshot_list_params, MCP_HINT_READ_ONLY | MCP_HINT_IDEMPOTENT,
         mcp_tool_snapshot_list},
        {"snapshot_delete", "Delete a snapshot",
         "Delete a snapshot and free its disk. Refused while sessions boot on it (usedBy: a "
         "session restored from it, forks of that session's checkpoints). A snapshot already "
         "gone is reported as such.",
         mcp_snapshot_delete_params, MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT,
         mcp_tool_snapshot_delete},
        {"restore", "Restore a snapshot",
         "Create a new session from a snapshot: it boots fresh on the snapshot's files with the "
         "spec of the session it was taken of, and runs afterStart again.",
         mcp_restore_params, 0, mcp_tool_restore},
        {"fork", "Fork a session",
         "Start count new sessions from a checkpoint of a session, each with the guest's "
         "memory, processes and files as they were at the checkpoint. Returns their names.",
         p_fork, 0, t_fork},
        {"rollback", "Roll a session back",
         "Return a session to one of its checkpoints: memory, processes and disk as they were "
         "then; what happened since is lost.",
         p_rollback, MCP_HINT_DESTRUCTIVE, t_rollback},
        {"pause", "Pause a session",
         "Pause a session's VM (spec.state Paused): the guest stops running until resume.",
         p_action, MCP_HINT_IDEMPOTENT, t_pause},
        {"resume", "Resume a session", "Resume a paused session (spec.state Running).", p_action,
         MCP_HINT_IDEMPOTENT, t_resume},
        {0},
};
