/* SPDX-License-Identifier: MIT */
/* Memory back to the host: the virtio balloon inflated to the guest's free memory and deflated
 * again, which leaves those pages as holes in the RAM file. Only for a VM whose RAM backend
 * QEMU reports share=on: QEMU 7.2 punches ballooned pages out of the backing file also for a
 * private mapping (ram_block_discard_range), and a fork's file is its checkpoint's. */
#include "vmm/balloon/balloon.h"
#include "vmm/vmm.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define BALLOON_PATH       "/machine/peripheral/" VMM_BALLOON_ID
#define MEM_PATH           "/objects/mem" /* the RAM backend (vmm_build_argv: id=mem) */
#define BALLOON_QMP_MS     5000
#define BALLOON_POLL_MS    50
#define BALLOON_STALL_MS   3000       /* no growth this long: the guest gave what it could */
#define BALLOON_SLACK      (1u << 20) /* the guest's driver moves 256 pages at a time */
#define BALLOON_DEFLATE_MS 10000      /* at least, however little of timeout_ms is left */
#define STATS_POLL_MS      100
#define PAGE_MASK_4K       ((uint64_t)4095)

#define STOP_CHECK_MS 2 /* how soon a wait between polls sees *yield or *cancel */

static bool asked_to_stop(const volatile bool *flag)
{
        return flag && *flag;
}

/* ms between two polls of QEMU, cut short once *o->yield or *o->cancel is set: a request
 * waiting for the session (a pause, a rollback) used to wait out the rest of the interval,
 * 25 ms on average for BALLOON_POLL_MS. Looking at a flag costs no QMP round trip. */
static void wait_poll(const struct vmm_give_back_opts *o, unsigned ms)
{
        struct timespec ts = {.tv_nsec = STOP_CHECK_MS * 1000000L};

        for (unsigned t = 0; t < ms; t += STOP_CHECK_MS) {
                if (asked_to_stop(o->yield) || asked_to_stop(o->cancel))
                        return;
                nanosleep(&ts, NULL);
        }
}

static uint64_t after_ms(unsigned ms)
{
        return fk_now_mono_ns() + (uint64_t)ms * 1000000ull;
}

uint64_t vmm_balloon_plan(const struct vmm_give_back_opts *o, uint64_t guest_free,
                          uint64_t *ret_expected)
{
        uint64_t used, back, inflate;

        if (ret_expected)
                *ret_expected = 0;
        if (!o || guest_free > o->ram_bytes)
                return 0;
        used = o->ram_bytes - guest_free;
        back = o->host_bytes > used ? o->host_bytes - used : 0;
        inflate = guest_free > o->margin_bytes ? (guest_free - o->margin_bytes) & ~PAGE_MASK_4K : 0;
        if (back == 0 || inflate == 0 || back < o->min_bytes || inflate < o->min_bytes)
                return 0;
        if (ret_expected)
                *ret_expected = back < inflate ? back : inflate;
        return inflate;
}

/* "QMP query-balloon: DeviceNotActive: ..." is a VM without a balloon device: -ENODEV. */
static int no_device(int r, struct fk_error *err)
{
        if (r == -EIO && strstr(err->msg, "DeviceNotActive"))
                return fk_error_set(err, -ENODEV, "QEMU has no balloon device");
        return r;
}

static int qom_get(struct qmp_client *qmp, const char *path, const char *prop, json_t **ret,
                   struct fk_error *err)
{
        return qmp_execute_take(qmp, "qom-get",
                                json_pack("{s:s, s:s}", "path", path, "property", prop),
                                BALLOON_QMP_MS, ret, err);
}

static int set_poll_interval(struct qmp_client *qmp, int seconds, struct fk_error *err)
{
        json_t *args = json_pack("{s:s, s:s, s:i}", "path", BALLOON_PATH, "property",
                                 "guest-stats-polling-interval", "value", seconds);
        int r;

        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(qmp, "qom-set", args, BALLOON_QMP_MS, NULL, err);
        json_decref(args);
        if (r == -EIO && strstr(err->msg, "not found"))
                r = fk_error_set(err, -ENODEV, "QEMU has no device %s", BALLOON_PATH);
        return r;
}

/* The RAM backend is share=on: a hole punched in its file is memory given back and nothing
 * else (a private mapping's file may be a checkpoint's that forks share). */
static int check_shared(struct qmp_client *qmp, struct fk_error *err)
{
        json_t *v = NULL;
        int r = qom_get(qmp, MEM_PATH, "share", &v, err);

        if (r >= 0 && !json_is_boolean(v))
                r = fk_error_set(err, -EBADMSG, "qom-get %s share: not a boolean", MEM_PATH);
        else if (r >= 0 && !json_is_true(v))
                r = fk_error_set(err, -EPERM,
                                 "guest RAM is mapped share=off (copy-on-write on a file forks "
                                 "may share): QEMU 7.2 would punch ballooned pages out of that "
                                 "file, so its memory is not given back");
        json_decref(v);
        return r;
}

static int balloon_actual(struct qmp_client *qmp, uint64_t *ret, struct fk_error *err)
{
        json_t *v = NULL, *a;
        int r = qmp_execute(qmp, "query-balloon", NULL, BALLOON_QMP_MS, &v, err);

        a = json_object_get(v, "actual");
        if (r >= 0 && !json_is_integer(a))
                r = fk_error_set(err, -EBADMSG, "query-balloon: no \"actual\" in the reply");
        if (r >= 0)
                *ret = (uint64_t)json_integer_value(a);
        json_decref(v);
        return no_device(r, err);
}

static int set_target(struct qmp_client *qmp, uint64_t bytes, struct fk_error *err)
{
        json_t *args = json_pack("{s:I}", "value", (json_int_t)bytes);
        int r;

        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(qmp, "balloon", args, BALLOON_QMP_MS, NULL, err);
        json_decref(args);
        return no_device(r, err);
}

/* One reading of the stats; 1 and *ret when they are at least as new as since_s (host wall
 * clock seconds, QEMU's stamp), 0 when not yet. Before the guest's first report every stat is
 * 2^64-1, which jansson cannot hold: that reply fails to decode (-EBADMSG), also "not yet". */
static int read_free(struct qmp_client *qmp, int64_t since_s, uint64_t *ret, struct fk_error *err)
{
        json_t *v = NULL, *f;
        int r = qom_get(qmp, BALLOON_PATH, "guest-stats", &v, err);

        if (r == -EBADMSG)
                return 0;
        if (r < 0)
                return r;
        f = json_object_get(json_object_get(v, "stats"), "stat-free-memory");
        r = json_integer_value(json_object_get(v, "last-update")) >= since_s &&
            json_is_integer(f) && json_integer_value(f) >= 0;
        if (r)
                *ret = (uint64_t)json_integer_value(f);
        json_decref(v);
        return r;
}

/* Fresh stats from the guest's driver: QEMU asks for them while the polling interval is set
 * (at once when it is set, then every second, on the guest's clock), off again afterwards.
 * 1: none came before *o->yield or *o->cancel was set (nothing to plan with). */
static int guest_free(struct qmp_client *qmp, const struct vmm_give_back_opts *o, uint64_t *ret,
                      struct fk_error *err)
{
        int64_t since = (int64_t)(fk_now_real_ns() / 1000000000ull);
        uint64_t end = after_ms(o->timeout_ms);
        struct fk_error off_err = {0};
        bool stopped = false;
        int r = set_poll_interval(qmp, 1, err), k;

        while (r >= 0 && (r = read_free(qmp, since, ret, err)) == 0) {
                if (asked_to_stop(o->yield) || asked_to_stop(o->cancel)) {
                        stopped = true;
                        break;
                }
                if (fk_now_mono_ns() >= end) {
                        r = fk_error_set(err, -ETIMEDOUT,
                                         "the guest's balloon driver sent no memory stats in %u ms "
                                         "(virtio_balloon not loaded in the guest?)",
                                         o->timeout_ms);
                        break;
                }
                wait_poll(o, STATS_POLL_MS);
        }
        if (r == -ENODEV)
                return r;
        k = set_poll_interval(qmp, 0, &off_err);
        if (r >= 0 && k < 0) {
                *err = off_err;
                return k;
        }
        return r < 0 ? r : stopped;
}

/* Waits until the balloon holds want bytes (actual <= RAM - want, give or take a batch), stops
 * growing for BALLOON_STALL_MS, the deadline passes or *cancel or *yield is set; *ret_most: the
 * most it held; *ret_yielded: it stopped for *yield before it held want. */
static int wait_inflated(struct qmp_client *qmp, const struct vmm_give_back_opts *o, uint64_t want,
                         uint64_t end, uint64_t *ret_most, bool *ret_yielded, struct fk_error *err)
{
        uint64_t target = o->ram_bytes - want, low = o->ram_bytes, moved = fk_now_mono_ns();

        for (;;) {
                uint64_t actual;
                int r = balloon_actual(qmp, &actual, err);

                if (r < 0)
                        return r;
                if (actual < low) {
                        low = actual;
                        moved = fk_now_mono_ns();
                }
                *ret_most = o->ram_bytes > low ? o->ram_bytes - low : 0;
                if (low <= target + BALLOON_SLACK)
                        return 0;
                if (asked_to_stop(o->yield)) {
                        *ret_yielded = true;
                        return 0;
                }
                if (asked_to_stop(o->cancel) || fk_now_mono_ns() >= end ||
                    fk_now_mono_ns() - moved >= (uint64_t)BALLOON_STALL_MS * 1000000ull)
                        return 0;
                wait_poll(o, BALLOON_POLL_MS);
        }
}

/* The target back to the whole RAM, then until the guest has all of it again, or until *yield
 * or *cancel is set: the target is what matters (a checkpoint must not carry one below the RAM
 * into forks, qemu_balloon_adopted), and the guest deflates on its own. *ret_left: the wait was
 * stopped so. */
static int deflate(struct qmp_client *qmp, const struct vmm_give_back_opts *o, unsigned timeout_ms,
                   bool *ret_left, struct fk_error *err)
{
        uint64_t end = after_ms(timeout_ms), actual = 0;
        int r = set_target(qmp, o->ram_bytes, err);

        while (r >= 0) {
                if (asked_to_stop(o->yield) || asked_to_stop(o->cancel)) {
                        *ret_left = true;
                        break;
                }
                r = balloon_actual(qmp, &actual, err);
                if (r < 0 || actual >= o->ram_bytes)
                        break;
                if (fk_now_mono_ns() >= end)
                        return fk_error_set(err, -ETIMEDOUT,
                                            "the guest still holds %llu KiB in the balloon after "
                                            "%u ms (it deflates on its own)",
                                            (unsigned long long)((o->ram_bytes - actual) >> 10),
                                            timeout_ms);
                wait_poll(o, BALLOON_POLL_MS);
        }
        return r;
}

int vmm_balloon_reset(struct qmp_client *qmp, uint64_t ram_bytes, struct fk_error *err)
{
        return set_target(qmp, ram_bytes, err);
}

int vmm_balloon_give_back(struct qmp_client *qmp, const struct vmm_give_back_opts *o,
                          struct vmm_give_back_stats *ret, struct fk_error *err)
{
        struct vmm_give_back_stats st = {0};
        struct fk_error derr = {0};
        uint64_t inflate, start, end;
        int r, k;

        if (!qmp || !o || !o->ram_bytes)
                return fk_error_set(err, -EINVAL, "give back: no QMP client or RAM size");
        end = after_ms(o->timeout_ms);
        r = check_shared(qmp, err);
        if (r >= 0)
                r = guest_free(qmp, o, &st.guest_free, err);
        if (r > 0) {
                /* asked to stop before the stats came: the balloon was not touched */
                st.yielded = asked_to_stop(o->yield);
                st.skipped = true;
                if (ret)
                        *ret = st;
                return 0;
        }
        inflate = r >= 0 ? vmm_balloon_plan(o, st.guest_free, &st.expected) : 0;
        st.skipped = r >= 0 && inflate == 0;
        if (r < 0 || inflate == 0) {
                if (ret)
                        *ret = st;
                return r;
        }
        start = fk_now_mono_ns();
        r = set_target(qmp, o->ram_bytes - inflate, err);
        if (r >= 0)
                r = wait_inflated(qmp, o, inflate, end, &st.ballooned, &st.yielded, err);
        st.inflate_ns = fk_now_mono_ns() - start;
        /* whatever happened: the target goes back to the whole RAM */
        start = fk_now_mono_ns();
        k = deflate(qmp, o, FK_MAX(o->timeout_ms, BALLOON_DEFLATE_MS), &st.deflating, &derr);
        st.deflate_ns = fk_now_mono_ns() - start;
        if (r >= 0 && k < 0) {
                *err = derr;
                r = k;
        }
        if (ret)
                *ret = st;
        return r;
}
