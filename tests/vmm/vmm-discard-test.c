/* SPDX-License-Identifier: MIT */
/* vmm_discard against a real QEMU with a real tap, in a network namespace of the test's own:
 * while QEMU runs its tap cannot be attached elsewhere (EBUSY); the moment vmm_discard returns
 * it can, before anyone waited for the process, which then ends by SIGKILL. Without a tap the
 * process is only killed; without QMP the discard waits as vmm_stop does. Root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "tests/vmm/vmm-harness.h"

#define TAP "fkdisc0"

/* Attaches a tun fd to the tap (making it first, persistent, with make): the fd, or -errno
 * (-EBUSY while a QEMU holds it). */
static int tap_attach(bool make)
{
        struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI};
        int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        memcpy(ifr.ifr_name, TAP, sizeof(TAP));
        if (ioctl(fd, TUNSETIFF, &ifr) < 0 || (make && ioctl(fd, TUNSETPERSIST, 1) < 0)) {
                int r = -errno;

                close(fd);
                return r;
        }
        return fd;
}

static void boot(struct it_vm *vm, const char *name, bool tap)
{
        struct fk_error err = {0};

        it_vm_init(vm, name);
        if (tap) {
                vm->cfg.tap = TAP;
                vm->cfg.mac = "52:54:00:12:34:56";
        }
        CHECK(it_vm_spawn(vm, &err) >= 0, "spawn %s: %s", name, err.msg);
        it_vm_connect(vm);
        it_wait_console(vm, "tick 1", 60000);
}

/* The process ended by SIGKILL within 10 s. */
static void killed(struct it_vm *vm)
{
        const char *reason = NULL;
        int status = -1;

        CHECK(vmm_process_wait(vm->proc, 10000) == 1, "QEMU still there 10 s after the discard");
        CHECK(vmm_process_poll(vm->proc, &status, &reason) == 1, "poll");
        CHECK(status == 128 + SIGKILL, "QEMU ended with %d (%s), not by SIGKILL", status,
              reason ? reason : "?");
}

int main(void)
{
        struct it_vm vm, bare, noqmp;
        int fd;

        it_setup("vmm-discard");
        CHECK(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s", strerror(errno));
        fd = tap_attach(true);
        CHECK(fd >= 0, "create tap %s: %s", TAP, strerror(-fd));
        close(fd);

        boot(&vm, "withtap", true);
        fd = tap_attach(false);
        CHECK(fd == -EBUSY, "the tap QEMU holds attached elsewhere: %d, expected EBUSY", fd);
        CHECK(vmm_discard(vm.proc, vm.qmp, true, 2000) == 0, "discard");
        /* not waited for: the tap is free already */
        fd = tap_attach(false);
        CHECK(fd >= 0, "the tap right after the discard: %s", strerror(-fd));
        close(fd);
        killed(&vm);
        CHECK(vmm_discard(vm.proc, vm.qmp, true, 2000) == 0, "a second discard");
        it_vm_destroy(&vm);
        it_log("with a tap: free when vmm_discard returned, QEMU ended by SIGKILL");

        boot(&bare, "notap", false);
        CHECK(vmm_discard(bare.proc, bare.qmp, false, 2000) == 0, "discard without a tap");
        killed(&bare);
        it_vm_destroy(&bare);

        /* no QMP to let go of the tap with: vmm_stop's escalation, waited for */
        boot(&noqmp, "noqmp", true);
        CHECK(vmm_discard(noqmp.proc, NULL, true, 2000) == 0, "discard without QMP");
        CHECK(vmm_process_poll(noqmp.proc, NULL, NULL) == 1, "without QMP, not waited for");
        it_vm_destroy(&noqmp);
        it_log("vmm-discard: ok");
        return 0;
}
