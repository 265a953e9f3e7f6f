/* SPDX-License-Identifier: MIT */
/* What the QEMU backend tells a guest once its agent answered: a cold boot's entropy seed and
 * the session's secrets; a fork's secrets, entropy and identity; a restore's clock. */
#include "agent/secrets/secrets.h"
#include "agent/vm/vm-qemu.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Secrets and identity after the agent answered: 30 forks restored at once on 2 cores took
 * more than 5 s for SET_IDENTITY (the guest translates each new code path first). */
#define VM_GUEST_STEP_TIMEOUT_MS 60000

/* spec.secrets into the guest's tmpfs, queued on pp; messages name the path, never the value. */
static void queue_secrets(struct vmm_agent_pipe *pp, const struct agent_boot_params *p)
{
        char path[sizeof(AGENT_SECRETS_DIR) + MANIFEST_SECRET_NAME_MAX + 2];

        for (size_t i = 0; i < p->n_secrets; i++) {
                snprintf(path, sizeof(path), AGENT_SECRETS_DIR "/%s", p->secrets[i].name);
                vmm_agent_pipe_write_file(pp, path, p->secrets[i].value, p->secrets[i].size, 0400);
        }
}

/* A cold boot's secrets, in one pipeline. */
static int give_secrets(struct qemu_vm *q, const struct agent_boot_params *p, struct fk_error *err)
{
        struct vmm_agent_pipe *pp = vmm_agent_pipe_new(q->agent);

        queue_secrets(pp, p);
        return vmm_agent_pipe_run(pp, VM_GUEST_STEP_TIMEOUT_MS, err, NULL);
}

/* After a restore the guest is a copy: the session's secrets (minted anew), then fresh entropy
 * with a CRNG reseed and the new fork id (the guest writes the identity files), then its clock
 * (it stood still since the checkpoint). One pipeline, answered in this order: secrets first,
 * so a program that re-reads its secrets when the identity changes finds the new ones; no exec
 * runs before this boot returns. A restore without a fork id (none minted) gets no identity. */
static int restore_setup(struct qemu_vm *q, const struct agent_boot_params *p, struct fk_error *err)
{
        struct fk_error clock_err = {0};
        struct vmm_agent_pipe *pp;
        unsigned char entropy[64];
        int r;

        if (p->fork_id && (r = fk_random_bytes(entropy, sizeof(entropy))) < 0)
                return fk_error_set(err, r, "getrandom: %s", strerror(-r));
        pp = vmm_agent_pipe_new(q->agent);
        queue_secrets(pp, p);
        if (p->fork_id)
                vmm_agent_pipe_set_identity(pp, p->fork_id, entropy, sizeof(entropy));
        vmm_agent_pipe_set_time(pp, fk_now_real_ns());
        r = vmm_agent_pipe_run(pp, VM_GUEST_STEP_TIMEOUT_MS, err, &clock_err);
        if (r >= 0 && clock_err.code)
                log_warning("QEMU pid %d: guest clock not synced: %s",
                            (int)vmm_process_pid(q->proc), clock_err.msg);
        return r;
}

/* A cold-booted guest has no entropy source of its own (no virtio-rng, no RDRAND in TCG's CPU
 * model): its CRNG stays unready until something blocks in getrandom(), and a checkpoint taken
 * before then hands each fork the CRNG's one-time initialisation (about 28 guest pages per fork
 * written in its identity request). Seed it now. Best effort: older agents answer ENOSYS. */
static void seed_entropy(struct qemu_vm *q)
{
        struct fk_error err = {0};
        unsigned char entropy[64];
        int r;

        r = fk_random_bytes(entropy, sizeof(entropy));
        if (r >= 0)
                r = vmm_agent_add_entropy(q->agent, entropy, sizeof(entropy),
                                          VM_GUEST_STEP_TIMEOUT_MS, &err);
        if (r < 0 && r != -ENOSYS)
                log_warning("QEMU pid %d: guest entropy not seeded: %s",
                            (int)vmm_process_pid(q->proc), err.msg[0] ? err.msg : strerror(-r));
}

/* The guest clock stood still while QEMU was stopped (pause, or a checkpoint being restored):
 * step it so the guest sees the gap, as a user watching a clock would. Best effort. */
void qemu_sync_clock(struct qemu_vm *q)
{
        struct fk_error err = {0};

        if (vmm_agent_set_time(q->agent, fk_now_real_ns(), VM_QMP_TIMEOUT_MS, &err) < 0)
                log_warning("QEMU pid %d: guest clock not synced: %s",
                            (int)vmm_process_pid(q->proc), err.msg);
}

int qemu_guest_setup(struct qemu_vm *q, const struct agent_boot_params *p, struct fk_error *err)
{
        if (p->restore_dir)
                return restore_setup(q, p, err);
        seed_entropy(q);
        return give_secrets(q, p, err);
}
