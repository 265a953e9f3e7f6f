/* SPDX-License-Identifier: MIT */
/* Inside the manifest module only: a small document tree with positions (built from libyaml
 * events or from jansson values) and the typed decoding helpers that report into a diag. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest/manifest.h"

/* Beyond this many messages the rest are dropped (one "too many errors" line is added). */
#define MANIFEST_MAX_DIAG 100
#define MPATH_MAX         512

enum mnode_type {
        MNODE_SCALAR,
        MNODE_MAP,
        MNODE_SEQ,
};

/* How a scalar resolves: quoted YAML scalars and JSON strings are strings; plain YAML
 * scalars resolve as in the YAML 1.2 core schema. */
enum mscalar_kind {
        MSCALAR_STRING,
        MSCALAR_INT,
        MSCALAR_FLOAT,
        MSCALAR_BOOL,
        MSCALAR_NULL,
};

struct mnode {
        enum mnode_type type;
        enum mscalar_kind kind; /* SCALAR */
        char *text;             /* SCALAR: owned, NUL-terminated */
        size_t len;             /* SCALAR: bytes (may differ from strlen when it holds NUL) */
        unsigned line, col;     /* 1-based; 0 when the source has no positions (JSON) */
        bool alias;             /* stands for a refused alias: errors about it are not repeated */
        struct mnode **items;   /* owned; SEQ: elements; MAP: key, value, key, value ... */
        size_t n_items;
        size_t alloc;
};

/* Decoding context: where messages go and how they are prefixed. */
struct mctx {
        struct manifest_diag *diag;
        const char *source;
        unsigned n_errors; /* errors reported through mctx_err */
        bool oom;
        size_t diag_start; /* diag->n when the context was set up */
        uint64_t *keys;    /* owned: line/col sort key of each message added since diag_start */
};

/* Sorts the messages this context added by position (stable) and frees its state. */
void mctx_finish(struct mctx *c);

struct mnode *mnode_free(struct mnode *n);
/* Parses all documents of buf; *ret_docs is an owned array of roots (one per non-empty
 * document). Syntax problems are reported into c (and stop the parse). Returns 0 or -ENOMEM. */
int mnode_parse_yaml(struct mctx *c, const char *buf, size_t size, struct mnode ***ret_docs,
                     size_t *ret_n);
/* Converts a JSON value to a tree without positions. Returns 0, -EINVAL (reported) or -ENOMEM. */
int mnode_from_json(struct mctx *c, const json_t *j, struct mnode **ret);
/* Resolves a plain YAML scalar. */
enum mscalar_kind mscalar_resolve(const char *s);

/* Reports "SOURCE:LINE:COL: PATH: MESSAGE" (position omitted when n has none, path omitted
 * when empty). */
void mctx_err(struct mctx *c, const struct mnode *n, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* Path helpers: write "parent.key" / "parent[i]" into buf. */
const char *mpath_key(char *buf, size_t size, const char *parent, const char *key);
const char *mpath_idx(char *buf, size_t size, const char *parent, size_t i);

bool mnode_is_null(const struct mnode *n);
const char *mnode_type_name(const struct mnode *n);
/* The value for key in a map (NULL when absent). */
const struct mnode *mnode_get(const struct mnode *map, const char *key);

/* Checks n is a map with string keys, no duplicates, and (when known is non-NULL, a
 * NULL-terminated list) only known keys. Reports every problem; returns false when n is not a
 * map at all (the caller then skips it). */
bool mget_map(struct mctx *c, const struct mnode *n, const char *path, const char *const *known);
/* Checks n is a list; reports otherwise. */
bool mget_seq(struct mctx *c, const struct mnode *n, const char *path);
/* A non-null scalar as text; reports and returns NULL otherwise (or when it holds a NUL). */
const char *mget_string(struct mctx *c, const struct mnode *n, const char *path);
/* An integer in [min, max]; reports and returns false otherwise. */
bool mget_uint(struct mctx *c, const struct mnode *n, const char *path, uint64_t min, uint64_t max,
               uint64_t *ret);
/* A number (integer or float) in [min, max]. */
bool mget_double(struct mctx *c, const struct mnode *n, const char *path, double min, double max,
                 double *ret);
/* A required field: reports "required field missing" at map when absent or null. */
const struct mnode *mget_required(struct mctx *c, const struct mnode *map, const char *path,
                                  const char *key);
/* Strings dup'd into *ret, with oom tracking. */
int mstrdup(struct mctx *c, const char *s, char **ret);

/* Edit distance suggestions. Returns the closest of cands (n of them) to s when it is close
 * enough to be a likely typo, else NULL. */
const char *manifest_suggest(const char *s, const char *const *cands, size_t n);
/* Reports an unknown value: "unknown WHAT "v" (did you mean "x"?)" or "(known: a, b)". */
void mctx_err_unknown(struct mctx *c, const struct mnode *n, const char *path, const char *what,
                      const char *v, const char *const *cands, size_t n_cands);

/* Name checks with a reason (NULL when valid). */
const char *manifest_name_problem(const char *name);
const char *manifest_env_name_problem(const char *name);
const char *manifest_label_key_problem(const char *key);
const char *manifest_label_value_problem(const char *value);

/* Makes p absolute against base_dir (relative base_dir: against the cwd) and normalizes it
 * lexically ("." and ".." parts). Caller frees *ret. */
int manifest_resolve_path(const char *base_dir, const char *p, char **ret);
/* Built-in NodeConfig defaults into a zeroed struct (fields that depend on others: see
 * node_config_finish). */
int node_config_init_defaults(struct node_config *c);
int node_config_finish(struct node_config *c);
/* The api section's rules across fields (manifest-node-api.c): TLS for a non-loopback listen,
 * a token for any listen, cert and key together, api.url; fills the default api.url. api is
 * the api map (for positions). Reports into c. */
void node_config_check_api(struct mctx *c, const struct mnode *api, struct node_config *cfg);
/* The health and diskPressure sections (manifest-node-health.c); v is the section's map. */
void node_config_decode_health(struct mctx *c, const struct mnode *v, struct node_config *cfg);
void node_config_decode_disk_pressure(struct mctx *c, const struct mnode *v,
                                      struct node_config *cfg);
/* The memoryGiveBack section (manifest-node-memory.c); v is the section's map. */
void node_config_decode_give_back(struct mctx *c, const struct mnode *v, struct node_config *cfg);
/* spec.image when it is an OCI reference (a string with '/'): checked against cfg's
 * registries into *ret; false (nothing done) for a node image name. */
bool manifest_decode_image_ref(struct mctx *c, const struct mnode *spec,
                               const struct node_config *cfg, char **ret);
/* The registries section (manifest-node-registries.c) and freeing it. */
void node_config_decode_registries(struct mctx *c, const struct mnode *v, const char *base_dir,
                                   struct node_config *cfg);
void node_config_registries_free(struct node_config *c);
/* Without an images section: minimal plus every image directory under <stateDir>/images. */
int node_config_default_images(struct node_config *c);
/* Checks apiVersion and kind of a document root (reports problems). */
/* A string-to-string map at n: label rules (is_env false) or environment names (true). */
void manifest_decode_kvs(struct mctx *c, const struct mnode *n, const char *path, bool is_env,
                         struct kv **ret, size_t *ret_n);
/* metadata.annotations (manifest-fields.c): qualified-name keys, any string values. */
void manifest_decode_annotations(struct mctx *c, const struct mnode *n, struct kv **ret,
                                 size_t *ret_n);
int manifest_decode_header(struct mctx *c, const struct mnode *root, const char *kind);
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
