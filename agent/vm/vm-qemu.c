/* SPDX-License-Identifier: MIT */
/* The real VM operations: boot a session microVM with vmm/ (argv, spawn, QMP, guest agent),
 * re-adopt one after a restart (from the record its boot stored), stop, pause, resume, exec. */
#include "agent/vm/vm.h"
#include "agent/obs/obs.h"
#include "agent/disk/disk.h"
#include "agent/image/image.h"
#include "agent/store/store.h"
#include "agent/jail/jail.h"
#include "agent/vm/vm-qemu.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define VM_FILE_TIMEOUT_MS 120000

static void qemu_free(void *userdata, void *vm)
{
        struct qemu_vm *q = vm;

        (void)userdata;
        if (!q)
                return;
        qmp_client_free(q->qmp);
        vmm_agent_free(q->agent);
        vmm_console_free(q->console);
        vmm_process_free(q->proc);
        free(q->console_log);
        free(q->rootfs);
        free(q->run_dir);
        free(q->mem_path);
        free(q->kernel);
        free(q->initrd);
        free(q->disk);
        free(q->tap);
        free(q->mac);
        free(q->append);
        free(q);
}

static int vmgenid_new(char out[37])
{
        uint8_t b[16];
        char h[33];
        int r;

        r = fk_random_bytes(b, sizeof(b));
        if (r < 0)
                return r;
        fk_hex(b, sizeof(b), h);
        snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
        return 0;
}

/* What identifies the VM and what it was started with, for the state store (adopt reads it). */
static json_t *qemu_record(void *vm)
{
        const struct qemu_vm *q = vm;

        return json_pack("{s:i, s:I, s:s, s:b, s:I, s:s, s:s, s:s?, s:s?, s:s?, s:s?, s:i, s:i, "
                         "s:i, s:s?, s:s?, s:I, s:b, s:b, s:b, s:b}",
                         "pid", (int)vmm_process_pid(q->proc), "startTime",
                         (json_int_t)vmm_process_start_time(q->proc), "memPath", q->mem_path,
                         "memPrivate", q->mem_private, "memBytes", (json_int_t)q->mem_bytes,
                         "kernel", q->kernel, "initrd", q->initrd, "disk", q->disk, "tap", q->tap,
                         "mac", q->mac, "append", q->append, "vcpus", (int)q->vcpus, "memoryMiB",
                         (int)q->memory_mib, "accel", q->accel, "consoleLog", q->console_log,
                         "rootfs", q->rootfs, "jailUid", (json_int_t)q->jail_uid, "balloon",
                         q->balloon, "balloonHint", q->balloon_hint, "ramTail", q->ram_tail,
                         "guestAnnounce", q->guest_announce);
}

static int dup_str(char **dst, const char *src)
{
        if (!src)
                return 0;
        *dst = strdup(src);
        return *dst ? 0 : -ENOMEM;
}

/* Records what QEMU is started with (for its record and the materialize helper). */
static int remember_config(struct qemu_vm *q, const struct agent_boot_params *p, const char *mem)
{
        q->mem_private = p->mem_private;
        q->balloon = p->balloon;
        q->balloon_hint = p->balloon && p->balloon_hint;
        /* KVM tracks dirty pages itself; TCG's tracking needs the tail (vmm.h) */
        q->ram_tail = p->restore_dir ? p->ram_tail : p->accel == VMM_ACCEL_TCG;
        /* new VMs never offer the guest announce; a restore's device is its source's */
        q->guest_announce = p->restore_dir && p->guest_announce;
        q->mem_bytes = p->mem_private && mem ? agent_space_allocated(mem) : 0;
        q->vcpus = p->vcpus;
        q->memory_mib = p->memory_mib;
        q->accel = p->accel;
        q->jail_uid = p->jail_uid;
        if (dup_str(&q->run_dir, p->run_dir) < 0 || dup_str(&q->mem_path, mem) < 0 ||
            dup_str(&q->kernel, p->kernel) < 0 || dup_str(&q->initrd, p->initrd) < 0 ||
            dup_str(&q->disk, p->disk) < 0 || dup_str(&q->tap, p->tap) < 0 ||
            dup_str(&q->mac, p->mac) < 0 || dup_str(&q->rootfs, p->rootfs) < 0 ||
            (p->rootfs ? fk_asprintf(&q->append, "forklet.root=" AGENT_ROOTFS_LABEL "%s%s",
                                     p->append ? " " : "", p->append ? p->append : "") < 0
                       : dup_str(&q->append, p->append) < 0) ||
            fk_asprintf(&q->console_log, "%s/" AGENT_CONSOLE_LOG, p->state_dir) < 0)
                return -ENOMEM;
        return 0;
}

/* vmm_process_spawn takes one hook; run the session's list in order. Async-signal-safe. */
static int run_pre_exec(void *userdata)
{
        const struct agent_boot_params *p = userdata;

        for (size_t i = 0; i < p->n_pre_exec; i++) {
                char n[] = {'h', 'o', 'o', 'k', ' ', (char)('0' + i % 10), '\0'};
                int r;

                vmm_pre_exec_step(p->pre_exec[i].step ? p->pre_exec[i].step : n, NULL);
                r = p->pre_exec[i].fn(p->pre_exec[i].userdata);
                if (r != 0)
                        return r;
        }
        return 0;
}

/* Adds the time since *t to step's in p->timing and moves *t on. */
static void lap(const struct agent_boot_params *p, enum agent_boot_step step, uint64_t *t)
{
        uint64_t now = fk_now_mono_ns();

        if (p->timing)
                p->timing->ns[step] += now - *t;
        *t = now;
}

/* A booted guest's pages are all dirty for QEMU's migration bitmap: cleared now, while nobody
 * uses the session yet, rather than in its first live checkpoint's first sync (with the RAM
 * tail that sync stops QEMU's main loop for about 1.5 us a dirty page: 400 ms for 1 GiB). Not
 * in restores: that would lengthen every fork and rollback by as much (a rolled-back session's
 * and a lone fork's is cleared once it is idle: agent/daemon/dirty-log.c). A failure only costs
 * that stall later. */
static void reset_dirty_log(struct qemu_vm *q, const char *name)
{
        struct fk_error err = {0};
        unsigned ms = 0;

        if (vmm_dirty_log_reset(q->qmp, VM_QMP_TIMEOUT_MS, &ms, &err) < 0)
                log_warning("VM %s: migration dirty bitmap not cleared (%s): its first live "
                            "checkpoint will stop its network longer",
                            name, err.msg);
        else
                log_debug("VM %s: migration dirty bitmap cleared (QEMU's sync %u ms)", name, ms);
}

static int qemu_reset_dirty_log(void *userdata, void *vm, unsigned *ret_setup_ms,
                                struct fk_error *err)
{
        struct qemu_vm *q = vm;

        (void)userdata;
        if (!q->ram_tail)
                return 1;
        return vmm_dirty_log_reset(q->qmp, VM_QMP_TIMEOUT_MS, ret_setup_ms, err);
}

unsigned qemu_disk_chain(const char *disk)
{
        unsigned depth = 0;

        if (disk && agent_disk_chain(disk, &depth, NULL) < 0)
                depth = 1;
        return depth;
}

static int spawn(const struct agent_boot_params *p, struct qemu_vm *q, struct fk_error *err)
{
        cleanup_free char *qmp = NULL, *qmp2 = NULL, *agent = NULL, *console = NULL, *mem = NULL,
                          *log = NULL;
        struct vmm_exec_env env = {0};
        char **argv = NULL;
        char guid[37];
        int r;

        if (fk_asprintf(&qmp, "%s/qmp.sock", p->run_dir) < 0 ||
            fk_asprintf(&qmp2, "%s/" VM_QMP2_SOCKET, p->run_dir) < 0 ||
            fk_asprintf(&agent, "%s/agent.sock", p->run_dir) < 0 ||
            fk_asprintf(&console, "%s/console.sock", p->run_dir) < 0 ||
            (p->mem_path ? !(mem = strdup(p->mem_path))
                         : fk_asprintf(&mem, "%s/mem.ram", p->run_dir) < 0) ||
            fk_asprintf(&log, "%s/qemu.log", p->run_dir) < 0 || vmgenid_new(guid) < 0 ||
            remember_config(q, p, mem) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        struct vmm_config c = {
                .name = p->name,
                .accel = (enum vmm_accel)p->accel,
                .vcpus = p->vcpus,
                .memory_mib = p->memory_mib,
                .kernel = p->kernel,
                .initrd = p->initrd,
                .mem_path = mem,
                .mem_share = !p->mem_private,
                .incoming_defer = p->restore_dir != NULL,
                .qmp_socket = qmp,
                .qmp2_socket = qmp2,
                .agent_socket = agent,
                .console_socket = console,
                .vmgenid = guid,
                .append = q->append, /* p->append plus forklet.root= with a rootfs */
                .rootfs = p->rootfs,
                .disk = p->disk,
                .disk_chain = qemu_disk_chain(p->disk),
                .tap = p->tap,
                .mac = p->mac,
                .sandbox = p->jail_uid != 0,
                .tb_size_mib = p->tb_size_mib,
                .balloon = p->balloon,
                .balloon_hint = q->balloon_hint,
                .ram_tail = q->ram_tail,
                .guest_announce = q->guest_announce,
        };
        uint64_t t;

        /* Under TCG the guest calibrates its TSC against emulated timers, which can stall
         * for minutes on a busy host; handing it the host's frequency avoids that. */
        if (c.accel == VMM_ACCEL_TCG && vmm_host_tsc_khz(&c.tsc_khz) < 0)
                c.tsc_khz = 0;
        c.tsc_reliable = vmm_host_tsc_invariant();
        r = vmm_build_argv(&c, &argv, err);
        if (r < 0)
                return r;
        r = vmm_build_env(&c, environ, &env, err);
        if (r < 0) {
                fk_strv_free(argv);
                return r;
        }
        t = fk_now_mono_ns();
        r = vmm_process_spawn_env(argv, &env, log, p->n_pre_exec > 0 ? run_pre_exec : NULL,
                                  (void *)p, &q->proc, err);
        fk_strv_free(argv);
        vmm_exec_env_done(&env);
        lap(p, AGENT_BOOT_STEP_SPAWN, &t);
        if (r < 0)
                return r;
        if (p->timing)
                p->timing->ns[AGENT_BOOT_STEP_PRE_EXEC] += vmm_process_pre_exec_ns(q->proc);
        if (p->spawned) {
                json_t *rec = qemu_record(q);

                r = rec ? p->spawned(p->spawned_ctx, vmm_process_pid(q->proc), rec) : -ENOMEM;
                json_decref(rec);
                if (r < 0)
                        return fk_error_set(err, r, "QEMU pid %d not recorded: %s",
                                            (int)vmm_process_pid(q->proc), strerror(-r));
        }
        /* First, so the log starts with the kernel's first line; a fresh boot rotates the
         * previous boot's log to console.log.1. */
        r = qemu_wait_started(q, p, console, err);
        if (r >= 0)
                r = vmm_console_start(console, q->console_log, AGENT_CONSOLE_MAX, true,
                                      VM_CONNECT_TIMEOUT_MS, &q->console, err);
        if (r >= 0)
                r = qmp_client_connect(qmp, VM_CONNECT_TIMEOUT_MS, &q->qmp, err);
        lap(p, AGENT_BOOT_STEP_QEMU, &t);
        if (r >= 0 && p->restore_dir)
                r = vmm_checkpoint_load(q->qmp, p->restore_dir, true, q->guest_announce,
                                        VM_CONNECT_TIMEOUT_MS, err);
        lap(p, AGENT_BOOT_STEP_RESTORE, &t);
        if (r >= 0)
                r = vmm_agent_connect(agent, VM_CONNECT_TIMEOUT_MS, &q->agent, err);
        if (r >= 0)
                r = qemu_wait_ready(q, p, log, err);
        lap(p, AGENT_BOOT_STEP_AGENT, &t);
        if (r >= 0)
                r = qemu_guest_setup(q, p, err);
        lap(p, AGENT_BOOT_STEP_IDENTITY, &t);
        if (r >= 0 && !p->restore_dir && q->ram_tail) {
                reset_dirty_log(q, p->name);
                lap(p, AGENT_BOOT_STEP_DIRTY_LOG, &t);
        }
        return r;
}

/* A cold boot whose guest lost its timer is ended and booted again, this many times at most:
 * the calibration fails only when the vCPU is starved during its 100 ms. */
#define VM_BOOT_ATTEMPTS 3

static int qemu_boot(void *userdata, const struct agent_boot_params *p, void **ret_vm,
                     struct fk_error *err)
{
        (void)userdata;
        for (unsigned attempt = 1;; attempt++) {
                struct qemu_vm *q = calloc(1, sizeof(*q));
                int r;

                if (!q)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                r = spawn(p, q, err);
                if (r >= 0) {
                        *ret_vm = q;
                        return 0;
                }
                qemu_explain_exit(q, p->run_dir, err);
                if (q->proc)
                        (void)vmm_stop(q->proc, NULL, q->qmp, 2000);
                qemu_free(NULL, q);
                if (r != -EAGAIN || attempt == VM_BOOT_ATTEMPTS)
                        return r;
                log_warning("VM %s: %s; booting it again (attempt %u of %u)", p->name, err->msg,
                            attempt + 1, VM_BOOT_ATTEMPTS);
                if (p->timing)
                        p->timing->retries++;
        }
}

bool agent_vm_guest_announce_of(const json_t *obj)
{
        const json_t *v = json_object_get(obj, "guestAnnounce");

        return !v || json_is_true(v);
}

static void read_vm_config(struct qemu_vm *q, const json_t *j)
{
        q->mem_private = json_is_true(json_object_get(j, "memPrivate"));
        /* absent in the records of older forkletds, whose QEMUs have no balloon */
        q->balloon = json_is_true(json_object_get(j, "balloon"));
        q->balloon_hint = json_is_true(json_object_get(j, "balloonHint")); /* absent: none */
        q->ram_tail = json_is_true(json_object_get(j, "ramTail"));         /* absent: none */
        q->guest_announce = agent_vm_guest_announce_of(j);
        q->mem_bytes = (uint64_t)json_integer_value(json_object_get(j, "memBytes"));
        q->vcpus = (unsigned)json_integer_value(json_object_get(j, "vcpus"));
        q->memory_mib = (unsigned)json_integer_value(json_object_get(j, "memoryMiB"));
        q->accel = (int)json_integer_value(json_object_get(j, "accel"));
        q->jail_uid = (uid_t)json_integer_value(json_object_get(j, "jailUid"));
        (void)dup_str(&q->mem_path, json_string_value(json_object_get(j, "memPath")));
        (void)dup_str(&q->kernel, json_string_value(json_object_get(j, "kernel")));
        (void)dup_str(&q->initrd, json_string_value(json_object_get(j, "initrd")));
        (void)dup_str(&q->disk, json_string_value(json_object_get(j, "disk")));
        (void)dup_str(&q->tap, json_string_value(json_object_get(j, "tap")));
        (void)dup_str(&q->mac, json_string_value(json_object_get(j, "mac")));
        (void)dup_str(&q->append, json_string_value(json_object_get(j, "append")));
        (void)dup_str(&q->console_log, json_string_value(json_object_get(j, "consoleLog")));
        (void)dup_str(&q->rootfs, json_string_value(json_object_get(j, "rootfs")));
}

/* A VM left behind by a killed forkletd may be mid-restore (a fork or rollback whose
 * migrate-incoming never finished: it can never become that session) or stopped by an
 * interrupted checkpoint (resume it: adoption reports it Running and the planner pauses it again
 * if the session is meant to be Paused). */
static int adopt_check_status(struct qemu_vm *q, struct fk_error *err)
{
        cleanup_free char *status = NULL;
        int r = qmp_query_status(q->qmp, VM_QMP_TIMEOUT_MS, &status, err);

        if (r >= 0 && strcmp(status, "inmigrate") && strcmp(status, "prelaunch") &&
            (r = vmm_live_abandon(q->qmp, VM_QMP_TIMEOUT_MS, err)) > 0) {
                /* a live checkpoint its forkletd did not finish: the source runs on */
                free(status);
                status = NULL;
                r = qmp_query_status(q->qmp, VM_QMP_TIMEOUT_MS, &status, err);
        }
        if (r < 0)
                return r;
        if (strcmp(status, "inmigrate") == 0 || strcmp(status, "prelaunch") == 0 ||
            strcmp(status, "restore-vm") == 0)
                return fk_error_set(err, -ESRCH, "QEMU pid %d never finished its restore (%s)",
                                    (int)vmm_process_pid(q->proc), status);
        if (strcmp(status, "paused") == 0 || strcmp(status, "postmigrate") == 0 ||
            strcmp(status, "finish-migrate") == 0)
                return vmm_cont_migrated(q->qmp, VM_QMP_TIMEOUT_MS, NULL, NULL, err);
        /* stopped by a disk error (1: adopted as such) or panicked (refused) */
        return qemu_health_adopt_status(q, status, err);
}

/* The file of query-block's "file": a path, or "json:{...}" when the node has options of its own
 * (drop-cache): then its "file" member's "filename". Heap or NULL. */
static char *file_of(const char *name)
{
        json_t *j;
        const char *f;
        char *path;

        if (!name || strncmp(name, "json:", 5) != 0)
                return name ? strdup(name) : NULL;
        j = json_loads(name + 5, 0, NULL);
        f = json_string_value(json_object_get(json_object_get(j, "file"), "filename"));
        path = f ? strdup(f) : NULL;
        json_decref(j);
        return path;
}

char *qemu_disk0_inserted(struct qemu_vm *q, const char *member)
{
        json_t *devs = NULL, *dev;
        char *value = NULL;
        size_t i;

        if (qmp_execute(q->qmp, "query-block", NULL, VM_QMP_TIMEOUT_MS, &devs, NULL) < 0)
                return NULL;
        json_array_foreach(devs, i, dev)
        {
                const char *name = json_string_value(json_object_get(dev, "device"));
                const char *v = json_string_value(
                        json_object_get(json_object_get(dev, "inserted"), member));

                if (!value && name && v && strcmp(name, "disk0") == 0)
                        value = strdup(v);
        }
        json_decref(devs);
        return value;
}

/* A checkpoint's disk switch that QEMU made and the killed forkletd did not record (it stores the
 * new overlay after cont): the VM writes another overlay of the same disk dir than its record
 * names. The VM's disk is QEMU's, so a later start or checkpoint builds on the file it wrote. */
static void adopt_disk(struct qemu_vm *q)
{
        cleanup_free char *file = q->disk ? qemu_disk0_inserted(q, "file") : NULL;
        cleanup_free char *top = file_of(file);
        const char *a, *b;

        if (!top || strcmp(top, q->disk) == 0 || !(a = strrchr(top, '/')) ||
            !(b = strrchr(q->disk, '/')) || a - top != b - q->disk ||
            strncmp(top, q->disk, (size_t)(a - top)) != 0 || access(top, F_OK) != 0)
                return;
        log_warning("VM pid %d writes %s, not %s as recorded: a checkpoint's disk switch the "
                    "previous forkletd did not record; taken as the VM's disk",
                    (int)vmm_process_pid(q->proc), top, q->disk);
        free(q->disk);
        q->disk = TAKE_PTR(top);
}

static int qemu_adopt(void *userdata, const char *run_dir, const json_t *record, int accel,
                      void **ret_vm, struct fk_error *err)
{
        cleanup_free char *qmp = NULL, *agent = NULL, *con_sock = NULL;
        struct fk_error con_err = {0};
        struct qemu_vm *q = NULL;
        uint64_t start = 0;
        pid_t pid = 0;
        int r;

        (void)userdata;
        (void)accel;
        if (fk_asprintf(&qmp, "%s/qmp.sock", run_dir) < 0 ||
            fk_asprintf(&agent, "%s/agent.sock", run_dir) < 0 ||
            fk_asprintf(&con_sock, "%s/console.sock", run_dir) < 0 ||
            !(q = calloc(1, sizeof(*q))) || dup_str(&q->run_dir, run_dir) < 0) {
                free(q);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        if (!json_is_integer(json_object_get(record, "pid"))) {
                qemu_free(NULL, q);
                return fk_error_set(err, -ESRCH, "the VM record names no QEMU pid");
        }
        pid = (pid_t)json_integer_value(json_object_get(record, "pid"));
        start = (uint64_t)json_integer_value(json_object_get(record, "startTime"));
        read_vm_config(q, record);
        r = vmm_process_adopt(pid, start, &q->proc);
        if (r < 0)
                fk_error_set(err, r, "QEMU pid %d is gone", (int)pid);
        /* Best effort: a VM booted by an older forkletd has a file console instead. */
        if (r >= 0 && q->console_log)
                (void)vmm_console_start(con_sock, q->console_log, AGENT_CONSOLE_MAX, false,
                                        VM_QMP_TIMEOUT_MS, &q->console, &con_err);
        if (r >= 0)
                r = qmp_client_connect(qmp, VM_QMP_TIMEOUT_MS, &q->qmp, err);
        if (r >= 0)
                r = adopt_check_status(q, err);
        if (r >= 0)
                adopt_disk(q);
        if (r >= 0)
                qemu_balloon_adopted(q);
        if (r >= 0)
                r = vmm_agent_connect(agent, VM_QMP_TIMEOUT_MS, &q->agent, err);
        /* a VM a disk error stopped cannot answer before it continues */
        if (r >= 0 && !q->health.io_stopped)
                r = vmm_agent_wait_ready(q->agent, VM_CONNECT_TIMEOUT_MS, err);
        if (r < 0) {
                if (q->proc)
                        (void)vmm_stop(q->proc, NULL, q->qmp, 2000);
                qemu_free(NULL, q);
                return r;
        }
        *ret_vm = q;
        return 0;
}

static int qemu_stop(void *userdata, void *vm, unsigned timeout_ms)
{
        struct qemu_vm *q = vm;

        (void)userdata;
        return vmm_stop(q->proc, q->agent, q->qmp, timeout_ms);
}

static int qemu_pause(void *userdata, void *vm, struct fk_error *err)
{
        (void)userdata;
        return qmp_execute(((struct qemu_vm *)vm)->qmp, "stop", NULL, VM_QMP_TIMEOUT_MS, NULL, err);
}

static int qemu_resume(void *userdata, void *vm, struct fk_error *err)
{
        struct qemu_vm *q = vm;
        int r;

        (void)userdata;
        r = qmp_execute(q->qmp, "cont", NULL, VM_QMP_TIMEOUT_MS, NULL, err);
        if (r >= 0)
                qemu_sync_clock(q);
        return r;
}

static int qemu_write_file(void *userdata, void *vm, const char *path, const void *data,
                           size_t size, unsigned mode, struct fk_error *err)
{
        (void)userdata;
        return vmm_agent_write_file(((struct qemu_vm *)vm)->agent, path, data, size, mode,
                                    VM_FILE_TIMEOUT_MS, err);
}

static int qemu_read_file(void *userdata, void *vm, const char *path, size_t max, void **ret,
                          size_t *ret_size, struct fk_error *err)
{
        (void)userdata;
        return vmm_agent_read_file(((struct qemu_vm *)vm)->agent, path, max, ret, ret_size,
                                   VM_FILE_TIMEOUT_MS, err);
}

static int qemu_exec(void *userdata, void *vm, const struct vmm_exec_request *req,
                     int (*out_fn)(int stream, const void *data, size_t size, void *ud),
                     void *out_userdata, struct vmm_exec_result *ret, struct fk_error *err)
{
        (void)userdata;
        return vmm_agent_exec(((struct qemu_vm *)vm)->agent, req, out_fn, out_userdata, ret, err);
}

static pid_t qemu_pid(void *vm)
{
        return vmm_process_pid(((struct qemu_vm *)vm)->proc);
}

static int qemu_exit_fd(void *vm)
{
        return vmm_process_fd(((struct qemu_vm *)vm)->proc);
}

static int qemu_poll_exit(void *vm, int *ret_status, const char **ret_reason)
{
        return vmm_process_poll(((struct qemu_vm *)vm)->proc, ret_status, ret_reason);
}

const struct agent_vm_ops agent_vm_ops_qemu = {
        .jailable = true,
        .boot = qemu_boot,
        .adopt = qemu_adopt,
        .record = qemu_record,
        .stop = qemu_stop,
        .pause = qemu_pause,
        .resume = qemu_resume,
        .exec = qemu_exec,
        .checkpoint = qemu_checkpoint,
        .checkpoint_bytes = qemu_checkpoint_bytes,
        .checkpoint_write = qemu_checkpoint_write,
        .snapshot_disk = qemu_snapshot_disk,
        .write_file = qemu_write_file,
        .read_file = qemu_read_file,
        .pid = qemu_pid,
        .exit_fd = qemu_exit_fd,
        .poll_exit = qemu_poll_exit,
        .health = qemu_health,
        .health_fd = qemu_health_fd,
        .ping = qemu_ping,
        .kill = qemu_kill,
        .discard = qemu_discard,
        .disk_free = qemu_disk_free,
        .ram_bytes = qemu_ram_bytes,
        .give_back = qemu_give_back,
        .compact_disk = qemu_compact_disk,
        .reset_dirty_log = qemu_reset_dirty_log,
        .free = qemu_free,
};
