/* SPDX-License-Identifier: MIT */
/* The manifest model: Session and NodeConfig parsed from YAML (libyaml) into typed structs,
 * defaults, validation with FILE:LINE:COL errors, and canonical JSON/YAML rendering. */
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

/* sizeClasses[].diskMiB bounds: 64 MiB .. 16 TiB. */
#define SIZE_CLASS_DISK_MIB_MIN 64u
#define SIZE_CLASS_DISK_MIB_MAX (16u << 20)

struct size_class {
        char *name; /* owned */
        unsigned vcpus;
        unsigned memory_mib;
        double cpu; /* CPU quota in cores, e.g. 0.5 */
        unsigned pids;
        unsigned io_weight; /* 0: unset */
        /* diskMiB: size of the workspace disk (which also holds the root overlay of images with
         * a root disk). 0: the image's workspace.img as it is. */
        unsigned disk_mib;
};

struct image_spec {
        char *name; /* owned */
        char *dir;  /* owned, absolute after load (resolved against the config file's dir) */
};

/* registries entry: where OCI references in spec.image may be pulled from. */
struct registry_spec {
        char *host;      /* owned: "ghcr.io", "127.0.0.1:5000" or "*" (any registry, TLS) */
        char *auth_file; /* owned absolute path (skopeo --authfile) or NULL */
        bool insecure;   /* plain HTTP / no TLS verification: loopback hosts only */
};

enum accel_mode {
        ACCEL_AUTO,
        ACCEL_KVM,
        ACCEL_TCG,
        _ACCEL_MAX,
        _ACCEL_INVALID = -1,
};
const char *accel_mode_to_string(enum accel_mode a);
enum accel_mode accel_mode_from_string(const char *s);

struct node_config {
        char *node_name; /* owned; default: hostname */
        char *state_dir; /* owned, absolute; default /var/lib/forklet */
        char *run_dir;   /* owned, absolute; default /run/forklet */
        enum accel_mode accel;
        char *manifest_dir;      /* owned, absolute; default /etc/forklet/sessions */
        char *api_socket;        /* owned, absolute; default <runDir>/api.sock */
        char *api_listen;        /* owned or NULL: optional IPv4:PORT TCP listener (loopback, or
                                  * any address with api.tlsCert/tlsKey) */
        char *api_token_file;    /* owned or NULL; required with api_listen */
        char *api_tls_cert;      /* owned or NULL: PEM server certificate (chain) of the listener */
        char *api_tls_key;       /* owned or NULL: PEM private key (mode 0600 or stricter) */
        char *api_tls_client_ca; /* owned or NULL: PEM CA; set: clients must present a cert */
        /* owned or NULL: the https URL other hosts reach the listener at (published in the node
         * status); default "https://" + api.listen when TLS is on and listen is not 0.0.0.0 */
        char *api_url;
        char *uplink_pool;      /* owned CIDR, default 198.18.0.0/16 */
        char *uplink_interface; /* owned, "" = no NAT out */
        char **dns;             /* owned strv, may be empty */
        unsigned dns_min_ttl_s; /* network.dnsMinTTL: floor for learned addresses, default 30 */
        char *cgroup_parent;    /* owned, default "forklet" */
        struct size_class *size_classes; /* owned array */
        size_t n_size_classes;
        struct image_spec *images; /* owned array */
        size_t n_images;
        struct registry_spec *registries; /* owned array; empty: no OCI references */
        size_t n_registries;
        unsigned reserve_memory_mib;    /* default 1024 */
        unsigned max_sessions;          /* default 64 */
        unsigned max_forks_per_session; /* default 32 */
        /* Allocatable vCPUs = host CPUs * cpuOvercommitPercent / 100 (CPU is compressible:
         * quotas cap each session, weights share the rest). Default 400. */
        unsigned cpu_overcommit_percent;
        /* QEMU's own memory beyond guest RAM, added to memory.max and to the capacity charge
         * (measured: bench/qemu-overhead.sh). Default 128. */
        unsigned qemu_overhead_mib;
        /* Share of guest RAM a fork is charged at admission, before its PSS is known (its
         * RAM is copy-on-write on the checkpoint). Default 25. */
        unsigned fork_memory_percent;
        /* jail: each session's QEMU runs as its own uid/gid from [jail_uid_base,
         * jail_uid_base + jail_uid_count); count 0 turns the jail off. Default 200000, 65536. */
        unsigned jail_uid_base;
        unsigned jail_uid_count;
        /* hardening.dropCapabilities: forkletd drops every capability it does not need at
         * start (agent_privileges_keep_mask); false keeps all. Default true. */
        bool drop_capabilities;
        /* health: liveness probes of each Running guest's agent every livenessIntervalSeconds
         * (0: off; default 15); failureThreshold probes in a row unanswered make it
         * GuestUnresponsive (default 4: about a minute, longer than the 30 s the agent channel
         * gives a guest's unfinished frame before it reconnects). */
        unsigned liveness_interval_s;
        unsigned liveness_failure_threshold;
        /* diskPressure: a VM stopped by a disk write error continues by itself once its disk's
         * filesystem has minFreeMiB free (resume: auto, the default), or on `forklet resume`
         * only (manual). Default 64 MiB. */
        bool disk_pressure_auto_resume;
        unsigned disk_pressure_min_free_mib;
        /* memoryGiveBack: the balloon takes a booted guest's free memory back out of its RAM
         * file (never a fork's or a rolled-back session's: theirs is a checkpoint's) after a
         * live checkpoint was written, and when a check every intervalSeconds (0: none; default
         * 30) finds the file thresholdMiB (default 32) above what the guest uses; marginMiB
         * (default 16) stays free in the guest. enabled false: never. Default true. */
        bool give_back_enabled;
        unsigned give_back_interval_s;
        unsigned give_back_threshold_mib;
        unsigned give_back_margin_mib;
        char **etcd;       /* owned strv, empty: standalone */
        char *etcd_prefix; /* owned, default "/forklet" */
        /* controlPlane.releasePendingAfterSeconds: a cluster session this node's admission kept
         * Pending that long (never booted here) is handed back to the scheduler. Default 30;
         * 0: never. */
        unsigned release_pending_s;
        struct kv *labels; /* owned array: node labels (cluster nodeSelector) */
        size_t n_labels;
        /* secrets.mintCommand: owned argv (absolute program first), NULL: minting refused */
        char **mint_command;
        /* secrets.fileDirs: owned strv of absolute dirs a file secret must lie under (checked
         * lexically here, on the resolved path when read); default {"/etc/forklet/secrets"} */
        char **secret_file_dirs;
        char *source; /* owned file name */
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

/* Frees a manifest and everything it owns; accepts NULL, returns NULL. */
struct session_manifest *session_manifest_free(struct session_manifest *m);
struct node_config *node_config_free(struct node_config *c);
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

/* Parses a NodeConfig; relative paths resolve against the directory of `source` (a path).
 * Same error conventions as above. */
int node_config_parse(const char *buf, size_t size, const char *source, struct node_config **ret,
                      struct manifest_diag *diag);
int node_config_load_file(const char *path, struct node_config **ret, struct manifest_diag *diag);
/* The built-in default config (used when forkletd has no --config). */
int node_config_default(struct node_config **ret);

const struct size_class *node_config_find_size_class(const struct node_config *c, const char *n);
const struct image_spec *node_config_find_image(const struct node_config *c, const char *n);

/* ---- OCI image references (manifest-oci-ref.c) ------------------------------------------ */

#define MANIFEST_OCI_HOST_MAX 256
/* host[:port]/repo[:tag][@sha256:HEX], parsed. A reference always names its registry. */
struct oci_ref {
        char host[MANIFEST_OCI_HOST_MAX]; /* lowercased "127.0.0.1:5000" */
        char repo[256];                   /* "tools/python" */
        char tag[129];                    /* "" with a digest only; "latest" when neither */
        char digest[72];                  /* "sha256:<64 hex>" or "" */
};
/* spec.image names an OCI reference (it holds a '/'), not an image the node lists. */
bool manifest_image_is_ref(const char *image);
/* Parses s; -EINVAL with err (may be NULL) saying what is wrong. Pure. */
int manifest_oci_ref_parse(const char *s, struct oci_ref *ret, struct fk_error *err);
/* Back to text (host/repo[:tag][@digest]); -ENAMETOOLONG when it does not fit. */
int manifest_oci_ref_format(const struct oci_ref *ref, char *buf, size_t size);
/* 127.0.0.0/8 or localhost, with or without a port. */
bool manifest_registry_host_is_loopback(const char *host);
/* The registries entry for host: an exact (case-insensitive) match, else "*", else NULL. */
const struct registry_spec *node_config_find_registry(const struct node_config *c,
                                                      const char *host);
/* Parses image as a reference and, with a cfg, checks its registry is listed: -EPERM "registry
 * X is not allowed on node N (allowed: ...)". ret may be NULL. Does not log. */
int manifest_check_image_ref(const struct node_config *cfg, const char *image, struct oci_ref *ret,
                             struct fk_error *err);

/* Canonical JSON: {"apiVersion","kind","metadata":{name,namespace,labels},"spec":{...}} with
 * defaults filled in, keys in a fixed order. Returns a new reference or NULL on ENOMEM. */
json_t *session_manifest_to_json(const struct session_manifest *m);
/* Inverse of the above (accepts what the API receives as JSON, same validation rules as YAML;
 * errors in diag use source "<json>" and the JSON path, no line/col). */
int session_manifest_from_json(const json_t *j, const struct node_config *cfg,
                               struct session_manifest **ret, struct manifest_diag *diag);
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

/* path (absolute) lies under one of cfg->secret_file_dirs, lexically after normalization. */
bool manifest_secret_file_allowed(const struct node_config *cfg, const char *path);
/* Validates a DNS-1123 label (lowercase alnum and '-', 1..63, alnum at both ends). */
bool manifest_name_is_valid(const char *name);
/* Parses one egress entry; on error fills err with a message (without position). */
int manifest_egress_parse(const char *text, struct egress_rule *ret, struct fk_error *err);
void egress_rule_done(struct egress_rule *r);

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
