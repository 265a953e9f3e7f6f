/* SPDX-License-Identifier: MIT */
/* The CLI's argument parsers: global options, get, wait, exec, the -f verbs, and their error
 * messages naming the argument; plus the AGE column formatting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/cli.h"

/* argv vectors from literals; the parsers never write through argv. */
static char **argv_of(const char *first, ...)
{
        static char *slots[32][16];
        static unsigned next;
        char **v = slots[next++ % 32];
        const char *a = first;
        va_list ap;
        int i = 0;

        va_start(ap, first);
        while (a && i < 15) {
                v[i++] = (char *)a;
                a = va_arg(ap, const char *);
        }
        va_end(ap);
        v[i] = NULL;
        return v;
}
#define ARGV(...) argv_of(__VA_ARGS__, (const char *)NULL)

static void test_global(void **state)
{
        struct fk_error err = {0};
        struct cli c;
        int verb;

        (void)state;
        assert_int_equal(
                cli_parse_global(3, ARGV("forklet", "get", "sessions"), NULL, &c, &verb, &err), 0);
        assert_int_equal(verb, 1);
        assert_string_equal(c.socket, CLI_DEFAULT_SOCKET);
        assert_string_equal(c.namespace, "default");
        assert_int_equal(cli_parse_global(3, ARGV("forklet", "--socket=/tmp/s", "get"), "/env", &c,
                                          &verb, &err),
                         0);
        assert_string_equal(c.socket, "/tmp/s");
        assert_int_equal(verb, 2);
        assert_int_equal(cli_parse_global(5, ARGV("forklet", "-n", "ns1", "--socket", "/x"), NULL,
                                          &c, &verb, &err),
                         0);
        assert_string_equal(c.namespace, "ns1");
        assert_int_equal(verb, 5);
        assert_int_equal(cli_parse_global(2, ARGV("forklet", "get"), "/env.sock", &c, &verb, &err),
                         0);
        assert_string_equal(c.socket, "/env.sock");
        assert_int_equal(cli_parse_global(2, ARGV("forklet", "--socket"), NULL, &c, &verb, &err),
                         -EINVAL);
        assert_non_null(strstr(err.msg, "--socket"));
        assert_int_equal(
                cli_parse_global(3, ARGV("forklet", "--bogus", "get"), NULL, &c, &verb, &err),
                -EINVAL);
        assert_non_null(strstr(err.msg, "--bogus"));
}

static void test_get(void **state)
{
        struct cli_get_args a;
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cli_parse_get(2, ARGV("get", "sessions"), &a, &err), 0);
        assert_true(a.list);
        assert_int_equal(a.output, CLI_OUTPUT_TABLE);
        assert_int_equal(cli_parse_get(5, ARGV("get", "session", "hello", "-o", "json"), &a, &err),
                         0);
        assert_false(a.list);
        assert_string_equal(a.name, "hello");
        assert_int_equal(a.output, CLI_OUTPUT_JSON);
        assert_int_equal(cli_parse_get(4, ARGV("get", "--output=yaml", "session", "x"), &a, &err),
                         0);
        assert_int_equal(a.output, CLI_OUTPUT_YAML);
        assert_int_equal(cli_parse_get(3, ARGV("get", "sessions", "--output=json"), &a, &err), 0);
        assert_int_equal(a.output, CLI_OUTPUT_JSON);
        assert_int_equal(cli_parse_get(2, ARGV("get", "session"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "NAME"));
        assert_int_equal(cli_parse_get(4, ARGV("get", "sessions", "-o", "xml"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "xml"));
        assert_int_equal(cli_parse_get(2, ARGV("get", "pods"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "pods"));
        assert_int_equal(cli_parse_get(1, ARGV("get"), &a, &err), -EINVAL);
        assert_int_equal(cli_parse_get(3, ARGV("get", "sessions", "-o"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "-o"));
}

static void test_wait(void **state)
{
        struct cli_wait_args a;
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cli_parse_wait(4, ARGV("wait", "hello", "--for=Running", "--timeout=180"),
                                        &a, &err),
                         0);
        assert_string_equal(a.name, "hello");
        assert_string_equal(a.phase, "Running");
        assert_int_equal(a.timeout_s, 180);
        assert_int_equal(
                cli_parse_wait(6, ARGV("wait", "--for", "phase=Failed", "x", "--timeout", "5s"), &a,
                               &err),
                0);
        assert_string_equal(a.phase, "Failed");
        assert_int_equal(a.timeout_s, 5);
        assert_int_equal(cli_parse_wait(3, ARGV("wait", "x", "--timeout=abc"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "--timeout"));
        assert_int_equal(cli_parse_wait(2, ARGV("wait", "x"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "--for"));
        assert_int_equal(cli_parse_wait(2, ARGV("wait", "--for=Running"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "NAME"));
        assert_int_equal(cli_parse_wait(4, ARGV("wait", "x", "y", "--for=Running"), &a, &err),
                         -EINVAL);
        assert_non_null(strstr(err.msg, "\"y\""));
}

static void test_portforward(void **state)
{
        struct cli_portforward_args a = {0};
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(
                cli_parse_portforward(3, ARGV("port-forward", "web", "18080:8080"), &a, &err), 0);
        assert_string_equal(a.name, "web");
        assert_int_equal(a.local, 18080);
        assert_int_equal(a.remote, 8080);
        assert_int_equal(cli_parse_portforward(3, ARGV("port-forward", "web", "8080"), &a, &err),
                         -EINVAL);
        assert_non_null(strstr(err.msg, "LOCAL:REMOTE"));
        assert_int_equal(cli_parse_portforward(3, ARGV("port-forward", "web", "0:80"), &a, &err),
                         -EINVAL);
        assert_int_equal(
                cli_parse_portforward(3, ARGV("port-forward", "web", "80:70000"), &a, &err),
                -EINVAL);
        assert_non_null(strstr(err.msg, "1..65535"));
        assert_int_equal(cli_parse_portforward(2, ARGV("port-forward", "web"), &a, &err), -EINVAL);
}

/* port-forward's verdict, for a forward that began on a session created at "T0", on a look
 * at one in phase, created at created, being deleted or not */
static enum cli_pf_verdict verdict_of(const char *phase, const char *created, bool deleting,
                                      char *why, size_t size)
{
        json_t *j = json_pack("{s:{s:s}, s:{s:s}}", "metadata", "creationTimestamp", created,
                              "status", "phase", phase);
        enum cli_pf_verdict v;

        if (deleting)
                json_object_set_new(json_object_get(j, "metadata"), "deletionTimestamp",
                                    json_string(created));
        v = cli_portforward_verdict(j, "T0", why, size);
        json_decref(j);
        return v;
}

static void test_portforward_verdict(void **state)
{
        char why[96];

        (void)state;
        assert_int_equal(verdict_of("Running", "T0", false, why, sizeof(why)), CLI_PF_SERVE);
        /* a rollback passes through Starting, a restart through Pending: the forward stays */
        assert_int_equal(verdict_of("Starting", "T0", false, why, sizeof(why)), CLI_PF_WAIT);
        assert_string_equal(why, "is Starting");
        assert_int_equal(verdict_of("Pending", "T0", false, why, sizeof(why)), CLI_PF_WAIT);
        assert_int_equal(verdict_of("Paused", "T0", false, why, sizeof(why)), CLI_PF_WAIT);
        assert_int_equal(verdict_of("Stopped", "T0", false, why, sizeof(why)), CLI_PF_CLOSE);
        assert_string_equal(why, "is Stopped");
        assert_int_equal(verdict_of("Failed", "T0", false, why, sizeof(why)), CLI_PF_CLOSE);
        assert_int_equal(verdict_of("Running", "T0", true, why, sizeof(why)), CLI_PF_CLOSE);
        assert_string_equal(why, "is being deleted");
        /* deleted and applied again under the same name: not the session the forward was for */
        assert_int_equal(verdict_of("Running", "T1", false, why, sizeof(why)), CLI_PF_CLOSE);
        assert_string_equal(why, "was deleted and created again");
        assert_int_equal(cli_portforward_verdict(NULL, "T0", why, sizeof(why)), CLI_PF_CLOSE);
        assert_string_equal(why, "is gone");
}

static void test_exec(void **state)
{
        struct cli_exec_args a;
        struct fk_error err = {0};
        char **v;

        (void)state;
        v = ARGV("exec", "hello", "--", "uname", "-r");
        assert_int_equal(cli_parse_exec(5, v, &a, &err), 0);
        assert_string_equal(a.name, "hello");
        assert_ptr_equal(a.argv, &v[3]);
        assert_string_equal(a.argv[1], "-r");
        assert_null(a.argv[2]);
        assert_false(a.stdin_);
        v = ARGV("exec", "-i", "hello", "--timeout=30", "--", "cat");
        assert_int_equal(cli_parse_exec(6, v, &a, &err), 0);
        assert_true(a.stdin_);
        assert_int_equal(a.timeout_s, 30);
        assert_string_equal(a.argv[0], "cat");
        v = ARGV("exec", "hello", "--detach", "sleep", "100");
        assert_int_equal(cli_parse_exec(5, v, &a, &err), 0);
        assert_true(a.detach);
        assert_string_equal(a.argv[0], "sleep");
        assert_int_equal(cli_parse_exec(3, ARGV("exec", "hello", "--"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "command"));
        assert_int_equal(cli_parse_exec(3, ARGV("exec", "--", "ls"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "NAME"));
        assert_int_equal(cli_parse_exec(5, ARGV("exec", "-x", "h", "--", "ls"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "-x"));
        assert_int_equal(
                cli_parse_exec(6, ARGV("exec", "-i", "--detach", "h", "--", "ls"), &a, &err),
                -EINVAL);
        v = ARGV("exec", "h", "--output-cap=4K", "--", "ls");
        assert_int_equal(cli_parse_exec(5, v, &a, &err), 0);
        assert_int_equal(a.output_cap, 4096);
        v = ARGV("exec", "h", "--output-cap", "2M", "--", "ls");
        assert_int_equal(cli_parse_exec(6, v, &a, &err), 0);
        assert_int_equal(a.output_cap, 2u << 20);
        assert_int_equal(
                cli_parse_exec(5, ARGV("exec", "h", "--output-cap=0", "--", "ls"), &a, &err),
                -EINVAL);
        assert_int_equal(
                cli_parse_exec(5, ARGV("exec", "h", "--output-cap=1X", "--", "ls"), &a, &err),
                -EINVAL);
        assert_non_null(strstr(err.msg, "byte count"));
}

static void test_logs_previous(void **state)
{
        struct cli_files_args a;
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cli_parse_files(3, ARGV("logs", "--previous", "web"), "logs", &a, &err),
                         0);
        assert_true(a.previous);
        assert_string_equal(a.name, "web");
        free(a.files);
        assert_int_equal(cli_parse_files(2, ARGV("logs", "web"), "logs", &a, &err), 0);
        assert_false(a.previous);
        free(a.files);
        assert_int_equal(cli_parse_files(3, ARGV("describe", "-p", "web"), "describe", &a, &err),
                         -EINVAL);
}

static void test_action(void **state)
{
        struct cli_action_args a;
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cli_parse_action(2, ARGV("pause", "hello"), &a, &err), 0);
        assert_string_equal(a.name, "hello");
        assert_true(a.wait);
        assert_int_equal(a.timeout_s, CLI_ACTION_DEFAULT_TIMEOUT_S);
        assert_int_equal(
                cli_parse_action(4, ARGV("stop", "--no-wait", "hello", "--timeout=9"), &a, &err),
                0);
        assert_false(a.wait);
        assert_int_equal(a.timeout_s, 9);
        assert_int_equal(cli_parse_action(1, ARGV("resume"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "resume: missing NAME"));
        assert_int_equal(cli_parse_action(3, ARGV("start", "a", "b"), &a, &err), -EINVAL);
        assert_int_equal(cli_parse_action(3, ARGV("start", "a", "--timeout=0"), &a, &err), -EINVAL);
        assert_int_equal(cli_parse_action(3, ARGV("start", "a", "--bogus"), &a, &err), -EINVAL);
}

static void test_cp(void **state)
{
        struct cli_cp_args a = {0};
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cli_parse_cp(3, ARGV("cp", "./f.bin", "web:/tmp/f.bin"), &a, &err), 0);
        assert_true(a.upload);
        assert_string_equal(a.session, "web");
        assert_string_equal(a.guest, "/tmp/f.bin");
        assert_string_equal(a.local, "./f.bin");
        assert_int_equal(cli_parse_cp(3, ARGV("cp", "web-1:/etc/os-release", "-"), &a, &err), 0);
        assert_false(a.upload);
        assert_string_equal(a.session, "web-1");
        assert_string_equal(a.guest, "/etc/os-release");
        assert_string_equal(a.local, "-");
        assert_int_equal(cli_parse_cp(3, ARGV("cp", "a", "b"), &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "exactly one side"));
        assert_int_equal(cli_parse_cp(3, ARGV("cp", "a:/x", "b:/y"), &a, &err), -EINVAL);
        /* Relative guest paths and odd names are local paths, so both sides are local. */
        assert_int_equal(cli_parse_cp(3, ARGV("cp", "web:tmp", "x"), &a, &err), -EINVAL);
        assert_int_equal(cli_parse_cp(3, ARGV("cp", "Web:/tmp", "x"), &a, &err), -EINVAL);
        assert_int_equal(cli_parse_cp(2, ARGV("cp", "a:/x"), &a, &err), -EINVAL);
}

static void test_files(void **state)
{
        struct cli_files_args a;
        struct fk_error err = {0};

        (void)state;
        assert_int_equal(cli_parse_files(5,
                                         ARGV("validate", "-f", "a.yaml", "--filename=b.yaml",
                                              "--config=n.yaml"),
                                         "validate", &a, &err),
                         0);
        assert_int_equal(a.n_files, 2);
        assert_string_equal(a.files[1], "b.yaml");
        assert_string_equal(a.config, "n.yaml");
        free(a.files);
        assert_int_equal(cli_parse_files(1, ARGV("validate"), "validate", &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "-f"));
        assert_int_equal(cli_parse_files(2, ARGV("apply", "x.yaml"), "apply", &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "x.yaml"));
        assert_int_equal(cli_parse_files(2, ARGV("apply", "-f"), "apply", &a, &err), -EINVAL);
        assert_int_equal(cli_parse_files(2, ARGV("delete", "hello"), "delete", &a, &err), 0);
        assert_string_equal(a.name, "hello");
        assert_int_equal(a.n_files, 0);
        free(a.files);
        assert_int_equal(cli_parse_files(3, ARGV("delete", "-f", "h.yaml"), "delete", &a, &err), 0);
        assert_int_equal(a.n_files, 1);
        free(a.files);
        assert_int_equal(
                cli_parse_files(4, ARGV("delete", "x", "-f", "h.yaml"), "delete", &a, &err),
                -EINVAL);
        assert_int_equal(cli_parse_files(1, ARGV("delete"), "delete", &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "NAME"));
        assert_int_equal(cli_parse_files(3, ARGV("logs", "-f", "x"), "logs", &a, &err), -EINVAL);
        assert_int_equal(cli_parse_files(2, ARGV("logs", "hello"), "logs", &a, &err), 0);
        free(a.files);
        assert_int_equal(cli_parse_files(3, ARGV("logs", "a", "b"), "logs", &a, &err), -EINVAL);
        assert_int_equal(cli_parse_files(2, ARGV("describe", "x"), "describe", &a, &err), 0);
        assert_string_equal(a.name, "x");
        free(a.files);
        assert_int_equal(cli_parse_files(1, ARGV("describe"), "describe", &a, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "describe: missing NAME"));
}

static void test_age(void **state)
{
        char buf[32];
        long long t0 = 1795856400; /* 2026-11-28T09:00:00Z */

        (void)state;
        cli_format_age("2026-11-28T09:00:00Z", t0 + 42, buf, sizeof(buf));
        assert_string_equal(buf, "42s");
        cli_format_age("2026-11-28T09:00:00Z", t0 + 600, buf, sizeof(buf));
        assert_string_equal(buf, "10m");
        cli_format_age("2026-11-28T09:00:00Z", t0 + 5 * 3600, buf, sizeof(buf));
        assert_string_equal(buf, "5h");
        cli_format_age("2026-11-28T09:00:00Z", t0 + 3 * 86400, buf, sizeof(buf));
        assert_string_equal(buf, "3d");
        cli_format_age(NULL, t0, buf, sizeof(buf));
        assert_string_equal(buf, "-");
        cli_format_age("garbage", t0, buf, sizeof(buf));
        assert_string_equal(buf, "-");
}

static void test_image(void **state)
{
        struct cli_image_args a;
        struct fk_error err = {0};
        char bar[128];

        (void)state;
        assert_int_equal(cli_parse_image(2, ARGV("image", "list"), &a, &err), 0);
        assert_string_equal(a.verb, "list");
        assert_null(a.image);
        assert_false(a.json);
        assert_int_equal(cli_parse_image(4, ARGV("image", "list", "-o", "json"), &a, &err), 0);
        assert_true(a.json);
        assert_int_equal(cli_parse_image(3, ARGV("image", "pull", "h.io/a:1"), &a, &err), 0);
        assert_string_equal(a.image, "h.io/a:1");
        assert_int_equal(cli_parse_image(3, ARGV("image", "rm", "0123456789ab"), &a, &err), 0);
        assert_int_equal(cli_parse_image(2, ARGV("image", "rm"), &a, &err), -EINVAL);
        assert_string_equal(err.msg, "image rm: IMAGE is required (a reference or a digest)");
        assert_int_equal(cli_parse_image(3, ARGV("image", "list", "x"), &a, &err), -EINVAL);
        assert_string_equal(err.msg, "image list: takes no IMAGE");
        assert_int_equal(cli_parse_image(2, ARGV("image", "frob"), &a, &err), -EINVAL);
        assert_string_equal(err.msg, "image: expected list, pull, inspect or rm (got \"frob\")");
        assert_int_equal(cli_parse_image(1, ARGV("image"), &a, &err), -EINVAL);
        assert_int_equal(cli_parse_image(4, ARGV("image", "list", "-o", "yaml"), &a, &err),
                         -EINVAL);
        cli_image_bar(bar, sizeof(bar), 512 * 1024, 1024 * 1024);
        assert_string_equal(bar, "[###############...............]   0.5 of 1.0 MiB");
        cli_image_bar(bar, sizeof(bar), 0, 0);
        assert_string_equal(bar, "[..............................]   0.0 MiB");
        cli_image_bar(bar, sizeof(bar), 5, 1);
        assert_string_equal(bar, "[##############################]   0.0 of 0.0 MiB");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_global),        cmocka_unit_test(test_get),
                cmocka_unit_test(test_wait),          cmocka_unit_test(test_exec),
                cmocka_unit_test(test_files),         cmocka_unit_test(test_age),
                cmocka_unit_test(test_action),        cmocka_unit_test(test_cp),
                cmocka_unit_test(test_portforward),   cmocka_unit_test(test_portforward_verdict),
                cmocka_unit_test(test_logs_previous), cmocka_unit_test(test_image),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
