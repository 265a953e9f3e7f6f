/* SPDX-License-Identifier: MIT */
/* forklet: parses the global options and runs the verb from the command table. */
#include "cli/cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
        fprintf(f, "Usage: forklet [--socket PATH] [-n NAMESPACE] COMMAND [ARGS]\n\nCommands:\n");
        for (const struct cli_command *c = cli_commands; c->name; c++)
                fprintf(f, "  forklet %s\n", c->usage);
        fprintf(f,
                "\nOptions:\n"
                "  --socket PATH       forkletd's API socket (default $FORKLET_SOCKET or "
                "%s)\n"
                "  -n, --namespace NS  namespace of NAME arguments (default \"default\")\n"
                "  --etcd URL[,URL]    cluster mode: talk to etcd (default $FORKLET_ETCD)\n"
                "  --etcd-prefix P     cluster key prefix (default $FORKLET_ETCD_PREFIX or "
                "/forklet)\n"
                "  --server URL        forkletd's TLS listener, https://HOST:PORT, instead of\n"
                "                      the socket (default $FORKLET_SERVER)\n"
                "  --token-file FILE   bearer token for --server (default $FORKLET_TOKEN_FILE)\n"
                "  --ca FILE           PEM CA that signed the server's certificate (default\n"
                "                      $FORKLET_CA; else a pin or the system CA store)\n"
                "  --pinned-public-key sha256//BASE64  accept only this server key\n"
                "  --cert FILE --key FILE  client certificate for mutual TLS ($FORKLET_CERT/KEY)\n"
                "  -h, --help          this text; forklet VERB --help: that verb's\n"
                "  --version           the version\n"
                "\nExit status: 0 success, 1 failure (error printed; for audit verify: the\n"
                "chain is broken), 2 usage error;\n"
                "exec returns the guest command's status (128+N if killed by signal N,\n"
                "127 if it could not be started).\n",
                CLI_DEFAULT_SOCKET);
}

/* `forklet VERB ... --help|-h` before any "--" (for exec: before the guest command, whose own
 * arguments they may be). */
static bool wants_help(const struct cli_command *cmd, int argc, char **argv)
{
        bool exec = strcmp(cmd->name, "exec") == 0;
        int positional = 0;

        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
                        return true;
                if (exec &&
                    (strcmp(argv[i], "--timeout") == 0 || strcmp(argv[i], "--output-cap") == 0))
                        i++; /* their value */
                else if (exec && argv[i][0] != '-' && ++positional == 2)
                        return false;
        }
        return false;
}

static int verb_help(const struct cli_command *cmd)
{
        printf("Usage: forklet [global options] %s\n\n%s\nGlobal options and exit status: "
               "forklet --help; all verbs: docs/cli.md, forklet(1).\n",
               cmd->usage, cmd->help ? cmd->help : "");
        return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
        const struct cli_command *cmd;
        struct fk_error err = {0};
        struct cli c;
        int verb;

        if (cli_parse_global(argc, argv, getenv("FORKLET_SOCKET"), &c, &verb, &err) < 0) {
                fprintf(stderr, "forklet: %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (verb >= argc) {
                usage(stderr);
                return CLI_EXIT_USAGE;
        }
        if (strcmp(argv[verb], "help") == 0 && verb + 1 < argc) {
                cmd = cli_command_find(argv[verb + 1]);
                if (cmd)
                        return verb_help(cmd);
                fprintf(stderr, "forklet help: unknown command \"%s\" (see forklet --help)\n",
                        argv[verb + 1]);
                return CLI_EXIT_USAGE;
        }
        if (strcmp(argv[verb], "--help") == 0 || strcmp(argv[verb], "-h") == 0 ||
            strcmp(argv[verb], "help") == 0) {
                usage(stdout);
                return CLI_EXIT_OK;
        }
        if (strcmp(argv[verb], "--version") == 0 || strcmp(argv[verb], "version") == 0) {
                printf("forklet %s\n", FORKLET_VERSION);
                return CLI_EXIT_OK;
        }
        cmd = cli_command_find(argv[verb]);
        if (!cmd) {
                fprintf(stderr, "forklet: unknown command \"%s\" (see forklet --help)\n",
                        argv[verb]);
                return CLI_EXIT_USAGE;
        }
        if (wants_help(cmd, argc - verb, argv + verb))
                return verb_help(cmd);
        /* cluster mode (cli/cluster.c) */
        if (!c.etcd)
                c.etcd = getenv("FORKLET_ETCD");
        if (!c.etcd_prefix)
                c.etcd_prefix = getenv("FORKLET_ETCD_PREFIX");
        cli_global_env(&c);
        if (c.etcd && *c.etcd)
                return cli_cluster_run(&c, cmd, argc - verb, argv + verb);
        return cmd->run(&c, argc - verb, argv + verb);
}
