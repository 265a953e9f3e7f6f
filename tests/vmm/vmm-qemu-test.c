/* SPDX-License-Identifier: MIT */
/* The QEMU driver against a real QEMU 7.2 (TCG): spawn from vmm_build_argv, QMP status /
 * stop / cont, the share=on RAM file, adopt, graceful stop via QMP quit, kill -9 noticed
 * through the pidfd, and spawn failures. Root; exits 77 when a prerequisite is missing. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "tests/vmm/vmm-harness.h"

static bool socket_accepts(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        return fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

static void expect_event(struct it_vm *vm, const char *name)
{
        json_t *ev = NULL;
        bool found = false;

        while (!found && qmp_next_event(vm->qmp, &ev) > 0) {
                found = strcmp(json_string_value(json_object_get(ev, "event")), name) == 0;
                json_decref(ev);
        }
        CHECK(found, "%s: no %s event queued", vm->name, name);
}

/* Boot, status, pause/resume, RAM file, pidfile, adopt, QMP quit. */
static void test_lifecycle(void)
{
        struct it_vm vm;
        struct fk_error err = {};
        struct vmm_process *adopted = NULL;
        cleanup_free char *pidtext = NULL;
        const char *reason = NULL;
        int status = -1;
        struct stat st;
        uint64_t t0 = fk_now_mono_ns();

        it_vm_init(&vm, "life");
        vm.cfg.vmgenid = "8e3f5d52-5b2c-4a7e-b1a8-6c0d9e2f7a41";
        CHECK(it_vm_spawn(&vm, &err) >= 0, "spawn: %s", err.msg);
        it_vm_connect(&vm);
        it_log("QMP ready %.0f ms after spawn", it_ms_since(t0));
        it_expect_status(&vm, "running");
        it_wait_console(&vm, "forklet-test-init up", 60000);
        it_log("guest init up %.0f ms after spawn", it_ms_since(t0));

        /* The memory-backend-file is the guest RAM: exactly memory_mib, and share=on means the
         * guest's writes land in it (it has data extents now). */
        CHECK(stat(vm.mem_path, &st) == 0, "stat %s: %m", vm.mem_path);
        CHECK(st.st_size == 256LL << 20, "RAM file is %lld bytes", (long long)st.st_size);
        CHECK(st.st_blocks > 0, "RAM file has no data: guest RAM is not backed by it");
        CHECK(fk_read_file(vm.pidfile, 64, &pidtext, NULL) >= 0, "read pidfile");
        CHECK(atoi(pidtext) == vmm_process_pid(vm.proc), "pidfile %s != %d", pidtext,
              (int)vmm_process_pid(vm.proc));

        it_qmp(&vm, "stop", NULL);
        it_expect_status(&vm, "paused");
        expect_event(&vm, "STOP");
        it_qmp(&vm, "cont", NULL);
        it_expect_status(&vm, "running");
        expect_event(&vm, "RESUME");

        CHECK(vmm_process_adopt(vmm_process_pid(vm.proc), vmm_process_start_time(vm.proc) + 7,
                                &adopted) == -ESRCH,
              "adopted with a wrong start time");
        CHECK(vmm_process_adopt(vmm_process_pid(vm.proc), vmm_process_start_time(vm.proc),
                                &adopted) == 0,
              "adopt failed");
        CHECK(vmm_process_poll(adopted, NULL, NULL) == 0, "adopted VM looks dead");

        t0 = fk_now_mono_ns();
        CHECK(vmm_stop(vm.proc, NULL, vm.qmp, 5000) == 0, "vmm_stop failed");
        it_log("vmm_stop via QMP quit took %.0f ms", it_ms_since(t0));
        CHECK(vmm_process_poll(vm.proc, &status, &reason) == 1, "still running");
        CHECK(status == 0, "QEMU %s", reason);
        /* The adopter (not the parent) sees the exit through its pidfd too. */
        CHECK(vmm_process_wait(adopted, 1000) == 1, "adopted handle missed the exit");
        CHECK(!socket_accepts(vm.qmp_path) && !socket_accepts(vm.agent_path),
              "a socket still accepts after QEMU exited");
        CHECK(kill(vmm_process_pid(vm.proc), 0) < 0 && errno == ESRCH, "pid still exists");
        CHECK(vmm_stop(vm.proc, NULL, vm.qmp, 5000) == 0, "second stop is not a no-op");
        vmm_process_free(adopted);
        it_vm_destroy(&vm);
}

/* Someone else's SIGKILL is noticed through the pidfd within a second. */
static void test_kill9(void)
{
        struct it_vm vm;
        struct fk_error err = {};
        struct pollfd pfd;
        const char *reason = NULL;
        int status = -1, n;
        uint64_t t0;

        it_vm_init(&vm, "kill9");
        CHECK(it_vm_spawn(&vm, &err) >= 0, "spawn: %s", err.msg);
        it_vm_connect(&vm);
        it_expect_status(&vm, "running");
        t0 = fk_now_mono_ns();
        CHECK(kill(vmm_process_pid(vm.proc), SIGKILL) == 0, "kill: %m");
        pfd = (struct pollfd){.fd = vmm_process_fd(vm.proc), .events = POLLIN};
        n = poll(&pfd, 1, 1000);
        CHECK(n == 1, "pidfd not readable within 1 s after kill -9");
        it_log("kill -9 seen through the pidfd after %.1f ms", it_ms_since(t0));
        CHECK(vmm_process_poll(vm.proc, &status, &reason) == 1, "poll after kill");
        CHECK(status == 128 + 9 && strcmp(reason, "killed by signal 9") == 0, "got %d %s", status,
              reason);
        CHECK(qmp_execute(vm.qmp, "query-status", NULL, 2000, NULL, &err) == -ECONNRESET,
              "QMP after kill: %s", err.msg);
        it_vm_destroy(&vm);
}

static void test_spawn_failures(void)
{
        struct it_vm vm;
        struct fk_error err = {};
        cleanup_free char *log = NULL;
        const char *reason = NULL;
        int status = -1;

        it_vm_init(&vm, "missing");
        vm.cfg.qemu_binary = "/nonexistent/qemu-system-x86_64";
        CHECK(it_vm_spawn(&vm, &err) == -ENOENT, "spawn of a missing binary: %s", err.msg);
        CHECK(vm.proc == NULL, "a process was returned");
        it_log("missing binary: %s", err.msg);
        it_vm_destroy(&vm);

        /* QEMU starts but rejects its configuration: the error lands in its log. */
        it_vm_init(&vm, "badkernel");
        vm.cfg.kernel = "/nonexistent/vmlinuz";
        CHECK(it_vm_spawn(&vm, &err) >= 0, "spawn: %s", err.msg);
        CHECK(vmm_process_wait(vm.proc, 10000) == 1, "QEMU with a missing kernel kept running");
        CHECK(vmm_process_poll(vm.proc, &status, &reason) == 1 && status == 1, "got %d %s", status,
              reason);
        CHECK(fk_read_file(vm.log, 1 << 16, &log, NULL) >= 0 && strstr(log, "/nonexistent/vmlinuz"),
              "QEMU log does not name the kernel: %s", log ? log : "");
        CHECK(qmp_client_connect(vm.qmp_path, 200, &vm.qmp, &err) == -ETIMEDOUT,
              "QMP connect to an exited QEMU: %s", err.msg);
        it_vm_destroy(&vm);
}

int main(void)
{
        it_setup("vmm-qemu");
        test_spawn_failures();
        test_kill9();
        test_lifecycle();
        it_log("PASS");
        return 0;
}
