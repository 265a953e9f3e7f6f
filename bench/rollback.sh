#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/rollback: rollback to agent-ready through a real forkletd (tmpfs runDir, disk stateDir:
# tests/lib/harness.sh), a new forkletd and guest image against a baseline pair in the same
# run. Two sessions, one booted from each image by its own forkletd, one checkpoint each; then
# rounds in which the baseline forkletd and the new one take turns (each adopts the VMs the
# other left) and roll both sessions back REPS times. A row per (forkletd, guest) pair: the wall of `forklet
# rollback` (request to Running, the CLI's own start included) and the medians of the boot's
# steps (status.bootTiming). The rollback's cost is the old QEMU's end plus the restored one's
# start, so both the daemon (how it ends the old QEMU) and the guest agent (how soon it sees the
# new host) show.
# Usage (root): bench/rollback.sh FORKLETD FORKLET IMAGE_DIR BASE_FORKLETD BASE_IMAGE_DIR
#   [REPS=5 ROUNDS=2 MIB=256 FILL=0]; e.g. a baseline built from the previous commit in another
#   directory. MIB: the guests' RAM. FILL: MiB each guest writes (into its /run tmpfs, so at most
#   about MIB/2) before every rollback, so that the QEMU replaced holds that much RAM of its own
#   (after the first rollback: private pages over the checkpoint's file).
FORKLETD_NEW=${1:?forkletd path}
FORKLET=${2:?forklet path}
IMG_NEW=$(realpath "${3:?image dir}")
FORKLETD_BASE=${4:?baseline forkletd path}
IMG_BASE=$(realpath "${5:?baseline image dir}")
REPS=${REPS:-5}
ROUNDS=${ROUNDS:-2}
MIB=${MIB:-256}
FILL=${FILL:-0}
FK_TAG=bench-rb
IMG=$IMG_NEW
. "$(dirname "$0")/../tests/lib/harness.sh"
. "$(dirname "$0")/lib.sh"
fk_setup
FK_IMAGES=("{name: new, dir: $IMG_NEW}" "{name: base, dir: $IMG_BASE}")
FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: $MIB, cpu: 1.0, pids: 1024}")
fk_node_config >"$T/node.yaml"
OUT=$T/results
: >"$OUT"

# Each guest is booted by its own forkletd, which picks the guest's kernel command line and CPU
# model (argv.c); a rollback keeps what the checkpoint's boot had.
for g in base new; do
        v=FORKLETD_${g^^}
        FORKLETD=${!v}
        start_daemon
        FK_SESSION_IMAGE=$g session "g$g"
        "$FORKLET" wait "g$g" --for=Running --timeout=300 || fail "g$g not Running"
        "$FORKLET" checkpoint create "g$g" --wait >"$T/ck.$g" || fail "checkpoint of g$g"
        stop_daemon
done
for round in $(seq "$ROUNDS"); do
        for d in base new; do
                v=FORKLETD_${d^^}
                FORKLETD=${!v}
                start_daemon
                for g in base new; do
                        for i in $(seq "$REPS"); do
                                bench_fill "g$g" "$FILL"
                                t0=$(date +%s%N)
                                "$FORKLET" rollback "g$g" "$(cat "$T/ck.$g")" >/dev/null ||
                                        fail "rollback of g$g (forkletd $d, round $round)"
                                wall=$((($(date +%s%N) - t0) / 1000000))
                                echo "$d $g $wall $(bench_boot_steps "g$g")" >>"$OUT"
                        done
                done
                stop_daemon
        done
done

echo "rollback to agent-ready (ms), $((REPS * ROUNDS)) each, forkletds taking turns, $MIB MiB guests, $FILL MiB written before each"
bench_steps_head guest "baseline pair"
for d in base new; do
        for g in base new; do
                bench_steps_row "$OUT" "$d" "$g" base
        done
done
