/* SPDX-License-Identifier: MIT */
/* OCI images by reference (inside fk_agent): the store under <stateDir>/oci (one read-only
 * rootfs per manifest digest, the references that point at it), pulls with skopeo off the API
 * thread and the reconcile lock, and the rootfs build (umoci unpack, the forklet agent
 * injected, mkfs.ext4 -d). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* ext4 label of an image's rootfs.img (OCI images here, scripts/build-image-debian.sh);
 * forklet.root= names it. */
#define AGENT_ROOTFS_LABEL "forklet-root"

typedef struct json_t json_t;
struct node_config;
struct agent_image_store;

/* Where a session whose spec.image is a reference boots from (heap strings, caller frees with
 * agent_image_boot_done). kernel, initrd and workspace come from the node image "minimal". */
struct agent_image_boot {
        char *digest; /* "sha256:..." */
        char *rootfs; /* <store>/images/<hex>/rootfs.img */
};
void agent_image_boot_done(struct agent_image_boot *b);

/* The image config that exec and afterStart apply (from the OCI config blob). */
struct agent_image_config {
        char **env;        /* owned "K=V" strv or NULL */
        char *working_dir; /* owned or NULL */
        char *user;        /* owned or NULL */
        char **command;    /* owned Entrypoint + Cmd or NULL */
};
void agent_image_config_done(struct agent_image_config *c);

/* wake(ctx) is called from a pull thread when a pull ends (the reconcile loop looks again).
 * Loads what <stateDir>/oci holds and removes half-done pulls a crash left. Logs. */
int agent_image_store_new(const struct node_config *cfg, void (*wake)(void *), void *wake_ctx,
                          struct agent_image_store **ret);
/* Waits for pulls in flight (they are cancelled first). Accepts NULL, returns NULL. */
struct agent_image_store *agent_image_store_free(struct agent_image_store *st);

/* The boot files of ref when it is pulled: 0. Otherwise starts (or joins) a pull and returns
 * -EAGAIN with err "pulling REF: N of M bytes", or -EIO with err holding the registry's message
 * when the last pull failed (another starts once its back-off passed). -EPERM: the registry is
 * not allowed. Never blocks on the network. Thread-safe. */
int agent_image_resolve(struct agent_image_store *st, const char *ref, struct agent_image_boot *ret,
                        struct fk_error *err);
/* The image config of digest ("sha256:..."); -ENOENT when not in the store. */
int agent_image_config(struct agent_image_store *st, const char *digest,
                       struct agent_image_config *ret);
/* Starts (or joins) a pull of ref even if it is present (forklet image pull): a new digest of
 * a tag replaces the old reference. 0 started or joined; -EPERM / -EINVAL with err. */
int agent_image_pull_start(struct agent_image_store *st, const char *ref, struct fk_error *err);
/* {"reference","state":"Pulling|Ready|Failed","bytesDone","bytesTotal","digest","message"}
 * for ref (new reference), NULL when there is no pull and no image for it. */
json_t *agent_image_pull_json(struct agent_image_store *st, const char *ref);
/* Every image: {"digest","references","sizeBytes","pulledAt","config"} (new reference). */
json_t *agent_image_list_json(struct agent_image_store *st);
/* The image whose digest hex starts with id (>= 12 hex digits) or that a reference names:
 * its digest into ret (72 bytes). -ENOENT, -EINVAL (ambiguous or malformed). */
int agent_image_find(struct agent_image_store *st, const char *id, char *ret, size_t size);
/* Removes the image of digest and its references (nothing checks users here). -ENOENT. */
int agent_image_remove(struct agent_image_store *st, const char *digest);
/* Removes every image that no session uses (digests of in_use, a NULL-terminated strv) and
 * that was not pulled by hand. Returns how many were removed. Logs. */
int agent_image_gc(struct agent_image_store *st, char *const *in_use);
