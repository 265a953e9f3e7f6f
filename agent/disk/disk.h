/* SPDX-License-Identifier: MIT */
/* fk_agent_disk: a session's workspace disk, qcow2 overlays under <session state>/disk (chains,
 * compaction, links for forks, standalone copies for snapshots) and the shared empty bases. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct agent_store;

/* <state>/disk (caller frees). */
int agent_disk_dir(const char *state_dir, char **ret);
/* The active overlay of session key whose state dir is sd (a path in sd/disk, caller frees),
 * from its state record; -ENOENT when none was made yet (or the file is gone). */
int agent_disk_active(struct agent_store *st, const char *sd, const char *key, char **ret);
/* Records path (a file in key's disk dir) as its active overlay (err as agent_store_update). */
int agent_disk_set_active(struct agent_store *st, const char *key, const char *path,
                          struct fk_error *err);
/* A free name <state>/disk/PREFIX-N.qcow2 (creates the dir; caller frees). */
int agent_disk_next_path(const char *state_dir, const char *prefix, char **ret);
/* Virtual size of a qcow2 image (its header) or size of a raw file. */
int agent_disk_virtual_size(const char *path, uint64_t *ret);
/* qemu-img create -f qcow2 -u -b backing -F raw|qcow2 path SIZE (format sniffed). err set. */
int agent_disk_create_overlay(const char *path, const char *backing, struct fk_error *err);
/* The same, through a template kept in template_dir (an existing directory; NULL: none): the
 * first overlay of a kind (backing name as written, format, size) runs qemu-img and is kept
 * there; later ones copy it, byte for byte what qemu-img wrote. For the overlays of every fork
 * and rollback of one checkpoint (template_dir: the checkpoint's dir). */
int agent_disk_create_overlay_from(const char *path, const char *backing, const char *template_dir,
                                   struct fk_error *err);
/* Makes the template agent_disk_create_overlay_from keeps in template_dir for overlays of
 * layer made beside it (what every fork and rollback of a checkpoint makes), unless it is
 * there: so that the first of them copies it too instead of running qemu-img. err set. */
int agent_disk_overlay_template(const char *layer, const char *template_dir, struct fk_error *err);
/* Depth of the backing chain of a qcow2 (1: no backing) and its bottom file (heap, may be NULL
 * when not wanted). Reads the headers, no qemu-img. */
int agent_disk_chain(const char *path, unsigned *ret_depth, char **ret_base);
/* When path's chain is deeper than max_depth, rebases it (qemu-img rebase, not while a QEMU
 * writes it) straight onto the chain's bottom. 1 compacted, 0 nothing to do, -errno + err. */
int agent_disk_compact(const char *path, unsigned max_depth, struct fk_error *err);
#define AGENT_DISK_MAX_DEPTH 16
/* Live compaction (agent/daemon/compact.c): after each checkpoint a running session's chain is
 * streamed (QMP block-stream) so that the next precopy's completion inactivates and its cont
 * reopens few layers (each costs about 0.2-0.8 ms of the pause, docs/benchmarks.md): at most
 * this many above the bottom, the top counted, that is the top and one anchor. */
#define AGENT_DISK_LIVE_MAX_LAYERS 2
/* The anchor: the lowest layer above the bottom, kept while it holds at least
 * AGENT_DISK_ANCHOR_MIN bytes and what lies above it (what the guest wrote since the anchor's
 * checkpoint) less than 1/AGENT_DISK_ANCHOR_SHARE of it; a stream onto it copies only that. */
#define AGENT_DISK_ANCHOR_MIN   (4ull * 1024 * 1024)
#define AGENT_DISK_ANCHOR_SHARE 4
/* Where a live chain files[0] (the top) .. files[n - 1] (the bottom), alloc[i] the files'
 * allocated bytes, is streamed onto: the index of the base (the anchor or the bottom), 0 when
 * nothing is due. Onto the anchor once the chain has more than max_layers layers above the
 * bottom; onto the bottom when the anchor is too small or what lies above it too large, once
 * beyond the bound or, right after a checkpoint of the VM (checkpointed), while all there is to
 * copy is less than AGENT_DISK_ANCHOR_MIN: not a fork's or a rollback's new chain, whose layers
 * forks share by hard links. max_layers 0: never. Pure. */
size_t agent_disk_stream_base(const uint64_t *alloc, size_t n, unsigned max_layers,
                              bool checkpointed);
/* Whether a stream that has run elapsed_ns and copied done of len bytes (QEMU's job offset and
 * len) would still run longer than wait_ns at the pace it had; nothing copied yet counts as
 * longer once it has run wait_ns. Pure. */
bool agent_disk_stream_outlasts(uint64_t elapsed_ns, uint64_t done, uint64_t len, uint64_t wait_ns);
/* The backing name the layer at path records for backing: its bare name when both are in one
 * directory (layers name their backing relative to their directory, so a chain hard-linked into
 * a fork's dir resolves there), else backing as given. Pure; *ret is a heap string. */
int agent_disk_backing_name(const char *path, const char *backing, char **ret);
/* The files of path's chain from path down to its bottom (backing names resolved against their
 * layer's directory), as a heap strv of *ret_n entries. Reads the headers. */
int agent_disk_chain_files(const char *path, char ***ret, size_t *ret_n);
/* The checkpoint layers of disk_dir (layer-ck_*.qcow2) in no chain of roots (paths, NULL
 * entries skipped), as a heap strv (may be empty). Reads the headers; does not log. */
int agent_disk_unused_layers(const char *disk_dir, const char *const *roots, size_t n_roots,
                             char ***ret);
/* Allocated bytes of path and every layer under it (an upper bound of what qemu-img convert
 * writes). */
uint64_t agent_disk_chain_allocated(const char *path);
/* Hard-links layer and every layer under it that lives in the same directory into dst_dir
 * (created), keeping their names, so the chain resolves there without the source dir (backing
 * names inside a directory are relative). *ret (may be NULL): the link of layer (heap). */
int agent_disk_link_chain(const char *layer, const char *dst_dir, char **ret, struct fk_error *err);

/* qemu-img convert -U -O qcow2 src dst: a standalone copy of a (read-only) chain. */
int agent_disk_convert(const char *src, const char *dst, struct fk_error *err);
/* The active overlay, created over base (the image's raw workspace.img) the first time and
 * recorded in key's state record. *ret is a heap path. err set on failure. */
int agent_disk_prepare(struct agent_store *st, const char *sd, const char *key, const char *base,
                       char **ret, struct fk_error *err);
/* The empty ext4 workspace base of mib MiB (label "workspace") that size classes with diskMiB
 * boot over: <node_state_dir>/disks/workspace-<mib>M.img, made once (sparse, mkfs.ext4 under a
 * temp name, renamed into place) and shared read-only by every overlay. *ret is a heap path. */
int agent_disk_workspace_base(const char *node_state_dir, unsigned mib, char **ret,
                              struct fk_error *err);
