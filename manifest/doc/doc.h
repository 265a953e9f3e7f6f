/* SPDX-License-Identifier: MIT */
/* fk_manifest_doc: the document layer every manifest kind is read with: a small tree with
 * positions (from libyaml events or jansson values), typed getters that report FILE:LINE:COL
 * problems into a diag, the value formats fields use (names, label keys, egress entries),
 * YAML locate and rendering. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct json_t json_t; /* jansson */

#define MANIFEST_API_VERSION   "forklet.dev/v1alpha1"
#define MANIFEST_MAX_FILE_SIZE (1024 * 1024)
#define MANIFEST_MAX_DEPTH     32
#define MANIFEST_NAME_MAX      63

enum egress_kind {
        EGRESS_HOST,     /* api.github.com */
        EGRESS_WILDCARD, /* *.example.com: subdomains only; host holds "example.com" */
        EGRESS_CIDR,     /* 203.0.113.0/24, 2001:db8::/32, a bare address is /32 or /128 */
};

/* One parsed egress entry. `raw` is the text as written (and as rendered back). */
struct egress_rule {
        char *raw; /* owned */
        enum egress_kind kind;
        char *host;         /* owned; HOST/WILDCARD: lowercased name without "*." */
        int family;         /* CIDR: AF_INET or AF_INET6; 0 otherwise */
        uint8_t addr[16];   /* CIDR: network address (network byte order) */
        uint8_t prefix_len; /* CIDR */
        uint16_t port;      /* 0: any port */
};

/* key=value pairs in manifest order (labels, env). */
struct kv {
        char *key;   /* owned */
        char *value; /* owned */
};

/* All errors found in one input, each "FILE:LINE:COL: path: message". */
struct manifest_diag {
        char **messages; /* owned strv */
        size_t n;
};
void manifest_diag_done(struct manifest_diag *d); /* frees messages, leaves d reusable */
/* Appends one formatted message. */
int manifest_diag_add(struct manifest_diag *d, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Reads a manifest file (caller frees *ret): -EINVAL with a diag when it is larger than
 * MANIFEST_MAX_FILE_SIZE, -errno with a diag when it cannot be read. */
int manifest_read_file(const char *path, char **ret, size_t *ret_size, struct manifest_diag *diag);
/* Where PATH (a field path as validation messages name it: "spec.egress[1]") is in document
 * DOC (0-based, counting non-empty documents) of the YAML in buf: the node's 1-based line and
 * column, or those of its deepest ancestor present (a field filled in by default). 0, -ENOENT
 * (no such document), -EINVAL (not YAML) or -ENOMEM. */
int manifest_yaml_locate(const char *buf, size_t size, size_t doc, const char *path,
                         unsigned *ret_line, unsigned *ret_col);
/* Rewrites a message session_manifest_from_json() reported ("<json>: PATH: TEXT") against the
 * YAML source of document DOC: "SOURCE:LINE:COL: PATH: TEXT" into *ret (caller frees).
 * -EINVAL when msg is not such a message; else as manifest_yaml_locate(). */
int manifest_json_diag_relocate(const char *msg, const char *buf, size_t size, size_t doc,
                                const char *source, char **ret);
/* Renders a JSON value as YAML text (block style, stable), for `-o yaml`. Caller frees. */
int manifest_json_to_yaml(const json_t *j, char **ret);

/* Validates a DNS-1123 label (lowercase alnum and '-', 1..63, alnum at both ends). */
bool manifest_name_is_valid(const char *name);
/* Parses one egress entry; on error fills err with a message (without position). */
int manifest_egress_parse(const char *text, struct egress_rule *ret, struct fk_error *err);
void egress_rule_done(struct egress_rule *r);

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

/* Checks apiVersion and kind of a document root (reports problems). */
int manifest_decode_header(struct mctx *c, const struct mnode *root, const char *kind);

/* A string-to-string map at n: label rules (is_env false) or environment names (true). */
void manifest_decode_kvs(struct mctx *c, const struct mnode *n, const char *path, bool is_env,
                         struct kv **ret, size_t *ret_n);
