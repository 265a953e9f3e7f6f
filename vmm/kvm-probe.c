/* SPDX-License-Identifier: MIT */
/* Proves /dev/kvm can run an ordinary guest before "accel: auto" picks it: some hosts expose a
 * /dev/kvm that opens but cannot run a standard guest (e.g. a paravirtual KVM inside a VM that
 * only runs guests built for it), and QEMU then hangs or aborts at vCPU setup. */
#include "vmm/vmm-internal.h"
#include "common/cleanup.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define PROBE_MEM_SIZE   0x1000
#define PROBE_GUEST_ADDR 0x1000
#define PROBE_PORT       0xf1
#define PROBE_VALUE      0x2a

/* Real-mode code: mov al, 0x2a; out 0xf1, al; hlt */
static const uint8_t probe_code[] = {0xb0, PROBE_VALUE, 0xe6, PROBE_PORT, 0xf4};

static int probe_set_regs(int vcpu)
{
        struct kvm_sregs sregs;
        struct kvm_regs regs;

        if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0)
                return -errno;
        sregs.cs.base = 0;
        sregs.cs.selector = 0;
        if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
                return -errno;
        memset(&regs, 0, sizeof(regs));
        regs.rip = PROBE_GUEST_ADDR;
        regs.rflags = 0x2;
        if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
                return -errno;
        return 0;
}

/* Runs the vCPU until it reports our port write; anything else means this KVM cannot run a
 * plain guest. */
static int probe_run(int vcpu, struct kvm_run *run)
{
        for (int i = 0; i < 4; i++) {
                if (ioctl(vcpu, KVM_RUN, 0) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (run->exit_reason == KVM_EXIT_IO && run->io.port == PROBE_PORT &&
                    run->io.direction == KVM_EXIT_IO_OUT && run->io.size == 1 &&
                    ((uint8_t *)run)[run->io.data_offset] == PROBE_VALUE)
                        return 0;
                return -ENOTSUP;
        }
        return -ENOTSUP;
}

/* PVM ("kvm-pvm") runs only guests built for it: a stock Debian kernel hangs after the real-mode
 * setup code and `-cpu host` aborts in QEMU at MSR setup, while a tiny real-mode program (which
 * PVM emulates) still runs. So its presence rules KVM out for auto. */
static bool kvm_is_paravirtual_only(void)
{
        return access("/sys/module/kvm_pvm", F_OK) == 0;
}

int vmm_kvm_probe(const char *kvm_path)
{
        cleanup_close int kvm = open(kvm_path, O_RDWR | O_CLOEXEC | O_NOCTTY);
        cleanup_close int vm = -1;
        cleanup_close int vcpu = -1;
        struct kvm_userspace_memory_region region;
        struct kvm_run *run;
        void *mem;
        int run_size, r;

        if (kvm < 0)
                return -errno;
        if (kvm_is_paravirtual_only())
                return -ENOTSUP;
        if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
                return -ENOTSUP;
        vm = ioctl(kvm, KVM_CREATE_VM, 0UL);
        if (vm < 0)
                return -errno;
        mem = mmap(NULL, PROBE_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
                return -errno;
        memcpy(mem, probe_code, sizeof(probe_code));
        region = (struct kvm_userspace_memory_region){
                .slot = 0,
                .guest_phys_addr = PROBE_GUEST_ADDR,
                .memory_size = PROBE_MEM_SIZE,
                .userspace_addr = (uintptr_t)mem,
        };
        r = ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0 ? -errno : 0;
        if (r >= 0) {
                vcpu = ioctl(vm, KVM_CREATE_VCPU, 0UL);
                r = vcpu < 0 ? -errno : 0;
        }
        run_size = r >= 0 ? ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0) : -1;
        if (r >= 0 && run_size <= 0)
                r = -ENOTSUP;
        if (r < 0) {
                munmap(mem, PROBE_MEM_SIZE);
                return r;
        }
        run = mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
        if (run == MAP_FAILED) {
                munmap(mem, PROBE_MEM_SIZE);
                return -errno;
        }
        r = probe_set_regs(vcpu);
        if (r >= 0)
                r = probe_run(vcpu, run);
        munmap(run, (size_t)run_size);
        munmap(mem, PROBE_MEM_SIZE);
        return r;
}
