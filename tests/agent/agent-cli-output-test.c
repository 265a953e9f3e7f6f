/* SPDX-License-Identifier: MIT */
/* cli_write_for_terminal: what a guest's console bytes become on the user's terminal. */
#include "cli/cli.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* The bytes cli_write_for_terminal writes for in[0..n), NUL-terminated in out. */
static void render(const char *in, size_t n, char *out, size_t size)
{
        int fds[2];
        ssize_t got;

        assert_int_equal(pipe(fds), 0);
        assert_int_equal(cli_write_for_terminal(fds[1], in, n), 0);
        close(fds[1]);
        got = read(fds[0], out, size - 1);
        assert_true(got >= 0);
        out[got] = '\0';
        close(fds[0]);
}

static void test_plain_text_unchanged(void **state)
{
        const char in[] = "boot ok\r\n\tcaf\xc3\xa9 \xe2\x9c\x93\n";
        char out[256];

        (void)state;
        render(in, sizeof(in) - 1, out, sizeof(out));
        assert_string_equal(out, in);
}

static void test_controls_escaped(void **state)
{
        /* a terminal title change, a colour, a bell, a lone CR that would overwrite the line,
         * DEL and a NUL */
        const char in[] = "\x1b]0;pwned\x07x\x1b[31mred\rfake\x7f\0end";
        char out[256];

        (void)state;
        render(in, sizeof(in) - 1, out, sizeof(out));
        assert_string_equal(out, "\\x1b]0;pwned\\x07x\\x1b[31mred\\x0dfake\\x7f\\x00end");
        assert_null(strchr(out, 0x1b));
}

static void test_cr_at_end_escaped(void **state)
{
        char out[64];

        (void)state;
        render("a\r", 2, out, sizeof(out));
        assert_string_equal(out, "a\\x0d");
        render("", 0, out, sizeof(out));
        assert_string_equal(out, "");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plain_text_unchanged),
                cmocka_unit_test(test_controls_escaped),
                cmocka_unit_test(test_cr_at_end_escaped),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
