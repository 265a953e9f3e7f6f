/* SPDX-License-Identifier: MIT */
/* Live compaction of a running QEMU's disk chain: QMP block-stream of disk0 onto the chain's
 * anchor or its bottom while the guest runs, bounded and cancelled on failure; then the layers
 * QEMU no longer uses are closed (blockdev-del of the overlays a checkpoint opened) and the jail's
 * grants on them revoked. */
#include "agent/vm/vm-qemu.h"
#include "agent/disk/disk.h"
#include "agent/jail/jail.h"
#include "agent/store/store.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One job id: a stream a killed forkletd started is found again by it after adoption. */
#define COMPACT_JOB    "fk-compact"
#define POLL_MS        20
#define CANCEL_WAIT_MS 10000
#define MAX_DEL_PASSES 64

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

/* 1 while QEMU lists the compaction job, 0 once it is gone (auto-dismissed when it ended);
 * *ret_done and *ret_len (either may be NULL): its progress in bytes while listed. */
static int job_progress(struct qemu_vm *q, uint64_t *ret_done, uint64_t *ret_len,
                        struct fk_error *err)
{
        json_t *jobs = NULL, *job;
        size_t i;
        int r = qmp_execute(q->qmp, "query-block-jobs", NULL, VM_QMP_TIMEOUT_MS, &jobs, err);

        if (r < 0)
                return r;
        r = 0;
        json_array_foreach(jobs, i, job)
        {
                const char *id = json_string_value(json_object_get(job, "device"));

                if (!id || strcmp(id, COMPACT_JOB) != 0)
                        continue;
                r = 1;
                if (ret_done)
                        *ret_done = (uint64_t)json_integer_value(json_object_get(job, "offset"));
                if (ret_len)
                        *ret_len = (uint64_t)json_integer_value(json_object_get(job, "len"));
        }
        json_decref(jobs);
        return r;
}

static int job_listed(struct qemu_vm *q, struct fk_error *err)
{
        return job_progress(q, NULL, NULL, err);
}

/* Cancels the job and waits until QEMU dropped it: a cancelled stream leaves the top backed by
 * the same chain (what it copied so far is the same data). */
static int job_cancel(struct qemu_vm *q, struct fk_error *err)
{
        json_t *args = json_pack("{s:s}", "device", COMPACT_JOB);
        uint64_t end = fk_now_mono_ns() + (uint64_t)CANCEL_WAIT_MS * 1000000ull;
        struct fk_error ignored = {0};
        int r;

        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        /* it may have ended meanwhile: then there is nothing to cancel */
        (void)qmp_execute(q->qmp, "block-job-cancel", args, VM_QMP_TIMEOUT_MS, NULL, &ignored);
        json_decref(args);
        while ((r = job_listed(q, err)) > 0 && fk_now_mono_ns() < end)
                sleep_ms(POLL_MS);
        if (r > 0)
                return fk_error_set(err, -ETIMEDOUT, "the stream job %s outlived its cancel",
                                    COMPACT_JOB);
        return r;
}

/* Waits for the job (started at t0) to end: -ETIMEDOUT or -ECANCELED after cancelling it, or 0
 * with *yielded when it was cancelled for p->yield (may_yield): a request waits for a stream
 * only while its rest looks shorter than p->yield_wait_ms. */
static int job_wait(struct qemu_vm *q, const struct agent_compact_params *p, uint64_t t0,
                    uint64_t end, bool may_yield, bool *yielded, struct fk_error *err)
{
        uint64_t done = 0, len = 0;
        int r;

        while ((r = job_progress(q, &done, &len, err)) > 0) {
                uint64_t now = fk_now_mono_ns();
                bool cancel = p->cancel && *p->cancel;
                bool yield = may_yield && p->yield && *p->yield &&
                             agent_disk_stream_outlasts(now - t0, done, len,
                                                        (uint64_t)p->yield_wait_ms * 1000000ull);

                if (cancel || yield || now >= end) {
                        r = job_cancel(q, err);
                        if (r < 0)
                                return r;
                        if (cancel)
                                return fk_error_set(err, -ECANCELED,
                                                    "stream cancelled: the session is going");
                        if (yield) {
                                *yielded = true;
                                return 0;
                        }
                        return fk_error_set(err, -ETIMEDOUT, "stream cancelled after %u ms",
                                            p->timeout_ms);
                }
                sleep_ms(POLL_MS);
        }
        return r;
}

/* The name of the node of disk0's chain with depth layers below it, "" when QEMU cannot tell
 * for sure: disk0's top must have top_depth below it, and one format node only that depth.
 * block-stream's base (a file name) cannot name a layer QEMU knows by another name: the
 * overlays it opened under a workspace name that became the checkpoint's layer, and the nodes
 * with options (json:{...}), so a stream onto the anchor names its node. */
static void node_at_depth(struct qemu_vm *q, int64_t top_depth, int64_t depth,
                          char node[static QEMU_NODE_SIZE])
{
        cleanup_free char *top = qemu_disk0_inserted(q, "node-name");
        json_t *nodes = NULL, *n;
        unsigned found = 0;
        bool top_ok = false;
        size_t i;

        node[0] = '\0';
        /* not flat: QEMU 7.2 gives backing_file_depth 0 in the flat list */
        if (!top || qmp_execute(q->qmp, "query-named-block-nodes", NULL, VM_QMP_TIMEOUT_MS, &nodes,
                                NULL) < 0)
                goto out;
        json_array_foreach(nodes, i, n)
        {
                const char *drv = json_string_value(json_object_get(n, "drv"));
                const char *name = json_string_value(json_object_get(n, "node-name"));
                json_int_t d = json_integer_value(json_object_get(n, "backing_file_depth"));

                if (!drv || strcmp(drv, "file") == 0 || !name)
                        continue;
                if (strcmp(name, top) == 0)
                        top_ok = d == top_depth;
                if (d == depth && found++ == 0)
                        snprintf(node, QEMU_NODE_SIZE, "%s", name);
        }
out:
        if (!top_ok || found != 1 || strlen(node) + 1 >= QEMU_NODE_SIZE)
                node[0] = '\0';
        json_decref(nodes);
}

/* block-stream of disk0 onto files[base] (the bottom, as QEMU opened it: QEMU matches its
 * backing names; or the anchor's node), the top then naming it as name (how the chain names
 * it). */
static int stream_start(struct qemu_vm *q, char *const *files, size_t n, size_t base,
                        const char *name, uint64_t speed, struct fk_error *err)
{
        char node[QEMU_NODE_SIZE] = "";
        json_t *args;
        int r;

        if (base + 1 < n) {
                node_at_depth(q, (int64_t)n - 1, (int64_t)(n - 1 - base), node);
                if (!node[0])
                        return fk_error_set(err, -ESRCH,
                                            "QEMU's graph of disk0 does not match its chain of "
                                            "%zu files: no node for the anchor %s",
                                            n, files[base]);
        }
        args = json_pack("{s:s, s:s, s:s, s:s, s:I}", "job-id", COMPACT_JOB, "device", "disk0",
                         node[0] ? "base-node" : "base", node[0] ? node : files[base],
                         "backing-file", name, "speed", (json_int_t)speed);
        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(q->qmp, "block-stream", args, VM_QMP_TIMEOUT_MS, NULL, err);
        json_decref(args);
        return r;
}

/* The overlays a live checkpoint opened with blockdev-add stay open as long as the monitor
 * holds them, also once a stream took them out of the chain: the next migration would
 * inactivate and its cont reopen them, and QEMU would keep files forkletd revokes. A node
 * still in the chain is refused ("busy"), one that backs another only after that one went,
 * hence the passes. Best effort: returns how many were closed. */
static unsigned drop_orphans(struct qemu_vm *q)
{
        cleanup_free char *top = qemu_disk0_inserted(q, "node-name");
        unsigned closed = 0;
        bool progress = true;

        for (int pass = 0; top && progress && pass < MAX_DEL_PASSES; pass++) {
                json_t *nodes = NULL, *n;
                size_t i;

                progress = false;
                if (qmp_execute(q->qmp, "query-named-block-nodes", NULL, VM_QMP_TIMEOUT_MS, &nodes,
                                NULL) < 0)
                        break;
                json_array_foreach(nodes, i, n)
                {
                        const char *name = json_string_value(json_object_get(n, "node-name"));
                        json_t *args;

                        if (!name ||
                            strncmp(name, QEMU_OVERLAY_PREFIX, strlen(QEMU_OVERLAY_PREFIX)) ||
                            strcmp(name, top) == 0 ||
                            !(args = json_pack("{s:s}", "node-name", name)))
                                continue;
                        if (qmp_execute(q->qmp, "blockdev-del", args, VM_QMP_TIMEOUT_MS, NULL,
                                        NULL) >= 0) {
                                closed++;
                                progress = true;
                        }
                        json_decref(args);
                }
                json_decref(nodes);
        }
        return closed;
}

static bool strv_has(char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

/* Files of the top's directory (the session's disk dir) out of the live chain: QEMU no longer
 * holds them, so its uid loses them (the files stay: checkpoints and forks use them). Every
 * such file, not only what this stream dropped: one a killed forkletd's stream dropped is
 * revoked too. Returns how many lost a grant or had none. */
static unsigned revoke_dropped(const struct qemu_vm *q, char *const *chain, size_t n)
{
        cleanup_free char *dir = strdup(q->disk);
        unsigned dropped = 0;
        struct dirent *de;
        char *slash;
        DIR *dp;

        if (!dir || !(slash = strrchr(dir, '/')))
                return 0;
        *slash = '\0';
        if (!(dp = opendir(dir)))
                return 0;
        while ((de = readdir(dp))) {
                cleanup_free char *p = NULL;
                size_t len = strlen(de->d_name);

                if (len < 7 || strcmp(de->d_name + len - 6, ".qcow2") ||
                    fk_asprintf(&p, "%s/%s", dir, de->d_name) < 0 || strv_has(chain, n, p))
                        continue;
                dropped++;
                if (q->jail_uid)
                        (void)agent_jail_revoke(p, q->jail_uid);
        }
        closedir(dp);
        return dropped;
}

/* What a stream onto files[base] copies at most: the layers between the top and it. */
static uint64_t between_bytes(const uint64_t *alloc, size_t base)
{
        uint64_t sum = 0;

        for (size_t i = 1; i < base; i++)
                sum += alloc[i];
        return sum;
}

static int stream(struct qemu_vm *q, const struct agent_compact_params *p, char *const *files,
                  size_t n, size_t base, const uint64_t *alloc, struct agent_compact_result *res,
                  struct fk_error *err)
{
        cleanup_free char *name = NULL;
        uint64_t t0 = fk_now_mono_ns();
        int r;

        r = agent_space_check(q->disk, "stateDir", between_bytes(alloc, base) + AGENT_SPACE_SLACK,
                              "live disk compaction", err);
        if (r < 0)
                return r;
        if (agent_disk_backing_name(q->disk, files[base], &name) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = stream_start(q, files, n, base, name, p->speed, err);
        if (r >= 0)
                log_info("QEMU pid %d: streaming %zu disk layers into %s (onto %s, %s)",
                         (int)vmm_process_pid(q->proc), base - 1, q->disk, name,
                         base + 1 == n ? "the bottom" : "the anchor");
        if (r >= 0)
                r = job_wait(q, p, t0, t0 + (uint64_t)p->timeout_ms * 1000000ull,
                             n < p->yield_max_files, &res->yielded, err);
        res->ns = fk_now_mono_ns() - t0;
        return r;
}

/* The allocated bytes of each file of the chain (a heap array), NULL: out of memory. */
static uint64_t *allocated(char *const *files, size_t n)
{
        uint64_t *alloc = calloc(n ? n : 1, sizeof(*alloc));

        for (size_t i = 0; alloc && i < n; i++)
                alloc[i] = agent_space_allocated(files[i]);
        return alloc;
}

int qemu_compact_disk(void *userdata, void *vm, const struct agent_compact_params *p,
                      struct agent_compact_result *ret, struct fk_error *err)
{
        struct qemu_vm *q = vm;
        struct agent_compact_result res = {0};
        cleanup_free uint64_t *alloc = NULL;
        char **files = NULL;
        size_t n = 0, base;
        int r;

        (void)userdata;
        if (!q->disk)
                return 0;
        /* a stream of a forkletd killed meanwhile: QEMU ran it on; wait for its end */
        r = job_listed(q, err);
        if (r > 0) {
                res.adopted = true;
                uint64_t t0 = fk_now_mono_ns();

                r = job_wait(q, p, t0, t0 + (uint64_t)p->timeout_ms * 1000000ull, false,
                             &res.yielded, err);
        }
        if (r >= 0 && (r = agent_disk_chain_files(q->disk, &files, &n)) < 0)
                fk_error_set(err, r, "read the chain of %s: %s", q->disk, strerror(-r));
        res.depth_before = res.depth_after = (unsigned)n;
        res.top_before = agent_space_allocated(q->disk);
        if (r >= 0 && (alloc = allocated(files, n)) &&
            (base = agent_disk_stream_base(alloc, n, p->max_layers, p->checkpointed)) > 0) {
                r = stream(q, p, files, n, base, alloc, &res, err);
                /* QEMU rewrote the top's header when the stream completed: what it says now is
                 * the chain (a failure left it as it was) */
                fk_strv_free(files);
                files = NULL;
                n = 0;
                if (agent_disk_chain_files(q->disk, &files, &n) >= 0)
                        res.depth_after = (unsigned)n;
                res.streamed = r >= 0 && res.depth_after < res.depth_before;
                /* a stream that completed before its cancel counts as done */
                res.yielded = res.yielded && !res.streamed;
        }
        if (files) {
                (void)drop_orphans(q);
                res.dropped = revoke_dropped(q, files, n);
        }
        res.top_after = agent_space_allocated(q->disk);
        fk_strv_free(files);
        *ret = res;
        return r;
}
