#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/request-during-give-back: how long a checkpoint request waits when it comes while the
# give-back after a live checkpoint runs (the balloon inflating to the guest's free memory), a
# new forkletd against a baseline one in the same run, turns taken. Each forkletd boots its own
# MIB MiB session; per round: a live checkpoint (--wait: Ready), DELAY s for the give-back due
# after it to start, then `forklet checkpoint create` timed (request to the source running
# again). Through a real forkletd (tests/lib/harness.sh: tmpfs runDir, disk stateDir; no jail
# and root's capabilities kept, so QEMU 7.2 takes live checkpoints by background snapshot).
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/request-during-give-back.sh \
#   FORKLETD FORKLET BASE_FORKLETD   [MIB=1024 REPS=3 DELAY=0.5]
FORKLETD_NEW=${1:?forkletd path}
FORKLET=${2:?forklet path}
FORKLETD_BASE=${3:?baseline forkletd path}
MIB=${MIB:-1024}
REPS=${REPS:-3}
DELAY=${DELAY:-0.5}
FK_TAG=bench-rgb
. "$(dirname "$0")/../tests/lib/harness.sh"
fk_setup
FK_JAIL="{uidBase: $FK_UID_BASE, uidCount: 0}"
FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: $MIB, cpu: 1.0, pids: 1024}")
fk_node_config "memoryGiveBack: {intervalSeconds: 3600}" \
        "hardening: {dropCapabilities: false}" >"$T/node.yaml"
OUT=$T/results
: >"$OUT"

pct() { sort -n | awk -v p="$1" '{v[NR] = $1} END {if (!NR) {print "-"; exit}
        i = int((NR - 1) * p + 0.5) + 1; printf "%.0f", v[i]}'; }

# boot D: the session sD, booted by forkletd D (left Running for its rounds)
boot() {
        local v=FORKLETD_${1^^}
        FORKLETD=${!v}
        start_daemon
        session "s$1"
        "$FORKLET" wait "s$1" --for=Running --timeout=300 || fail "s$1 not Running"
        stop_daemon
}

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
        "$FORKLET" checkpoint create "s$1" >/dev/null || fail "s$1: checkpoint during the give-back"
        ms=$((($(date +%s%N) - t0) / 1000000))
        # the second checkpoint's own give-back: done before this forkletd stops
        sleep 1
        echo "$1 $ms $mode" >>"$OUT"
        stop_daemon
}

boot base
boot new
for _ in $(seq "$REPS"); do
        round base
        round new
done

echo "checkpoint request $DELAY s after a live checkpoint's Ready (its give-back running), ms;"
echo "guest $MIB MiB, $REPS each, forkletds taking turns"
printf '%-9s | %-5s %-5s | %-10s | %s\n' forkletd p50 max "vs base" "first checkpoint's mode"
b50=$(awk '$1 == "base" {print $2}' "$OUT" | pct 0.5)
for d in base new; do
        v50=$(awk -v d="$d" '$1 == d {print $2}' "$OUT" | pct 0.5)
        printf '%-9s | %-5s %-5s | %-10s | %s\n' "$d" "$v50" \
                "$(awk -v d="$d" '$1 == d {print $2}' "$OUT" | pct 1)" \
                "$(awk -v a="$b50" -v b="$v50" 'BEGIN {printf "%.2fx", (b > 0 ? a / b : 0)}')" \
                "$(awk -v d="$d" '$1 == d {print $3}' "$OUT" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
done
