/* SPDX-License-Identifier: MIT */
/* The precopy checkpoint's conversation driven by QEMU's MIGRATION events: no query while the
 * guest is stopped but cont, and the pause's commands armed ahead (qmp_arm: QEMU 7.2's monitor
 * reads one byte per main-loop turn), so the pause is QEMU's own work. */
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint-internal.h"
#include "vmm/checkpoint/checkpoint.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static int arm_continue(struct qmp_client *qmp, struct fk_error *err)
{
        json_t *args = json_pack("{s:s}", "state", "pre-switchover");
        int r;

        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_arm(qmp, "migrate-continue", args, err);
        json_decref(args);
        return r;
}

/* The pause's first commands, armed while the guest runs (qmp_arm): the disk freeze, and
 * migrate-continue on the second connection when there is one; with nothing to do at the
 * switch-over, migrate-continue. */
static int arm_pause(struct qmp_client *qmp, const struct vmm_live_opts *o, struct fk_error *err)
{
        int r;

        if (o->switch_command) {
                r = qmp_arm(qmp, o->switch_command, o->switch_args, err);
                if (r >= 0 && o->continue_qmp)
                        r = arm_continue(o->continue_qmp, err);
                return r;
        }
        if (o->switchover) /* it runs first: migrate-continue goes after it, not armed */
                return 0;
        return arm_continue(qmp, err);
}

/* What runs once the migration completed (switch_after), armed while the guest runs: the disk
 * freeze, and cont on the second connection when there is one (it goes after the freeze's
 * reply; one monitor parses one command at a time); with nothing to switch, cont. */
static int arm_after(struct qmp_client *qmp, const struct vmm_live_opts *o, struct fk_error *err)
{
        int r;

        if (o->switch_command) {
                r = qmp_arm(qmp, o->switch_command, o->switch_args, err);
                if (r >= 0 && o->continue_qmp)
                        r = qmp_arm(o->continue_qmp, "cont", NULL, err);
                return r;
        }
        return o->switchover ? 0 : qmp_arm(qmp, "cont", NULL, err);
}

static int arm(struct qmp_client *qmp, const struct vmm_live_opts *o, struct fk_error *err)
{
        return o->switch_after ? arm_after(qmp, o, err) : arm_pause(qmp, o, err);
}

void vmm_live_disarm(struct qmp_client *qmp, const struct vmm_live_opts *o, unsigned timeout_ms)
{
        (void)qmp_disarm(qmp, timeout_ms);
        if (o->continue_qmp)
                (void)qmp_disarm(o->continue_qmp, timeout_ms);
}

/* An event's timestamp (QEMU's realtime clock) on our monotonic clock; 0 if it has none. */
static uint64_t event_mono_ns(json_t *ev)
{
        json_t *ts = json_object_get(ev, "timestamp");
        json_int_t s = json_integer_value(json_object_get(ts, "seconds"));
        json_int_t us = json_integer_value(json_object_get(ts, "microseconds"));
        uint64_t real = fk_now_real_ns(), mono = fk_now_mono_ns();
        uint64_t at = (uint64_t)s * 1000000000ull + (uint64_t)us * 1000ull;

        if (s <= 0 || us < 0 || at > real || real - at > mono)
                return 0;
        return mono - (real - at);
}

/* When the guest stopped, by QEMU's STOP event (queued while we waited: QEMU sends it before it
 * says pre-switchover); else `fallback`. */
uint64_t vmm_live_stopped_at(struct qmp_client *qmp, uint64_t fallback)
{
        static const char *const stop[] = {"STOP", NULL};
        uint64_t at = 0;
        json_t *ev = NULL;

        while (qmp_take_event(qmp, stop, &ev) > 0) {
                at = event_mono_ns(ev);
                json_decref(ev);
        }
        return at && at <= fallback ? at : fallback;
}

static unsigned ms_until(uint64_t deadline)
{
        uint64_t now = fk_now_mono_ns();

        return now >= deadline ? 1 : (unsigned)((deadline - now + 999999) / 1000000);
}

/* Waits for the MIGRATION event whose status is want, until deadline (-ETIMEDOUT then, err
 * unset); failed or cancelled are errors (QEMU's reason from query-migrate). */
static int wait_migration(struct qmp_client *qmp, const char *want, uint64_t deadline,
                          uint64_t *ret_ns, struct fk_error *err)
{
        static const char *const names[] = {"MIGRATION", NULL};

        for (;;) {
                json_t *ev = NULL;
                char st[32];
                int r = qmp_wait_event(qmp, names, ms_until(deadline), &ev, NULL);

                if (r < 0)
                        return r == -ETIMEDOUT ? r
                                               : fk_error_set(err, r, "QMP: waiting for %s", want);
                snprintf(st, sizeof(st), "%s",
                         json_string_value(json_object_get(json_object_get(ev, "data"), "status"))
                                 ?: "?");
                json_decref(ev);
                if (strcmp(st, want) == 0) {
                        *ret_ns = fk_now_mono_ns();
                        return 0;
                }
                /* QEMU's reason needs a query: what is armed goes unrun first */
                if (strcmp(st, "failed") == 0)
                        return qmp_disarm(qmp, 5000) >= 0 &&
                                               vmm_live_migrate_status(qmp, 5000, st, sizeof(st),
                                                                       NULL, err) < 0
                                       ? -EIO
                                       : fk_error_set(err, -EIO, "migration failed");
                if (strcmp(st, "cancelling") == 0 || strcmp(st, "cancelled") == 0)
                        return fk_error_set(err, -ECANCELED, "migration %s", st);
        }
}

/* Until the switch-over (want: pre-switchover, or completed with switch_after); past
 * converge_ms the guest is stopped so the rest goes out without new dirty pages (*ret_forced). */
static int events_switchover(struct qmp_client *qmp, const struct vmm_live_opts *o,
                             const char *want, uint64_t *ret_ns, bool *ret_forced,
                             struct fk_error *err)
{
        uint64_t start = fk_now_mono_ns();
        uint64_t converge = start + (uint64_t)o->converge_ms * 1000000ull;
        uint64_t deadline = start + (uint64_t)o->timeout_ms * 1000000ull;
        int r = wait_migration(qmp, want, converge, ret_ns, err);

        if (r != -ETIMEDOUT)
                return r;
        r = qmp_disarm(qmp, o->timeout_ms);
        if (r >= 0 && o->continue_qmp)
                r = qmp_disarm(o->continue_qmp, o->timeout_ms);
        if (r < 0)
                return fk_error_set(err, r, "QMP: disarm before the stop: %s", strerror(-r));
        r = qmp_execute(qmp, "stop", NULL, o->timeout_ms, NULL, err);
        if (r >= 0)
                r = arm(qmp, o, err);
        if (r < 0)
                return r;
        *ret_forced = true;
        r = wait_migration(qmp, want, deadline, ret_ns, err);
        return r == -ETIMEDOUT ? fk_error_set(err, r,
                                              "live checkpoint did not reach the switch-over in "
                                              "%u ms",
                                              o->timeout_ms)
                               : r;
}

/* QEMU's own measure of the pause, asked once the guest runs again. */
static int query_downtime(struct qmp_client *qmp, unsigned timeout_ms, uint64_t *ret,
                          struct fk_error *err)
{
        json_t *info = NULL;
        char st[32];
        int r = vmm_live_migrate_status(qmp, timeout_ms, st, sizeof(st), &info, err);

        if (r >= 0)
                *ret = (uint64_t)json_integer_value(json_object_get(info, "downtime"));
        json_decref(info);
        return r;
}

/* The armed cont fired on c (or sent, when it could not be armed), sent again while QEMU has not
 * finalized; the refused ones count as postmigrate. The pause ends here. */
static int cont_fired(struct qmp_client *c, bool armed, const struct vmm_live_opts *o,
                      struct vmm_live_stats *st, uint64_t *mark, struct fk_error *err)
{
        uint64_t refused_ns = 0;
        int r = armed ? qmp_fire(c, o->timeout_ms, NULL, err)
                      : qmp_execute(c, "cont", NULL, o->timeout_ms, NULL, err);

        if (r == -EIO && strstr(err->msg, "not finalized")) {
                ++st->polls;
                refused_ns = fk_now_mono_ns();
                r = vmm_cont_migrated(c, o->timeout_ms, &st->polls, &refused_ns, err);
        }
        if (refused_ns) {
                st->step_ns[VMM_LIVE_POSTMIGRATE] = refused_ns - *mark;
                *mark = refused_ns;
        }
        vmm_live_step_end(st, VMM_LIVE_CONT, mark);
        st->pause_ns = *mark - st->stop_ns;
        return r;
}

/* The disk freeze with the guest stopped: the armed switch_command fired, then o->switchover;
 * the SWITCH step ends. */
static int fire_switch(struct qmp_client *qmp, const struct vmm_live_opts *o,
                       struct vmm_live_stats *st, uint64_t *mark, struct fk_error *err)
{
        int r = 0;

        if (o->switch_command)
                r = qmp_fire(qmp, o->timeout_ms, NULL, err);
        if (r >= 0 && o->switchover)
                r = o->switchover(o->userdata, err);
        vmm_live_step_end(st, VMM_LIVE_SWITCH, mark);
        return r;
}

/* switch_after: no pause before the switch-over. QEMU stops the guest, sends the last pages and
 * the devices and inactivates the disks; then, the guest still stopped, the armed disk freeze
 * and cont (on the second connection, armed too, when there is one). */
static int run_after(struct qmp_client *qmp, const struct vmm_live_opts *o,
                     struct vmm_live_stats *st, struct fk_error *err)
{
        struct qmp_client *cq = o->switch_command && o->continue_qmp ? o->continue_qmp : qmp;
        bool cont_armed = cq != qmp || (!o->switch_command && !o->switchover);
        uint64_t done = 0, mark;
        int r = arm_after(qmp, o, err);

        if (r >= 0)
                r = events_switchover(qmp, o, "completed", &done, &st->forced, err);
        if (r < 0)
                return r;
        st->stop_ns = mark = vmm_live_stopped_at(qmp, done);
        vmm_live_step_end(st, VMM_LIVE_COMPLETED, &mark);
        r = fire_switch(qmp, o, st, &mark, err);
        if (r >= 0 && o->completed)
                r = o->completed(o->userdata, err);
        vmm_live_step_end(st, VMM_LIVE_CALLBACK, &mark);
        if (r >= 0)
                r = cont_fired(cq, cont_armed, o, st, &mark, err);
        return r < 0 ? r : query_downtime(qmp, o->timeout_ms, &st->downtime_ms, err);
}

/* The precopy conversation driven by QEMU's MIGRATION events, the pause's commands armed
 * ahead (qmp_arm) and no query while the guest is stopped. Steps as live_run_polled's;
 * postmigrate is the time of the conts QEMU refused before it finalized (usually none). */
int vmm_live_run_events(struct qmp_client *qmp, const struct vmm_live_opts *o,
                        struct vmm_live_stats *st, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)o->timeout_ms * 1000000ull;
        uint64_t seen = 0, mark, done = 0;
        json_t *args;
        int r;

        if (o->switch_after)
                return run_after(qmp, o, st, err);
        r = arm_pause(qmp, o, err);
        if (r >= 0)
                r = events_switchover(qmp, o, "pre-switchover", &seen, &st->forced, err);
        if (r < 0)
                return r;
        st->stop_ns = mark = vmm_live_stopped_at(qmp, seen);
        vmm_live_step_end(st, VMM_LIVE_SEEN, &mark);
        r = fire_switch(qmp, o, st, &mark, err);
        if (r < 0)
                return r;
        if (o->switch_command && o->continue_qmp) {
                r = qmp_fire(o->continue_qmp, o->timeout_ms, NULL, err);
        } else if (o->switch_command || o->switchover) {
                args = json_pack("{s:s}", "state", "pre-switchover");
                if (!args)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                r = qmp_execute(qmp, "migrate-continue", args, o->timeout_ms, NULL, err);
                json_decref(args);
        } else {
                r = qmp_fire(qmp, o->timeout_ms, NULL, err);
        }
        vmm_live_step_end(st, VMM_LIVE_CONTINUE, &mark);
        /* cont's bytes go while QEMU writes the devices */
        if (r >= 0)
                r = qmp_arm(qmp, "cont", NULL, err);
        if (r >= 0 && (r = wait_migration(qmp, "completed", deadline, &done, err)) == -ETIMEDOUT)
                r = fk_error_set(err, r, "migration did not complete in %u ms", o->timeout_ms);
        vmm_live_step_end(st, VMM_LIVE_COMPLETED, &mark);
        if (r >= 0 && o->completed)
                r = o->completed(o->userdata, err);
        vmm_live_step_end(st, VMM_LIVE_CALLBACK, &mark);
        if (r >= 0)
                r = cont_fired(qmp, true, o, st, &mark, err);
        return r < 0 ? r : query_downtime(qmp, o->timeout_ms, &st->downtime_ms, err);
}
