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

# steps NAME: "qemu restore agent identity total disk" (ms) of the last boot
steps() {
        "$FORKLET" get session "$1" -o json | jq -r '.status.bootTiming |
                [.qemuMs, .restoreMs, .agentMs, .identityMs, .totalMs, .diskMs] | map(. // 0 | round) | @tsv'
}

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
                                [ "$FILL" = 0 ] || gsh "g$g" "head -c 1048576 /dev/urandom >/run/r1m &&
                                        i=0 && while [ \$i -lt $FILL ]; do cat /run/r1m; i=\$((i + 1)); done >/run/fill" ||
                                        fail "fill $FILL MiB in g$g"
                                t0=$(date +%s%N)
                                "$FORKLET" rollback "g$g" "$(cat "$T/ck.$g")" >/dev/null ||
                                        fail "rollback of g$g (forkletd $d, round $round)"
                                wall=$((($(date +%s%N) - t0) / 1000000))
                                echo "$d $g $wall $(steps "g$g")" >>"$OUT"
                        done
                done
                stop_daemon
        done
done

echo "rollback to agent-ready (ms), $((REPS * ROUNDS)) each, forkletds taking turns, $MIB MiB guests, $FILL MiB written before each"
printf "%-9s %-6s | %-13s | %-5s %-7s %-8s %-7s %-9s %-7s | %s\n" forkletd guest "wall p50/p90" \
        disk qemu restore agent identity total "wall vs baseline pair"
b50=$(awk '$1 == "base" && $2 == "base" {print $3}' "$OUT" | pct 0.5)
for d in base new; do
        for g in base new; do
                sel() { awk -v d="$d" -v g="$g" -v c="$1" '$1 == d && $2 == g {print $c}' "$OUT"; }
                w50=$(sel 3 | pct 0.5)
                printf "%-9s %-6s | %5s / %-5s | %-5s %-7s %-8s %-7s %-9s %-7s | %.2fx\n" "$d" "$g" \
                        "$w50" "$(sel 3 | pct 0.9)" "$(sel 9 | pct 0.5)" "$(sel 4 | pct 0.5)" "$(sel 5 | pct 0.5)" \
                        "$(sel 6 | pct 0.5)" "$(sel 7 | pct 0.5)" "$(sel 8 | pct 0.5)" \
                        "$(awk -v a="$b50" -v b="$w50" 'BEGIN {print (b > 0 ? a / b : 0)}')"
        done
done
