/* SPDX-License-Identifier: MIT */
/* A live checkpoint of a session's QEMU: the method (precopy or background snapshot), the new
 * disk overlay opened while the guest runs and switched to with the guest stopped (precopy: once
 * the migration completed), the second QMP connection that cont (or migrate-continue) is armed
 * on, and what the checkpoint records of the pause. */
#include "agent/vm/vm.h"
#include "agent/vm/vm-qemu.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIVE_CONVERGE_MS 20000 /* precopy this long at most, then stop to finish */

/* The live method: precopy where QEMU's dirty tracking is exact (KVM's dirty log, or TCG with
 * the RAM tail), else the background snapshot (userfaultfd; refused by a jailed QEMU 7.2, then
 * stop-and-copy). FORKLET_CHECKPOINT_MODE=precopy (or precopy-polled, precopy-pause) or
 * =background forces one. */
static bool live_background(const struct qemu_vm *q)
{
        const char *m = getenv("FORKLET_CHECKPOINT_MODE");

        if (m && (strcmp(m, "precopy") == 0 || strcmp(m, "precopy-polled") == 0 ||
                  strcmp(m, "precopy-pause") == 0))
                return false;
        if (m && strcmp(m, "background") == 0)
                return true;
        return !(q->accel == VMM_ACCEL_KVM || q->ram_tail);
}

/* FORKLET_CHECKPOINT_MODE=precopy-polled: precopy with the polled conversation instead of
 * QEMU's events and armed commands (bench/checkpoint.sh's baseline). */
static bool live_polled(void)
{
        const char *m = getenv("FORKLET_CHECKPOINT_MODE");

        return m && strcmp(m, "precopy-polled") == 0;
}

/* The disk switches once the migration completed (vmm_live_opts.switch_after), unless
 * FORKLET_CHECKPOINT_MODE=precopy-pause asks for the pause before the switch-over that
 * forkletd used before (bench/checkpoint.sh's baseline). */
static bool live_switch_after(void)
{
        const char *m = getenv("FORKLET_CHECKPOINT_MODE");

        return !(m && strcmp(m, "precopy-pause") == 0);
}

/* The disk freeze at the live switch-over (the guest is stopped there). */
struct live_switch {
        struct qemu_vm *q;
        const struct agent_checkpoint_params *p;
        struct agent_checkpoint_result *res;
        char node[QEMU_NODE_SIZE]; /* the new overlay's node, opened before the pause; "": none */
};

/* Opens new_disk as a node of its own while the guest runs, so the switch-over only changes
 * the graph (blockdev-snapshot) instead of opening files with the guest stopped. */
static int overlay_open(struct live_switch *ls, struct fk_error *err)
{
        if (!ls->p->new_disk)
                return 0;
        return qemu_overlay_add(ls->q, ls->p->new_disk, ls->node, err);
}

static void overlay_close(struct live_switch *ls)
{
        json_t *args = ls->node[0] ? json_pack("{s:s}", "node-name", ls->node) : NULL;

        if (args && !ls->res->disk_switched)
                (void)qmp_execute(ls->q->qmp, "blockdev-del", args, VM_QMP_TIMEOUT_MS, NULL, NULL);
        json_decref(args);
}

/* The session QEMU's second QMP socket, connected for one checkpoint (the monitor takes one
 * client at a time, and nobody would read its events between checkpoints); NULL when this
 * QEMU has none (started by an older forkletd) or it does not answer. */
static struct qmp_client *connect_second(const struct qemu_vm *q)
{
        cleanup_free char *path = NULL;
        struct qmp_client *c = NULL;
        struct fk_error err = {0};

        if (fk_asprintf(&path, "%s/" VM_QMP2_SOCKET, q->run_dir) < 0 || access(path, F_OK) < 0)
                return NULL;
        if (qmp_client_connect(path, 1000, &c, &err) < 0) {
                log_debug("QEMU pid %d: %s: %s (migrate-continue not armed)",
                          (int)vmm_process_pid(q->proc), path, err.msg);
                return NULL;
        }
        return c;
}

/* QEMU flushes every disk when it stops the guest for the switch-over (do_vm_stop's
 * bdrv_flush_all): the qcow2 metadata it caches and what the guest wrote since its last flush
 * went to disk inside the pause, with an fdatasync (seen: 108-117 ms in the checkpoint after a
 * compaction's stream, whose L2 and refcount updates sit in QEMU's cache, against 1.4 ms; a
 * host-side fdatasync of the file did not help). Flushed now, while the guest runs, the stop's
 * flush finds little left. QMP has no flush command; HMP's qemu-io runs bdrv_flush on the
 * device. */
static void flush_disk(const struct qemu_vm *q)
{
        json_t *args = json_pack("{s:s}", "command-line", "qemu-io disk0 \"flush\"");
        struct fk_error err = {0};
        json_t *out = NULL;

        if (!args ||
            qmp_execute(q->qmp, "human-monitor-command", args, VM_QMP_TIMEOUT_MS, &out, &err) < 0 ||
            (json_string_value(out) && json_string_value(out)[0]))
                log_debug("QEMU pid %d: flush disk0 before the checkpoint: %s",
                          (int)vmm_process_pid(q->proc),
                          err.msg[0] ? err.msg : json_string_value(out) ?: "out of memory");
        json_decref(out);
        json_decref(args);
}

/* After blockdev-snapshot (vmm's switch_command) moved disk0 onto the new overlay: the VM's
 * disk is the new overlay now. */
static int live_switched(void *userdata, struct fk_error *err)
{
        struct live_switch *ls = userdata;
        char *disk = strdup(ls->p->new_disk);

        if (!disk)
                return fk_error_set(err, -ENOMEM, "out of memory");
        ls->res->disk_switched = true;
        free(ls->q->disk);
        ls->q->disk = disk;
        return 0;
}

/* "seen 2.10 switch 0.80 ... ms": where a precopy pause went (bench-live-pause's steps) */
static void pause_steps_text(const struct vmm_live_stats *st, char *buf, size_t size)
{
        size_t off = 0;

        buf[0] = '\0';
        for (int s = 0; s < _VMM_LIVE_STEP_MAX && off < size; s++)
                off += (size_t)snprintf(buf + off, size - off, "%s %.2f ",
                                        vmm_live_step_to_string(s), (double)st->step_ns[s] / 1e6);
        if (off < size)
                snprintf(buf + off, size - off, "ms");
}

/* The guest runs while its RAM goes into dir/full; the disk switches with the guest stopped. */
int qemu_checkpoint_live(struct qemu_vm *q, const struct agent_checkpoint_params *p,
                         const char *full, struct agent_checkpoint_result *res,
                         struct fk_error *err)
{
        struct live_switch ls = {.q = q, .p = p, .res = res};
        struct vmm_live_opts o = {.converge_ms = LIVE_CONVERGE_MS,
                                  .timeout_ms = p->timeout_ms,
                                  .userdata = &ls,
                                  .background = live_background(q),
                                  .poll = live_polled(),
                                  .switch_after = live_switch_after()};
        struct vmm_live_stats st = {0};
        json_t *args = NULL;
        int r = overlay_open(&ls, err);

        /* a QEMU that cannot open the overlay beside the old one: stop-and-copy's switch */
        if (r == -EIO)
                r = fk_error_set(err, -EOPNOTSUPP, "blockdev-add of the new overlay: %s", err->msg);
        if (r >= 0 && ls.node[0]) {
                /* the switch only changes the graph: the old overlay becomes the checkpoint's
                 * frozen layer */
                args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", ls.node);
                if (!args)
                        r = fk_error_set(err, -ENOMEM, "out of memory");
                o.switch_command = "blockdev-snapshot";
                o.switch_args = args;
                o.switchover = live_switched;
        }
        if (r >= 0 && args && !o.background)
                o.continue_qmp = connect_second(q);
        if (r >= 0 && args)
                flush_disk(q);
        if (r >= 0)
                r = vmm_checkpoint_live(q->qmp, full, &o, &st, err);
        qmp_client_free(o.continue_qmp);
        json_decref(args);
        overlay_close(&ls);
        if (r < 0)
                return r;
        res->switch_ns = st.step_ns[VMM_LIVE_SWITCH];
        /* until Ready: the stream's size (touched RAM + device state) stands for ramBytes */
        res->ram_bytes = st.stream_bytes;
        res->live = true;
        res->background = o.background;
        res->forced = st.forced;
        res->pause_ns = st.pause_ns;
        res->downtime_ms = st.downtime_ms;
        if (!o.background)
                pause_steps_text(&st, res->pause_steps, sizeof(res->pause_steps));
        res->write_pending = true;
        return 0;
}
