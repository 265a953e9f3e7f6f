/* SPDX-License-Identifier: MIT */
/* The environment and THP setting a QEMU process is started with, built by a pure function from
 * struct vmm_config like its command line: restored TCG QEMUs run lean (see vmm.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "vmm/vmm.h"

#define TUNABLES_KEY "GLIBC_TUNABLES="

/* An idle restored guest under TCG needs little of what these cost: the fan-out of many forks
 * of one checkpoint is where they add up. Under KVM nothing of it applies (no code buffer;
 * vCPU threads that malloc in parallel). */
static bool lean(const struct vmm_config *c)
{
        return c->accel == VMM_ACCEL_TCG && c->incoming_defer;
}

/* "GLIBC_TUNABLES=<old>:<ours>", or the entry as it is when it already sets arena_max. */
static char *tunables_entry(const char *old)
{
        char *s = NULL;

        if (!old)
                return fk_asprintf(&s, TUNABLES_KEY "%s", VMM_LEAN_MALLOC_TUNABLE) < 0 ? NULL : s;
        if (strstr(old, "glibc.malloc.arena_max="))
                return fk_asprintf(&s, TUNABLES_KEY "%s", old) < 0 ? NULL : s;
        return fk_asprintf(&s, TUNABLES_KEY "%s%s%s", old, old[0] ? ":" : "",
                           VMM_LEAN_MALLOC_TUNABLE) < 0
                       ? NULL
                       : s;
}

/* What QEMU may read of forkletd's environment: the program search path, temporary files,
 * locale and time zone, glibc's tunables. Anything else (an operator's tokens and keys, the
 * FORKLET_* knobs) stays out of a process that runs a guest, jailed as its own uid. */
static bool passed_on(const char *entry)
{
        static const char *const keep[] = {
                "PATH=", "TMPDIR=", "TZ=", "LANG=", "LANGUAGE=", "LC_", TUNABLES_KEY};

        for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
                if (strncmp(entry, keep[i], strlen(keep[i])) == 0)
                        return true;
        return false;
}

int vmm_build_env(const struct vmm_config *cfg, char *const *base, struct vmm_exec_env *ret,
                  struct fk_error *err)
{
        const char *old_tunables = NULL;
        char **v = NULL;
        int r = 0;

        if (!cfg || !ret)
                return fk_error_set(err, -EINVAL, "vmm env: missing config");
        for (size_t i = 0; base && base[i] && r >= 0; i++) {
                if (!passed_on(base[i]))
                        continue;
                if (lean(cfg) && strncmp(base[i], TUNABLES_KEY, strlen(TUNABLES_KEY)) == 0) {
                        old_tunables = base[i] + strlen(TUNABLES_KEY);
                        continue;
                }
                r = fk_strv_push(&v, base[i]);
        }
        if (r >= 0 && lean(cfg)) {
                cleanup_free char *t = tunables_entry(old_tunables);

                r = t ? fk_strv_push(&v, t) : -ENOMEM;
        }
        /* an empty base still gives an (empty) strv, never NULL: NULL means "forkletd's" */
        if (r >= 0 && !v)
                r = (v = calloc(1, sizeof(*v))) ? 0 : -ENOMEM;
        if (r < 0) {
                fk_strv_free(v);
                return fk_error_set(err, r, "vmm env: out of memory");
        }
        *ret = (struct vmm_exec_env){.envp = v, .thp_disable = lean(cfg)};
        return 0;
}

void vmm_exec_env_done(struct vmm_exec_env *e)
{
        if (!e)
                return;
        fk_strv_free(e->envp);
        *e = (struct vmm_exec_env){0};
}
