/* SPDX-License-Identifier: MIT */
/* fk_vmm_balloon: memory back to the host through a VM's virtio-balloon device (vmm_config.balloon,
 * VMM_BALLOON_ID), over its QMP client: the guest's free memory from the balloon's stats, the
 * balloon inflated to take it (QEMU punches the pages out of the RAM file) and deflated again.
 * Above fk_vmm. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct qmp_client;

struct vmm_give_back_opts {
        uint64_t ram_bytes;    /* the guest's RAM (memory_mib) */
        uint64_t host_bytes;   /* what its RAM file holds on the host now (allocated bytes) */
        uint64_t margin_bytes; /* left free in the guest while the balloon is inflated */
        uint64_t min_bytes;    /* expected to come back at least this much, else nothing is done */
        unsigned timeout_ms;   /* stats and inflation; the deflation gets as long again */
        const volatile bool *cancel; /* set: stop inflating (then deflate); NULL: never */
        /* set: stop inflating (then deflate), keeping what came back so far: a request waits for
         * the VM (stats.yielded says it happened); NULL: never */
        const volatile bool *yield;
};

struct vmm_give_back_stats {
        uint64_t guest_free; /* the guest's free memory (its balloon driver's stats) */
        uint64_t expected;   /* what the plan expected back: host_bytes - (RAM - guest_free) */
        uint64_t ballooned;  /* the most the balloon held */
        uint64_t inflate_ns; /* target set .. reached (or given up) */
        uint64_t deflate_ns; /* target back to the whole RAM .. the guest has it all again */
        bool skipped;        /* less than min_bytes to expect, or stopped before the guest's stats
                              * came: the balloon was not touched */
        bool yielded;        /* stopped early for *yield (in the stats wait or the inflation) */
        bool deflating;      /* the target is the whole RAM again, but *yield or *cancel ended the
                              * wait while the guest still deflated (it goes on by itself) */
};

/* The bytes to inflate the balloon by (0: not worth it) for a guest with guest_free bytes free:
 * all its free memory but the margin, when the RAM file holds at least min_bytes more than the
 * guest uses (RAM - free). *ret_expected (may be NULL): that difference, 0 when it is not worth
 * it. Pure. */
uint64_t vmm_balloon_plan(const struct vmm_give_back_opts *o, uint64_t guest_free,
                          uint64_t *ret_expected);
/* Gives the guest's free memory back to the host: the balloon takes it (QEMU punches each page
 * out of the RAM file: fallocate PUNCH_HOLE, then madvise), then gives it back to the guest
 * (the pages come back as holes, zero when read). Refuses (-EPERM, err says why, nothing sent
 * but queries) unless QEMU reports the RAM backend share=on: QEMU 7.2 punches the holes into
 * the backing file also for a private (share=off) mapping, which for a fork is the checkpoint's
 * RAM file every fork maps. -ENODEV: no balloon device; -ETIMEDOUT: the guest's driver sent no
 * stats (virtio_balloon not loaded?). The balloon's target is the whole RAM again on return
 * whatever happened once it was moved (a later checkpoint never carries an inflating balloon
 * into forks). ret is filled also on failure. Does not log. */
int vmm_balloon_give_back(struct qmp_client *qmp, const struct vmm_give_back_opts *o,
                          struct vmm_give_back_stats *ret, struct fk_error *err);
/* Sets the balloon's target to the whole RAM (ram_bytes): the guest deflates whatever it holds
 * (after adopting a VM whose give-back a killed forkletd left half done). -ENODEV without a
 * balloon device. Does not log. */
int vmm_balloon_reset(struct qmp_client *qmp, uint64_t ram_bytes, struct fk_error *err);
