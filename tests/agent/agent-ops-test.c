/* SPDX-License-Identifier: MIT */
/* forkletd's operational pieces without a daemon: the audit
 * hash chain (append, verify, an edited/removed/torn line is named), the operation journal,
 * bearer tokens, api.listen and the Idempotency-Key table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include "agent/api/api-internal.h"
#include "agent/daemon/daemon-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

struct tmp {
        char dir[64];
        char path[128];
};

static int tmp_setup(void **state)
{
        struct tmp *t = calloc(1, sizeof(*t));

        assert_non_null(t);
        strcpy(t->dir, "/tmp/fk-ops-XXXXXX");
        assert_non_null(mkdtemp(t->dir));
        snprintf(t->path, sizeof(t->path), "%s/audit.log", t->dir);
        *state = t;
        return 0;
}

static int tmp_teardown(void **state)
{
        struct tmp *t = *state;

        fk_rm_rf(t->dir);
        free(t);
        return 0;
}

static void append_n(const char *path, int n)
{
        struct agent_audit *a = NULL;

        assert_int_equal(agent_audit_open(path, &a), 0);
        for (int i = 0; i < n; i++) {
                char result[16];

                snprintf(result, sizeof(result), "%d", 200 + i);
                assert_int_equal(agent_audit_append(a,
                                                    &(struct agent_audit_entry){
                                                            .caller = "uid:0",
                                                            .session = "default/x",
                                                            .action = "POST /x",
                                                            .result = result,
                                                            .latency_s = 0.25,
                                                    }),
                                 0);
        }
        agent_audit_close(a);
}

/* Replaces the first occurrence of from with to in line lineno (1-based) of path. */
static void edit_line(const char *path, int lineno, const char *from, const char *to)
{
        cleanup_free char *buf = NULL;
        char *p, *q, *out;
        size_t size;

        assert_int_equal(fk_read_file(path, 1 << 20, &buf, &size), 0);
        p = buf;
        for (int i = 1; i < lineno; i++)
                p = strchr(p, '\n') + 1;
        q = strstr(p, from);
        assert_non_null(q);
        assert_true(q < strchr(p, '\n'));
        out = malloc(size + strlen(to) + 1);
        assert_non_null(out);
        memcpy(out, buf, (size_t)(q - buf));
        strcpy(out + (q - buf), to);
        strcat(out, q + strlen(from));
        assert_int_equal(fk_write_file_atomic(path, out, strlen(out), 0600), 0);
        free(out);
}

static size_t verify(const char *path, int want)
{
        struct fk_error err = {0};
        size_t lines = 0, bad = 0;

        assert_int_equal(agent_audit_verify(path, &lines, &bad, &err), want);
        return want == 0 ? lines : bad;
}

static void test_audit_chain(void **state)
{
        struct tmp *t = *state;
        struct stat st;

        append_n(t->path, 3);
        append_n(t->path, 2); /* reopen continues the chain */
        assert_int_equal(verify(t->path, 0), 5);
        assert_int_equal(stat(t->path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        edit_line(t->path, 3, "\"202\"", "\"500\"");
        assert_int_equal(verify(t->path, -EBADMSG), 3);
}

static void test_audit_edit_rehashed(void **state)
{
        struct tmp *t = *state;
        cleanup_free char *buf = NULL;
        char *p;

        append_n(t->path, 4);
        /* Deleting line 2 breaks the link of (new) line 2. */
        assert_int_equal(fk_read_file(t->path, 1 << 20, &buf, NULL), 0);
        p = strchr(buf, '\n') + 1;
        memmove(p, strchr(p, '\n') + 1, strlen(strchr(p, '\n') + 1) + 1);
        assert_int_equal(fk_write_file_atomic(t->path, buf, strlen(buf), 0600), 0);
        assert_int_equal(verify(t->path, -EBADMSG), 2);
}

static void test_audit_torn(void **state)
{
        struct tmp *t = *state;
        struct agent_audit *a = NULL;
        FILE *f;

        append_n(t->path, 2);
        f = fopen(t->path, "a");
        assert_non_null(f);
        fputs("{\"time\":", f);
        fclose(f);
        assert_int_equal(verify(t->path, -EBADMSG), 3);
        /* A torn chain is not extended. */
        assert_int_equal(agent_audit_open(t->path, &a), -EBADMSG);
}

static void test_journal(void **state)
{
        struct tmp *t = *state;
        cleanup_free char *id = NULL, *path = NULL, *buf = NULL;
        json_t *j;

        assert_int_equal(agent_journal_begin(t->dir, "checkpoint", "default.x",
                                             json_pack("{s:i}", "step", 1), &id),
                         0);
        assert_int_equal(agent_journal_update(t->dir, id, json_pack("{s:i}", "step", 2)), 0);
        assert_true(fk_asprintf(&path, "%s/journal/%s.json", t->dir, id) > 0);
        assert_int_equal(fk_read_file(path, 1 << 16, &buf, NULL), 0);
        j = json_loads(buf, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j, "op")), "checkpoint");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "data"), "step")),
                         2);
        json_decref(j);
        assert_int_equal(agent_journal_update(t->dir, "../x", NULL), -EINVAL);
        assert_int_equal(agent_journal_end(t->dir, id), 0);
        assert_int_equal(access(path, F_OK), -1);
        assert_int_equal(agent_journal_end(t->dir, id), 0); /* twice: nothing to do */
}

static void write_token(const char *path, const char *text, mode_t mode)
{
        assert_int_equal(fk_write_file_atomic(path, text, strlen(text), mode), 0);
        assert_int_equal(chmod(path, mode), 0);
}

static void test_token(void **state)
{
        struct tmp *t = *state;
        struct fk_error err = {0};
        struct api_token tok;
        char path[160];

        snprintf(path, sizeof(path), "%s/token", t->dir);
        write_token(path, "short-token\n", 0600);
        assert_int_equal(api_token_load(path, &tok, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "11 bytes"));
        write_token(path, "0123456789abcdef0123456789abcdef-long-enough\n", 0644);
        assert_int_equal(api_token_load(path, &tok, &err), -EPERM);
        write_token(path, "0123456789abcdef0123456789abcdef-long-enough\n", 0600);
        assert_int_equal(api_token_load(path, &tok, &err), 0);
        assert_int_equal(tok.size, 44);
        assert_int_equal(strlen(tok.id), 12);
        assert_true(api_token_equal(&tok, "0123456789abcdef0123456789abcdef-long-enough"));
        assert_false(api_token_equal(&tok, "0123456789abcdef0123456789abcdef-long-enougH"));
        assert_false(api_token_equal(&tok, "0123456789abcdef0123456789abcdef-long-enough-"));
        assert_false(api_token_equal(&tok, "0123456789abcdef0123456789abcdef-long-enoug"));
        assert_false(api_token_equal(&tok, ""));
}

static void test_listen(void **state)
{
        struct fk_error err = {0};
        struct sockaddr_in sa;

        (void)state;
        assert_int_equal(api_parse_listen("127.0.0.1:8080", false, &sa, &err), 0);
        assert_int_equal(ntohs(sa.sin_port), 8080);
        assert_int_equal(api_parse_listen("0.0.0.0:8080", false, &sa, &err), -EPERM);
        assert_int_equal(api_parse_listen("10.0.0.1:80", false, &sa, &err), -EPERM);
        assert_int_equal(api_parse_listen("127.0.0.1", false, &sa, &err), -EINVAL);
        assert_int_equal(api_parse_listen("127.0.0.1:99999", false, &sa, &err), -EINVAL);
}

static void test_idem(void **state)
{
        struct api_idem *m = api_idem_new();
        struct api_capture cap = {0}, replay = {0};

        (void)state;
        assert_non_null(m);
        assert_int_equal(api_idem_begin(m, "uid:0 k", "fp1", &replay), 0);
        api_capture_begin(&cap);
        api_capture_note(201, "{\"a\":1}", "created");
        api_capture_end();
        api_idem_finish(m, "uid:0 k", &cap);
        api_capture_done(&cap);
        assert_int_equal(api_idem_begin(m, "uid:0 k", "fp1", &replay), 1);
        assert_int_equal(replay.status, 201);
        assert_string_equal(replay.body, "{\"a\":1}");
        assert_string_equal(replay.apply, "created");
        api_capture_done(&replay);
        assert_int_equal(api_idem_begin(m, "uid:0 k", "fp2", &replay), -EINVAL);
        /* Another caller's key is another key. */
        assert_int_equal(api_idem_begin(m, "uid:1 k", "fp2", &replay), 0);
        cap = (struct api_capture){0}; /* streamed: nothing to replay, key forgotten */
        api_idem_finish(m, "uid:1 k", &cap);
        assert_int_equal(api_idem_begin(m, "uid:1 k", "fp2", &replay), 0);
        api_idem_free(m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_audit_chain, tmp_setup, tmp_teardown),
                cmocka_unit_test_setup_teardown(test_audit_edit_rehashed, tmp_setup, tmp_teardown),
                cmocka_unit_test_setup_teardown(test_audit_torn, tmp_setup, tmp_teardown),
                cmocka_unit_test_setup_teardown(test_journal, tmp_setup, tmp_teardown),
                cmocka_unit_test_setup_teardown(test_token, tmp_setup, tmp_teardown),
                cmocka_unit_test(test_listen),
                cmocka_unit_test(test_idem),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
