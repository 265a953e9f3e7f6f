/* SPDX-License-Identifier: MIT */
/* The waits of a QEMU's start (its sockets, then its guest agent) and what to say when it
 * ended during them. */
#include "agent/vm/vm-qemu.h"
#include "agent/jail/jail.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Whether the console said the guest kernel disabled its only timer (its boot then hangs). */
static bool lost_timer(struct qemu_vm *q)
{
        struct vmm_console_report rep;

        if (!q->console)
                return false;
        vmm_console_report(q->console, &rep);
        return rep.timer_lost > 0;
}

/* What ends a wait of a QEMU's start early, whatever it waits for: QEMU exited (when: at its
 * start, during boot; extra: after the reason) or the boot was cancelled. 0: wait on. */
static int start_ended(struct qemu_vm *q, const struct agent_boot_params *p, const char *when,
                       const char *extra, struct fk_error *err)
{
        const char *reason = NULL;
        int status = 0;

        if (vmm_process_poll(q->proc, &status, &reason) == 1)
                return fk_error_set(err, -ECHILD, "QEMU exited %s: %s%s", when,
                                    reason ? reason : "unknown", extra);
        if (p->cancel && *p->cancel)
                return fk_error_set(err, -ECANCELED, "boot cancelled");
        return 0;
}

/* Waits for the guest agent, giving up early if QEMU dies, the guest lost its timer (-EAGAIN)
 * or the session is deleted. */
int qemu_wait_ready(struct qemu_vm *q, const struct agent_boot_params *p, const char *qemu_log,
                    struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)p->boot_timeout_ms * 1000000;
        char see[300];
        int r;

        snprintf(see, sizeof(see), " (see %s)", qemu_log);
        for (;;) {
                r = vmm_agent_wait_ready(q->agent, VM_READY_STEP_MS, err);
                if (r >= 0)
                        return 0;
                if ((r = start_ended(q, p, "during boot", see, err)) < 0)
                        return r;
                if (!p->restore_dir && lost_timer(q))
                        return fk_error_set(err, -EAGAIN,
                                            "the guest kernel disabled its only timer (\"APIC "
                                            "frequency too slow\": its calibration got too little "
                                            "CPU on a busy host), so its boot would hang");
                if (fk_now_mono_ns() >= deadline) {
                        char last[FK_ERROR_MSG_MAX];

                        snprintf(last, sizeof(last), "%s", err->msg);
                        return fk_error_set(err, -ETIMEDOUT,
                                            "guest agent not ready after %u ms (%s)",
                                            p->boot_timeout_ms, last);
                }
        }
}

/* QEMU binds its sockets about two thirds into its start, which is about 85 ms of CPU here: a
 * host starting dozens of QEMUs at once, or busy with something else, can take longer than the
 * 15 s a connect waits (seen: 22 of 30 forks failed with "connect to console socket: No such
 * file or directory" under perf). So the console socket is waited for within the boot's own
 * budget, as long as QEMU lives; a QEMU that exits is reported at once. */
int qemu_wait_started(struct qemu_vm *q, const struct agent_boot_params *p, const char *socket,
                      struct fk_error *err)
{
        uint64_t t0 = fk_now_mono_ns(), deadline = t0 + (uint64_t)p->boot_timeout_ms * 1000000;
        long wait_ns = 1000000;
        int r;

        while (access(socket, F_OK) < 0) {
                if ((r = start_ended(q, p, "at its start", "", err)) < 0)
                        return r;
                if (fk_now_mono_ns() >= deadline)
                        return fk_error_set(err, -ETIMEDOUT,
                                            "QEMU pid %d did not create %s in %u s (is the host "
                                            "overloaded?)",
                                            (int)vmm_process_pid(q->proc), socket,
                                            p->boot_timeout_ms / 1000);
                nanosleep(&(struct timespec){.tv_nsec = wait_ns}, NULL);
                wait_ns = FK_MIN(2 * wait_ns, 10000000L);
        }
        if (fk_now_mono_ns() - t0 > (uint64_t)VM_CONNECT_TIMEOUT_MS * 1000000)
                log_warning("VM %s: QEMU took %.1f s to create its sockets (host overloaded?)",
                            p->name, (double)(fk_now_mono_ns() - t0) / 1e9);
        return 0;
}

/* Reads a file of ours (at most 1 MiB) from a run dir a jailed QEMU owns: it may have replaced
 * it with a symlink or its own file, which must not be believed. */
static int read_trusted(const char *path, char **ret)
{
        cleanup_close int fd = agent_jail_open_trusted(path);
        cleanup_free char *buf = NULL;
        size_t len = 0;
        ssize_t n;

        if (fd < 0)
                return fd;
        if (!(buf = malloc(1024 * 1024 + 1)))
                return -ENOMEM;
        while (len < 1024 * 1024 && (n = read(fd, buf + len, 1024 * 1024 - len)) > 0)
                len += (size_t)n;
        buf[len] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

/* When QEMU died during boot, its last stderr line says why better than a closed socket. */
void qemu_explain_exit(struct qemu_vm *q, const char *run_dir, struct fk_error *err)
{
        cleanup_free char *path = NULL, *buf = NULL;
        char *line, *end;
        int r = err->code;

        if (!q->proc || vmm_process_wait(q->proc, 500) != 1)
                return;
        if (fk_asprintf(&path, "%s/qemu.log", run_dir) < 0 || read_trusted(path, &buf) < 0)
                return;
        end = buf + strlen(buf);
        while (end > buf && (end[-1] == '\n' || end[-1] == ' '))
                *--end = '\0';
        line = strrchr(buf, '\n');
        line = line ? line + 1 : buf;
        if (*line)
                fk_error_set(err, r ? r : -ECHILD, "QEMU exited: %.160s (see %s)", line, path);
}
