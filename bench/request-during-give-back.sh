#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/request-during-give-back: how long a checkpoint request waits when it comes while the
# give-back after a live checkpoint runs (the balloon inflating to the guest's free memory), a
# new forkletd against a baseline one in the same run, turns taken. Each forkletd boots its own
# MIB MiB session; per round: a live checkpoint (--wait: Ready), DELAY s for the give-back due
# after it to start, then `forklet checkpoint create` timed (request to the source running
# again; REQUEST=pause: `forklet pause` timed, request to Paused, then a resume). Through a real
# forkletd (tests/lib/harness.sh: tmpfs runDir, disk stateDir; no jail
# and root's capabilities kept, so QEMU 7.2 takes live checkpoints by background snapshot).
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/request-during-give-back.sh \
#   FORKLETD FORKLET BASE_FORKLETD   [MIB=1024 REPS=3 DELAY=0.5 REQUEST=checkpoint|pause]
FORKLETD_NEW=${1:?forkletd path}
FORKLET=${2:?forklet path}
FORKLETD_BASE=${3:?baseline forkletd path}
MIB=${MIB:-1024}
REPS=${REPS:-3}
DELAY=${DELAY:-0.5}
REQUEST=${REQUEST:-checkpoint}
FK_TAG=bench-rgb
. "$(dirname "$0")/../tests/lib/harness.sh"
. "$(dirname "$0")/lib.sh"
fk_setup
FK_JAIL="{uidBase: $FK_UID_BASE, uidCount: 0}"
FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: $MIB, cpu: 1.0, pids: 1024}")
fk_node_config "memoryGiveBack: {intervalSeconds: 3600}" \
        "hardening: {dropCapabilities: false}" >"$T/node.yaml"
OUT=$T/results
: >"$OUT"

# round D: one timed checkpoint request during the give-back of session sD under forkletd D
round() {
        local v=FORKLETD_${1^^} ck t0 ms mode
        FORKLETD=${!v}
        start_daemon
        "$FORKLET" wait "s$1" --for=Running --timeout=60 || fail "s$1 not Running"
        ck=$("$FORKLET" checkpoint create "s$1" --wait) || fail "s$1: checkpoint"
        mode=$("$FORKLET" checkpoint inspect "s$1" "$ck" -o json | jq -r .mode)
        sleep "$DELAY"
        t0=$(date +%s%N)
        if [ "$REQUEST" = pause ]; then
                "$FORKLET" pause "s$1" >/dev/null || fail "s$1: pause during the give-back"
                ms=$((($(date +%s%N) - t0) / 1000000))
                "$FORKLET" resume "s$1" >/dev/null || fail "s$1: resume"
        else
                "$FORKLET" checkpoint create "s$1" >/dev/null ||
                        fail "s$1: checkpoint during the give-back"
                ms=$((($(date +%s%N) - t0) / 1000000))
        fi
        # the second checkpoint's own give-back: done before this forkletd stops
        sleep 1
        echo "$1 $ms $mode" >>"$OUT"
        stop_daemon
}

bench_boot base
bench_boot new
for _ in $(seq "$REPS"); do
        round base
        round new
done

bench_turns_table "$OUT" \
        "$REQUEST request $DELAY s after a live checkpoint's Ready (its give-back running), ms;" \
        "guest $MIB MiB, $REPS each, forkletds taking turns; notes: the first checkpoint's mode"
