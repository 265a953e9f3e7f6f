/* SPDX-License-Identifier: MIT */
/* The fork-engine verbs' argument parser (checkpoint, fork, rollback, snapshot, restore): what
 * each accepts and the messages for what it refuses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"

/* The parser never writes through argv; literals are const under -Wwrite-strings. */
static int parse(struct cli_fork_args *a, struct fk_error *e, const char *first, ...)
{
        char *v[16];
        const char *s = first;
        va_list ap;
        int n = 0;

        va_start(ap, first);
        while (s && n < 15) {
                v[n++] = (char *)s;
                s = va_arg(ap, const char *);
        }
        va_end(ap);
        v[n] = NULL;
        return cli_parse_fork(n, v, a, e);
}

#define PARSE(a, e, ...) parse(a, e, __VA_ARGS__, NULL)

static void test_checkpoint(void **state)
{
        struct cli_fork_args a;
        struct fk_error e = {0};

        (void)state;
        assert_int_equal(PARSE(&a, &e, "checkpoint", "create", "web"), 0);
        assert_int_equal(a.verb, CLI_CHECKPOINT_CREATE);
        assert_string_equal(a.name, "web");
        assert_int_equal(PARSE(&a, &e, "checkpoint", "list", "web", "-o", "json"), 0);
        assert_int_equal(a.verb, CLI_CHECKPOINT_LIST);
        assert_int_equal(a.output, CLI_OUTPUT_JSON);
        assert_int_equal(PARSE(&a, &e, "checkpoint", "delete", "web", "ck_12", "--cascade"), 0);
        assert_int_equal(a.verb, CLI_CHECKPOINT_DELETE);
        assert_string_equal(a.id, "ck_12");
        assert_true(a.cascade);
        assert_int_equal(PARSE(&a, &e, "checkpoint", "delete", "web", "ck_12"), 0);
        assert_false(a.cascade);
        assert_int_equal(PARSE(&a, &e, "checkpoint", "inspect", "web", "ck_3", "-o", "yaml"), 0);
        assert_int_equal(a.verb, CLI_CHECKPOINT_INSPECT);
        assert_string_equal(a.name, "web");
        assert_string_equal(a.id, "ck_3");
        assert_int_equal(a.output, CLI_OUTPUT_YAML);
        assert_int_equal(PARSE(&a, &e, "checkpoint", "inspect", "web"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "checkpoint", "delete", "web"), -EINVAL);
        assert_non_null(strstr(e.msg, "usage"));
        assert_int_equal(PARSE(&a, &e, "checkpoint", "make", "web"), -EINVAL);
        assert_non_null(strstr(e.msg, "unknown action \"make\""));
        assert_int_equal(PARSE(&a, &e, "checkpoint", "create", "web", "--cascade"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "checkpoint", "create", "web", "--bogus"), -EINVAL);
        assert_non_null(strstr(e.msg, "--bogus"));
}

static void test_fork(void **state)
{
        struct cli_fork_args a;
        struct fk_error e = {0};

        (void)state;
        assert_int_equal(PARSE(&a, &e, "fork", "web", "--from", "ck_1", "--count", "3"), 0);
        assert_int_equal(a.verb, CLI_FORK);
        assert_string_equal(a.name, "web");
        assert_string_equal(a.id, "ck_1");
        assert_int_equal(a.count, 3);
        assert_int_equal(PARSE(&a, &e, "fork", "--count=2", "--from=ck_2", "web"), 0);
        assert_int_equal(a.count, 2);
        assert_string_equal(a.id, "ck_2");
        assert_int_equal(PARSE(&a, &e, "fork", "web", "--count", "3"), -EINVAL);
        assert_non_null(strstr(e.msg, "--from"));
        assert_int_equal(PARSE(&a, &e, "fork", "web", "--from", "ck_1"), -EINVAL);
        assert_non_null(strstr(e.msg, "--count"));
        assert_int_equal(PARSE(&a, &e, "fork", "web", "--from", "ck_1", "--count", "0"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "fork", "web", "--from", "ck_1", "--count", "2x"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "fork", "web", "--from"), -EINVAL);
        assert_non_null(strstr(e.msg, "needs a value"));
}

static void test_rollback_snapshot_restore(void **state)
{
        struct cli_fork_args a;
        struct fk_error e = {0};

        (void)state;
        assert_int_equal(PARSE(&a, &e, "rollback", "web", "ck_9"), 0);
        assert_int_equal(a.verb, CLI_ROLLBACK);
        assert_string_equal(a.name, "web");
        assert_string_equal(a.id, "ck_9");
        assert_int_equal(PARSE(&a, &e, "rollback", "web"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "snapshot", "create", "web"), 0);
        assert_int_equal(a.verb, CLI_SNAPSHOT_CREATE);
        assert_string_equal(a.name, "web");
        assert_int_equal(PARSE(&a, &e, "snapshot", "take", "web"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "snapshot", "list"), 0);
        assert_int_equal(a.verb, CLI_SNAPSHOT_LIST);
        assert_null(a.name);
        assert_int_equal(a.output, CLI_OUTPUT_TABLE);
        assert_int_equal(PARSE(&a, &e, "snapshot", "list", "-o", "json"), 0);
        assert_int_equal(a.output, CLI_OUTPUT_JSON);
        assert_int_equal(PARSE(&a, &e, "snapshot", "list", "web"), -EINVAL);
        assert_non_null(strstr(e.msg, "snapshot create NAME | list"));
        assert_int_equal(PARSE(&a, &e, "snapshot", "inspect", "snap_1", "-o", "yaml"), 0);
        assert_int_equal(a.verb, CLI_SNAPSHOT_INSPECT);
        assert_string_equal(a.id, "snap_1");
        assert_int_equal(a.output, CLI_OUTPUT_YAML);
        assert_int_equal(PARSE(&a, &e, "snapshot", "delete", "snap_1"), 0);
        assert_int_equal(a.verb, CLI_SNAPSHOT_DELETE);
        assert_string_equal(a.id, "snap_1");
        assert_null(a.name);
        assert_int_equal(PARSE(&a, &e, "snapshot", "delete"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "snapshot", "delete", "snap_1", "-o", "json"), -EINVAL);
        assert_non_null(strstr(e.msg, "-o goes with snapshot list and inspect"));
        assert_int_equal(PARSE(&a, &e, "snapshot", "delete", "snap_1", "--cascade"), -EINVAL);
        assert_int_equal(PARSE(&a, &e, "snapshot", "inspect", "snap_1", "-o", "wide"), -EINVAL);
        assert_non_null(strstr(e.msg, "snapshot: -o json|yaml only"));
        assert_int_equal(PARSE(&a, &e, "restore", "snap_1", "--name", "web2"), 0);
        assert_int_equal(a.verb, CLI_RESTORE);
        assert_string_equal(a.id, "snap_1");
        assert_string_equal(a.name, "web2");
        assert_int_equal(PARSE(&a, &e, "restore", "snap_1"), -EINVAL);
        assert_non_null(strstr(e.msg, "--name"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_checkpoint),
                cmocka_unit_test(test_fork),
                cmocka_unit_test(test_rollback_snapshot_restore),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
