#!/bin/sh
# SPDX-License-Identifier: MIT
# Probe (issue 17 item 3): does this QEMU's free page reporting punch holes in the backing file
# of a PRIVATE (share=off) memory-backend-file? That is how a fork maps its checkpoint's RAM
# file, shared by every fork of the checkpoint: holes there would corrupt the checkpoint.
# Boots the minimal guest (plus the virtio_balloon module) twice on a tmpfs RAM file whose
# upper 64 MiB hold a pattern, with and without virtio-balloon free-page-reporting=on, and
# prints how many pattern pages the file still holds after 60 s. Baseline: without the device.
# Usage (root): bench/probe-free-page-reporting.sh [BUILD_DIR]   (needs build/images/minimal)
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(readlink -f "${1:-$SRC/build}")
W=$(mktemp -d /tmp/fk-fpr.XXXXXX)
RAM=/dev/shm/fk-fpr-$$
QP=
cleanup() {
        [ -z "$QP" ] || kill "$QP" 2>/dev/null || true
        rm -rf "$W" "$RAM"
}
trap cleanup EXIT INT TERM
mkdir -p "$W/images"
ln -s "$BUILD/images/cache" "$W/images/cache"
sed 's/ ext4 overlay"/ ext4 overlay virtio_balloon"/' "$SRC/vmm/guest/build-image.sh" >"$W/build-image.sh"
chmod +x "$W/build-image.sh"
"$W/build-image.sh" "$W/images/fpr" "$BUILD/vmm/guest/forklet-agent" \
        "$BUILD/vmm/guest/tools/forklet-tools" 2>/dev/null
KHZ=$(awk -F: '/cpu MHz/ { printf "%d", $2 * 1000; exit }' /proc/cpuinfo)

run() { # run EXTRA-ARGS...: boots, waits 60 s, prints the pattern pages left of 16384
        rm -f "$RAM"
        truncate -s 256M "$RAM"
        python3 -c "
f = open('$RAM', 'r+b'); f.seek(192 << 20)
for i in range(64): f.write(b'\xaa' * (1 << 20))"
        qemu-system-x86_64 -M microvm,memory-backend=mem -accel tcg,tb-size=64 -nodefaults \
                -no-user-config -display none -no-reboot -smp 1 -m 256M \
                -object "memory-backend-file,id=mem,size=256M,mem-path=$RAM,share=off" \
                -kernel "$W/images/fpr/vmlinuz" -initrd "$W/images/fpr/initrd.img" \
                -append "console=ttyS0 panic=-1 tsc_early_khz=$KHZ" -serial "file:$W/console.log" \
                "$@" &
        QP=$!
        sleep 60
        kill "$QP"
        wait "$QP" 2>/dev/null || true
        QP=
        python3 -c "
d = open('$RAM', 'rb').read()
print(sum(1 for i in range(0, len(d), 4096) if d[i:i + 4096] == b'\xaa' * 4096))"
}
base=$(run)
fpr=$(run -device virtio-balloon-device,free-page-reporting=on)
echo "$(qemu-system-x86_64 --version | head -n 1)"
printf '%-44s %8s %8s\n' "RAM file share=off, 64 MiB pattern" "pages" "ratio"
printf '%-44s %8s %8s\n' "no balloon (baseline)" "$base" "1.00"
printf '%-44s %8s %8s\n' "virtio-balloon free-page-reporting=on" "$fpr" \
        "$(awk -v a="$fpr" -v b="$base" 'BEGIN { printf "%.2f", b ? a / b : 0 }')"
[ "$fpr" = "$base" ] && echo "the private mapping's file is left alone" ||
        echo "free page reporting punched holes in the private mapping's FILE (unsafe for forks)"
