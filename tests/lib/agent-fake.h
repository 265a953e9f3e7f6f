/* SPDX-License-Identifier: MIT */
/* A fake VM backend and clock for the agent's unit tests: boots are instant, "QEMU" is an
 * eventfd the test can fire, exec answers a few canned commands. Header-only (static inline)
 * so each test binary compiles its own copy. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agent/daemon/daemon.h"
#include "agent/net/net.h"
#include "agent/vm/vm.h"
#include "common/util.h"
#include "vmm/vmm.h"

struct fake_vm {
        pid_t pid;
        int efd;
        atomic_bool exited;
        atomic_bool stopped;
        int exit_status;               /* poll_exit's status (137: SIGKILL) */
        struct agent_vm_health health; /* what ops.health reports; the test sets it */
        atomic_bool ping_fail;         /* liveness probes time out */
        atomic_int pings, resumes;
        uint64_t disk_free; /* ops.disk_free */
};

struct fake_backend {
        atomic_int boots, stops, adopts, frees, execs;
        atomic_int kills; /* VMs ended without a poweroff (dead guests) */
        atomic_bool fail_boot;
        atomic_bool slow_boot; /* boot waits for cancel (up to 5 s) */
        atomic_bool release;   /* lets a "block" exec finish */
        atomic_bool blocked;   /* a "block" exec is waiting */
        atomic_int next_pid;
        unsigned last_memory_mib, last_vcpus;
        char last_kernel[512];
        char last_env[512];                  /* env of the last exec, ';'-joined */
        char last_tap[32], last_append[256]; /* network boot parameters of the last boot */
        size_t last_n_pre_exec;
};

static inline struct fake_vm *fake_vm_new(pid_t pid)
{
        struct fake_vm *v = calloc(1, sizeof(*v));

        if (!v)
                return NULL;
        v->pid = pid;
        v->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        v->exit_status = 137;
        return v;
}

/* Marks the VM as exited (as if QEMU died) and makes its exit fd readable. */
static inline void fake_vm_crash(struct fake_vm *v)
{
        uint64_t one = 1;

        atomic_store(&v->exited, true);
        (void)!write(v->efd, &one, sizeof(one));
}

static inline int fake_boot(void *ud, const struct agent_boot_params *p, void **ret_vm,
                            struct fk_error *err)
{
        struct fake_backend *f = ud;
        struct fake_vm *v;

        if (atomic_load(&f->fail_boot))
                return fk_error_set(err, -EIO, "fake boot failure for %s", p->key);
        if (access(p->run_dir, W_OK) < 0 || access(p->state_dir, W_OK) < 0)
                return fk_error_set(err, -ENOENT, "run/state dir missing");
        if (atomic_load(&f->slow_boot)) {
                if (p->spawned && p->spawned(p->spawned_ctx, 4242, NULL) < 0)
                        return fk_error_set(err, -EIO, "spawned refused");
                for (int i = 0; i < 500 && !*p->cancel; i++)
                        usleep(10000);
                return fk_error_set(err, -ECANCELED, "boot cancelled");
        }
        v = fake_vm_new(atomic_fetch_add(&f->next_pid, 1));
        if (!v)
                return -ENOMEM;
        f->last_memory_mib = p->memory_mib;
        f->last_vcpus = p->vcpus;
        snprintf(f->last_kernel, sizeof(f->last_kernel), "%s", p->kernel);
        snprintf(f->last_tap, sizeof(f->last_tap), "%s", p->tap ? p->tap : "");
        snprintf(f->last_append, sizeof(f->last_append), "%s", p->append ? p->append : "");
        f->last_n_pre_exec = p->n_pre_exec;
        if (p->spawned && p->spawned(p->spawned_ctx, v->pid, NULL) < 0) {
                free(v);
                return fk_error_set(err, -EIO, "the VM record was not stored");
        }
        atomic_fetch_add(&f->boots, 1);
        *ret_vm = v;
        return 0;
}

/* Adopts the pid the record names when the run dir is still there (a host reboot empties it). */
static inline int fake_adopt(void *ud, const char *run_dir, const json_t *record, int accel,
                             void **ret_vm, struct fk_error *err)
{
        struct fake_backend *f = ud;
        struct fake_vm *v;

        (void)accel;
        if (access(run_dir, F_OK) < 0 || !json_is_integer(json_object_get(record, "pid")))
                return fk_error_set(err, -ESRCH, "nothing to adopt in %s", run_dir);
        v = fake_vm_new((pid_t)json_integer_value(json_object_get(record, "pid")));
        if (!v)
                return -ENOMEM;
        atomic_fetch_add(&f->adopts, 1);
        *ret_vm = v;
        return 0;
}

static inline int fake_stop(void *ud, void *vm, unsigned timeout_ms)
{
        struct fake_backend *f = ud;

        (void)timeout_ms;
        atomic_store(&((struct fake_vm *)vm)->stopped, true);
        atomic_fetch_add(&f->stops, 1);
        return 0;
}

static inline int fake_pause(void *ud, void *vm, struct fk_error *err)
{
        (void)ud, (void)vm, (void)err;
        return 0;
}

static inline int fake_exec(void *ud, void *vm, const struct vmm_exec_request *req,
                            int (*out_fn)(int stream, const void *data, size_t size, void *ud),
                            void *out_ud, struct vmm_exec_result *ret, struct fk_error *err)
{
        struct fake_backend *f = ud;
        const char *cmd = req->argv[0];
        size_t off = 0;

        atomic_fetch_add(&f->execs, 1);
        f->last_env[0] = '\0';
        for (size_t i = 0; req->env && req->env[i]; i++)
                off += (size_t)snprintf(f->last_env + off, sizeof(f->last_env) - off, "%s;",
                                        req->env[i]);
        *ret = (struct vmm_exec_result){.pid = 42};
        if (atomic_load(&((struct fake_vm *)vm)->stopped))
                return fk_error_set(err, -ECONNRESET, "VM stopped");
        if (strcmp(cmd, "both") == 0) {
                out_fn(1, "out\n", 4, out_ud);
                out_fn(2, "err\n", 4, out_ud);
                ret->exit_code = 3;
        } else if (strcmp(cmd, "cat") == 0) {
                if (req->stdin_size)
                        out_fn(1, req->stdin_data, req->stdin_size, out_ud);
        } else if (strcmp(cmd, "block") == 0) {
                atomic_store(&f->blocked, true);
                for (int i = 0; i < 500 && !atomic_load(&f->release); i++)
                        usleep(10000);
                out_fn(1, "done", 4, out_ud);
        } else if (strcmp(cmd, "kill") == 0) {
                ret->signaled = true;
                ret->signal = 9;
        } else if (strcmp(cmd, "daemon") == 0 && req->detach) {
                ret->pid = 77;
        } else
                return fk_error_set(err, -ENOENT, "%s: not found in the guest PATH", cmd);
        return 0;
}

static inline pid_t fake_pid(void *vm)
{
        return ((struct fake_vm *)vm)->pid;
}

static inline int fake_exit_fd(void *vm)
{
        return ((struct fake_vm *)vm)->efd;
}

static inline int fake_poll_exit(void *vm, int *ret_status, const char **ret_reason)
{
        if (!atomic_load(&((struct fake_vm *)vm)->exited))
                return 0;
        *ret_status = ((struct fake_vm *)vm)->exit_status;
        *ret_reason = *ret_status == 137 ? "killed by SIGKILL" : "exited with status 0";
        return 1;
}

/* Guest health: as the test set it; a resume clears a disk-error stop (QEMU's RESUME). */
static inline int fake_health(void *ud, void *vm, struct agent_vm_health *ret)
{
        (void)ud;
        *ret = ((struct fake_vm *)vm)->health;
        return 0;
}

static inline int fake_ping(void *ud, void *vm, unsigned timeout_ms, struct fk_error *err)
{
        struct fake_vm *v = vm;

        (void)ud;
        atomic_fetch_add(&v->pings, 1);
        if (atomic_load(&v->ping_fail))
                return fk_error_set(err, -ETIMEDOUT, "ping: no answer in %u ms", timeout_ms);
        return 0;
}

static inline int fake_kill(void *ud, void *vm, unsigned timeout_ms)
{
        struct fake_backend *f = ud;

        (void)timeout_ms;
        atomic_fetch_add(&f->kills, 1);
        atomic_store(&((struct fake_vm *)vm)->stopped, true);
        return 0;
}

static inline int fake_resume(void *ud, void *vm, struct fk_error *err)
{
        struct fake_vm *v = vm;

        (void)ud, (void)err;
        atomic_fetch_add(&v->resumes, 1);
        v->health.io_stopped = false;
        return 0;
}

static inline int fake_disk_free(void *ud, void *vm, uint64_t *ret)
{
        (void)ud;
        *ret = ((struct fake_vm *)vm)->disk_free;
        return 0;
}

static inline void fake_free(void *ud, void *vm)
{
        struct fake_backend *f = ud;
        struct fake_vm *v = vm;

        atomic_fetch_add(&f->frees, 1);
        close(v->efd);
        free(v);
}

static inline struct agent_vm_ops fake_ops(struct fake_backend *f)
{
        return (struct agent_vm_ops){
                .boot = fake_boot,
                .adopt = fake_adopt,
                .stop = fake_stop,
                .pause = fake_pause,
                .resume = fake_resume,
                .exec = fake_exec,
                .pid = fake_pid,
                .exit_fd = fake_exit_fd,
                .poll_exit = fake_poll_exit,
                .health = fake_health,
                .ping = fake_ping,
                .kill = fake_kill,
                .disk_free = fake_disk_free,
                .free = fake_free,
                .userdata = f,
        };
}

/* A clock the test moves: wall starts at 2026-11-29T00:00:00Z. */
struct fake_clock {
        atomic_ullong real_ns, mono_ns;
};

static inline uint64_t fake_real(void *ud)
{
        return atomic_load(&((struct fake_clock *)ud)->real_ns);
}

static inline uint64_t fake_mono(void *ud)
{
        return atomic_load(&((struct fake_clock *)ud)->mono_ns);
}

static inline void fake_clock_advance(struct fake_clock *c, uint64_t seconds)
{
        atomic_fetch_add(&c->real_ns, seconds * 1000000000ull);
        atomic_fetch_add(&c->mono_ns, seconds * 1000000000ull);
}
