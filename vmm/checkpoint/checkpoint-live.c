/* SPDX-License-Identifier: MIT */
/* Live checkpoints: the guest runs while its RAM goes into a stream file. Precopy: a migration
 * that pauses before the switch-over (the disk freezes there), then cont; its conversation is
 * driven by QEMU's events (checkpoint-live-events.c) or polled here (the benchmark's
 * baseline). Background snapshot: stop, freeze the disk, QEMU saves the devices and resumes the
 * guest under userfaultfd write protection. Setup, abort and recovery of both. */
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

/* on: the capability of mode bg (background-snapshot) or precopy (pause-before-switchover
 * unless pause is false). */
int vmm_live_set_caps(struct qmp_client *qmp, bool on, bool bg, bool pause, unsigned timeout_ms,
                      struct fk_error *err)
{
        /* x-ignore-shared off: the stream carries the RAM, so the guest may keep writing it;
         * events: MIGRATION events say when the switch-over and the completion happen */
        return qmp_execute_take(qmp, "migrate-set-capabilities",
                                json_pack("{s:[{s:s,s:b},{s:s,s:b},{s:s,s:b},{s:s,s:b}]}",
                                          "capabilities", "capability", "x-ignore-shared", "state",
                                          0, "capability", "pause-before-switchover", "state",
                                          (int)(on && !bg && pause), "capability",
                                          "background-snapshot", "state", (int)(on && bg),
                                          "capability", "events", "state", (int)(on && !bg)),
                                timeout_ms, NULL, err);
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
        return qmp_execute_take(qmp, "migrate-set-parameters",
                                json_pack("{s:I, s:I}", "downtime-limit",
                                          (json_int_t)LIVE_DOWNTIME_MS, "max-bandwidth",
                                          (json_int_t)LIVE_BANDWIDTH_MAX),
                                timeout_ms, NULL, err);
}

/* query-migrate's status into buf; *ret_info keeps the reply (new reference) when asked. */
int vmm_live_migrate_status(struct qmp_client *qmp, unsigned timeout_ms, char *buf, size_t size,
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

void vmm_live_sleep_ns(uint64_t ns)
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
                r = vmm_live_migrate_status(qmp, o->timeout_ms, st, sizeof(st), NULL, err);
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
                vmm_live_sleep_ns(o->poll_us ? o->poll_us * 1000ull : LIVE_POLL_NS);
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
                int r = vmm_live_migrate_status(qmp, timeout_ms, st, sizeof(st), &info, err);

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
                vmm_live_sleep_ns(poll_ns);
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
                vmm_live_sleep_ns(LIVE_POLL_STOP_NS);
        }
}

/* After a failure once the migration started: cancel it (QEMU restarts a guest it stopped for
 * the switch-over) and make sure the guest runs. A migration that completed (switch_after: the
 * disk switch failed after it) cannot be cancelled, and its QEMU refuses cont until it has
 * finalized: cont is sent again then. */
static void abort_live(struct qmp_client *qmp, unsigned timeout_ms)
{
        cleanup_free char *status = NULL;
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
        char st[32];

        (void)qmp_execute(qmp, "migrate_cancel", NULL, timeout_ms, NULL, NULL);
        while (fk_now_mono_ns() < deadline &&
               vmm_live_migrate_status(qmp, timeout_ms, st, sizeof(st), NULL, NULL) >= 0 &&
               (strcmp(st, "cancelling") == 0 || strcmp(st, "pre-switchover") == 0 ||
                strcmp(st, "active") == 0 || strcmp(st, "device") == 0))
                vmm_live_sleep_ns(LIVE_POLL_NS);
        if (qmp_query_status(qmp, timeout_ms, &status, NULL) < 0 || !strcmp(status, "running"))
                return;
        (void)vmm_cont_migrated(qmp, timeout_ms, NULL, NULL, NULL);
}

int vmm_live_abandon(struct qmp_client *qmp, unsigned timeout_ms, struct fk_error *err)
{
        static const char *const running[] = {"setup",  "active",     "pre-switchover",
                                              "device", "cancelling", NULL};
        bool cancel = false;
        char st[32];
        int r = vmm_live_migrate_status(qmp, timeout_ms, st, sizeof(st), NULL, err);

        if (r < 0 && r != -EIO) /* -EIO: an earlier one failed, nothing runs */
                return r;
        for (size_t i = 0; r >= 0 && running[i]; i++)
                cancel = cancel || strcmp(st, running[i]) == 0;
        if (cancel)
                abort_live(qmp, timeout_ms);
        r = vmm_live_set_caps(qmp, false, false, false, timeout_ms, err);
        /* the parameters a live checkpoint sets: an interrupted dirty bitmap reset
         * (vmm_dirty_log_reset) left max-bandwidth at 1 KiB/s, which a stop-and-copy save,
         * which sets none, would run under */
        if (r >= 0 && cancel)
                r = set_params(qmp, timeout_ms, err);
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
        r = vmm_live_set_caps(qmp, true, o->background, o->poll || !o->switch_after, o->timeout_ms,
                              err);
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
void vmm_live_step_end(struct vmm_live_stats *st, enum vmm_live_step s, uint64_t *mark)
{
        uint64_t now = fk_now_mono_ns();

        st->step_ns[s] = now - *mark;
        *mark = now;
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
                uint64_t stop = vmm_live_stopped_at(qmp, fk_now_mono_ns());

                if (stop > running_ns)
                        st->stop_ns = mark = stop;
        }
        if (r >= 0)
                vmm_live_step_end(st, VMM_LIVE_SEEN, &mark);
        if (r >= 0)
                r = run_switch(qmp, o, err);
        if (r < 0)
                return r;
        vmm_live_step_end(st, VMM_LIVE_SWITCH, &mark);
        args = json_pack("{s:s}", "state", "pre-switchover");
        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(qmp, "migrate-continue", args, o->timeout_ms, NULL, err);
        json_decref(args);
        vmm_live_step_end(st, VMM_LIVE_CONTINUE, &mark);
        if (r >= 0)
                r = wait_completed(qmp, o->timeout_ms, LIVE_POLL_STOP_NS, &st->downtime_ms,
                                   &st->polls, err);
        vmm_live_step_end(st, VMM_LIVE_COMPLETED, &mark);
        /* QEMU's migration thread sets postmigrate after "completed": a cont before that would
         * leave a running guest whose runstate says postmigrate */
        if (r >= 0)
                r = wait_runstate(qmp, "postmigrate", o->timeout_ms, &st->polls, err);
        vmm_live_step_end(st, VMM_LIVE_POSTMIGRATE, &mark);
        if (r >= 0 && o->completed)
                r = o->completed(o->userdata, err);
        vmm_live_step_end(st, VMM_LIVE_CALLBACK, &mark);
        /* postmigrate: cont reactivates the block layer and runs the guest on */
        if (r >= 0)
                r = qmp_execute(qmp, "cont", NULL, o->timeout_ms, NULL, err);
        vmm_live_step_end(st, VMM_LIVE_CONT, &mark);
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
                r = vmm_live_migrate_status(qmp, timeout_ms, st, sizeof(st), NULL, err);
                if (r < 0)
                        return r;
                if (strcmp(st, "setup") && strcmp(st, "active") && strcmp(st, "completed"))
                        return fk_error_set(err, -EIO, "background snapshot is %s", st);
                if (fk_now_mono_ns() > deadline)
                        return fk_error_set(err, -ETIMEDOUT, "the guest did not run again in %u ms",
                                            timeout_ms);
                vmm_live_sleep_ns(LIVE_POLL_NS);
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
                (void)vmm_live_set_caps(qmp, false, true, false, o->timeout_ms, NULL);
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
                (void)vmm_live_set_caps(qmp, false, o->background, false, o->timeout_ms, NULL);
                unlink(stream);
                return r;
        }
        r = o->poll ? live_run_polled(qmp, o, &st, err) : vmm_live_run_events(qmp, o, &st, err);
        if (r < 0)
                vmm_live_disarm(qmp, o, o->timeout_ms);
        qmp_drop_events(qmp, "MIGRATION");
        qmp_drop_events(qmp, "MIGRATION_PASS");
        if (r < 0)
                abort_live(qmp, o->timeout_ms);
        /* later stop-and-copy saves must not wait at a switch-over nobody continues */
        (void)vmm_live_set_caps(qmp, false, false, false, o->timeout_ms, NULL);
        if (r < 0) {
                unlink(stream);
                return r;
        }
done:
        st.total_ns = fk_now_mono_ns() - t0;
        if (stat(stream, &sb) == 0)
                st.stream_bytes = (uint64_t)sb.st_size;
        if (ret)
                *ret = st;
        return 0;
}
