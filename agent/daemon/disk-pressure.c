/* SPDX-License-Identifier: MIT */
/* DiskPressure: QEMU stops a VM whose disk write fails (werror=enospc by default). The session
 * shows Paused with Ready=False DiskIOError (exec fails at once instead of hanging), and the
 * VM continues once its disk's filesystem has diskPressure.minFreeMiB free again (resume: auto,
 * checked every few seconds) or on `forklet resume` (manual). */
#include "agent/daemon/daemon-internal.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <inttypes.h>
#include <string.h>

#define DISK_CHECK_INTERVAL_NS (2ull * 1000 * 1000 * 1000)

static void pressure_begins(struct agent_daemon *d, struct agent_session *s,
                            const struct agent_vm_health *h)
{
        const char *dev = h->io_device[0] ? h->io_device : "its disk";
        const char *why = h->io_reason[0] ? h->io_reason : "I/O error";

        s->health.io_stopped = true;
        s->health.io_resume_due = false;
        s->health.io_check_ns = agent_now_mono(d) + DISK_CHECK_INTERVAL_NS;
        if (d->cfg->disk_pressure_auto_resume)
                agent_session_set_condition(s, AGENT_COND_DISK_PRESSURE, "True",
                                            h->io_nospace ? "NoSpace" : "IOError",
                                            agent_now_real(d),
                                            "QEMU stopped the VM: a write to %s failed: %s; it "
                                            "continues once %u MiB are free where its disk is",
                                            dev, why, d->cfg->disk_pressure_min_free_mib);
        else
                agent_session_set_condition(s, AGENT_COND_DISK_PRESSURE, "True",
                                            h->io_nospace ? "NoSpace" : "IOError",
                                            agent_now_real(d),
                                            "QEMU stopped the VM: a write to %s failed: %s; free "
                                            "space, then `forklet resume %s`",
                                            dev, why, s->name);
        log_warning("session %s: QEMU stopped the VM: a write to %s failed: %s", s->key, dev, why);
}

/* Free space is back (policy auto): let the planner continue the VM. */
static void check_space(struct agent_daemon *d, struct agent_session *s)
{
        uint64_t free_bytes = 0, want = (uint64_t)d->cfg->disk_pressure_min_free_mib << 20;
        int r;

        s->health.io_check_ns = agent_now_mono(d) + DISK_CHECK_INTERVAL_NS;
        if (!d->ops.disk_free)
                return;
        r = d->ops.disk_free(d->ops.userdata, s->vm->vm, &free_bytes);
        if (r < 0) {
                log_debug("session %s: free space of its disk's filesystem: %s", s->key,
                          strerror(-r));
                return;
        }
        if (free_bytes < want)
                return;
        s->health.io_resume_due = true;
        log_info("session %s: %" PRIu64 " MiB free where its disk is; continuing the VM", s->key,
                 free_bytes >> 20);
}

static void pressure_ends(struct agent_daemon *d, struct agent_session *s)
{
        s->health.io_stopped = false;
        s->health.io_resume_due = false;
        agent_session_set_condition(s, AGENT_COND_DISK_PRESSURE, "False", "Resumed",
                                    agent_now_real(d), "%s",
                                    "the VM continues after its disk write error");
        log_info("session %s: the VM continues after its disk write error", s->key);
}

void agent_disk_pressure_observe(struct agent_daemon *d, struct agent_session *s,
                                 const struct agent_vm_health *h)
{
        if (h->io_stops > s->health.io_stops_seen) {
                agent_metrics_add_io_error_stops(h->io_stops - s->health.io_stops_seen);
                s->health.io_stops_seen = h->io_stops;
        }
        if (!h->io_stopped) {
                if (s->health.io_stopped)
                        pressure_ends(d, s);
                return;
        }
        if (!s->health.io_stopped)
                pressure_begins(d, s, h);
        /* Also after a resume that met the error again at once (the job said Running). */
        if (s->phase == SESSION_PHASE_RUNNING) {
                s->phase = SESSION_PHASE_PAUSED;
                agent_session_set_condition(s, AGENT_COND_READY, "False", "DiskIOError",
                                            agent_now_real(d), "%s",
                                            "the VM is stopped by a disk write error (see "
                                            "DiskPressure)");
        }
        if (d->cfg->disk_pressure_auto_resume && !s->health.io_resume_due &&
            agent_now_mono(d) >= s->health.io_check_ns)
                check_space(d, s);
}
