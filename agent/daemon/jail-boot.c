/* SPDX-License-Identifier: MIT */
/* The daemon's side of the jail: a boot's QEMU jailed with the session's uid and ledger
 * (agent/jail/jail.h does the jail itself). */
#include "agent/daemon/daemon-internal.h"
#include "agent/jail/jail.h"
#include "common/error.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <string.h>

int agent_jail_prepare(const struct node_config *cfg, struct agent_boot_params *p,
                       struct agent_jail *j, struct fk_error *err)
{
        struct agent_jail_files f = {
                .run_dir = p->run_dir,
                .kernel = p->kernel,
                .initrd = p->initrd,
                .rootfs = p->rootfs,
                .mem_path = p->mem_path,
                .disk = p->disk,
                .disk_dir = true,
                .tap = p->tap != NULL,
                .kvm = p->accel == VMM_ACCEL_KVM,
        };
        int r;

        if (p->n_pre_exec >= AGENT_PRE_EXEC_MAX)
                return fk_error_set(err, -E2BIG, "jail: too many pre-exec hooks");
        r = agent_jail_uid(cfg, p->key, p->state_dir, &j->uid);
        if (r < 0)
                return fk_error_set(err, r, "jail: no uid for %s in [%u, %u): %s", p->key,
                                    cfg->jail_uid_base, cfg->jail_uid_base + cfg->jail_uid_count,
                                    strerror(-r));
        r = agent_jail_setup(j, &f, p->state_dir, err);
        if (r < 0)
                return r;
        p->jail_uid = j->uid;
        p->pre_exec[p->n_pre_exec++] = (struct agent_pre_exec){agent_jail_pre_exec, j, "jail"};
        return 0;
}
