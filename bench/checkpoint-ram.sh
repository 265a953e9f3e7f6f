#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/checkpoint-ram: what a live checkpoint of a booted session costs its host in RAM and
# time, a new forkletd against a baseline one in the same run, turns taken. Each forkletd boots
# its own MIB MiB session (so each guest has the devices its forkletd gives a boot), whose guest
# keeps TOUCH MiB in a file of its tmpfs. Per round: `forklet checkpoint create` timed (request
# to the source running again: the precopy's RAM pass is inside it), the guest RAM file's
# allocated MiB before, right after and when the checkpoint is Ready, the time to Ready, and the
# RAM file SETTLE s later (after the give-back a live checkpoint brings). Through a real forkletd
# (tests/lib/harness.sh: tmpfs runDir, disk stateDir, jail: precopy under TCG). The new
# forkletd runs with FORKLET_BALLOON_HINT=on (free page hinting; BASE_FORKLETD may be the same
# binary), the baseline without.
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/checkpoint-ram.sh \
#   FORKLETD FORKLET BASE_FORKLETD   [MIB=1024 TOUCH=100 REPS=3 SETTLE=20]
FORKLETD_NEW=${1:?forkletd path}
FORKLET=${2:?forklet path}
FORKLETD_BASE=${3:?baseline forkletd path}
MIB=${MIB:-1024}
TOUCH=${TOUCH:-100}
REPS=${REPS:-3}
SETTLE=${SETTLE:-20}
FK_TAG=bench-ckram
. "$(dirname "$0")/../tests/lib/harness.sh"
. "$(dirname "$0")/lib.sh"
fk_setup
bench_node "$MIB"

# ram NAME: the allocated MiB of the session's guest RAM file
ram() {
        stat -c '%b %B' "$(jq -r .vm.memPath "$T/state/sessions/default.$1/state.json")" |
                awk '{ printf "%d", $1 * $2 / 1048576 }'
}

# hint D: forkletd D's environment (free page hinting for the new one)
hint() {
        if [ "$1" = new ]; then export FORKLET_BALLOON_HINT=on; else unset FORKLET_BALLOON_HINT; fi
}

# round D: one checkpoint of session sD under forkletd D
round() {
        local v=FORKLETD_${1^^} s=s$1 ck t0 create before right ready_ms ready later i st
        FORKLETD=${!v}
        hint "$1"
        start_daemon
        "$FORKLET" wait "$s" --for=Running --timeout=60 || fail "$s not Running"
        before=$(ram "$s")
        t0=$(date +%s%N)
        ck=$("$FORKLET" checkpoint create "$s") || fail "$s: checkpoint"
        create=$((($(date +%s%N) - t0) / 1000000))
        right=$(ram "$s")
        for i in $(seq 600); do
                st=$("$FORKLET" checkpoint inspect "$s" "$ck" -o json | jq -r .status)
                [ "$st" = Ready ] && break
                sleep 0.1
        done
        [ "$st" = Ready ] || fail "$s: $ck is $st after 60 s"
        ready_ms=$((($(date +%s%N) - t0) / 1000000))
        ready=$(ram "$s")
        sleep "$SETTLE"
        later=$(ram "$s")
        echo "$1 $create $ready_ms $before $right $ready $later" >>"$OUT"
        stop_daemon
}

for d in base new; do
        hint "$d"
        bench_boot "$d"
        FORKLETD=${FORKLETD_NEW}
        start_daemon
        gsh "s$d" "head -c $((TOUCH << 20)) /dev/urandom >/run/touch" || fail "touch in s$d"
        stop_daemon
done
for _ in $(seq "$REPS"); do
        round base
        round new
done

echo "live checkpoint of a booted $MIB MiB session whose guest keeps $TOUCH MiB, $REPS each, forkletds taking turns"
echo "ms: create (request to the source running) and Ready, p50/max; RAM file MiB (medians): before, right after create, at Ready, $SETTLE s later"
printf '%-9s | %-13s | %-13s | %-6s %-6s %-6s %-6s | %s\n' forkletd create ready before right ready later "create vs base"
b50=$(awk '$1 == "base" {print $2}' "$OUT" | pct 0.5)
for d in base new; do
        col() { awk -v d="$d" -v c="$1" '$1 == d {print $c}' "$OUT"; }
        c50=$(col 2 | pct 0.5)
        printf '%-9s | %5s / %-5s | %5s / %-5s | %-6s %-6s %-6s %-6s | %s\n' "$d" "$c50" "$(col 2 | pct 1)" \
                "$(col 3 | pct 0.5)" "$(col 3 | pct 1)" "$(col 4 | pct 0.5)" "$(col 5 | pct 0.5)" \
                "$(col 6 | pct 0.5)" "$(col 7 | pct 0.5)" \
                "$(awk -v a="$b50" -v b="$c50" 'BEGIN {printf "%.2fx", (b > 0 ? a / b : 0)}')"
done
echo "rounds (forkletd create_ms ready_ms before right ready later):"
cat "$OUT"
