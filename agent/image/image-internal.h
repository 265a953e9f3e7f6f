/* SPDX-License-Identifier: MIT */
/* Inside the image store only (image-store.c, image-pull.c, image-rootfs.c): the store, one
 * pull, and the steps a pull runs. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/image/image.h"
#include "manifest/manifest.h"

enum image_pull_state {
        IMAGE_PULL_RUNNING,
        IMAGE_PULL_FAILED,
        IMAGE_PULL_DONE,
};

struct image_pull {
        struct agent_image_store *st;
        char ref[600];
        struct oci_ref oref;
        enum image_pull_state state;
        uint64_t bytes_done, bytes_total; /* under st->lock */
        char msg[FK_ERROR_MSG_MAX];       /* failure: the registry's or the tool's message */
        char digest[72];
        unsigned failures;
        uint64_t retry_at_ns; /* monotonic: a failed pull starts again after this */
        bool pin;             /* forklet image pull: kept by the garbage collector */
        struct image_pull *next;
};

struct agent_image_store {
        pthread_mutex_t lock;
        pthread_cond_t idle;           /* a pull thread ended */
        const struct node_config *cfg; /* borrowed */
        char *root;                    /* owned: <stateDir>/oci */
        struct image_pull *pulls;      /* owned list */
        unsigned running;              /* pull threads alive */
        volatile bool stopping;        /* read by pulls without the lock (their cancel flag) */
        void (*wake)(void *);
        void *wake_ctx;
};

/* The pull thread's body (image-pull.c): inspect, copy, unpack, build, publish. Returns with
 * p's state set (under st->lock). */
void image_pull_run(struct image_pull *p);
/* Runs argv (absolute or PATH) with stdout into *ret_out (heap, may be NULL: dropped, at most
 * max bytes) and stderr's last line into err on failure. cancel (may be NULL) is polled; while
 * it runs, tick(ctx) is called about every 200 ms (may be NULL). */
int image_run(const char *const *argv, size_t max, char **ret_out, const volatile bool *cancel,
              void (*tick)(void *), void *ctx, struct fk_error *err);
/* <root>/images/<hex> of digest (caller frees). */
int image_dir(const struct agent_image_store *st, const char *digest, char **ret);
/* Records ref -> digest in <root>/refs.json (under st->lock). */
int image_refs_set(struct agent_image_store *st, const char *ref, const char *digest);

/* image-rootfs.c: from an unpacked tree to the store's image directory. */
/* Copies the forklet agent of the node image's initrd (sbin/forklet-agent) into tree's
 * /sbin, resolving every path inside tree (openat2 RESOLVE_IN_ROOT: an image's absolute
 * symlinks cannot point it at the host). */
int image_inject_agent(const char *initrd, const char *tree, const char *work,
                       struct fk_error *err);
/* mkfs.ext4 -d tree into path (label AGENT_ROOTFS_LABEL), sized to the tree plus room. */
int image_build_ext4(const char *tree, const char *path, struct fk_error *err);
/* The "config" object of the image config blob of an OCI layout's only image (new ref). */
int image_read_config(const char *layout, json_t **ret, struct fk_error *err);
/* image-list.c: marks digest's image as pulled by hand (kept by agent_image_gc). */
int image_pin(struct agent_image_store *st, const char *digest);
