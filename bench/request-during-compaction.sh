#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/request-during-compaction: how long a pause waits when it comes while the live disk
# compaction streams the session's layers into its top, a new forkletd against a baseline one in
# the same run, turns taken. Each forkletd boots its own session, which writes MIB MiB of random
# data to /workspace. Per round: checkpoints (--wait) until the compaction starts a stream (the
# stream then copies those MiB into the top, at disk speed), DELAY s, then `forklet pause`
# timed (request to Paused); then resume, and the stream (started over) is let finish. A round
# whose stream ended before the pause is counted as such ("ended-first"), one whose stream the
# pause cut short too (",cut"). Through a real
# forkletd (tests/lib/harness.sh: tmpfs runDir, disk stateDir, jailed QEMU).
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/request-during-compaction.sh \
#   FORKLETD FORKLET BASE_FORKLETD   [MIB=256 REPS=3 DELAY=0.3 SPEED=0]
# SPEED (bytes/s, 0: none) caps the stream's copy (FORKLET_LIVE_COMPACT_SPEED, both forkletds):
# a disk slower than this host's page cache, which holds the layers here.
FORKLETD_NEW=${1:?forkletd path}
FORKLET=${2:?forklet path}
FORKLETD_BASE=${3:?baseline forkletd path}
MIB=${MIB:-256}
REPS=${REPS:-3}
DELAY=${DELAY:-0.3}
SPEED=${SPEED:-0}
[ "$SPEED" = 0 ] || export FORKLET_LIVE_COMPACT_SPEED=$SPEED
FK_TAG=bench-rdc
. "$(dirname "$0")/../tests/lib/harness.sh"
. "$(dirname "$0")/lib.sh"
fk_setup
fk_require_cmds qemu-img jq
OUT=$T/results
: >"$OUT"

log_count() { grep -c "$1" "$T/forkletd.log"; }
top() { # the live top overlay of session sD
        local sd=$T/state/sessions/default.s$1
        echo "$sd/disk/$(jq -r .disk "$sd/state.json")"
}
depth() { qemu-img info -U --backing-chain "$(top "$1")" | grep -c '^image:'; }

# round D: one timed pause during a stream of session sD under forkletd D
round() {
        local v=FORKLETD_${1^^} s0 c0 k0 n=0 t0 ms note
        FORKLETD=${!v}
        start_daemon
        "$FORKLET" wait "s$1" --for=Running --timeout=60 || fail "s$1 not Running"
        s0=$(log_count 'streaming .* disk layers')
        while [ "$(log_count 'streaming .* disk layers')" = "$s0" ] && [ $n -lt 10 ]; do
                n=$((n + 1))
                "$FORKLET" checkpoint create "s$1" --wait >/dev/null || fail "s$1: checkpoint"
        done
        fk_wait 30 eval "[ \$(log_count 'streaming .* disk layers') -gt $s0 ]" ||
                fail "s$1: no stream after $n checkpoints (chain $(depth "$1") files)"
        c0=$(log_count 'disk chain compacted live')
        sleep "$DELAY"
        note=during-stream
        [ "$(log_count 'disk chain compacted live')" = "$c0" ] || note=ended-first
        k0=$(log_count 'live disk compaction cut short')
        t0=$(date +%s%N)
        "$FORKLET" pause "s$1" --timeout=120 >/dev/null || fail "s$1: pause during the stream"
        ms=$((($(date +%s%N) - t0) / 1000000))
        [ "$(log_count 'live disk compaction cut short')" = "$k0" ] || note=$note,cut
        echo "$1 $ms $note" >>"$OUT"
        "$FORKLET" resume "s$1" --timeout=120 >/dev/null || fail "s$1: resume"
        # the stream (started over after a cut) ends before this forkletd stops
        fk_wait 120 eval "[ \$(depth $1) -le 5 ]" || fail "s$1: the chain stays at $(depth "$1") files"
        stop_daemon
}

bench_boot base
bench_boot new
# the data every later stream copies into the top again
start_daemon
for d in base new; do
        gsh "s$d" "head -c $((MIB * 1048576)) /dev/urandom > /workspace/data && sync" ||
                fail "s$d: write $MIB MiB"
done
stop_daemon
for _ in $(seq "$REPS"); do
        round base
        round new
done
bench_turns_table "$OUT" \
        "pause requested $DELAY s after a live compaction's stream started (the session's disk holds $MIB MiB; stream speed cap ${SPEED} B/s, 0: none), ms;" \
        "request to Paused, $REPS each, forkletds taking turns; notes: whether the stream was still running, and cut short"
