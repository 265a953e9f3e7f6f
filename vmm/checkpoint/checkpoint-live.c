/* SPDX-License-Identifier: MIT */
/* Live checkpoints: the guest runs while its RAM goes into a stream file. Precopy: a migration
 * that pauses before the switch-over (the disk freezes there), then cont, driven by QEMU's
 * MIGRATION events (or polled, the benchmark's baseline). Background snapshot: stop, freeze
 * the disk, QEMU saves the devices and resumes the guest under userfaultfd write protection. */
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint-internal.h"
#include "vmm/checkpoint/checkpoint.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LIVE_POLL_NS       1000000ull  /* 1 ms: the poll bounds how late the pause is seen */
#define LIVE_POLL_STOP_NS  200000ull   /* the guest is stopped: each poll's wait is pause */
#define LIVE_DOWNTIME_MS   10          /* what QEMU may stop the guest for at the switch-over */
#define LIVE_BANDWIDTH_MAX (1ll << 40) /* bytes/s: a file, not a network (7.2 default 32 MiB/s) */

/* on: the capability of mode bg (background-snapshot) or precopy (pause-before-switchover). */
static int set_caps(struct qmp_client *qmp, bool on, bool bg, unsigned timeout_ms,
                    struct fk_error *err)
{
        /* x-ignore-shared off: the stream carries the RAM, so the guest may keep writing it;
         * events: MIGRATION events say when the switch-over and the completion happen */
        json_t *args = json_pack("{s:[{s:s,s:b},{s:s,s:b},{s:s,s:b},{s:s,s:b}]}", "capabilities",
                                 "capability", "x-ignore-shared", "state", 0, "capability",
                                 "pause-before-switchover", "state", (int)(on && !bg), "capability",
                                 "background-snapshot", "state", (int)(on && bg), "capability",
                                 "events", "state", (int)(on && !bg));
        int r;

        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(qmp, "migrate-set-capabilities", args, timeout_ms, NULL, err);
        json_decref(args);
        return r;
}

/* -EOPNOTSUPP with "what: QEMU's reason" (err->msg is the reason: copied, not read in place) */
static int refused(struct fk_error *err, const char *what)
{
        char why[sizeof(err->msg)];

        snprintf(why, sizeof(why), "%s", err->msg);
        return fk_error_set(err, -EOPNOTSUPP, "%s: %s", what, why);
}

static int set_params(struct qmp_client *qmp, unsigned timeout_ms, struct fk_error *err)
{
        json_t *args = json_pack("{s:I, s:I}", "downtime-limit", (json_int_t)LIVE_DOWNTIME_MS,
                                 "max-bandwidth", (json_int_t)LIVE_BANDWIDTH_MAX);
        int r;

        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(qmp, "migrate-set-parameters", args, timeout_ms, NULL, err);
        json_decref(args);
        return r;
}

/* query-migrate's status into buf; *ret_info keeps the reply (new reference) when asked. */
static int migrate_status(struct qmp_client *qmp, unsigned timeout_ms, char *buf, size_t size,
                          json_t **ret_info, struct fk_error *err)
{
        json_t *ret = NULL;
        const char *st;
        int r = qmp_execute(qmp, "query-migrate", NULL, timeout_ms, &ret, err);

        if (r < 0)
                return r;
        st = json_string_value(json_object_get(ret, "status"));
        snprintf(buf, size, "%s", st ? st : "none");
        if (strcmp(buf, "failed") == 0) {
                const char *desc = json_string_value(json_object_get(ret, "error-desc"));

                r = fk_error_set(err, -EIO, "migration failed: %s", desc ? desc : "no reason");
        }
        if (ret_info && r >= 0)
                *ret_info = ret;
        else
                json_decref(ret);
        return r;
}

static void sleep_ns(uint64_t ns)
{
        struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

        nanosleep(&ts, NULL);
}

/* The switch-over's work with the guest stopped: o->switch_command, then o->switchover. */
static int run_switch(struct qmp_client *qmp, const struct vmm_live_opts *o, struct fk_error *err)
{
        int r = 0;

        if (o->switch_command)
                r = qmp_execute(qmp, o->switch_command, o->switch_args, o->timeout_ms, NULL, err);
        if (r >= 0 && o->switchover)
                r = o->switchover(o->userdata, err);
        return r;
}

/* The first command of the pause, armed while the guest runs (qmp_arm): the disk freeze, or
 * migrate-continue when there is nothing to do at the switch-over. */
static int arm_first(struct qmp_client *qmp, const struct vmm_live_opts *o, struct fk_error *err)
{
        json_t *args;
        int r;

        if (o->switch_command)
                return qmp_arm(qmp, o->switch_command, o->switch_args, err);
        if (o->switchover) /* it runs first: migrate-continue goes after it, not armed */
                return 0;
        args = json_pack("{s:s}", "state", "pre-switchover");
        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_arm(qmp, "migrate-continue", args, err);
        json_decref(args);
        return r;
}

/* Polls until the migration stops before the switch-over. Past converge_ms the guest is
 * stopped so the rest goes out without new dirty pages (*ret_forced). ret_last_running_ns: the
 * monotonic time of the last reply that still saw the guest run (the pause began after it). */
static int wait_switchover(struct qmp_client *qmp, const struct vmm_live_opts *o,
                           uint64_t *ret_last_running_ns, bool *ret_forced, struct fk_error *err)
{
        uint64_t start = fk_now_mono_ns(), last = start;
        uint64_t converge = start + (uint64_t)o->converge_ms * 1000000ull;
        uint64_t deadline = start + (uint64_t)o->timeout_ms * 1000000ull;
        bool forced = false;
        char st[32];
        int r;

        for (;;) {
                r = migrate_status(qmp, o->timeout_ms, st, sizeof(st), NULL, err);
                if (r < 0)
                        return r;
                if (strcmp(st, "pre-switchover") == 0)
                        break;
                if (strcmp(st, "active") && strcmp(st, "setup"))
                        return fk_error_set(err, -EIO, "migration is %s, not pre-switchover", st);
                if (!forced)
                        last = fk_now_mono_ns();
                if (!forced && last > converge) {
                        r = qmp_execute(qmp, "stop", NULL, o->timeout_ms, NULL, err);
                        if (r < 0)
                                return r;
                        forced = true;
                }
                if (fk_now_mono_ns() > deadline)
                        return fk_error_set(
                                err, -ETIMEDOUT,
                                "live checkpoint did not reach the switch-over in %u ms",
                                o->timeout_ms);
                sleep_ns(o->poll_us ? o->poll_us * 1000ull : LIVE_POLL_NS);
        }
        *ret_last_running_ns = last;
        *ret_forced = forced;
        return 0;
}

static int wait_completed(struct qmp_client *qmp, unsigned timeout_ms, uint64_t poll_ns,
                          uint64_t *ret_downtime_ms, unsigned *polls, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
        char st[32];

        for (;;) {
                json_t *info = NULL;
                int r = migrate_status(qmp, timeout_ms, st, sizeof(st), &info, err);

                ++*polls;
                if (r < 0)
                        return r;
                if (strcmp(st, "completed") == 0) {
                        *ret_downtime_ms =
                                (uint64_t)json_integer_value(json_object_get(info, "downtime"));
                        json_decref(info);
                        return 0;
                }
                json_decref(info);
                if (strcmp(st, "device") && strcmp(st, "active") && strcmp(st, "pre-switchover"))
                        return fk_error_set(err, -EIO, "migration is %s, not completed", st);
                if (fk_now_mono_ns() > deadline)
                        return fk_error_set(err, -ETIMEDOUT, "migration did not complete in %u ms",
                                            timeout_ms);
                sleep_ns(poll_ns);
        }
}

static int wait_runstate(struct qmp_client *qmp, const char *want, unsigned timeout_ms,
                         unsigned *polls, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

        for (;;) {
                cleanup_free char *status = NULL;
                int r = qmp_query_status(qmp, timeout_ms, &status, err);

                ++*polls;
                if (r < 0)
                        return r;
                if (strcmp(status, want) == 0)
                        return 0;
                if (fk_now_mono_ns() > deadline)
                        return fk_error_set(err, -ETIMEDOUT, "the VM is %s, not %s after %u ms",
                                            status, want, timeout_ms);
                sleep_ns(LIVE_POLL_STOP_NS);
        }
}

/* After a failure once the migration started: cancel it (QEMU restarts a guest it stopped for
 * the switch-over) and make sure the guest runs. */
static void abort_live(struct qmp_client *qmp, unsigned timeout_ms)
{
        cleanup_free char *status = NULL;
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
        char st[32];

        (void)qmp_execute(qmp, "migrate_cancel", NULL, timeout_ms, NULL, NULL);
        while (fk_now_mono_ns() < deadline &&
               migrate_status(qmp, timeout_ms, st, sizeof(st), NULL, NULL) >= 0 &&
               (strcmp(st, "cancelling") == 0 || strcmp(st, "pre-switchover") == 0 ||
                strcmp(st, "active") == 0 || strcmp(st, "device") == 0))
                sleep_ns(LIVE_POLL_NS);
        if (qmp_query_status(qmp, timeout_ms, &status, NULL) >= 0 && strcmp(status, "running"))
                (void)qmp_execute(qmp, "cont", NULL, timeout_ms, NULL, NULL);
}

int vmm_live_abandon(struct qmp_client *qmp, unsigned timeout_ms, struct fk_error *err)
{
        static const char *const running[] = {"setup",  "active",     "pre-switchover",
                                              "device", "cancelling", NULL};
        bool cancel = false;
        char st[32];
        int r = migrate_status(qmp, timeout_ms, st, sizeof(st), NULL, err);

        if (r < 0 && r != -EIO) /* -EIO: an earlier one failed, nothing runs */
                return r;
        for (size_t i = 0; r >= 0 && running[i]; i++)
                cancel = cancel || strcmp(st, running[i]) == 0;
        if (cancel)
                abort_live(qmp, timeout_ms);
        r = set_caps(qmp, false, false, timeout_ms, err);
        return r < 0 ? r : cancel;
}

/* Refusals before the guest was touched: the caller may take the stop-and-copy path. */
static int live_setup(struct qmp_client *qmp, const struct vmm_live_opts *o, struct fk_error *err)
{
        cleanup_free char *status = NULL;
        int r = qmp_query_status(qmp, o->timeout_ms, &status, err);

        if (r < 0)
                return r;
        if (strcmp(status, "running"))
                return fk_error_set(err, -EOPNOTSUPP, "the VM is %s, not running", status);
        r = set_caps(qmp, true, o->background, o->timeout_ms, err);
        if (r >= 0)
                r = set_params(qmp, o->timeout_ms, err);
        return r == -EIO ? refused(err, "QEMU refused live migration") : r;
}

const char *vmm_live_step_to_string(enum vmm_live_step s)
{
        static const char *const names[_VMM_LIVE_STEP_MAX] = {[VMM_LIVE_SEEN] = "seen",
                                                              [VMM_LIVE_SWITCH] = "switch",
                                                              [VMM_LIVE_CONTINUE] = "continue",
                                                              [VMM_LIVE_COMPLETED] = "completed",
                                                              [VMM_LIVE_POSTMIGRATE] =
                                                                      "postmigrate",
                                                              [VMM_LIVE_CALLBACK] = "callback",
                                                              [VMM_LIVE_CONT] = "cont"};

        return s >= 0 && s < _VMM_LIVE_STEP_MAX ? names[s] : "?";
}

/* Ends step s of the pause: its time since *mark, and *mark moves on. */
static void step_end(struct vmm_live_stats *st, enum vmm_live_step s, uint64_t *mark)
{
        uint64_t now = fk_now_mono_ns();

        st->step_ns[s] = now - *mark;
        *mark = now;
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
static uint64_t stopped_at(struct qmp_client *qmp, uint64_t fallback)
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
                                               migrate_status(qmp, 5000, st, sizeof(st), NULL,
                                                              err) < 0
                                       ? -EIO
                                       : fk_error_set(err, -EIO, "migration failed");
                if (strcmp(st, "cancelling") == 0 || strcmp(st, "cancelled") == 0)
                        return fk_error_set(err, -ECANCELED, "migration %s", st);
        }
}

/* Until the switch-over; past converge_ms the guest is stopped so the rest goes out without new
 * dirty pages (*ret_forced). */
static int events_switchover(struct qmp_client *qmp, const struct vmm_live_opts *o,
                             uint64_t *ret_ns, bool *ret_forced, struct fk_error *err)
{
        uint64_t start = fk_now_mono_ns();
        uint64_t converge = start + (uint64_t)o->converge_ms * 1000000ull;
        uint64_t deadline = start + (uint64_t)o->timeout_ms * 1000000ull;
        int r = wait_migration(qmp, "pre-switchover", converge, ret_ns, err);

        if (r != -ETIMEDOUT)
                return r;
        r = qmp_disarm(qmp, o->timeout_ms);
        if (r < 0)
                return fk_error_set(err, r, "QMP: disarm before the stop: %s", strerror(-r));
        r = qmp_execute(qmp, "stop", NULL, o->timeout_ms, NULL, err);
        if (r >= 0)
                r = arm_first(qmp, o, err);
        if (r < 0)
                return r;
        *ret_forced = true;
        r = wait_migration(qmp, "pre-switchover", deadline, ret_ns, err);
        return r == -ETIMEDOUT ? fk_error_set(err, r,
                                              "live checkpoint did not reach the switch-over in "
                                              "%u ms",
                                              o->timeout_ms)
                               : r;
}

/* cont as soon as QEMU takes it: it refuses one until its migration thread has left
 * finish-migrate for postmigrate ("Migration is not finalized yet", QEMU >= 4.0), which is
 * what makes a cont right after the completed event safe. *refused: how many it refused. */
static int cont_when_finalized(struct qmp_client *qmp, unsigned timeout_ms, unsigned *refused,
                               uint64_t *ret_last_refused_ns, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

        for (;;) {
                uint64_t t = fk_now_mono_ns();
                int r = qmp_execute(qmp, "cont", NULL, timeout_ms, NULL, err);

                if (r != -EIO || !strstr(err->msg, "not finalized"))
                        return r;
                ++*refused;
                *ret_last_refused_ns = fk_now_mono_ns();
                if (t > deadline)
                        return fk_error_set(err, -ETIMEDOUT,
                                            "QEMU did not finalize the migration in %u ms",
                                            timeout_ms);
                sleep_ns(LIVE_POLL_STOP_NS / 2);
        }
}

/* QEMU's own measure of the pause, asked once the guest runs again. */
static int query_downtime(struct qmp_client *qmp, unsigned timeout_ms, uint64_t *ret,
                          struct fk_error *err)
{
        json_t *info = NULL;
        char st[32];
        int r = migrate_status(qmp, timeout_ms, st, sizeof(st), &info, err);

        if (r >= 0)
                *ret = (uint64_t)json_integer_value(json_object_get(info, "downtime"));
        json_decref(info);
        return r;
}

/* The precopy conversation driven by QEMU's MIGRATION events, the pause's commands armed
 * ahead (qmp_arm) and no query while the guest is stopped. Steps as live_run_polled's;
 * postmigrate is the time of the conts QEMU refused before it finalized (usually none). */
static int live_run_events(struct qmp_client *qmp, const struct vmm_live_opts *o,
                           struct vmm_live_stats *st, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)o->timeout_ms * 1000000ull;
        uint64_t seen = 0, mark, done = 0, refused_ns = 0;
        json_t *args;
        int r;

        r = arm_first(qmp, o, err);
        if (r >= 0)
                r = events_switchover(qmp, o, &seen, &st->forced, err);
        if (r < 0)
                return r;
        st->stop_ns = mark = stopped_at(qmp, seen);
        step_end(st, VMM_LIVE_SEEN, &mark);
        if (o->switch_command)
                r = qmp_fire(qmp, o->timeout_ms, NULL, err);
        if (r >= 0 && o->switchover)
                r = o->switchover(o->userdata, err);
        if (r < 0)
                return r;
        step_end(st, VMM_LIVE_SWITCH, &mark);
        if (o->switch_command || o->switchover) {
                args = json_pack("{s:s}", "state", "pre-switchover");
                if (!args)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                r = qmp_execute(qmp, "migrate-continue", args, o->timeout_ms, NULL, err);
                json_decref(args);
        } else {
                r = qmp_fire(qmp, o->timeout_ms, NULL, err);
        }
        step_end(st, VMM_LIVE_CONTINUE, &mark);
        /* cont's bytes go while QEMU writes the devices */
        if (r >= 0)
                r = qmp_arm(qmp, "cont", NULL, err);
        if (r >= 0 && (r = wait_migration(qmp, "completed", deadline, &done, err)) == -ETIMEDOUT)
                r = fk_error_set(err, r, "migration did not complete in %u ms", o->timeout_ms);
        step_end(st, VMM_LIVE_COMPLETED, &mark);
        if (r >= 0 && o->completed)
                r = o->completed(o->userdata, err);
        step_end(st, VMM_LIVE_CALLBACK, &mark);
        if (r >= 0 && (r = qmp_fire(qmp, o->timeout_ms, NULL, err)) == -EIO &&
            strstr(err->msg, "not finalized")) {
                ++st->polls;
                refused_ns = fk_now_mono_ns();
                r = cont_when_finalized(qmp, o->timeout_ms, &st->polls, &refused_ns, err);
        }
        if (refused_ns) {
                /* the refused conts are the wait for postmigrate: that step, not cont's */
                st->step_ns[VMM_LIVE_POSTMIGRATE] = refused_ns - mark;
                mark = refused_ns;
        }
        step_end(st, VMM_LIVE_CONT, &mark);
        st->pause_ns = mark - st->stop_ns;
        return r < 0 ? r : query_downtime(qmp, o->timeout_ms, &st->downtime_ms, err);
}

/* The precopy conversation by polling query-migrate and query-status (bench-live-pause's
 * baseline, vmm_live_opts.poll). */
static int live_run_polled(struct qmp_client *qmp, const struct vmm_live_opts *o,
                           struct vmm_live_stats *st, struct fk_error *err)
{
        uint64_t running_ns = 0, mark;
        json_t *args;
        int r;

        r = wait_switchover(qmp, o, &running_ns, &st->forced, err);
        /* the same start as the event-driven path: QEMU's STOP, when it came after the last
         * reply that saw the guest run */
        st->stop_ns = mark = running_ns;
        if (r >= 0) {
                uint64_t stop = stopped_at(qmp, fk_now_mono_ns());

                if (stop > running_ns)
                        st->stop_ns = mark = stop;
        }
        if (r >= 0)
                step_end(st, VMM_LIVE_SEEN, &mark);
        if (r >= 0)
                r = run_switch(qmp, o, err);
        if (r < 0)
                return r;
        step_end(st, VMM_LIVE_SWITCH, &mark);
        args = json_pack("{s:s}", "state", "pre-switchover");
        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(qmp, "migrate-continue", args, o->timeout_ms, NULL, err);
        json_decref(args);
        step_end(st, VMM_LIVE_CONTINUE, &mark);
        if (r >= 0)
                r = wait_completed(qmp, o->timeout_ms, LIVE_POLL_STOP_NS, &st->downtime_ms,
                                   &st->polls, err);
        step_end(st, VMM_LIVE_COMPLETED, &mark);
        /* QEMU's migration thread sets postmigrate after "completed": a cont before that would
         * leave a running guest whose runstate says postmigrate */
        if (r >= 0)
                r = wait_runstate(qmp, "postmigrate", o->timeout_ms, &st->polls, err);
        step_end(st, VMM_LIVE_POSTMIGRATE, &mark);
        if (r >= 0 && o->completed)
                r = o->completed(o->userdata, err);
        step_end(st, VMM_LIVE_CALLBACK, &mark);
        /* postmigrate: cont reactivates the block layer and runs the guest on */
        if (r >= 0)
                r = qmp_execute(qmp, "cont", NULL, o->timeout_ms, NULL, err);
        step_end(st, VMM_LIVE_CONT, &mark);
        st->pause_ns = mark - st->stop_ns;
        return r;
}

/* Until QEMU's snapshot thread has the guest running again (it resumes it from a bottom half
 * once write tracking is on); *ret_ns: when that was seen. */
static int wait_resumed(struct qmp_client *qmp, unsigned timeout_ms, uint64_t *ret_ns,
                        struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

        for (;;) {
                cleanup_free char *status = NULL;
                char st[32];
                int r = qmp_query_status(qmp, timeout_ms, &status, err);

                if (r < 0)
                        return r;
                if (strcmp(status, "running") == 0) {
                        *ret_ns = fk_now_mono_ns();
                        return 0;
                }
                r = migrate_status(qmp, timeout_ms, st, sizeof(st), NULL, err);
                if (r < 0)
                        return r;
                if (strcmp(st, "setup") && strcmp(st, "active") && strcmp(st, "completed"))
                        return fk_error_set(err, -EIO, "background snapshot is %s", st);
                if (fk_now_mono_ns() > deadline)
                        return fk_error_set(err, -ETIMEDOUT, "the guest did not run again in %u ms",
                                            timeout_ms);
                sleep_ns(LIVE_POLL_NS);
        }
}

/* background-snapshot: the guest stops here, the disk switches, and QEMU saves the devices,
 * write-protects the RAM (userfaultfd) and resumes the guest; pages it then writes are copied
 * into the stream first, so the stream is the RAM of the instant of the stop. */
static int bg_run(struct qmp_client *qmp, const char *stream, const struct vmm_live_opts *o,
                  struct vmm_live_stats *st, bool *ret_started, struct fk_error *err)
{
        uint64_t stop_ns, run_ns = 0;
        unsigned polls = 0; /* the guest runs meanwhile: not counted */
        int r = qmp_execute(qmp, "stop", NULL, o->timeout_ms, NULL, err);

        if (r < 0)
                return r;
        stop_ns = fk_now_mono_ns();
        r = run_switch(qmp, o, err);
        st->step_ns[VMM_LIVE_SWITCH] = fk_now_mono_ns() - stop_ns;
        if (r >= 0)
                r = vmm_migrate_start_fd(qmp, "migrate", stream, o->timeout_ms, err);
        *ret_started = r >= 0;
        if (r >= 0)
                r = wait_resumed(qmp, o->timeout_ms, &run_ns, err);
        st->pause_ns = (run_ns ? run_ns : fk_now_mono_ns()) - stop_ns;
        if (r >= 0)
                r = wait_completed(qmp, o->timeout_ms, LIVE_POLL_NS, &st->downtime_ms, &polls, err);
        return r;
}

/* background-snapshot: refused, or failed once the guest was stopped: it runs on. */
static int bg_checkpoint(struct qmp_client *qmp, const char *stream, const struct vmm_live_opts *o,
                         struct vmm_live_stats *st, struct fk_error *err)
{
        bool started = false;
        int r = bg_run(qmp, stream, o, st, &started, err);

        if (r < 0 && started)
                abort_live(qmp, o->timeout_ms);
        else if (r < 0)
                (void)qmp_execute(qmp, "cont", NULL, o->timeout_ms, NULL, NULL);
        if (r == -EIO && !started)
                r = refused(err, "QEMU refused the background snapshot");
        return r;
}

int vmm_checkpoint_live(struct qmp_client *qmp, const char *stream, const struct vmm_live_opts *o,
                        struct vmm_live_stats *ret, struct fk_error *err)
{
        struct vmm_live_stats st = {0};
        uint64_t t0 = fk_now_mono_ns();
        struct stat sb;
        int r;

        r = live_setup(qmp, o, err);
        if (r >= 0 && o->background) {
                r = bg_checkpoint(qmp, stream, o, &st, err);
                (void)set_caps(qmp, false, true, o->timeout_ms, NULL);
                if (r < 0) {
                        unlink(stream);
                        return r;
                }
                goto done;
        }
        /* what an earlier migration or pause left queued is not this one's */
        qmp_drop_events(qmp, "MIGRATION");
        qmp_drop_events(qmp, "MIGRATION_PASS");
        qmp_drop_events(qmp, "STOP");
        if (r >= 0 &&
            (r = vmm_migrate_start_fd(qmp, "migrate", stream, o->timeout_ms, err)) == -EIO)
                r = refused(err, "QEMU refused live migration");
        if (r < 0) {
                (void)set_caps(qmp, false, o->background, o->timeout_ms, NULL);
                unlink(stream);
                return r;
        }
        r = o->poll ? live_run_polled(qmp, o, &st, err) : live_run_events(qmp, o, &st, err);
        if (r < 0)
                (void)qmp_disarm(qmp, o->timeout_ms);
        qmp_drop_events(qmp, "MIGRATION");
        qmp_drop_events(qmp, "MIGRATION_PASS");
        if (r < 0)
                abort_live(qmp, o->timeout_ms);
        /* later stop-and-copy saves must not wait at a switch-over nobody continues */
        (void)set_caps(qmp, false, false, o->timeout_ms, NULL);
        if (r < 0)
                return r;
done:
        st.total_ns = fk_now_mono_ns() - t0;
        if (stat(stream, &sb) == 0)
                st.stream_bytes = (uint64_t)sb.st_size;
        if (ret)
                *ret = st;
        return 0;
}
