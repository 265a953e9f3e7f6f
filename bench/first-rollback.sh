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
bench_node "$MIB"

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
                                bench_fill "$s" "$FILL"
                                t0=$(date +%s%N)
                                "$FORKLET" rollback "$s" "$ck" >/dev/null || fail "$which rollback of $s"
                                echo "$d $which $((($(date +%s%N) - t0) / 1000000)) $(bench_boot_steps "$s")" >>"$OUT"
                        done
                        "$FORKLET" delete "$s" >/dev/null || fail "delete $s"
                done
                stop_daemon
        done
done

echo "a session's first and second rollback to agent-ready (ms), $((REPS * ROUNDS)) each, forkletds taking turns, $MIB MiB guests, $FILL MiB written before each"
bench_steps_head rollback "baseline's"
for which in first second; do
        for d in base new; do
                bench_steps_row "$OUT" "$d" "$which" "$which"
        done
done
