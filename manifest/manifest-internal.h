/* SPDX-License-Identifier: MIT */
/* Inside fk_manifest only: the Session decoder's parts in their own files (annotations,
 * secrets). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest/manifest.h"

/* metadata.annotations (manifest-fields.c): qualified-name keys, any string values. */
void manifest_decode_annotations(struct mctx *c, const struct mnode *n, struct kv **ret,
                                 size_t *ret_n);
/* spec.secrets (manifest-secrets.c): decode into m (reports problems), and model helpers. */
void manifest_decode_secrets(struct mctx *c, const struct mnode *n, const struct node_config *cfg,
                             struct session_manifest *m);
void manifest_secrets_free(struct secret_spec *v, size_t n);
/* Deep copy into *ret (n entries; on -ENOMEM *ret is partial: free it with n). */
int manifest_secrets_copy(const struct secret_spec *v, size_t n, struct secret_spec **ret);
bool manifest_secrets_equal(const struct secret_spec *a, size_t na, const struct secret_spec *b,
                            size_t nb);
/* [{name, file} | {name, mint: true}] (new reference, NULL on ENOMEM). */
json_t *manifest_secrets_json(const struct secret_spec *v, size_t n);
/* Decodes one Session tree; on reported errors returns -EINVAL. */
int session_decode(struct mctx *c, const struct mnode *root, const struct node_config *cfg,
                   struct session_manifest **ret);
