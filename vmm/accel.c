/* SPDX-License-Identifier: MIT */
/* Accelerator selection: KVM when /dev/kvm is usable, TCG otherwise ("auto"), or forced. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "vmm/vmm-internal.h"
#include "vmm/vmm.h"

const char *vmm_accel_to_string(enum vmm_accel a)
{
        switch (a) {
        case VMM_ACCEL_TCG:
                return "tcg";
        case VMM_ACCEL_KVM:
                return "kvm";
        }
        return NULL;
}

/* Returns 0 when the device opens read-write, else -errno. */
static int kvm_usable(const char *kvm_path)
{
        cleanup_close int fd = open(kvm_path, O_RDWR | O_CLOEXEC | O_NOCTTY);

        if (fd < 0)
                return -errno;
        return 0;
}

int vmm_accel_resolve_at(const char *want, const char *kvm_path, bool probe, enum vmm_accel *ret,
                         struct fk_error *err)
{
        int r;

        if (!want || !ret)
                return fk_error_set(err, -EINVAL, "accel: no accelerator requested");

        if (strcmp(want, "tcg") == 0) {
                *ret = VMM_ACCEL_TCG;
                return 0;
        }
        if (strcmp(want, "auto") == 0) {
                /* auto must not pick a KVM that opens but cannot run a plain guest. */
                r = kvm_usable(kvm_path);
                if (r == 0 && probe)
                        r = vmm_kvm_probe(kvm_path);
                *ret = r == 0 ? VMM_ACCEL_KVM : VMM_ACCEL_TCG;
                return 0;
        }
        if (strcmp(want, "kvm") == 0) {
                r = kvm_usable(kvm_path);
                if (r < 0)
                        return fk_error_set(err, -ENODEV,
                                            "accel: kvm requested but %s cannot be opened "
                                            "read-write (%s); use accel: auto or tcg, or load "
                                            "the kvm module and check permissions",
                                            kvm_path, strerror(-r));
                *ret = VMM_ACCEL_KVM;
                return 0;
        }
        return fk_error_set(err, -EINVAL,
                            "accel: unknown accelerator \"%s\" (known: auto, kvm, tcg)", want);
}

int vmm_accel_resolve(const char *want, enum vmm_accel *ret, struct fk_error *err)
{
        return vmm_accel_resolve_at(want, "/dev/kvm", true, ret, err);
}
