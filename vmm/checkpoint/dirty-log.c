/* SPDX-License-Identifier: MIT */
/* Clearing QEMU's migration dirty bitmap of a VM with the RAM tail (vmm_config.ram_tail) while
 * nobody waits on its guest: a migration into /dev/null that is cancelled as soon as its setup
 * (which syncs the bitmap once) is done.
 *
 * Why: with the tail, QEMU 7.2 syncs the bitmap page by page, and every page it finds dirty costs
 * a scan of each vCPU's TLB, under the big lock: about 1.5 us a page here, so a 1 GiB guest whose
 * pages are all dirty stops QEMU's main loop (its network, its timers) for about 400 ms. QEMU
 * marks every page dirty when it allocates the RAM and clears a page only in a migration's sync,
 * so the first live checkpoint of every booted session paid that, in a sync while its guest ran.
 * Paid here, at boot, the first checkpoint's first sync finds only what the guest wrote since. */
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint-internal.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <string.h>

/* bytes/s while the throwaway migration runs: its setup alone (the RAM block list) is over what
 * QEMU lets through in its first 100 ms window, so no RAM page is read (reading a hole of a
 * share=on tmpfs file would allocate it) */
#define DIRTY_LOG_BANDWIDTH 1024
#define DIRTY_LOG_POLL_NS   1000000ull

static int set_bandwidth(struct qmp_client *qmp, json_int_t bw, unsigned timeout_ms,
                         struct fk_error *err)
{
        return qmp_execute_take(qmp, "migrate-set-parameters",
                                json_pack("{s:I}", "max-bandwidth", bw), timeout_ms, NULL, err);
}

/* Polls query-migrate while its status is one of busy (NULL-terminated); the last status in st,
 * the last reply in *ret_info when asked. */
static int wait_past(struct qmp_client *qmp, const char *const *busy, uint64_t deadline,
                     unsigned timeout_ms, char *st, size_t size, json_t **ret_info,
                     struct fk_error *err)
{
        for (;;) {
                json_t *info = NULL;
                bool in = false;
                int r = vmm_live_migrate_status(qmp, timeout_ms, st, size, &info, err);

                if (r < 0)
                        return r;
                for (size_t i = 0; busy[i]; i++)
                        in = in || strcmp(st, busy[i]) == 0;
                if (!in) {
                        if (ret_info)
                                *ret_info = info;
                        else
                                json_decref(info);
                        return 0;
                }
                json_decref(info);
                if (fk_now_mono_ns() > deadline)
                        return fk_error_set(err, -ETIMEDOUT, "the migration is still %s", st);
                vmm_live_sleep_ns(DIRTY_LOG_POLL_NS);
        }
}

int vmm_dirty_log_reset(struct qmp_client *qmp, unsigned timeout_ms, unsigned *ret_setup_ms,
                        struct fk_error *err)
{
        static const char *const setup[] = {"setup", NULL};
        static const char *const ending[] = {"active", "cancelling", NULL};
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
        json_t *params = NULL, *info = NULL;
        json_int_t bw;
        char st[32];
        int r, r2;

        r = qmp_execute(qmp, "query-migrate-parameters", NULL, timeout_ms, &params, err);
        if (r < 0)
                return r;
        bw = json_integer_value(json_object_get(params, "max-bandwidth"));
        json_decref(params);
        if (bw <= 0)
                return fk_error_set(err, -EPROTO, "query-migrate-parameters: no max-bandwidth");
        /* x-ignore-shared off: a share=on RAM block would be skipped, its bitmap left as is */
        r = vmm_live_set_caps(qmp, false, false, false, timeout_ms, err);
        if (r >= 0)
                r = set_bandwidth(qmp, DIRTY_LOG_BANDWIDTH, timeout_ms, err);
        if (r >= 0)
                r = vmm_migrate_start_fd(qmp, "migrate", "/dev/null", timeout_ms, err);
        if (r >= 0)
                r = wait_past(qmp, setup, deadline, timeout_ms, st, sizeof(st), &info, err);
        if (r >= 0 && strcmp(st, "active"))
                r = fk_error_set(err, -EPROTO, "the migration into /dev/null is %s, not active",
                                 st);
        /* QEMU's own measure of the setup, which the sync is nearly all of */
        if (r >= 0 && ret_setup_ms)
                *ret_setup_ms = (unsigned)json_integer_value(json_object_get(info, "setup-time"));
        json_decref(info);
        /* cancelled whatever happened, and the bandwidth put back (a stop-and-copy save and the
         * helper's do not set it) */
        (void)qmp_execute(qmp, "migrate_cancel", NULL, timeout_ms, NULL, NULL);
        r2 = wait_past(qmp, ending, deadline, timeout_ms, st, sizeof(st), NULL, r < 0 ? NULL : err);
        if (r >= 0 && r2 < 0)
                r = r2;
        r2 = set_bandwidth(qmp, bw, timeout_ms, r < 0 ? NULL : err);
        return r < 0 ? r : r2;
}
