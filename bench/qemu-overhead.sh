#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/qemu-overhead: how much memory an idle session QEMU uses beyond its guest RAM, the
# number behind capacity.qemuOverheadMiB (memory.max = RAM + overhead, and the capacity charge).
# Boots the guest image with the argv forkletd uses (microvm, TCG translation cache 64 MiB, RAM
# file share=on on tmpfs, serial, QMP, virtio-serial agent), each in its own v1 memory cgroup, waits until the guest agent is
# up plus IDLE_S, and reads /proc/PID/smaps (the RAM file mapping vs the rest), smaps_rollup
# and the cgroup. The ratio column compares each row's overhead with the 256 MiB row's.
# Usage (root, cgroup v1 memory): FORKLET_IMAGE_DIR=build/images/minimal bench/qemu-overhead.sh
set -u
IMG=${FORKLET_IMAGE_DIR:?set FORKLET_IMAGE_DIR}
IDLE_S=${IDLE_S:-15}
SIZES=${SIZES:-256 1024}
T=$(mktemp -d /dev/shm/fk-bench-ovh-$$.XXXX) # tmpfs, like runDir in production
CG=/sys/fs/cgroup/memory/fk-bench-ovh-$$
QP=

cleanup() {
        [ -n "$QP" ] && kill -9 "$QP" 2>/dev/null && wait "$QP" 2>/dev/null
        for d in "$CG"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
        rmdir "$CG" 2>/dev/null
        rm -rf "$T"
}
trap cleanup EXIT
[ -d /sys/fs/cgroup/memory ] || { echo "needs the cgroup v1 memory controller" >&2; exit 77; }
mkdir "$CG" || exit 1
tsc=$(awk '/^cpu MHz/ {printf "%d", $4 * 1000; exit}' /proc/cpuinfo)

kb() { awk -v k="$1:" '$1 == k {s += $2} END {print s + 0}' "$2"; }
# RSS and PSS (kB) of the mapping of FILE in /proc/PID/smaps
map_kb() {
        awk -v f="$2" -v w="$3:" '/^[0-9a-f]+-[0-9a-f]+ / {m = (index($0, f) > 0)} m && $1 == w {s += $2} END {print s + 0}' "/proc/$1/smaps"
}

printf "%-8s %9s %9s %9s %9s %9s %9s %9s %6s\n" "RAM MiB" "RSS" "RAMmap" "own RSS" "own PSS" \
        "anon" "kmem" "cg-RAM" "ratio"
base=
for mem in $SIZES; do
        mkdir "$CG/$mem"
        (
                echo "$BASHPID" >"$CG/$mem/cgroup.procs"
                exec qemu-system-x86_64 -name ovh -M microvm,memory-backend=mem -accel tcg,tb-size=64 \
                        -nodefaults -no-user-config -display none -no-reboot -smp 1 -m "${mem}M" \
                        -object "memory-backend-file,id=mem,size=${mem}M,mem-path=$T/mem$mem.ram,share=on" \
                        -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" \
                        -append "console=ttyS0 quiet panic=-1 tsc_early_khz=$tsc" \
                        -chardev "file,id=console,path=$T/console$mem.log" -serial chardev:console \
                        -qmp "unix:$T/qmp$mem.sock,server=on,wait=off" -device virtio-serial-device \
                        -chardev "socket,id=agent,path=$T/agent$mem.sock,server=on,wait=off" \
                        -device virtserialport,chardev=agent,name=org.forklet.agent.0 2>>"$T/qemu.log"
        ) &
        QP=$!
        for _ in $(seq 240); do
                grep -qs "forklet-guest: ready" "$T/console$mem.log" && break
                sleep 0.5
        done
        grep -qs "forklet-guest: ready" "$T/console$mem.log" || { echo "guest did not boot" >&2; exit 1; }
        sleep "$IDLE_S"
        rss=$(kb Rss "/proc/$QP/smaps_rollup")
        pss=$(kb Pss "/proc/$QP/smaps_rollup")
        anon=$(kb Anonymous "/proc/$QP/smaps_rollup")
        ram=$(map_kb "$QP" "$T/mem$mem.ram" Rss)
        rampss=$(map_kb "$QP" "$T/mem$mem.ram" Pss)
        kmem=$(($(cat "$CG/$mem/memory.kmem.usage_in_bytes" 2>/dev/null || echo 0) / 1024))
        cgu=$(($(cat "$CG/$mem/memory.max_usage_in_bytes") / 1024))
        own=$((rss - ram))
        [ -z "$base" ] && base=$own
        printf "%-8s %9s %9s %9s %9s %9s %9s %9s %6.2f\n" "$mem" "$((rss / 1024))M" \
                "$((ram / 1024))M" "$((own / 1024))M" "$(((pss - rampss) / 1024))M" \
                "$((anon / 1024))M" "$((kmem / 1024))M" "$(((cgu - ram) / 1024))M" \
                "$(echo "$own $base" | awk '{printf "%.2f", $1 / $2}')"
        kill "$QP" && wait "$QP" 2>/dev/null
        QP=
        rm -f "$T/mem$mem.ram"
done
echo "# own = RSS beyond the guest RAM mapping (QEMU binary, libraries, heap, TCG code buffer);"
echo "# cg-RAM = the cgroup's peak charge minus the resident guest RAM (adds page cache, kmem)."
