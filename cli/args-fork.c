/* SPDX-License-Identifier: MIT */
/* Argument parsing (pure) of the fork-engine verbs: checkpoint, fork, rollback, snapshot,
 * restore. */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Positional arguments after the verb (and sub-verb) with the known options pulled out. */
struct parsed {
        const char *pos[4];
        size_t n;
        const char *from, *count, *name, *output;
        bool cascade, wait;
};

static int opt(int argc, char **argv, int *i, const char *name, const char **ret,
               struct fk_error *err)
{
        size_t n = strlen(name);

        if (strncmp(argv[*i], name, n) != 0)
                return 0;
        if (argv[*i][n] == '=') {
                *ret = argv[*i] + n + 1;
                return 1;
        }
        if (argv[*i][n] != '\0')
                return 0;
        if (*i + 1 >= argc)
                return fk_error_set(err, -EINVAL, "%s: %s needs a value", argv[0], name);
        *ret = argv[++*i];
        return 1;
}

static int collect(int argc, char **argv, int start, struct parsed *p, struct fk_error *err)
{
        for (int i = start; i < argc; i++) {
                int r;

                if ((r = opt(argc, argv, &i, "--from", &p->from, err)) != 0 ||
                    (r = opt(argc, argv, &i, "--count", &p->count, err)) != 0 ||
                    (r = opt(argc, argv, &i, "--name", &p->name, err)) != 0 ||
                    (r = opt(argc, argv, &i, "-o", &p->output, err)) != 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                if (strcmp(argv[i], "--cascade") == 0) {
                        p->cascade = true;
                        continue;
                }
                if (strcmp(argv[i], "--wait") == 0) {
                        p->wait = true;
                        continue;
                }
                if (argv[i][0] == '-' || p->n == 4)
                        return fk_error_set(err, -EINVAL, "%s: unexpected argument \"%s\"", argv[0],
                                            argv[i]);
                p->pos[p->n++] = argv[i];
        }
        return 0;
}

static int want(const struct parsed *p, size_t n, const char *usage, struct fk_error *err)
{
        if (p->n != n)
                return fk_error_set(err, -EINVAL, "usage: forklet %s", usage);
        return 0;
}

static int parse_output(const struct parsed *p, const char *verb, struct cli_fork_args *a,
                        struct fk_error *err)
{
        if (p->output && strcmp(p->output, "json") == 0)
                a->output = CLI_OUTPUT_JSON;
        else if (p->output && strcmp(p->output, "yaml") == 0)
                a->output = CLI_OUTPUT_YAML;
        else if (p->output)
                return fk_error_set(err, -EINVAL, "%s: -o json|yaml only", verb);
        return 0;
}

static int parse_checkpoint(const struct parsed *p, struct cli_fork_args *a, struct fk_error *err)
{
        const char *usage = "checkpoint create NAME [--wait] | list NAME | inspect NAME ID | "
                            "delete NAME ID [--cascade]";

        if (p->n < 1)
                return fk_error_set(err, -EINVAL, "usage: forklet %s", usage);
        if (strcmp(p->pos[0], "create") == 0)
                a->verb = CLI_CHECKPOINT_CREATE;
        else if (strcmp(p->pos[0], "list") == 0)
                a->verb = CLI_CHECKPOINT_LIST;
        else if (strcmp(p->pos[0], "delete") == 0)
                a->verb = CLI_CHECKPOINT_DELETE;
        else if (strcmp(p->pos[0], "inspect") == 0)
                a->verb = CLI_CHECKPOINT_INSPECT;
        else
                return fk_error_set(err, -EINVAL, "checkpoint: unknown action \"%s\" (%s)",
                                    p->pos[0], usage);
        if (want(p, a->verb == CLI_CHECKPOINT_DELETE || a->verb == CLI_CHECKPOINT_INSPECT ? 3 : 2,
                 usage, err) < 0)
                return -EINVAL;
        a->name = p->pos[1];
        a->id = p->n > 2 ? p->pos[2] : NULL;
        a->cascade = p->cascade;
        if (p->cascade && a->verb != CLI_CHECKPOINT_DELETE)
                return fk_error_set(err, -EINVAL, "--cascade goes with checkpoint delete");
        a->wait = p->wait;
        if (p->wait && a->verb != CLI_CHECKPOINT_CREATE)
                return fk_error_set(err, -EINVAL, "--wait goes with checkpoint create");
        return parse_output(p, "checkpoint", a, err);
}

static int parse_snapshot(const struct parsed *p, struct cli_fork_args *a, struct fk_error *err)
{
        const char *usage = "snapshot create NAME | list | inspect ID | delete ID";

        if (p->n < 1)
                return fk_error_set(err, -EINVAL, "usage: forklet %s", usage);
        if (strcmp(p->pos[0], "create") == 0)
                a->verb = CLI_SNAPSHOT_CREATE;
        else if (strcmp(p->pos[0], "list") == 0)
                a->verb = CLI_SNAPSHOT_LIST;
        else if (strcmp(p->pos[0], "inspect") == 0)
                a->verb = CLI_SNAPSHOT_INSPECT;
        else if (strcmp(p->pos[0], "delete") == 0)
                a->verb = CLI_SNAPSHOT_DELETE;
        else
                return fk_error_set(err, -EINVAL, "snapshot: unknown action \"%s\" (%s)", p->pos[0],
                                    usage);
        if (want(p, a->verb == CLI_SNAPSHOT_LIST ? 1 : 2, usage, err) < 0)
                return -EINVAL;
        if (a->verb == CLI_SNAPSHOT_CREATE)
                a->name = p->pos[1];
        else if (a->verb != CLI_SNAPSHOT_LIST)
                a->id = p->pos[1];
        if (p->cascade || p->wait)
                return fk_error_set(err, -EINVAL, "%s goes with checkpoint %s",
                                    p->cascade ? "--cascade" : "--wait",
                                    p->cascade ? "delete" : "create");
        if (p->output && a->verb != CLI_SNAPSHOT_LIST && a->verb != CLI_SNAPSHOT_INSPECT)
                return fk_error_set(err, -EINVAL, "-o goes with snapshot list and inspect");
        return parse_output(p, "snapshot", a, err);
}

static int parse_count(const char *s, unsigned *ret, struct fk_error *err)
{
        char *end;
        unsigned long v;

        if (!s)
                return fk_error_set(err, -EINVAL, "fork: --count N is required");
        v = strtoul(s, &end, 10);
        if (*end || v < 1 || v > 1000 || s[0] == '-')
                return fk_error_set(err, -EINVAL, "fork: --count must be 1..1000, not \"%s\"", s);
        *ret = (unsigned)v;
        return 0;
}

int cli_parse_fork(int argc, char **argv, struct cli_fork_args *ret, struct fk_error *err)
{
        struct cli_fork_args a = {0};
        struct parsed p = {0};
        const char *v = argv[0];
        int r;

        r = collect(argc, argv, 1, &p, err);
        if (r < 0)
                return r;
        if (strcmp(v, "checkpoint") == 0)
                r = parse_checkpoint(&p, &a, err);
        else if (strcmp(v, "fork") == 0) {
                a.verb = CLI_FORK;
                r = want(&p, 1, "fork NAME --from CHECKPOINT --count N", err);
                if (r >= 0 && !p.from)
                        r = fk_error_set(err, -EINVAL, "fork: --from CHECKPOINT is required");
                if (r >= 0)
                        r = parse_count(p.count, &a.count, err);
                a.id = p.from;
        } else if (strcmp(v, "rollback") == 0) {
                a.verb = CLI_ROLLBACK;
                r = want(&p, 2, "rollback NAME CHECKPOINT", err);
                a.id = p.n > 1 ? p.pos[1] : NULL;
        } else if (strcmp(v, "snapshot") == 0) {
                r = parse_snapshot(&p, &a, err);
        } else if (strcmp(v, "restore") == 0) {
                a.verb = CLI_RESTORE;
                r = want(&p, 1, "restore SNAPSHOT --name NEW", err);
                if (r >= 0 && !p.name)
                        r = fk_error_set(err, -EINVAL, "restore: --name NEW is required");
                a.id = p.n > 0 ? p.pos[0] : NULL;
                p.pos[0] = p.name;
        } else
                r = fk_error_set(err, -EINVAL, "unknown verb \"%s\"", v);
        if (r < 0)
                return r;
        if (a.verb == CLI_FORK || a.verb == CLI_ROLLBACK || a.verb == CLI_RESTORE)
                a.name = p.pos[0];
        *ret = a;
        return 0;
}
