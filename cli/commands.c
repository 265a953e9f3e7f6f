/* SPDX-License-Identifier: MIT */
/* The command table: every verb, its handler and its usage line. */
#include "cli/cli.h"

#include <string.h>

const struct cli_command cli_commands[] = {
        {"validate", cli_validate, "validate -f FILE... [--config NODE.yaml]"},
        {"apply", cli_apply, "apply -f FILE..."},
        {"get", cli_get, "get sessions | session NAME [-o json|yaml]"},
        {"wait", cli_wait, "wait NAME --for=PHASE|Deleted [--timeout=SECONDS]"},
        {"exec", cli_exec,
         "exec NAME [-i] [--detach] [--timeout=SECONDS] [--output-cap=BYTES] -- CMD [ARG...]"},
        {"delete", cli_delete, "delete NAME | -f FILE..."},
        {"logs", cli_logs, "logs [--previous|-p] NAME"},
        {"describe", cli_describe, "describe NAME"},
        {"tree", cli_tree, "tree NAME   (checkpoints and forks, forks of forks too)"},
        {"audit", cli_audit, "audit verify [--file PATH] [-o json|yaml]"},
        {"node", cli_node, "node [-o json|yaml]"},
        {"checkpoint", cli_fork_engine,
         "checkpoint create NAME | list NAME [-o json] | inspect NAME ID [-o json|yaml] | "
         "delete NAME ID [--cascade]"},
        {"fork", cli_fork_engine, "fork NAME --from CHECKPOINT --count N"},
        {"rollback", cli_fork_engine, "rollback NAME CHECKPOINT"},
        {"snapshot", cli_fork_engine, "snapshot create NAME | list | inspect ID | delete ID"},
        {"restore", cli_fork_engine, "restore SNAPSHOT --name NEW"},
        {"pause", cli_action, "pause NAME [--no-wait] [--timeout=SECONDS]"},
        {"resume", cli_action, "resume NAME [--no-wait] [--timeout=SECONDS]"},
        {"stop", cli_action, "stop NAME [--no-wait] [--timeout=SECONDS]"},
        {"start", cli_action, "start NAME [--no-wait] [--timeout=SECONDS]"},
        {"cp", cli_cp, "cp NAME:/PATH LOCAL | LOCAL NAME:/PATH   (LOCAL - : stdin/stdout)"},
        {"port-forward", cli_portforward, "port-forward NAME LOCAL:REMOTE"},
        {"kubeconfig", cli_kubeconfig,
         "kubeconfig [--config NODE.yaml] [--server URL] [--ca FILE] [--token-file FILE] "
         "[--name NAME]   (for kubectl: docs/kubernetes.md)"},
        {"image", cli_image,
         "image list [-o json] | pull REF | inspect IMAGE | rm IMAGE   (OCI images: "
         "docs/images.md)"},
        {"mcp", cli_mcp, "mcp   (an MCP server on stdin/stdout for AI agents: docs/mcp.md)"},
        {},
};

const struct cli_command *cli_command_find(const char *name)
{
        for (const struct cli_command *c = cli_commands; c->name; c++)
                if (strcmp(c->name, name) == 0)
                        return c;
        return NULL;
}
