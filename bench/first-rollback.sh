#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/first-rollback: a session's first rollback (it replaces the cold-booted QEMU, whose RAM
# is a share=on file in runDir) against its second (it replaces a restored QEMU on private
# pages), through a real forkletd (tmpfs runDir, disk stateDir: tests/lib/harness.sh), a new
# forkletd and a baseline taking turns. Each turn boots REPS sessions one after the other; each
# takes a checkpoint, writes FILL MiB into its guest's /run, rolls back, writes again and rolls
# back again. A row per (forkletd, rollback): the wall of `forklet rollback` (request to
# Running, the CLI's start included) p50/p90, the medians of the boot's steps
# (status.bootTiming) and the wall's ratio against the baseline's row.
# Usage (root): bench/first-rollback.sh FORKLETD FORKLET IMAGE_DIR BASE_FORKLETD
#   [REPS=3 ROUNDS=2 MIB=1024 FILL=400]
FORKLETD_NEW=${1:?forkletd path}
FORKLET=${2:?forklet path}
IMG=$(realpath "${3:?image dir}")
FORKLETD_BASE=${4:?baseline forkletd path}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
MIB=${MIB:-1024}
FILL=${FILL:-400}
FK_TAG=bench-frb
. "$(dirname "$0")/../tests/lib/harness.sh"
. "$(dirname "$0")/lib.sh"
fk_setup
FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: $MIB, cpu: 1.0, pids: 1024}")
fk_node_config >"$T/node.yaml"
OUT=$T/results
: >"$OUT"

# steps NAME: "disk qemu restore agent identity total" (ms) of the last boot
steps() {
        "$FORKLET" get session "$1" -o json | jq -r '.status.bootTiming |
                [.diskMs, .qemuMs, .restoreMs, .agentMs, .identityMs, .totalMs] | map(. // 0 | round) | @tsv'
}

fill() {
        [ "$FILL" = 0 ] || gsh "$1" "head -c 1048576 /dev/urandom >/run/r1m &&
                i=0 && while [ \$i -lt $FILL ]; do cat /run/r1m; i=\$((i + 1)); done >/run/fill" ||
                fail "fill $FILL MiB in $1"
}

for round in $(seq "$ROUNDS"); do
        for d in base new; do
                v=FORKLETD_${d^^}
                FORKLETD=${!v}
                start_daemon
                for i in $(seq "$REPS"); do
                        s=$d$round-$i
                        session "$s"
                        "$FORKLET" wait "$s" --for=Running --timeout=300 || fail "$s not Running"
                        ck=$("$FORKLET" checkpoint create "$s" --wait) || fail "checkpoint of $s"
                        for which in first second; do
                                fill "$s"
                                t0=$(date +%s%N)
                                "$FORKLET" rollback "$s" "$ck" >/dev/null || fail "$which rollback of $s"
                                echo "$d $which $((($(date +%s%N) - t0) / 1000000)) $(steps "$s")" >>"$OUT"
                        done
                        "$FORKLET" delete "$s" >/dev/null || fail "delete $s"
                done
                stop_daemon
        done
done

echo "a session's first and second rollback to agent-ready (ms), $((REPS * ROUNDS)) each, forkletds taking turns, $MIB MiB guests, $FILL MiB written before each"
printf "%-9s %-7s | %-13s | %-5s %-7s %-8s %-7s %-9s %-7s | %s\n" forkletd rollback "wall p50/p90" \
        disk qemu restore agent identity total "wall vs baseline's"
for which in first second; do
        b50=$(awk -v w="$which" '$1 == "base" && $2 == w {print $3}' "$OUT" | pct 0.5)
        for d in base new; do
                sel() { awk -v d="$d" -v w="$which" -v c="$1" '$1 == d && $2 == w {print $c}' "$OUT"; }
                w50=$(sel 3 | pct 0.5)
                printf "%-9s %-7s | %5s / %-5s | %-5s %-7s %-8s %-7s %-9s %-7s | %.2fx\n" "$d" "$which" \
                        "$w50" "$(sel 3 | pct 0.9)" "$(sel 4 | pct 0.5)" "$(sel 5 | pct 0.5)" "$(sel 6 | pct 0.5)" \
                        "$(sel 7 | pct 0.5)" "$(sel 8 | pct 0.5)" "$(sel 9 | pct 0.5)" \
                        "$(awk -v a="$b50" -v b="$w50" 'BEGIN {print (b > 0 ? a / b : 0)}')"
        done
done
