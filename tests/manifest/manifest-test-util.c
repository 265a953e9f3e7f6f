/* SPDX-License-Identifier: MIT */
/* Helpers shared by the manifest unit tests (see manifest-test-util.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tests/manifest/manifest-test-util.h"

int mt_parse(const char *text, const struct node_config *cfg, struct session_manifest **ret,
             struct manifest_diag *d)
{
        struct session_manifest **v = NULL;
        size_t n = 0;
        int r = manifest_parse_sessions(text, strlen(text), "t.yaml", cfg, &v, &n, d);

        if (r == 0) {
                assert_int_equal(n, 1);
                *ret = v[0];
                free(v);
        }
        return r;
}

void mt_assert_diag(struct manifest_diag *d, const char *const *want, size_t n)
{
        for (size_t i = 0; i < d->n && i < n; i++)
                if (strcmp(d->messages[i], want[i]) != 0)
                        fail_msg("message %zu: got\n  %s\nwant\n  %s", i, d->messages[i], want[i]);
        if (d->n != n)
                fail_msg("got %zu messages, want %zu (first: %s)", d->n, n,
                         d->n ? d->messages[0] : "-");
        manifest_diag_done(d);
}
