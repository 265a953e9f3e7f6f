/* SPDX-License-Identifier: MIT */
/* Checkpoints of a running QEMU: the choice of path (live in vm-qemu-live.c, stop-and-copy
 * here: pause, move the disk onto a new overlay, save device state and RAM, resume), the
 * Writing phase (a fork's private RAM materialized through a helper QEMU), and filesystem
 * snapshots (fsfreeze, move the disk, thaw). */
#include "agent/vm/vm.h"
#include "agent/disk/disk.h"
#include "agent/store/store.h"
#include "agent/vm/vm-qemu.h"
#include "agent/jail/jail.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

#define HELPER_TIMEOUT_MS 120000

/* Grants (recorded in the session's ledger) on a layer of the session's disk dir,
 * <state_dir>/disk/<layer>: the ledger lives in <state_dir>. */
int qemu_grant_layer(uid_t uid, const char *layer, unsigned perm)
{
        cleanup_free char *state_dir = strdup(layer);
        char *slash;

        for (int i = 0; state_dir && i < 2; i++)
                if ((slash = strrchr(state_dir, '/')))
                        *slash = '\0';
        if (!state_dir)
                return -ENOMEM;
        return agent_jail_grant_logged(state_dir, layer, uid, perm);
}

int qemu_overlay_add(struct qemu_vm *q, const char *path, char node[QEMU_NODE_SIZE],
                     struct fk_error *err)
{
        json_t *args;
        int r;

        snprintf(node, QEMU_NODE_SIZE, QEMU_OVERLAY_PREFIX "%llx",
                 (unsigned long long)fk_now_mono_ns());
        /* forkletd made path; a jailed QEMU opens it as its own uid */
        if (q->jail_uid && (r = qemu_grant_layer(q->jail_uid, path, 6)) < 0)
                return fk_error_set(err, r, "jail: grant uid %u %s: %s", (unsigned)q->jail_uid,
                                    path, strerror(-r));
        /* discard as -drive gave disk0 (blockdev-add's default ignores the guest's discards:
         * deleted files would no longer shrink the overlay), the page cache kept across
         * migrations as vmm gives every file of the chain (vmm_config.disk_chain) */
        args = json_pack("{s:s, s:s, s:{s:s, s:s, s:b}, s:n, s:s}", "driver", "qcow2", "node-name",
                         node, "file", "driver", "file", "filename", path, "drop-cache", 0,
                         "backing", "discard", "unmap");
        if (!args)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = qmp_execute(q->qmp, "blockdev-add", args, VM_QMP_TIMEOUT_MS, NULL, err);
        json_decref(args);
        if (r < 0)
                node[0] = '\0';
        return r;
}

/* The VM continues on new_disk (created over the current overlay's frozen name). The frozen
 * layer stays writable to the QEMU's uid: QEMU 7.2 keeps it open O_RDWR as the new backing
 * file and reopens it so at the next cont (after a migration inactivated the block layer).
 * The new node stays the monitor's until a compaction closes it, as a live switch's does. */
static int switch_disk(struct qemu_vm *q, const char *new_disk, struct fk_error *err)
{
        char node[QEMU_NODE_SIZE];
        json_t *args;
        char *disk;
        int r = qemu_overlay_add(q, new_disk, node, err);

        if (r < 0)
                return r;
        args = json_pack("{s:s, s:s}", "node", "disk0", "overlay", node);
        if (!args || !(disk = strdup(new_disk))) {
                json_decref(args);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        r = qmp_execute(q->qmp, "blockdev-snapshot", args, VM_QMP_TIMEOUT_MS, NULL, err);
        json_decref(args);
        if (r < 0) {
                free(disk);
                args = json_pack("{s:s}", "node-name", node);
                if (args)
                        (void)qmp_execute(q->qmp, "blockdev-del", args, VM_QMP_TIMEOUT_MS, NULL,
                                          NULL);
                json_decref(args);
                return r;
        }
        free(q->disk);
        q->disk = disk;
        return 0;
}

/* What the helper's pre-exec hook does: a network namespace of its own, gone with the
 * process, where the jail makes the tap (the fork's tap0 stays with the fork); then the jail. */
struct helper_exec {
        bool netns;
        struct agent_jail *jail; /* NULL: not jailed */
};

/* Async-signal-safe (runs in the child). */
static int helper_pre_exec(void *userdata)
{
        const struct helper_exec *h = userdata;

        vmm_pre_exec_step("unshare netns", NULL);
        if (h->netns && unshare(CLONE_NEWNET) < 0)
                return -errno;
        return h->jail ? agent_jail_pre_exec(h->jail) : 0;
}

/* The helper runs jailed like the fork it serves (same uid): its RAM file is made here, owned
 * by forkletd, and lent to that uid for the helper's life (the caller revokes it). */
static int helper_jail(const struct qemu_vm *q, const char *hdir, const char *mem_path,
                       const char *disk, struct agent_jail *j, struct fk_error *err)
{
        struct agent_jail_files f = {
                .run_dir = hdir,
                .kernel = q->kernel,
                .initrd = q->initrd,
                .rootfs = q->rootfs,
                .mem_path = mem_path,
                .disk = disk,
                .tap = q->tap != NULL,
                .kvm = q->accel == VMM_ACCEL_KVM,
        };
        int fd = open(mem_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

        if (fd < 0)
                return fk_error_set(err, -errno, "create %s: %m", mem_path);
        close(fd);
        j->uid = q->jail_uid;
        return agent_jail_setup(j, &f, NULL, err);
}

/* The helper's own run dir beside the session's, <runDir>/sessions/.KEY.helper-X (X: 8 hex
 * digits of the checkpoint id in dir, ".ck_X.partial" or "ck_X"): the jail hands its run dir
 * and the files in it to QEMU's uid, which must not reach the session's run dir; helpers of
 * overlapping writes do not meet; recovery removes it with whatever QEMU names it. */
static int helper_run_dir(const struct qemu_vm *q, const char *dir, char **ret)
{
        const char *base = strrchr(dir, '/'), *ck = strstr(base ? base : dir, "ck_");
        const char *key = strrchr(q->run_dir, '/');
        int n = (int)(key ? key - q->run_dir : 0);

        return fk_asprintf(ret, "%.*s/.%s.helper-%.8s", n, q->run_dir, key ? key + 1 : "vm",
                           ck ? ck + 3 : "0");
}

int qemu_spawn_helper(const struct qemu_vm *q, const char *dir, const char *mem_path,
                      const char *disk, struct vmm_process **ret_proc, char **ret_qmp,
                      struct fk_error *err)
{
        cleanup_free char *qmp = NULL, *agent = NULL, *console = NULL, *log = NULL, *hdir = NULL;
        struct agent_jail jail = {0};
        struct helper_exec hx = {.netns = q->tap != NULL, .jail = q->jail_uid ? &jail : NULL};
        struct vmm_exec_env env = {0};
        char **argv = NULL;
        int r;

        /* Sockets in a run dir of the helper's own: unix socket paths are short (108 bytes).
         * Its stderr log is opened by forkletd, so it goes to dir (stateDir): a run dir belongs
         * to the jail uid. */
        if (helper_run_dir(q, dir, &hdir) < 0 || fk_asprintf(&qmp, "%s/qmp.sock", hdir) < 0 ||
            fk_asprintf(&agent, "%s/agent.sock", hdir) < 0 ||
            fk_asprintf(&console, "%s/console.log", hdir) < 0 ||
            fk_asprintf(&log, "%s/helper-qemu.log", dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        (void)fk_rm_rf(hdir);
        r = fk_mkdir_p(hdir, 0700);
        if (r < 0)
                return fk_error_set(err, r, "create %s: %s", hdir, strerror(-r));
        struct vmm_config c = {
                .name = "materialize",
                .accel = (enum vmm_accel)q->accel,
                .vcpus = q->vcpus,
                .memory_mib = q->memory_mib,
                .kernel = q->kernel,
                .initrd = q->initrd,
                .append = q->append,
                .mem_path = mem_path,
                .mem_share = true,
                .qmp_socket = qmp,
                .agent_socket = agent,
                .console_log = console,
                .disk = disk,
                .disk_chain = qemu_disk_chain(disk),
                /* the fork's NIC with the same offloads, on a tap in a throwaway netns */
                .tap = q->tap,
                .mac = q->mac,
                .rootfs = q->rootfs,
                .incoming_defer = true,
                /* the guest never runs here: a precopy stream was saved while its source ran,
                 * its global state says "running", and without -S QEMU starts the guest once
                 * the stream is loaded; it then ran on in the checkpoint's RAM until the
                 * device save (and crashed there: list corruption, docs/fork-engine.md) */
                .start_paused = true,
                /* same devices as the fork (the stream has a vmgenid section) */
                .vmgenid = "00000000-0000-4000-8000-000000000000",
                .sandbox = q->jail_uid != 0,
                .balloon = q->balloon, /* the stream has its section when the VM has one */
                .balloon_hint = q->balloon_hint,
                .ram_tail = q->ram_tail,             /* the stream's RAM block is the VM's size */
                .guest_announce = q->guest_announce, /* the NIC's features are the stream's */
        };
        r = hx.jail ? helper_jail(q, hdir, mem_path, disk, &jail, err) : 0;
        if (r >= 0)
                r = vmm_build_argv(&c, &argv, err);
        /* the environment a session's QEMU gets: little of forkletd's */
        if (r >= 0)
                r = vmm_build_env(&c, environ, &env, err);
        if (r >= 0)
                r = vmm_process_spawn_env(argv, &env, log,
                                          hx.netns || hx.jail ? helper_pre_exec : NULL, &hx,
                                          ret_proc, err);
        vmm_exec_env_done(&env);
        fk_strv_free(argv);
        agent_jail_done(&jail);
        if (r >= 0)
                *ret_qmp = TAKE_PTR(qmp);
        return r;
}

/* dir/helper.pid: "PID START_TIME" of the helper, so a forkletd killed meanwhile finds it on
 * its next start (agent_checkpoint_clean_writing) and ends it. */
static void helper_record(const char *dir, const struct vmm_process *proc)
{
        cleanup_free char *path = NULL;
        char buf[64];
        int n = snprintf(buf, sizeof(buf), "%d %llu\n", (int)vmm_process_pid(proc),
                         (unsigned long long)vmm_process_start_time(proc));

        if (fk_asprintf(&path, "%s/helper.pid", dir) >= 0)
                (void)fk_write_file_atomic(path, buf, (size_t)n, 0600);
}

/* The helper's guest must not have run: its RAM is the checkpoint's. */
static int helper_paused(struct qmp_client *qmp, struct fk_error *err)
{
        cleanup_free char *status = NULL;
        int r = qmp_query_status(qmp, HELPER_TIMEOUT_MS, &status, err);

        if (r >= 0 && strcmp(status, "paused"))
                r = fk_error_set(err, -EIO,
                                 "the helper QEMU's guest is %s after the load, not paused",
                                 status);
        return r;
}

/* A fork's RAM is private, so x-ignore-shared does not skip it: load the full stream once
 * into a helper QEMU whose RAM is a new share=on file (dir/ram), then save device state only. */
static int materialize(struct qemu_vm *q, const struct agent_checkpoint_params *p, const char *full,
                       struct fk_error *err)
{
        cleanup_free char *ram = NULL, *disk = NULL, *qmp_path = NULL, *state = NULL,
                          *pidfile = NULL, *hdir = NULL, *log = NULL;
        uint64_t need = agent_space_allocated(full) + AGENT_SPACE_SLACK;
        struct vmm_process *proc = NULL;
        struct qmp_client *qmp = NULL;
        struct fk_error full_err = {0};
        int r, k;

        if (fk_asprintf(&ram, "%s/ram", p->dir) < 0 ||
            fk_asprintf(&state, "%s/state", p->dir) < 0 ||
            (p->frozen_disk && fk_asprintf(&disk, "%s/helper.qcow2", p->dir) < 0))
                return fk_error_set(err, -ENOMEM, "out of memory");
        /* the helper's RAM holds what the stream holds (zero pages stay holes) */
        r = agent_space_check(p->dir, "stateDir", need, "checkpoint (materialize)", err);
        if (r >= 0 && disk)
                r = agent_disk_create_overlay(disk, p->frozen_disk, err);
        if (r >= 0)
                r = qemu_spawn_helper(q, p->dir, ram, disk, &proc, &qmp_path, err);
        if (r >= 0)
                helper_record(p->dir, proc);
        if (r >= 0)
                r = qmp_client_connect(qmp_path, HELPER_TIMEOUT_MS, &qmp, err);
        if (r >= 0)
                r = vmm_migrate_load_file(qmp, full, false, HELPER_TIMEOUT_MS, err);
        if (r >= 0)
                r = helper_paused(qmp, err);
        if (r >= 0)
                r = vmm_migrate_save_file(qmp, state, true, HELPER_TIMEOUT_MS, err);
        /* a helper that died writing its RAM (SIGBUS: the jailed uid has no root-reserved
         * blocks) on a filesystem that is full now: say so, as the check before would */
        if (r < 0 && proc &&
            agent_space_check(p->dir, "stateDir", need, "checkpoint (materialize)", &full_err) < 0)
                *err = full_err, r = full_err.code;
        if (proc) {
                (void)vmm_process_kill(proc, SIGKILL);
                (void)vmm_process_wait(proc, 10000);
        }
        qmp_client_free(qmp);
        vmm_process_free(proc);
        /* the checkpoint's RAM is forkletd's again: no QEMU may write it from now on */
        if (q->jail_uid && (k = agent_jail_revoke(ram, q->jail_uid)) < 0 && r >= 0)
                r = fk_error_set(err, k, "jail: revoke uid %u on %s: %s", (unsigned)q->jail_uid,
                                 ram, strerror(-k));
        if (disk)
                unlink(disk);
        unlink(full);
        if (fk_asprintf(&pidfile, "%s/helper.pid", p->dir) >= 0)
                unlink(pidfile);
        if (fk_asprintf(&log, "%s/helper-qemu.log", p->dir) >= 0)
                unlink(log);
        if (helper_run_dir(q, p->dir, &hdir) >= 0)
                (void)fk_rm_rf(hdir);
        return r;
}

/* Bytes in data extents of path (touched RAM of a materialized checkpoint). */
static uint64_t data_bytes(const char *path)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        off_t pos = 0, data, hole;
        uint64_t sum = 0;

        while (fd >= 0 && (data = lseek(fd, pos, SEEK_DATA)) >= 0 &&
               (hole = lseek(fd, data, SEEK_HOLE)) > data) {
                sum += (uint64_t)(hole - data);
                pos = hole;
        }
        return sum;
}

static int save_paused(struct qemu_vm *q, const struct agent_checkpoint_params *p, const char *full,
                       struct agent_checkpoint_result *res, struct fk_error *err)
{
        struct vmm_checkpoint_stats st = {0};
        int r = 0;

        /* Before the migration: a completed migration inactivates the block layer until cont.
         * (Not again when a refused live path switched it already.) */
        if (p->new_disk && !res->disk_switched) {
                r = switch_disk(q, p->new_disk, err);
                if (r < 0)
                        return r;
                res->disk_switched = true;
        }
        if (q->mem_private)
                return vmm_migrate_save_file(q->qmp, full, false, p->timeout_ms, err);
        r = vmm_checkpoint_save(q->qmp, q->mem_path, p->dir, p->timeout_ms, &st, err);
        res->ram_bytes = st.ram_bytes;
        res->state_bytes = st.state_bytes;
        return r;
}

/* FORKLET_CHECKPOINT_MODE=stop-copy forces the fallback (benchmarks compare the two). */
static bool live_wanted(void)
{
        const char *m = getenv("FORKLET_CHECKPOINT_MODE");

        return !m || strcmp(m, "stop-copy") != 0;
}

uint64_t qemu_checkpoint_bytes(void *vm)
{
        const struct qemu_vm *q = vm;
        uint64_t ram = agent_space_allocated(q->mem_path);

        /* Private RAM goes into a stream, then into the helper's RAM file: at least what the
         * fork started from (its file, as allocated at boot: the link goes once it runs) twice;
         * what it touched since shows in the stream's size (materialize checks again). */
        if (q->mem_private)
                return 2 * (ram > q->mem_bytes ? ram : q->mem_bytes);
        /* live: the stream (touched pages; the RAM file made from it is checked before the
         * helper writes it) */
        return ram;
}

/* Stop, save, cont: device state + a sparse RAM copy, or a full stream for private RAM. */
static int checkpoint_stopped(struct qemu_vm *q, const struct agent_checkpoint_params *p,
                              const char *full, struct agent_checkpoint_result *res,
                              struct fk_error *err)
{
        struct fk_error cont_err = {0};
        cleanup_free char *status = NULL;
        bool was_running;
        uint64_t t0;
        int r, k;

        r = qmp_query_status(q->qmp, VM_QMP_TIMEOUT_MS, &status, err);
        if (r < 0)
                return r;
        was_running = strcmp(status, "running") == 0;
        t0 = fk_now_mono_ns();
        if (was_running &&
            (r = qmp_execute(q->qmp, "stop", NULL, VM_QMP_TIMEOUT_MS, NULL, err)) < 0)
                return r;
        r = save_paused(q, p, full, res, err);
        /* A failed checkpoint leaves the session running. The save's migration completed (or
         * failed): QEMU takes cont once it has finalized it. */
        if (was_running) {
                k = vmm_cont_migrated(q->qmp, VM_QMP_TIMEOUT_MS, NULL, NULL, &cont_err);
                if (k < 0 && r >= 0) {
                        *err = cont_err;
                        r = k;
                }
        }
        res->pause_ns = fk_now_mono_ns() - t0;
        res->write_pending = r >= 0 && q->mem_private;
        if (!res->write_pending)
                unlink(full);
        return r;
}

int qemu_checkpoint(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                    struct agent_checkpoint_result *ret, struct fk_error *err)
{
        struct agent_checkpoint_result res = {0};
        struct qemu_vm *q = vm;
        cleanup_free char *full = NULL;
        int r = -EOPNOTSUPP;

        (void)userdata;
        if (fk_asprintf(&full, "%s/full", p->dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (live_wanted())
                r = qemu_checkpoint_live(q, p, full, &res, err);
        else
                fk_error_set(err, r, "FORKLET_CHECKPOINT_MODE=stop-copy");
        if (r == -EOPNOTSUPP) {
                memcpy(res.fallback, err->msg, sizeof(res.fallback));
                res.fallback[sizeof(res.fallback) - 1] = 0;
                *err = (struct fk_error){0};
                r = checkpoint_stopped(q, p, full, &res, err);
        }
        res.balloon = q->balloon;
        res.balloon_hint = q->balloon_hint;
        res.ram_tail = q->ram_tail;
        res.guest_announce = q->guest_announce;
        *ret = res;
        return r;
}

int qemu_checkpoint_write(void *userdata, void *vm, const struct agent_checkpoint_params *p,
                          struct agent_checkpoint_result *ret, struct fk_error *err)
{
        struct qemu_vm *q = vm;
        cleanup_free char *full = NULL, *ram = NULL, *state = NULL;
        struct stat st;
        int r;

        (void)userdata;
        if (fk_asprintf(&full, "%s/full", p->dir) < 0 || fk_asprintf(&ram, "%s/ram", p->dir) < 0 ||
            fk_asprintf(&state, "%s/state", p->dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = materialize(q, p, full, err);
        if (r < 0)
                return r;
        ret->materialized = true;
        ret->ram_bytes = data_bytes(ram);
        ret->state_bytes = stat(state, &st) == 0 ? (uint64_t)st.st_size : 0;
        return 0;
}

int qemu_snapshot_disk(void *userdata, void *vm, const char *new_disk, struct fk_error *err)
{
        struct qemu_vm *q = vm;
        struct fk_error thaw_err = {0};
        int r, k;

        (void)userdata;
        r = vmm_agent_fsfreeze(q->agent, "/workspace", true, VM_QMP_TIMEOUT_MS, err);
        if (r < 0)
                return r;
        r = switch_disk(q, new_disk, err);
        k = vmm_agent_fsfreeze(q->agent, "/workspace", false, VM_QMP_TIMEOUT_MS, &thaw_err);
        if (k < 0 && r >= 0) {
                *err = thaw_err;
                r = k;
        }
        return r;
}
