/* SPDX-License-Identifier: MIT */
/* fk_manifest: the Session manifest parsed from YAML or JSON into typed structs, defaults,
 * validation against a node config with FILE:LINE:COL errors, canonical JSON, the field table
 * and its OpenAPI schema. The node config is manifest/node/node.h, the document layer
 * manifest/doc/doc.h (both included). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "manifest/doc/doc.h"
#include "manifest/node/node.h"

typedef struct json_t json_t; /* jansson */

enum session_state {
        SESSION_STATE_RUNNING,
        SESSION_STATE_PAUSED,
        SESSION_STATE_STOPPED,
        _SESSION_STATE_MAX,
        _SESSION_STATE_INVALID = -1,
};
const char *session_state_to_string(enum session_state s);
enum session_state session_state_from_string(const char *s);

enum restart_policy {
        RESTART_POLICY_NEVER,
        RESTART_POLICY_ON_FAILURE,
        _RESTART_POLICY_MAX,
        _RESTART_POLICY_INVALID = -1,
};
const char *restart_policy_to_string(enum restart_policy p);
enum restart_policy restart_policy_from_string(const char *s);

struct checkpoint_spec {
        char *name; /* owned */
};

/* spec.secrets entry: a value read from a node file when the session boots, or minted by the
 * node's secrets.mintCommand per session and per fork. The value itself never lives here. */
#define MANIFEST_SECRET_NAME_MAX 63
struct secret_spec {
        char *name; /* owned: an environment-variable-like name or a DNS label (a file name) */
        char *file; /* owned absolute node path, NULL when minted */
        bool mint;
};

struct session_manifest {
        /* metadata */
        char *name;        /* owned, DNS-1123 label */
        char *namespace;   /* owned, default "default" */
        struct kv *labels; /* owned array of n_labels */
        size_t n_labels;
        struct kv *annotations; /* owned array of n_annotations (any string values) */
        size_t n_annotations;
        /* spec */
        char *size_class;                   /* owned, default "small" */
        char *image;                        /* owned, default "minimal" */
        enum session_state state;           /* default RUNNING */
        enum restart_policy restart_policy; /* default NEVER */
        struct kv *env;                     /* owned array of n_env */
        size_t n_env;
        struct egress_rule *egress; /* owned array; n_egress == 0: open egress */
        size_t n_egress;
        uint16_t *ports; /* owned array of n_ports */
        size_t n_ports;
        char **after_start;     /* owned NULL-terminated argv, NULL when absent */
        bool run_image_command; /* lifecycle.runImageCommand: the image's Entrypoint+Cmd as the
                                 * afterStart default (OCI images) */
        struct checkpoint_spec *checkpoints; /* owned array */
        size_t n_checkpoints;
        bool has_forks;
        char *forks_from; /* owned, names an entry of checkpoints */
        unsigned forks_count;
        struct kv *node_selector; /* owned array; cluster: node labels required (empty: any) */
        size_t n_node_selector;
        struct secret_spec *secrets; /* owned array of n_secrets (names unique) */
        size_t n_secrets;
        /* where it came from (for messages); not rendered */
        char *source; /* owned file name or "<api>" */
        unsigned source_line;
};

/* Frees a manifest and everything it owns; accepts NULL, returns NULL. */
struct session_manifest *session_manifest_free(struct session_manifest *m);
/* Deep copy. */
int session_manifest_copy(const struct session_manifest *m, struct session_manifest **ret);
/* Deep equality of everything rendered (source fields ignored). */
bool session_manifest_equal(const struct session_manifest *a, const struct session_manifest *b);
/* The same without labels and annotations: what metadata.generation counts changes of. */
bool session_manifest_spec_equal(const struct session_manifest *a,
                                 const struct session_manifest *b);

/* Parses every document of a YAML buffer as Sessions. `source` names it in messages.
 * cfg may be NULL (then sizeClass/image/forks.count are checked only for syntax; with a cfg
 * they must name a known class/image and count <= cfg->max_forks_per_session).
 * On success *ret is an owned array of *ret_n manifests (caller frees each and the array).
 * On failure returns -EINVAL and diag holds every error found (as many as can be found in one
 * pass); other -errno on ENOMEM. Does not log. */
int manifest_parse_sessions(const char *buf, size_t size, const char *source,
                            const struct node_config *cfg, struct session_manifest ***ret,
                            size_t *ret_n, struct manifest_diag *diag);
/* Reads path (refuses > MANIFEST_MAX_FILE_SIZE with a diag) and calls the above. */
int manifest_load_sessions_file(const char *path, const struct node_config *cfg,
                                struct session_manifest ***ret, size_t *ret_n,
                                struct manifest_diag *diag);

/* Canonical JSON: {"apiVersion","kind","metadata":{name,namespace,labels},"spec":{...}} with
 * defaults filled in, keys in a fixed order. Returns a new reference or NULL on ENOMEM. */
json_t *session_manifest_to_json(const struct session_manifest *m);
/* Inverse of the above (accepts what the API receives as JSON, same validation rules as YAML;
 * errors in diag use source "<json>" and the JSON path, no line/col). */
int session_manifest_from_json(const json_t *j, const struct node_config *cfg,
                               struct session_manifest **ret, struct manifest_diag *diag);

/* path (absolute) lies under one of cfg->secret_file_dirs, lexically after normalization. */
bool manifest_secret_file_allowed(const struct node_config *cfg, const char *path);

/* The Session field table (manifest-fields.c): every field of a Session document, the one
 * source of the validator's known keys and of the OpenAPI schema (manifest-openapi.c). */
enum manifest_ftype {
        MF_STRING,
        MF_INT,
        MF_NUMBER,
        MF_BOOL,
        MF_TIME,   /* an RFC 3339 string */
        MF_OBJECT, /* fields below */
        MF_MAP,    /* string keys to string values */
        MF_ARRAY,  /* of items (MF_OBJECT items: fields below) */
        MF_ANY,    /* free-form (output only) */
};
#define MF_REQUIRED 1u /* must be present */
#define MF_OUTPUT   2u /* set by the server: accepted on input and ignored */
struct manifest_field {
        const char *name; /* NULL ends a list */
        enum manifest_ftype type;
        enum manifest_ftype items;           /* MF_ARRAY */
        const struct manifest_field *fields; /* MF_OBJECT (or its items): children */
        const char *const *enums;            /* NULL-terminated allowed values, or NULL */
        int64_t min, max;                    /* MF_INT bounds when max > min */
        unsigned flags;
        const char *description;
};
#define MANIFEST_FIELDS_MAX 32 /* children of one object, at most */
/* The root of a Session document (apiVersion, kind, metadata, spec, status). Static. */
const struct manifest_field *manifest_session_fields(void);
/* The field at a dotted path ("spec.forks"; "spec.checkpoints" gives the array, whose
 * fields are its items'); NULL when unknown. */
const struct manifest_field *manifest_field_find(const char *path);
/* Writes the names of f's children into buf (MANIFEST_FIELDS_MAX + 1 slots) and returns it
 * NULL-terminated: the keys the validator accepts at that object. */
const char *const *manifest_field_names(const struct manifest_field *f, const char **buf);
/* OpenAPI v3 schema objects for the group version: {"dev.forklet.v1alpha1.Session": ...,
 * "...SessionList": ...} with x-kubernetes-group-version-kind (new reference, NULL on ENOMEM). */
json_t *manifest_openapi_schemas(void);
