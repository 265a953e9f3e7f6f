/* SPDX-License-Identifier: MIT */
/* Argument parsing for the CLI: global options and each verb's arguments. Pure (no I/O, no
 * globals) so unit tests drive them directly; errors name the argument. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Matches "--long VALUE", "--long=VALUE", "-s VALUE" at argv[*i]. 1: matched (value set,
 * *i advanced past it), 0: not this option, -EINVAL: value missing. */
static int opt_value(int argc, char **argv, int *i, const char *lng, const char *shrt,
                     const char **ret, struct fk_error *err)
{
        const char *a = argv[*i];
        size_t n = strlen(lng);

        if (strncmp(a, lng, n) == 0 && a[n] == '=') {
                *ret = a + n + 1;
                return 1;
        }
        if (strcmp(a, lng) != 0 && (!shrt || strcmp(a, shrt) != 0))
                return 0;
        if (*i + 1 >= argc)
                return fk_error_set(err, -EINVAL, "%s: requires a value", a);
        *ret = argv[++*i];
        return 1;
}

static int parse_uint(const char *opt, const char *v, unsigned *ret, struct fk_error *err)
{
        char *end = NULL;
        unsigned long x;

        errno = 0;
        x = strtoul(v, &end, 10);
        if (errno || !*v || *v == '-' || x > 86400 * 365)
                return fk_error_set(err, -EINVAL, "%s: \"%s\" is not a number of seconds", opt, v);
        if (*end == 's' && end[1] == '\0')
                end++;
        if (*end)
                return fk_error_set(err, -EINVAL, "%s: \"%s\" is not a number of seconds", opt, v);
        *ret = (unsigned)x;
        return 0;
}

/* A byte count, optionally with K/M/G (binary) suffix; 0 is refused. */
static int parse_bytes(const char *opt, const char *v, size_t *ret, struct fk_error *err)
{
        char *end = NULL;
        unsigned long long x;

        errno = 0;
        x = strtoull(v, &end, 10);
        if (!errno && *v != '-' && end != v) {
                if (*end == 'K' || *end == 'k')
                        x <<= 10, end++;
                else if (*end == 'M')
                        x <<= 20, end++;
                else if (*end == 'G')
                        x <<= 30, end++;
        }
        if (errno || *v == '-' || end == v || *end || x == 0 || x > (1ull << 40))
                return fk_error_set(err, -EINVAL, "%s: \"%s\" is not a byte count (e.g. 4096, 1M)",
                                    opt, v);
        *ret = (size_t)x;
        return 0;
}

static int unknown(const char *verb, const char *a, struct fk_error *err)
{
        if (a[0] == '-')
                return fk_error_set(err, -EINVAL, "%s: unknown option \"%s\"", verb, a);
        return fk_error_set(err, -EINVAL, "%s: unexpected argument \"%s\"", verb, a);
}

int cli_parse_global(int argc, char **argv, const char *env_socket, struct cli *ret,
                     int *ret_verb_index, struct fk_error *err)
{
        struct cli c = {.socket = env_socket && *env_socket ? env_socket : CLI_DEFAULT_SOCKET,
                        .namespace = "default"};
        int i, r;

        for (i = 1; i < argc && argv[i][0] == '-'; i++) {
                if ((r = opt_value(argc, argv, &i, "--socket", NULL, &c.socket, err)) != 0 ||
                    (r = opt_value(argc, argv, &i, "--namespace", "-n", &c.namespace, err)) != 0 ||
                    (r = opt_value(argc, argv, &i, "--etcd", NULL, &c.etcd, err)) != 0 ||
                    (r = opt_value(argc, argv, &i, "--etcd-prefix", NULL, &c.etcd_prefix, err)) !=
                            0 ||
                    (r = opt_value(argc, argv, &i, "--server", NULL, &c.server, err)) != 0 ||
                    (r = opt_value(argc, argv, &i, "--token-file", NULL, &c.token_file, err)) !=
                            0 ||
                    (r = opt_value(argc, argv, &i, "--ca", NULL, &c.ca, err)) != 0 ||
                    (r = opt_value(argc, argv, &i, "--pinned-public-key", NULL, &c.pin, err)) !=
                            0 ||
                    (r = opt_value(argc, argv, &i, "--cert", NULL, &c.cert, err)) != 0 ||
                    (r = opt_value(argc, argv, &i, "--key", NULL, &c.key, err)) != 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ||
                    strcmp(argv[i], "--version") == 0)
                        break; /* handled by main as pseudo-verbs */
                return fk_error_set(err, -EINVAL, "unknown option \"%s\"", argv[i]);
        }
        *ret = c;
        *ret_verb_index = i;
        return 0;
}

static int parse_output(const char *v, enum cli_output *ret, struct fk_error *err)
{
        if (strcmp(v, "json") == 0)
                *ret = CLI_OUTPUT_JSON;
        else if (strcmp(v, "yaml") == 0)
                *ret = CLI_OUTPUT_YAML;
        else if (strcmp(v, "table") == 0 || strcmp(v, "wide") == 0)
                *ret = CLI_OUTPUT_TABLE;
        else
                return fk_error_set(err, -EINVAL, "-o: unknown format \"%s\" (json, yaml)", v);
        return 0;
}

int cli_parse_get(int argc, char **argv, struct cli_get_args *ret, struct fk_error *err)
{
        struct cli_get_args a = {0};
        const char *what = NULL, *v;
        int r;

        for (int i = 1; i < argc; i++) {
                r = opt_value(argc, argv, &i, "--output", "-o", &v, err);
                if (r < 0)
                        return r;
                if (r > 0) {
                        r = parse_output(v, &a.output, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (argv[i][0] == '-' || (what && a.name))
                        return unknown("get", argv[i], err);
                if (!what)
                        what = argv[i];
                else
                        a.name = argv[i];
        }
        if (!what)
                return fk_error_set(err, -EINVAL,
                                    "get: missing resource (sessions | session NAME)");
        a.list = strcmp(what, "sessions") == 0 && !a.name;
        if (!a.list && strcmp(what, "session") != 0 && strcmp(what, "sessions") != 0)
                return fk_error_set(err, -EINVAL, "get: unknown resource \"%s\"", what);
        if (!a.list && !a.name)
                return fk_error_set(err, -EINVAL, "get session: missing NAME");
        *ret = a;
        return 0;
}

int cli_parse_wait(int argc, char **argv, struct cli_wait_args *ret, struct fk_error *err)
{
        struct cli_wait_args a = {.timeout_s = 300};
        const char *v;
        int r;

        for (int i = 1; i < argc; i++) {
                if ((r = opt_value(argc, argv, &i, "--for", NULL, &a.phase, err)) != 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                if ((r = opt_value(argc, argv, &i, "--timeout", NULL, &v, err)) != 0) {
                        if (r < 0 || (r = parse_uint("--timeout", v, &a.timeout_s, err)) < 0)
                                return r;
                        continue;
                }
                if (argv[i][0] == '-' || a.name)
                        return unknown("wait", argv[i], err);
                a.name = argv[i];
        }
        if (!a.name)
                return fk_error_set(err, -EINVAL, "wait: missing NAME");
        if (!a.phase)
                return fk_error_set(err, -EINVAL, "wait: missing --for=PHASE");
        if (strncmp(a.phase, "phase=", 6) == 0)
                a.phase += 6;
        if (!*a.phase)
                return fk_error_set(err, -EINVAL, "--for: empty phase");
        *ret = a;
        return 0;
}

int cli_parse_exec(int argc, char **argv, struct cli_exec_args *ret, struct fk_error *err)
{
        struct cli_exec_args a = {0};
        const char *v;
        int i, r;

        for (i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--") == 0) {
                        i++;
                        break;
                }
                if (strcmp(argv[i], "-i") == 0 || strcmp(argv[i], "--stdin") == 0) {
                        a.stdin_ = true;
                        continue;
                }
                if (strcmp(argv[i], "--detach") == 0 || strcmp(argv[i], "-d") == 0) {
                        a.detach = true;
                        continue;
                }
                if ((r = opt_value(argc, argv, &i, "--timeout", NULL, &v, err)) != 0) {
                        if (r < 0 || (r = parse_uint("--timeout", v, &a.timeout_s, err)) < 0)
                                return r;
                        continue;
                }
                if ((r = opt_value(argc, argv, &i, "--output-cap", NULL, &v, err)) != 0) {
                        if (r < 0 || (r = parse_bytes("--output-cap", v, &a.output_cap, err)) < 0)
                                return r;
                        continue;
                }
                if (argv[i][0] == '-')
                        return unknown("exec", argv[i], err);
                if (a.name)
                        break; /* `exec NAME CMD...` without "--" */
                a.name = argv[i];
        }
        if (!a.name)
                return fk_error_set(err, -EINVAL, "exec: missing NAME");
        if (i >= argc)
                return fk_error_set(err, -EINVAL, "exec: missing command after \"--\"");
        if (a.stdin_ && a.detach)
                return fk_error_set(err, -EINVAL, "exec: -i and --detach exclude each other");
        a.argv = &argv[i];
        *ret = a;
        return 0;
}

static int push_file(struct cli_files_args *a, const char *f)
{
        const char **p = realloc(a->files, (a->n_files + 1) * sizeof(*p));

        if (!p)
                return -ENOMEM;
        p[a->n_files++] = f;
        a->files = p;
        return 0;
}

int cli_parse_files(int argc, char **argv, const char *verb, struct cli_files_args *ret,
                    struct fk_error *err)
{
        struct cli_files_args a = {0};
        bool name_only = strcmp(verb, "logs") == 0 || strcmp(verb, "describe") == 0 ||
                         strcmp(verb, "tree") == 0;
        bool takes_name = name_only || strcmp(verb, "delete") == 0;
        bool takes_files = !name_only;
        const char *v;
        int r = 0;

        for (int i = 1; i < argc && r >= 0; i++) {
                if (takes_files && (r = opt_value(argc, argv, &i, "--filename", "-f", &v, err))) {
                        if (r > 0)
                                r = push_file(&a, v);
                        continue;
                }
                if (strcmp(verb, "validate") == 0 &&
                    (r = opt_value(argc, argv, &i, "--config", NULL, &a.config, err)))
                        continue;
                if (strcmp(verb, "logs") == 0 &&
                    (!strcmp(argv[i], "--previous") || !strcmp(argv[i], "-p"))) {
                        a.previous = true;
                        continue;
                }
                if (argv[i][0] == '-' || !takes_name || a.name)
                        r = unknown(verb, argv[i], err);
                else
                        a.name = argv[i];
        }
        if (r >= 0 && takes_name && !a.name && a.n_files == 0)
                r = fk_error_set(err, -EINVAL, "%s: missing NAME%s", verb,
                                 takes_files ? " or -f FILE" : "");
        else if (r >= 0 && !takes_name && a.n_files == 0)
                r = fk_error_set(err, -EINVAL, "%s: missing -f FILE", verb);
        else if (r >= 0 && a.name && a.n_files > 0)
                r = fk_error_set(err, -EINVAL, "%s: give NAME or -f FILE, not both", verb);
        if (r < 0) {
                free(a.files);
                return r;
        }
        *ret = a;
        return 0;
}

void cli_format_age(const char *rfc3339, long long now_s, char *buf, size_t size)
{
        struct tm tm = {0};
        long long age;
        const char *end = rfc3339 ? strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

        if (!end) {
                snprintf(buf, size, "-");
                return;
        }
        age = now_s - (long long)timegm(&tm);
        if (age < 0)
                age = 0;
        if (age < 120)
                snprintf(buf, size, "%llds", age);
        else if (age < 2 * 3600)
                snprintf(buf, size, "%lldm", age / 60);
        else if (age < 2 * 86400)
                snprintf(buf, size, "%lldh", age / 3600);
        else
                snprintf(buf, size, "%lldd", age / 86400);
}

int cli_parse_action(int argc, char **argv, struct cli_action_args *ret, struct fk_error *err)
{
        struct cli_action_args a = {.timeout_s = CLI_ACTION_DEFAULT_TIMEOUT_S, .wait = true};
        const char *verb = argv[0], *v;
        int i, r;

        for (i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--no-wait") == 0) {
                        a.wait = false;
                        continue;
                }
                if ((r = opt_value(argc, argv, &i, "--timeout", NULL, &v, err)) != 0) {
                        if (r < 0 || (r = parse_uint("--timeout", v, &a.timeout_s, err)) < 0)
                                return r;
                        continue;
                }
                if (argv[i][0] == '-' || a.name)
                        return unknown(verb, argv[i], err);
                a.name = argv[i];
        }
        if (!a.name)
                return fk_error_set(err, -EINVAL, "%s: missing NAME", verb);
        if (a.wait && a.timeout_s == 0)
                return fk_error_set(err, -EINVAL, "%s: --timeout must be > 0 (or --no-wait)", verb);
        *ret = a;
        return 0;
}

/* "NAME:/abs" -> 1 (name copied into buf), anything else 0. */
static int guest_spec(const char *a, char *buf, size_t size, const char **ret_path)
{
        const char *colon = strchr(a, ':');
        size_t n = colon ? (size_t)(colon - a) : 0;

        if (!colon || n == 0 || n >= size || colon[1] != '/')
                return 0;
        for (size_t i = 0; i < n; i++)
                if (!((a[i] >= 'a' && a[i] <= 'z') || (a[i] >= '0' && a[i] <= '9') || a[i] == '-'))
                        return 0;
        memcpy(buf, a, n);
        buf[n] = '\0';
        *ret_path = colon + 1;
        return 1;
}

int cli_parse_cp(int argc, char **argv, struct cli_cp_args *ret, struct fk_error *err)
{
        const char *gpath = NULL;
        int src, dst;

        if (argc != 3)
                return fk_error_set(err, -EINVAL,
                                    "cp: usage: cp NAME:/PATH LOCAL | LOCAL NAME:/PATH");
        src = guest_spec(argv[1], ret->session_buf, sizeof(ret->session_buf), &gpath);
        dst = guest_spec(argv[2], ret->session_buf, sizeof(ret->session_buf), &gpath);
        if (src == dst)
                return fk_error_set(err, -EINVAL,
                                    "cp: exactly one side must be NAME:/ABSOLUTE/PATH (got \"%s\" "
                                    "and \"%s\")",
                                    argv[1], argv[2]);
        if (src)
                guest_spec(argv[1], ret->session_buf, sizeof(ret->session_buf), &gpath);
        ret->session = ret->session_buf;
        ret->guest = gpath;
        ret->upload = dst;
        ret->local = dst ? argv[1] : argv[2];
        return 0;
}
