#!/bin/bash
# SPDX-License-Identifier: MIT
# Boots the minimal image under real QEMU (TCG unless KVM is there) with a hand-written command
# line, runs guest-driver against the agent port, and checks that poweroff ends QEMU.
# Usage: guest-boot.sh GUEST_DRIVER (env: FORKLET_IMAGE_DIR). Exit 77: prerequisite missing.
set -u
DRIVER=$1
IMG=${FORKLET_IMAGE_DIR:-}

. "$(dirname "$0")/../lib/harness.sh"
fk_require_root
fk_require_cmds qemu-system-x86_64
[ -n "$IMG" ] && [ -f "$IMG/image.json" ] ||
        skip "no guest image in '$IMG' (build it: cmake --build BUILD --target guest-image)"
KVER=$(sed -n 's/.*"kernelVersion":"\([^"]*\)".*/\1/p' "$IMG/image.json")
[ -n "$KVER" ] || { echo "guest-boot: no kernelVersion in image.json" >&2; exit 1; }

# TCG by default: this machine's /dev/kvm (kvm-pvm, nested) opens but hangs a microvm guest
# at "Probing EDD". FORKLET_TEST_ACCEL=kvm tries KVM where it works.
ACCEL=${FORKLET_TEST_ACCEL:-tcg}
RUN=$(mktemp -d /tmp/forklet-guest-boot.$$.XXXXXX)
QPID=
cleanup() {
        if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
                kill "$QPID" 2>/dev/null
                sleep 1
                kill -9 "$QPID" 2>/dev/null
        fi
        [ -n "$QPID" ] && wait "$QPID" 2>/dev/null
        rm -rf "$RUN"
}
trap cleanup EXIT INT TERM

# Under TCG the guest TSC ticks at the host's rate, but on a loaded host the guest kernel's
# TSC calibration against the PIT fails and boot hangs ("Fast TSC calibration failed"):
# tell it the rate.
# Guest network/hostname config on the kernel command line (read by the guest init); the NIC
# sits on a QEMU hub with nothing else on it, so no packet can leave.
APPEND="console=ttyS0 quiet panic=-1 forklet.hostname=fk-boot forklet.ip=192.0.2.2/24"
APPEND="$APPEND forklet.gw=192.0.2.1 forklet.dns=192.0.2.53,192.0.2.54"
if [ "$ACCEL" = tcg ]; then
        KHZ=$(awk -F: '/^cpu MHz/ { printf "%d", $2 * 1000; exit }' /proc/cpuinfo)
        [ -n "$KHZ" ] && APPEND="$APPEND tsc_early_khz=$KHZ"
fi
cp --sparse=always "$IMG/workspace.img" "$RUN/workspace.img"
START=$(date +%s%N)
qemu-system-x86_64 -M microvm,accel=$ACCEL,memory-backend=mem -nodefaults -no-user-config \
        -display none -no-reboot -m 256M \
        -object memory-backend-file,id=mem,size=256M,mem-path="$RUN/mem",share=on \
        -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" -append "$APPEND" \
        -serial file:"$RUN/console.log" \
        -device virtio-serial-device \
        -chardev socket,id=agent,path="$RUN/agent.sock",server=on,wait=off \
        -device virtserialport,chardev=agent,name=org.forklet.agent.0 \
        -drive file="$RUN/workspace.img",if=none,id=ws,format=raw \
        -device virtio-blk-device,drive=ws \
        -netdev hubport,id=n0,hubid=0 -device virtio-net-device,netdev=n0 \
        -qmp unix:"$RUN/qmp.sock",server=on,wait=off 2>"$RUN/qemu.err" &
QPID=$!

"$DRIVER" "$RUN/agent.sock" "$KVER"
rc=$?
READY_NS=$(date +%s%N)
# Poweroff must end QEMU on its own (-no-reboot, ACPI poweroff on microvm).
i=0
while kill -0 "$QPID" 2>/dev/null && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
done
if kill -0 "$QPID" 2>/dev/null; then
        echo "guest-boot: FAIL: QEMU still running 10 s after poweroff" >&2
        rc=1
else
        wait "$QPID"
        echo "guest-boot: QEMU exited with $?" >&2
        QPID=
fi
grep -q "forklet-guest: ready" "$RUN/console.log" ||
        { echo "guest-boot: FAIL: no ready line on the console" >&2; rc=1; }
if [ $rc -ne 0 ]; then
        echo "---- console ----" >&2
        cat "$RUN/console.log" >&2
        cat "$RUN/qemu.err" >&2
fi
echo "guest-boot: total $(((READY_NS - START) / 1000000)) ms (accel $ACCEL)" >&2
exit $rc
