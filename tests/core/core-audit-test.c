/* SPDX-License-Identifier: MIT */
/* core's audit hash chain without files or a daemon: lines sealed by core_audit_seal verify,
 * and an edited field, a dropped line, a forged hash and a torn last line are named by line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/core.h"

/* A log of n sealed lines {"n":i,"prev":"..."} in one heap string. */
static char *make_log(int n)
{
        char head[CORE_AUDIT_HEX_SIZE], *log = strdup("");

        memset(head, '0', CORE_AUDIT_HEX_SIZE - 1);
        head[CORE_AUDIT_HEX_SIZE - 1] = '\0';
        for (int i = 1; i <= n; i++) {
                char *body, *line, *grown;

                assert_true(fk_asprintf(&body, "{\"n\":%d,\"prev\":\"%s\"", i, head) > 0);
                assert_int_equal(core_audit_seal(body, &line, head), 0);
                assert_true(fk_asprintf(&grown, "%s%s", log, line) > 0);
                free(log);
                free(body);
                free(line);
                log = grown;
        }
        return log;
}

/* Verifies text; returns the line count on success, else the bad line (and checks the code). */
static size_t verify_text(const char *text, int want, const char *want_msg)
{
        FILE *f = fmemopen((void *)text, strlen(text), "r");
        struct fk_error err = {0};
        size_t lines = 0, bad = 0;

        assert_non_null(f);
        assert_int_equal(core_audit_verify(f, &lines, &bad, &err), want);
        fclose(f);
        if (want_msg)
                assert_non_null(strstr(err.msg, want_msg));
        return want == 0 ? lines : bad;
}

static void test_intact(void **state)
{
        char *log = make_log(4);

        (void)state;
        assert_int_equal(verify_text(log, 0, NULL), 4);
        assert_int_equal(verify_text("", 0, NULL), 0);
        free(log);
}

static void test_edited(void **state)
{
        char *log = make_log(4), *p = strstr(log, "\"n\":3");

        (void)state;
        p[4] = '7';
        assert_int_equal(verify_text(log, -EBADMSG, "line 3: hash does not match"), 3);
        free(log);
}

static void test_dropped(void **state)
{
        char *log = make_log(4), *l2 = strchr(log, '\n') + 1, *l3 = strchr(l2, '\n') + 1;

        (void)state;
        memmove(l2, l3, strlen(l3) + 1);
        assert_int_equal(verify_text(log, -EBADMSG, "line 2: prev does not match"), 2);
        free(log);
}

static void test_forged_and_torn(void **state)
{
        char *log = make_log(3), *h = strstr(strchr(log, '\n') + 1, "\"hash\":\"");

        (void)state;
        h[8] = h[8] == 'a' ? 'b' : 'a';
        assert_int_equal(verify_text(log, -EBADMSG, "line 2: hash does not match"), 2);
        free(log);
        log = make_log(3);
        log[strlen(log) - 1] = '\0';
        assert_int_equal(verify_text(log, -EBADMSG, "line 3: torn"), 3);
        assert_int_equal(verify_text("not json\n", -EBADMSG, "line 1: not an audit record"), 1);
        free(log);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_intact),
                cmocka_unit_test(test_edited),
                cmocka_unit_test(test_dropped),
                cmocka_unit_test(test_forged_and_torn),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
