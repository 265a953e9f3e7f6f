/* SPDX-License-Identifier: MIT */
/* fk_agent_secrets: spec.secrets values for one boot (files read, minted ones run), wiped when
 * freed, and the status.identity ledger of what a boot delivered. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "manifest/manifest.h"

typedef struct json_t json_t; /* jansson */

#define AGENT_SECRET_MAX      (64 * 1024) /* a file or a mint's stdout beyond this is refused */
#define AGENT_MINT_TIMEOUT_MS 10000
#define AGENT_SECRETS_DIR     "/run/forklet/secrets" /* in the guest (tmpfs) */

struct agent_secret {
        char name[MANIFEST_SECRET_NAME_MAX + 1];
        unsigned char *value; /* owned, wiped when freed */
        size_t size;
        bool minted;
};
struct agent_secret_set {
        struct agent_secret *v; /* owned array of n */
        size_t n;
};
/* Wipes and frees the values; leaves s empty. */
void agent_secret_set_done(struct agent_secret_set *s);
/* cmd + "--session" key "--parent" parent "--fork-id" fork_id (NULL: ""). Caller frees *ret. */
int agent_secrets_mint_argv(char *const *cmd, const char *key, const char *parent,
                            const char *fork_id, char ***ret);
/* Runs argv (argv[0] absolute; stdin /dev/null, stderr inherited) and returns its stdout
 * (heap, caller frees): -EFBIG past max bytes, -ETIMEDOUT (killed), -EPROTO on a non-zero exit,
 * -ENODATA when empty. Messages never hold the output. */
int agent_secrets_run(char *const *argv, size_t max, unsigned timeout_ms, unsigned char **ret,
                      size_t *ret_size, struct fk_error *err);
/* Every secret of m for one boot of session key (files read, minted ones minted with parent and
 * fork_id). On failure nothing is returned. Does not log. */
/* status.identity for a boot that delivered secrets (checkpoint: the id restored from, NULL
 * on a cold boot; restored: the guest accepted a new identity). New reference or NULL. */
json_t *agent_identity_ledger(const char *fork_id, const char *checkpoint,
                              const struct agent_secret_set *secrets, bool restored, bool reseeded);
int agent_secrets_resolve(const struct node_config *cfg, const struct session_manifest *m,
                          const char *key, const char *parent, const char *fork_id,
                          struct agent_secret_set *ret, struct fk_error *err);
