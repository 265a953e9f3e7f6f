/* SPDX-License-Identifier: MIT */
/* Helpers shared by the manifest unit tests (cmocka): parse one Session, compare diagnostics. */
#pragma once

#include <stddef.h>

#include "manifest/manifest.h"

/* Parses text as sessions under cfg; on success asserts there is exactly one and gives it to
 * *ret (the caller frees it); returns manifest_parse_sessions' result, d filled. */
int mt_parse(const char *text, const struct node_config *cfg, struct session_manifest **ret,
             struct manifest_diag *d);
/* Fails the test unless d holds exactly the n messages of want, in order; then releases d. */
void mt_assert_diag(struct manifest_diag *d, const char *const *want, size_t n);
