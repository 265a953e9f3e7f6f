/* SPDX-License-Identifier: MIT */
/* The MCP tools for filesystem snapshots (the workspace disk only): snapshot_create of a session,
 * snapshot_list and snapshot_delete of a namespace's, and restore into a new session that boots
 * fresh on one. */
#include "cli/mcp-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define P_SNAPSHOT(what)                                                                           \
        {                                                                                          \
                .name = "snapshot", .type = MCP_T_STRING, .required = true,                        \
                .description = "the snapshot id (snap_..., from snapshot_create or "               \
                               "snapshot_list) to " what                                           \
        }
#define P_NAMESPACE_OF(what)                                                                       \
        {                                                                                          \
                .name = "namespace", .type = MCP_T_NAME,                                           \
                .description = "the namespace of " what " (default: forklet's -n, else "           \
                               "\"default\")"                                                      \
        }

const struct mcp_param mcp_snapshot_create_params[] = {
        {.name = "session",
         .type = MCP_T_NAME,
         .required = true,
         .description = "the session whose workspace disk to snapshot"},
        P_NAMESPACE_OF("the session"),
        {0},
};
const struct mcp_param mcp_snapshot_list_params[] = {P_NAMESPACE_OF("the snapshots' sessions"),
                                                     {0}};
const struct mcp_param mcp_snapshot_delete_params[] = {
        P_SNAPSHOT("delete"),
        P_NAMESPACE_OF("the snapshot's session"),
        {0},
};
const struct mcp_param mcp_restore_params[] = {
        P_SNAPSHOT("boot the new session on"),
        {.name = "name",
         .type = MCP_T_NAME,
         .required = true,
         .description = "the new session's name"},
        {.name = "wait_seconds",
         .type = MCP_T_INTEGER,
         .min = 0,
         .max = MCP_MAX_WAIT_S,
         .def = 0,
         .description = "how long to wait until the new session is Running; 0 returns at once"},
        P_NAMESPACE_OF("the new session"),
        {0},
};

/* The snapshot id goes into a URL: "snap_" and hex digits only, so no query rides on it. */
static bool snapshot_id_ok(const char *id)
{
        return strncmp(id, "snap_", 5) == 0 && id[5] &&
               strspn(id + 5, "0123456789abcdef") == strlen(id + 5);
}

int mcp_tool_snapshot_create(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const char *name = mcp_arg_string(args, "session", "");
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        struct cli c2;
        int k;

        mcp_cli_for(c, args, &c2);
        if (cli_session_path(&c2, name, "/snapshots", &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "snapshot_create", "POST", path, json_object(), &rep, r);
        if (k == 0)
                k = mcp_result_ok(r, json_pack("{s:O?, s:s, s:s}", "id",
                                               json_object_get(rep.body, "id"), "session", name,
                                               "namespace", c2.namespace));
        mcp_reply_done(&rep);
        return k < 0 ? k : 0;
}

int mcp_tool_snapshot_list(const struct cli *c, json_t *args, struct mcp_result *r)
{
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        struct cli c2;
        json_t *items;
        int k;

        mcp_cli_for(c, args, &c2);
        if (fk_asprintf(&path, "/api/v1alpha1/namespaces/%s/snapshots", c2.namespace) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "snapshot_list", "GET", path, NULL, &rep, r);
        items = json_object_get(rep.body, "items");
        if (k == 0)
                k = mcp_result_ok(r, json_pack("{s:O, s:s}", "snapshots", items ?: json_array(),
                                               "namespace", c2.namespace));
        mcp_reply_done(&rep);
        return k < 0 ? k : 0;
}

int mcp_tool_snapshot_delete(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const char *id = mcp_arg_string(args, "snapshot", "");
        cleanup_free char *path = NULL;
        const char *result;
        struct cli c2;
        int k;

        if (!snapshot_id_ok(id))
                return mcp_result_error(r,
                                        "snapshot \"%s\": not a snapshot id (snap_ and hex "
                                        "digits, from snapshot_list)",
                                        id);
        mcp_cli_for(c, args, &c2);
        if (fk_asprintf(&path, "/api/v1alpha1/namespaces/%s/snapshots/%s", c2.namespace, id) < 0)
                return -ENOMEM;
        k = mcp_delete_call(&c2, "snapshot_delete", path, id, r, &result);
        if (k != 0)
                return k < 0 ? k : 0;
        return mcp_result_ok(r, json_pack("{s:s, s:s, s:s}", "snapshot", id, "namespace",
                                          c2.namespace, "result", result));
}

int mcp_tool_restore(const struct cli *c, json_t *args, struct mcp_result *r)
{
        const struct mcp_tool *t = mcp_tool_find("restore");
        const char *id = mcp_arg_string(args, "snapshot", ""), *name;
        cleanup_free char *path = NULL;
        struct mcp_reply rep = {0};
        json_t *out = NULL, *names = NULL;
        struct cli c2;
        int k;

        name = mcp_arg_string(args, "name", "");
        mcp_cli_for(c, args, &c2);
        if (cli_session_path(&c2, name, "/restore", &path) < 0)
                return -ENOMEM;
        k = mcp_api_call(&c2, "restore", "POST", path, json_pack("{s:s}", "snapshot", id), &rep, r);
        if (k == 0 && !(out = json_pack("{s:s, s:s, s:s}", "name", name, "namespace", c2.namespace,
                                        "snapshot", id)))
                k = -ENOMEM;
        if (k == 0 && mcp_arg_int(t, args, "wait_seconds") > 0) {
                names = json_pack("[s]", name);
                k = names ? mcp_wait_into(&c2, names, mcp_arg_int(t, args, "wait_seconds"), out, r)
                          : -ENOMEM;
        }
        json_decref(names);
        mcp_reply_done(&rep);
        if (k == 0 && !r->error)
                return mcp_result_ok(r, out);
        json_decref(out);
        return k < 0 ? k : 0;
}
