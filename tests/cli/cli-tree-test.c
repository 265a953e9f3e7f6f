/* SPDX-License-Identifier: MIT */
/* cli_tree_render and cli_tree_root: the lineage drawn from a SessionList as the API returns
 * it (checkpoints with parents, forkOf, forks of forks, rollback branches, a deleted
 * checkpoint, other namespaces, a malformed cycle). */
#include "cli/cli.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

/* 2026-11-29T01:00:00Z: one hour after the sessions below were created */
#define NOW_S 1795914000ll

/* web: ck_a (ready) -> rollback to ck_a -> ck_c; ck_b after ck_a. web-fork-0 and web-fork-1
 * from ck_a; web-fork-0 took ck_f0 (parent ck_a, the checkpoint it came from) and forked
 * web-fork-0-fork-0 from it. web-fork-2 came from ck_gone (deleted). */
static const char list_json[] =
        "{\"kind\":\"SessionList\",\"items\":["
        "{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
        "\"creationTimestamp\":\"2026-11-29T00:00:00Z\"},\"status\":{\"phase\":\"Running\","
        "\"checkpoints\":["
        "{\"id\":\"ck_b\",\"name\":null,\"created\":\"2026-11-29T00:20:00Z\",\"parent\":\"ck_a\"},"
        "{\"id\":\"ck_a\",\"name\":\"ready\",\"created\":\"2026-11-29T00:10:00Z\"},"
        "{\"id\":\"ck_c\",\"name\":null,\"created\":\"2026-11-29T00:40:00Z\",\"parent\":\"ck_a\"}],"
        "\"forks\":[\"web-fork-0\",\"web-fork-1\",\"web-fork-2\"]}},"
        "{\"metadata\":{\"name\":\"web-fork-1\",\"namespace\":\"default\","
        "\"creationTimestamp\":\"2026-11-29T00:15:00Z\"},\"status\":{\"phase\":\"Paused\","
        "\"checkpoints\":[],\"forkOf\":{\"session\":\"web\",\"checkpoint\":\"ck_a\"}}},"
        "{\"metadata\":{\"name\":\"web-fork-0\",\"namespace\":\"default\","
        "\"creationTimestamp\":\"2026-11-29T00:15:00Z\"},\"status\":{\"phase\":\"Running\","
        "\"checkpoints\":[{\"id\":\"ck_f0\",\"created\":\"2026-11-29T00:30:00Z\","
        "\"parent\":\"ck_a\"}],\"forkOf\":{\"session\":\"web\",\"checkpoint\":\"ck_a\"}}},"
        "{\"metadata\":{\"name\":\"web-fork-0-fork-0\",\"namespace\":\"default\","
        "\"creationTimestamp\":\"2026-11-29T00:59:30Z\"},\"status\":{\"phase\":\"Starting\","
        "\"checkpoints\":[],\"forkOf\":{\"session\":\"web-fork-0\",\"checkpoint\":\"ck_f0\"}}},"
        "{\"metadata\":{\"name\":\"web-fork-2\",\"namespace\":\"default\","
        "\"creationTimestamp\":\"2026-11-29T00:50:00Z\"},\"status\":{\"phase\":\"Running\","
        "\"forkOf\":{\"session\":\"web\",\"checkpoint\":\"ck_gone\"}}},"
        "{\"metadata\":{\"name\":\"web-fork-9\",\"namespace\":\"other\","
        "\"creationTimestamp\":\"2026-11-29T00:50:00Z\"},\"status\":{\"phase\":\"Running\","
        "\"forkOf\":{\"session\":\"web\",\"checkpoint\":\"ck_a\"}}},"
        "{\"metadata\":{\"name\":\"alone\",\"namespace\":\"default\"},\"status\":{}}"
        "]}";

static json_t *load(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);

        if (!j)
                fail_msg("test list: %s at %d", jerr.text, jerr.column);
        return j;
}

static char *render(json_t *list, const char *root, const char *mark, const char *indent)
{
        const struct cli_tree_opts o = {
                .ns = "default", .root = root, .mark = mark, .indent = indent, .now_s = NOW_S};
        char *text = NULL;

        assert_int_equal(cli_tree_render(list, &o, &text), 0);
        return text;
}

static void test_full_tree(void **state)
{
        json_t *list = load(list_json);
        char *text = render(list, "web", NULL, NULL);

        (void)state;
        /* the deleted checkpoint's note widens the NAME column for every row */
        assert_string_equal(text, "NAME                                          PHASE      AGE\n"
                                  "Session/web                                   Running    60m\n"
                                  "├─Checkpoint/ck_a (ready)                     -          50m\n"
                                  "│ ├─Session/web-fork-0                        Running    45m\n"
                                  "│ │ └─Checkpoint/ck_f0                        -          30m\n"
                                  "│ │   └─Session/web-fork-0-fork-0             Starting   30s\n"
                                  "│ ├─Session/web-fork-1                        Paused     45m\n"
                                  "│ ├─Checkpoint/ck_b                           -          40m\n"
                                  "│ └─Checkpoint/ck_c                           -          20m\n"
                                  "└─Session/web-fork-2 (from ck_gone, deleted)  Running    10m\n");
        free(text);
        json_decref(list);
}

static void test_subtree_and_mark(void **state)
{
        json_t *list = load(list_json);
        char *text = render(list, "web-fork-0", "web-fork-0-fork-0", "  ");

        (void)state;
        /* a fork at the top: its parent's checkpoint is not drawn, nor called deleted */
        assert_string_equal(text, "  NAME                           PHASE      AGE\n"
                                  "  Session/web-fork-0             Running    45m\n"
                                  "  └─Checkpoint/ck_f0             -          30m\n"
                                  "    └─Session/web-fork-0-fork-0  Starting   30s  <- this "
                                  "session\n");
        free(text);
        json_decref(list);
}

static void test_root(void **state)
{
        json_t *list = load(list_json);

        (void)state;
        assert_string_equal(cli_tree_root(list, "default", "web-fork-0-fork-0"), "web");
        assert_string_equal(cli_tree_root(list, "default", "web"), "web");
        /* the parent "web" of other/web-fork-9 is not in namespace other */
        assert_string_equal(cli_tree_root(list, "other", "web-fork-9"), "web-fork-9");
        assert_null(cli_tree_root(list, "default", "nosuch"));
        json_decref(list);
}

static void test_alone_and_missing(void **state)
{
        const struct cli_tree_opts o = {.ns = "default", .root = "nosuch", .now_s = NOW_S};
        json_t *list = load(list_json);
        char *text = render(list, "alone", NULL, NULL);

        (void)state;
        assert_string_equal(text, "NAME           PHASE      AGE\n"
                                  "Session/alone  -          -\n");
        free(text);
        text = NULL;
        assert_int_equal(cli_tree_render(list, &o, &text), -ENOENT);
        assert_null(text);
        json_decref(list);
}

/* A list no daemon would send: two sessions forked from each other's checkpoints and a
 * checkpoint that is its own parent. Every node is drawn once (a under ck_2 is not drawn
 * again) and the walk ends. */
static void test_cycle(void **state)
{
        json_t *list = load("{\"items\":["
                            "{\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"},\"status\":{"
                            "\"checkpoints\":[{\"id\":\"ck_1\",\"parent\":\"ck_1\"}],"
                            "\"forkOf\":{\"session\":\"b\",\"checkpoint\":\"ck_2\"}}},"
                            "{\"metadata\":{\"name\":\"b\",\"namespace\":\"default\"},\"status\":{"
                            "\"checkpoints\":[{\"id\":\"ck_2\"}],"
                            "\"forkOf\":{\"session\":\"a\",\"checkpoint\":\"ck_1\"}}}]}");
        char *text;

        (void)state;
        assert_non_null(cli_tree_root(list, "default", "a"));
        text = render(list, "a", NULL, NULL);
        assert_string_equal(text, "NAME                   PHASE      AGE\n"
                                  "Session/a              -          -\n"
                                  "└─Checkpoint/ck_1      -          -\n"
                                  "  └─Session/b          -          -\n"
                                  "    └─Checkpoint/ck_2  -          -\n");
        free(text);
        json_decref(list);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_full_tree), cmocka_unit_test(test_subtree_and_mark),
                cmocka_unit_test(test_root),      cmocka_unit_test(test_alone_and_missing),
                cmocka_unit_test(test_cycle),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
