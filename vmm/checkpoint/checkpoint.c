/* SPDX-License-Identifier: MIT */
/* The fork engine's QEMU half: save a paused VM's device state next to a sparse copy of its
 * shared RAM file, and load such a checkpoint into a QEMU started with -incoming defer. */
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

#define MIGRATE_POLL_NS 2000000ull /* 2 ms */

static int set_ignore_shared(struct qmp_client *qmp, bool on, unsigned timeout_ms,
                             struct fk_error *err)
{
        return qmp_execute_take(qmp, "migrate-set-capabilities",
                                json_pack("{s:[{s:s,s:b}]}", "capabilities", "capability",
                                          "x-ignore-shared", "state", on),
                                timeout_ms, NULL, err);
}

/* After an incoming migration QEMU announces the VM's NICs to the network: its own RARP for
 * each, and virtio-net asks the guest (VIRTIO_NET_F_GUEST_ANNOUNCE) to send gratuitous ARP
 * and IPv6 neighbour advertisements, 5 rounds over about a second. That is for a VM that moved
 * to another host's switch port. A checkpoint's copy keeps its MAC behind a tap of its own (a
 * fork: a new netns; a rollback: the same one), where the host side resolves it on demand, so
 * the rounds only cost the restored guest: network code it translates anew under TCG and the
 * pages it writes. announce-rounds 0 turns them off (QEMU 7.2: virtio-net's post-load and the
 * RARP timer both take it from the incoming side's parameters). But where the device offers the
 * guest announce (guest_announce: a VM of an older release), QEMU 7.2's post-load then frees
 * virtio-net's announce timer, and the guest's next reset of the NIC (its poweroff) crashes
 * QEMU in timer_del(NULL): such a restore keeps one round. */
static int no_announce(struct qmp_client *qmp, bool guest_announce, unsigned timeout_ms,
                       struct fk_error *err)
{
        return qmp_execute_take(qmp, "migrate-set-parameters",
                                json_pack("{s:i}", "announce-rounds", guest_announce ? 1 : 0),
                                timeout_ms, NULL, err);
}

/* Polls query-migrate until "completed" (0), "failed"/"cancelled" (-EIO), or the timeout. */
static int wait_migration(struct qmp_client *qmp, unsigned timeout_ms, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

        for (;;) {
                json_t *ret = NULL;
                const char *status;
                int r = qmp_execute(qmp, "query-migrate", NULL, timeout_ms, &ret, err);

                if (r < 0)
                        return r;
                status = json_string_value(json_object_get(ret, "status"));
                if (status && strcmp(status, "completed") == 0) {
                        json_decref(ret);
                        return 0;
                }
                if (status && (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0)) {
                        const char *desc = json_string_value(json_object_get(ret, "error-desc"));

                        r = fk_error_set(err, -EIO, "migration %s: %s", status,
                                         desc ? desc : "no reason given");
                        json_decref(ret);
                        return r;
                }
                json_decref(ret);
                if (fk_now_mono_ns() > deadline)
                        return fk_error_set(err, -ETIMEDOUT, "migration did not complete in %u ms",
                                            timeout_ms);
                struct timespec ts = {0, MIGRATE_POLL_NS};
                nanosleep(&ts, NULL);
        }
}

/* Migration through a file forkletd opens and hands to QEMU (getfd + "fd:"): a sandboxed QEMU
 * may neither spawn the "exec:cat" helper (-sandbox spawn=deny) nor open paths of ours. QEMU
 * 7.2 has no file: transport (8.2); fd: on a regular file works both ways. */
int vmm_migrate_start_fd(struct qmp_client *qmp, const char *command, const char *path,
                         unsigned timeout_ms, struct fk_error *err)
{
        bool out = strcmp(command, "migrate") == 0;
        cleanup_close int fd = out ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
                                   : open(path, O_RDONLY | O_CLOEXEC);
        json_t *args;
        int r;

        if (fd < 0)
                return fk_error_set(err, -errno, "open %s: %s", path, strerror(errno));
        args = json_pack("{s:s}", "fdname", "fk-migrate");
        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute_with_fd(qmp, "getfd", args, fd, timeout_ms, NULL, err);
        json_decref(args);
        if (r < 0)
                return r;
        args = json_pack("{s:s}", "uri", "fd:fk-migrate");
        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(qmp, command, args, timeout_ms, NULL, err);
        json_decref(args);
        if (r < 0) {
                json_t *c = json_pack("{s:s}", "fdname", "fk-migrate");

                (void)qmp_execute(qmp, "closefd", c, timeout_ms, NULL, NULL);
                json_decref(c);
                return r;
        }
        return 0;
}

static int migrate_fd(struct qmp_client *qmp, const char *command, const char *path,
                      unsigned timeout_ms, struct fk_error *err)
{
        int r = vmm_migrate_start_fd(qmp, command, path, timeout_ms, err);

        return r < 0 ? r : wait_migration(qmp, timeout_ms, err);
}

/* The capability must be set on both ends before the stream starts. */
static int migrate_file(struct qmp_client *qmp, const char *command, const char *path,
                        bool ignore_shared, unsigned timeout_ms, struct fk_error *err)
{
        int r = set_ignore_shared(qmp, ignore_shared, timeout_ms, err);

        return r < 0 ? r : migrate_fd(qmp, command, path, timeout_ms, err);
}

static int save_locked(struct qmp_client *qmp, const char *mem_path, const char *dir,
                       unsigned timeout_ms, struct vmm_checkpoint_stats *stats,
                       struct fk_error *err)
{
        cleanup_free char *state = NULL, *ram = NULL;
        struct vmm_copy_stats copy = {0};
        struct stat st;
        int r;

        if (fk_asprintf(&state, "%s/state", dir) < 0 || fk_asprintf(&ram, "%s/ram", dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = migrate_file(qmp, "migrate", state, true, timeout_ms, err);
        if (r < 0)
                return r;
        r = vmm_sparse_copy(mem_path, ram, 0, &copy);
        if (r < 0)
                return fk_error_set(err, r, "copy RAM %s -> %s: %s", mem_path, ram, strerror(-r));
        stats->ram_bytes = copy.written_bytes;
        if (stat(state, &st) < 0)
                return fk_error_set(err, -errno, "device state %s missing", state);
        stats->state_bytes = (uint64_t)st.st_size;
        return 0;
}

int vmm_cont_migrated(struct qmp_client *qmp, unsigned timeout_ms, unsigned *refused,
                      uint64_t *last_refused_ns, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

        for (;;) {
                struct fk_error e = {0};
                uint64_t t = fk_now_mono_ns();
                int r = qmp_execute(qmp, "cont", NULL, timeout_ms, NULL, &e);

                if (r != -EIO || !strstr(e.msg, "not finalized")) {
                        if (r < 0 && err)
                                *err = e;
                        return r;
                }
                if (refused)
                        ++*refused;
                if (last_refused_ns)
                        *last_refused_ns = fk_now_mono_ns();
                if (t > deadline)
                        return fk_error_set(err, -ETIMEDOUT,
                                            "QEMU did not finalize the migration in %u ms",
                                            timeout_ms);
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
        }
}

int vmm_checkpoint_save(struct qmp_client *qmp, const char *mem_path, const char *dir,
                        unsigned timeout_ms, struct vmm_checkpoint_stats *ret, struct fk_error *err)
{
        struct vmm_checkpoint_stats stats = {0};
        struct fk_error cont_err = {0};
        cleanup_free char *status = NULL;
        bool was_running;
        uint64_t t0;
        int r, k;

        r = qmp_query_status(qmp, timeout_ms, &status, err);
        if (r < 0)
                return r;
        was_running = strcmp(status, "running") == 0;
        t0 = fk_now_mono_ns();
        if (was_running) {
                r = qmp_execute(qmp, "stop", NULL, timeout_ms, NULL, err);
                if (r < 0)
                        return r;
        }
        r = save_locked(qmp, mem_path, dir, timeout_ms, &stats, err);
        /* A failed checkpoint must leave the session as it was: always resume. */
        if (was_running) {
                k = vmm_cont_migrated(qmp, timeout_ms, NULL, NULL, &cont_err);
                if (k < 0 && r >= 0) {
                        if (err)
                                *err = cont_err;
                        r = k;
                }
        }
        stats.pause_ns = fk_now_mono_ns() - t0;
        if (r < 0)
                return r;
        if (ret)
                *ret = stats;
        return 0;
}

int vmm_checkpoint_load(struct qmp_client *qmp, const char *dir, bool resume, bool guest_announce,
                        unsigned timeout_ms, struct fk_error *err)
{
        cleanup_free char *state = NULL;
        int r;

        if (fk_asprintf(&state, "%s/state", dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = no_announce(qmp, guest_announce, timeout_ms, err);
        if (r >= 0)
                r = migrate_file(qmp, "migrate-incoming", state, true, timeout_ms, err);
        if (r < 0)
                return r;
        /* The source was stopped when saved, so the loaded VM is paused. */
        if (resume)
                return qmp_execute(qmp, "cont", NULL, timeout_ms, NULL, err);
        return 0;
}

int vmm_migrate_save_file(struct qmp_client *qmp, const char *path, bool ignore_shared,
                          unsigned timeout_ms, struct fk_error *err)
{
        return migrate_file(qmp, "migrate", path, ignore_shared, timeout_ms, err);
}

int vmm_migrate_load_file(struct qmp_client *qmp, const char *path, bool ignore_shared,
                          unsigned timeout_ms, struct fk_error *err)
{
        return migrate_file(qmp, "migrate-incoming", path, ignore_shared, timeout_ms, err);
}
