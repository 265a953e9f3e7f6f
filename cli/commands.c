/* SPDX-License-Identifier: MIT */
/* The command table: every verb, its handler and its usage line. */
#include "cli/cli.h"

#include <string.h>

const struct cli_command cli_commands[] = {
        {"validate", cli_validate, "validate -f FILE... [--config NODE.yaml]",
         "Checks manifests offline: every error as FILE:LINE:COL: field.path: message.\n"
         "  --config NODE.yaml  apply that node's size classes, images and limits too\n"},
        {"apply", cli_apply, "apply -f FILE...",
         "Creates or updates the sessions in FILE: session/NAME created, configured or\n"
         "unchanged.\n"},
        {"get", cli_get, "get sessions | session NAME [-o json|yaml]",
         "Lists sessions (NAME PHASE PID AGE), or prints one with its status.\n"
         "  -o json|yaml  the whole object\n"},
        {"wait", cli_wait, "wait NAME --for=PHASE|Deleted [--timeout=SECONDS]",
         "Blocks until the session reaches PHASE (Running, Stopped, ...) or is gone.\n"
         "  --timeout=SECONDS  give up after this long (300); exit 1 then, or when the session\n"
         "                     failed for good\n"},
        {"exec", cli_exec,
         "exec NAME [-i] [--detach] [--timeout=SECONDS] [--output-cap=BYTES] -- CMD [ARG...]",
         "Runs CMD in the session's guest; exits with its status (128+N: killed by signal N).\n"
         "  -i, --stdin           pass stdin to CMD\n"
         "  -d, --detach          start CMD in the background and print its guest pid\n"
         "  --timeout=SECONDS     kill CMD's process group after this long\n"
         "  --output-cap=BYTES    stop collecting output beyond this size (K, M, G)\n"},
        {"delete", cli_delete, "delete NAME | -f FILE...",
         "Stops the session's VM gracefully and removes its files; a session already gone is\n"
         "no error.\n"},
        {"logs", cli_logs, "logs [--previous|-p] NAME",
         "Prints the serial console of the session's current boot.\n"
         "  -p, --previous  the boot before\n"},
        {"describe", cli_describe, "describe NAME",
         "Status, conditions, resources, identity, the last events and the session's place\n"
         "in its lineage.\n"},
        {"tree", cli_tree, "tree NAME   (checkpoints and forks, forks of forks too)",
         "The session's checkpoints and forks as a tree, with phases and ages.\n"},
        {"audit", cli_audit, "audit verify [--file PATH] [-o json|yaml]",
         "Checks the audit log's hash chain; exit 1 when it is broken.\n"
         "  --file PATH  a local copy instead of forkletd's\n"},
        {"node", cli_node, "node [-o json|yaml]",
         "The node's capacity: allocatable, used, free, and how many of each size class fit.\n"},
        {"checkpoint", cli_fork_engine,
         "checkpoint create NAME [--wait] | list NAME [-o json] | inspect NAME ID [-o json|yaml] "
         "| delete NAME ID [--cascade]",
         "create prints the new id once the guest runs again; the checkpoint is Writing until\n"
         "its RAM file is complete, then Ready.\n"
         "  --wait     create: return once it is Ready\n"
         "  --cascade  delete: delete the forks made from it too (else refused, naming them)\n"},
        {"fork", cli_fork_engine, "fork NAME --from CHECKPOINT --count N",
         "Starts N copies of the session from its checkpoint; prints their names\n"
         "(NAME-fork-0, ...). They carry on from that instant, at the same guest PIDs. On a\n"
         "terminal it shows forks: k/N Running until all are up; a script waits with\n"
         "forklet wait NAME-fork-K --for=Running.\n"},
        {"rollback", cli_fork_engine, "rollback NAME CHECKPOINT",
         "Puts the session back to one of its own checkpoints, in place.\n"},
        {"snapshot", cli_fork_engine,
         "snapshot create NAME | list | inspect ID [-o json|yaml] | delete ID",
         "Snapshots of a session's workspace disk, kept after the session; delete is refused\n"
         "while a session's disk is over it (USED BY).\n"},
        {"restore", cli_fork_engine, "restore SNAPSHOT --name NEW",
         "Boots a new session NEW on a snapshot's workspace disk.\n"},
        {"pause", cli_action, "pause NAME [--no-wait] [--timeout=SECONDS]",
         "Pauses the session's VM (spec.state: Paused); idempotent.\n"
         "  --no-wait  return once the change is stored, not once it is reached\n"
         "  --timeout=SECONDS  how long to wait for it (180)\n"},
        {"resume", cli_action, "resume NAME [--no-wait] [--timeout=SECONDS]",
         "Resumes a Paused session (spec.state: Running); idempotent.\n"
         "  --no-wait  return once the change is stored, not once it is reached\n"
         "  --timeout=SECONDS  how long to wait for it (180)\n"},
        {"stop", cli_action, "stop NAME [--no-wait] [--timeout=SECONDS]",
         "Stops the session's VM and keeps its disk (spec.state: Stopped); idempotent.\n"
         "  --no-wait  return once the change is stored, not once it is reached\n"
         "  --timeout=SECONDS  how long to wait for it (180)\n"},
        {"start", cli_action, "start NAME [--no-wait] [--timeout=SECONDS]",
         "Boots a Stopped session again (spec.state: Running); idempotent.\n"
         "  --no-wait  return once the change is stored, not once it is reached\n"
         "  --timeout=SECONDS  how long to wait for it (180)\n"},
        {"cp", cli_cp, "cp NAME:/PATH LOCAL | LOCAL NAME:/PATH   (LOCAL - : stdin/stdout)",
         "Copies one file into or out of a Running guest (up to 64 MiB).\n"},
        {"port-forward", cli_portforward, "port-forward NAME LOCAL:REMOTE",
         "Listens on 127.0.0.1:LOCAL and [::1]:LOCAL and relays to guest port REMOTE, which\n"
         "must be in the session's spec.ports.\n"},
        {"kubeconfig", cli_kubeconfig,
         "kubeconfig [--config NODE.yaml] [--server URL] [--ca FILE] [--token-file FILE] "
         "[--name NAME]   (for kubectl: docs/kubernetes.md)",
         "Prints a kubeconfig for the node's TLS listener, so kubectl works against it.\n"},
        {"image", cli_image,
         "image list [-o json] | pull REF | inspect IMAGE | rm IMAGE   (OCI images: "
         "docs/images.md)",
         "The node's OCI images. IMAGE: a reference or 12 or more hex digits of the digest;\n"
         "rm is refused while a session, its checkpoints or a snapshot uses it.\n"},
        {"mcp", cli_mcp, "mcp   (an MCP server on stdin/stdout for AI agents: docs/mcp.md)",
         "Serves sessions, exec, files, checkpoints, forks and snapshots as MCP tools on\n"
         "stdin/stdout.\n"},
        {},
};

const struct cli_command *cli_command_find(const char *name)
{
        for (const struct cli_command *c = cli_commands; c->name; c++)
                if (strcmp(c->name, name) == 0)
                        return c;
        return NULL;
}
