/* SPDX-License-Identifier: MIT */
/* Memory back to the host for a QEMU VM: its RAM file's allocated size, the balloon give-back
 * (vmm/balloon.c) for a VM whose RAM file is its own, and letting go of a balloon a killed
 * forkletd left inflated. */
#include "agent/vm/vm-qemu.h"
#include "agent/store/store.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/balloon/balloon.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <string.h>

uint64_t qemu_ram_bytes(void *vm)
{
        const struct qemu_vm *q = vm;

        return q->mem_path ? agent_space_allocated(q->mem_path) : 0;
}

int qemu_give_back(void *userdata, void *vm, const struct agent_give_back_params *p,
                   struct agent_give_back_result *ret, struct fk_error *err)
{
        struct qemu_vm *q = vm;
        struct vmm_give_back_stats st = {0};
        struct vmm_give_back_opts o;
        int r;

        (void)userdata;
        /* The same rule vmm_balloon_give_back checks with QEMU itself (the backend's share
         * property): a private mapping's file is a checkpoint's, shared by its forks. */
        if (q->mem_private)
                return fk_error_set(err, -EPERM,
                                    "its RAM is a checkpoint's file mapped copy-on-write "
                                    "(%s): ballooning would punch holes into that file",
                                    q->mem_path);
        if (!q->balloon)
                return fk_error_set(err, -ENODEV,
                                    "its QEMU has no balloon device (started by an older "
                                    "forkletd, or restored from a checkpoint made without one)");
        o = (struct vmm_give_back_opts){
                .ram_bytes = vmm_ram_bytes(q->memory_mib, q->ram_tail),
                .host_bytes = qemu_ram_bytes(q),
                .margin_bytes = p->margin_bytes,
                .min_bytes = p->min_bytes,
                .timeout_ms = p->timeout_ms,
                .cancel = p->cancel,
                .yield = p->yield,
        };
        r = vmm_balloon_give_back(q->qmp, &o, &st, err);
        *ret = (struct agent_give_back_result){
                .before_bytes = o.host_bytes,
                .after_bytes = qemu_ram_bytes(q),
                .guest_free = st.guest_free,
                .ballooned = st.ballooned,
                .ns = st.inflate_ns + st.deflate_ns,
                .skipped = st.skipped,
                .yielded = st.yielded,
                .deflating = st.deflating,
        };
        return r;
}

void qemu_balloon_adopted(struct qemu_vm *q)
{
        struct fk_error err = {0};

        /* A give-back cut short leaves the target below the RAM: the guest would go on
         * inflating, and a checkpoint would carry that into forks, whose inflations punch
         * holes into the checkpoint's file. A VM of a fork never has a target set, but its
         * target is reset too (deflating is harmless there: madvise WILLNEED only). */
        if (q->balloon &&
            vmm_balloon_reset(q->qmp, vmm_ram_bytes(q->memory_mib, q->ram_tail), &err) < 0)
                log_warning("QEMU pid %d: balloon target not reset: %s",
                            (int)vmm_process_pid(q->proc), err.msg);
}
