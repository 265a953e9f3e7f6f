/* SPDX-License-Identifier: MIT */
/* fk_manifest_node: the NodeConfig (size classes, images, registries, networking, API,
 * jail, health, control plane, secrets), parsed and defaulted, and OCI image references
 * checked against its registries. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "manifest/doc/doc.h"

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
        /* QEMU's own memory beyond guest RAM, added to memory.max (with the TCG translation
         * cache under TCG) and to the capacity charge (measured: bench/qemu-overhead.sh).
         * Default 128. */
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

struct node_config *node_config_free(struct node_config *c);

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

/* Makes p absolute against base_dir (relative base_dir: against the cwd) and normalizes it
 * lexically ("." and ".." parts). Caller frees *ret. */
int manifest_resolve_path(const char *base_dir, const char *p, char **ret);
/* spec.image when it is an OCI reference (a string with '/'): checked against cfg's
 * registries into *ret; false (nothing done) for a node image name. */
bool manifest_decode_image_ref(struct mctx *c, const struct mnode *spec,
                               const struct node_config *cfg, char **ret);
