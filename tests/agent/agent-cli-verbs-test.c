/* SPDX-License-Identifier: MIT */
/* CLI verbs against the real REST API with the fake VM backend: `wait` on a session that does
 * not exist fails at once (404) unless --for=Deleted, which succeeds at once; `apply -f`
 * prints what the daemon refuses against the file, line and column it sent (second document
 * of a file, a flow mapping), never "<json>". */
#include "tests/lib/agent-harness.h"

#include <fcntl.h>
#include <time.h>

/* Runs fn(cli, argc, argv) with stderr captured into err (NUL-terminated). */
static int run_verb(struct env *e, int (*fn)(const struct cli *, int, char **), int argc,
                    char **argv, char *err, size_t size)
{
        char path[128];
        int saved = dup(2), fd, r;
        ssize_t n;

        snprintf(path, sizeof(path), "%s/stderr", e->dir);
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0 && saved >= 0);
        fflush(stderr);
        dup2(fd, 2);
        r = fn(&e->cli, argc, argv);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        n = pread(fd, err, size - 1, 0);
        err[n > 0 ? n : 0] = '\0';
        close(fd);
        return r;
}

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_wait_missing(void **state)
{
        struct env *e = *state;
        char *running[] = {(char *)"wait", (char *)"nope", (char *)"--for=Running",
                           (char *)"--timeout=60", NULL};
        char *deleted[] = {(char *)"wait", (char *)"nope", (char *)"--for=Deleted",
                           (char *)"--timeout=60", NULL};
        char *hello[] = {(char *)"wait", (char *)"hello", (char *)"--for=Running",
                         (char *)"--timeout=30", NULL};
        char err[512];
        double t0 = now_s();

        assert_int_equal(run_verb(e, cli_wait, 4, running, err, sizeof(err)), CLI_EXIT_FAILURE);
        assert_true(now_s() - t0 < 10);
        assert_non_null(strstr(err, "session default/nope not found"));
        t0 = now_s();
        assert_int_equal(run_verb(e, cli_wait, 4, deleted, err, sizeof(err)), CLI_EXIT_OK);
        assert_true(now_s() - t0 < 10);
        /* a session that exists is still waited for */
        assert_int_equal(req(e, "POST", "/api/v1alpha1/sessions", hello_json, NULL), 201);
        reconcile(e);
        assert_int_equal(run_verb(e, cli_wait, 4, hello, err, sizeof(err)), CLI_EXIT_OK);
}

static void write_manifest(struct env *e, const char *name, const char *text, char *ret_path,
                           size_t size)
{
        snprintf(ret_path, size, "%s/%s", e->dir, name);
        assert_int_equal(fk_write_file_atomic(ret_path, text, strlen(text), 0600), 0);
}

static void test_apply_errors_name_the_file(void **state)
{
        struct env *e = *state;
        /* line 13 col 14: the second document's sizeClass value */
        static const char two[] = "apiVersion: forklet.dev/v1alpha1\n"
                                  "kind: Session\n"
                                  "metadata: {name: good}\n"
                                  "spec:\n"
                                  "  sizeClass: small\n"
                                  "  image: minimal\n"
                                  "---\n"
                                  "apiVersion: forklet.dev/v1alpha1\n"
                                  "kind: Session\n"
                                  "metadata:\n"
                                  "  name: bad\n"
                                  "spec:\n"
                                  "  sizeClass: huge\n"
                                  "  image: minimal\n";
        /* flow style: the column of the value inside the braces */
        static const char flow[] = "apiVersion: forklet.dev/v1alpha1\n"
                                   "kind: Session\n"
                                   "metadata: {name: noimage}\n"
                                   "spec: {sizeClass: small, image: nosuch}\n";
        char path[256], err[1024], *argv[] = {(char *)"apply", (char *)"-f", path, NULL};
        char want[512];

        write_manifest(e, "two.yaml", two, path, sizeof(path));
        assert_int_equal(run_verb(e, cli_apply, 3, argv, err, sizeof(err)), CLI_EXIT_FAILURE);
        snprintf(want, sizeof(want), "%s:13:14: spec.sizeClass: unknown", path);
        if (!strstr(err, want))
                fail_msg("apply printed:\n%s\nwanted: %s", err, want);
        assert_null(strstr(err, "<json>"));
        assert_non_null(strstr(err, "session/bad"));

        write_manifest(e, "flow.yaml", flow, path, sizeof(path));
        assert_int_equal(run_verb(e, cli_apply, 3, argv, err, sizeof(err)), CLI_EXIT_FAILURE);
        assert_null(strstr(err, "<json>"));
        snprintf(want, sizeof(want), "%s:4:33: spec.image: ", path);
        if (!strstr(err, want))
                fail_msg("apply printed:\n%s\nwanted: %s", err, want);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_wait_missing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_errors_name_the_file, setup, teardown),
        };

        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
