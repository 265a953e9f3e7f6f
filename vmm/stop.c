/* SPDX-License-Identifier: MIT */
/* Graceful stop of a QEMU process, escalating: guest agent poweroff, QMP quit, SIGTERM,
 * SIGKILL, waiting a step timeout after each; and the discard of a VM nobody keeps. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "vmm/vmm.h"

/* timeout 0 means this per step. */
#define VMM_STOP_DEFAULT_STEP_MS 5000U
/* After SIGKILL the kernel still has to tear the process down (a large RAM mapping, a task
 * in uninterruptible sleep): give it this long before reporting failure. */
#define VMM_STOP_KILL_GRACE_MS 10000U

static int stop_by_agent(struct vmm_process *p, struct vmm_agent *agent, unsigned step_ms)
{
        struct fk_error err = {};
        int r;

        r = vmm_agent_poweroff(agent, step_ms, &err);
        if (r < 0) {
                log_debug("stop pid %d: agent poweroff: %s", (int)vmm_process_pid(p), err.msg);
                return 0;
        }
        return vmm_process_wait(p, step_ms);
}

static int stop_by_qmp(struct vmm_process *p, struct qmp_client *qmp, unsigned step_ms)
{
        struct fk_error err = {};
        int r;

        r = qmp_execute(qmp, "quit", NULL, step_ms, NULL, &err);
        /* QEMU may close the socket before its reply reaches us: that is success too. */
        if (r < 0 && r != -ECONNRESET) {
                log_debug("stop pid %d: QMP quit: %s", (int)vmm_process_pid(p), err.msg);
                return 0;
        }
        return vmm_process_wait(p, step_ms);
}

static int stop_by_signal(struct vmm_process *p, int sig, unsigned wait_ms)
{
        int r = vmm_process_kill(p, sig);

        if (r < 0 && r != -ESRCH)
                log_debug("stop pid %d: signal %d: %d", (int)vmm_process_pid(p), sig, r);
        return vmm_process_wait(p, wait_ms);
}

int vmm_stop(struct vmm_process *p, struct vmm_agent *agent, struct qmp_client *qmp,
             unsigned step_timeout_ms)
{
        unsigned step = step_timeout_ms ? step_timeout_ms : VMM_STOP_DEFAULT_STEP_MS;
        int r;

        if (!p)
                return -EINVAL;
        /* Stopping twice (or a VM that already died) is a no-op. */
        r = vmm_process_poll(p, NULL, NULL);
        if (r != 0)
                return r < 0 ? r : 0;
        if (agent) {
                r = stop_by_agent(p, agent, step);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        if (qmp) {
                r = stop_by_qmp(p, qmp, step);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        r = stop_by_signal(p, SIGTERM, step);
        if (r != 0)
                return r < 0 ? r : 0;
        r = stop_by_signal(p, SIGKILL, FK_MAX(step, VMM_STOP_KILL_GRACE_MS));
        if (r != 0)
                return r < 0 ? r : 0;
        return -ETIMEDOUT;
}

/* QEMU closes its tap now (QMP netdev_del) rather than as it ends. 0, or -errno. */
static int release_tap(struct vmm_process *p, struct qmp_client *qmp, unsigned step_ms)
{
        json_t *args = json_pack("{s:s}", "id", VMM_NETDEV_ID);
        struct fk_error err = {};
        int r;

        r = !qmp   ? -ENOTCONN
            : args ? qmp_execute(qmp, "netdev_del", args, step_ms, NULL, &err)
                   : -ENOMEM;
        json_decref(args);
        if (r < 0)
                log_debug("discard pid %d: netdev_del: %s", (int)vmm_process_pid(p),
                          qmp ? err.msg : "no QMP");
        return r;
}

int vmm_discard(struct vmm_process *p, struct qmp_client *qmp, bool has_tap,
                unsigned step_timeout_ms)
{
        unsigned step = step_timeout_ms ? step_timeout_ms : VMM_STOP_DEFAULT_STEP_MS;
        int r;

        if (!p)
                return -EINVAL;
        /* An exiting process closes its files only after its memory is freed (do_exit:
         * exit_mm, then exit_files): 80-100 ms for 600 MiB of a guest's private pages here,
         * during which the tap is still attached and another QEMU's open of it fails EBUSY.
         * netdev_del makes QEMU close it now; the NIC stays, without a peer. A QEMU that
         * already ended (its QMP socket closed) is only reaped, by vmm_stop. */
        if (has_tap && release_tap(p, qmp, step) < 0)
                return vmm_stop(p, NULL, qmp, step);
        /* not quit: QEMU's own clean-up would unlink its socket paths, which a QEMU started in
         * the same run dir meanwhile may have bound again */
        r = vmm_process_kill(p, SIGKILL);
        return r == -ESRCH ? 0 : r;
}
