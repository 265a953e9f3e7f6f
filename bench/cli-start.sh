#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/cli-start: the forklet CLI's wall per call, a new forklet against a baseline forklet in
# the same run (turns taken call by call), through a real forkletd (tests/lib/harness.sh) with
# one Running session: `forklet --help` (no I/O: the process start), `forklet get sessions` and
# `forklet exec NAME -- true`, and /bin/true for the floor. Each call is timed from the shell
# ($EPOCHREALTIME around it, no extra process). A row per command: p50/p90 of each binary (ms)
# and base p50 / new p50.
# Usage (root): bench/cli-start.sh FORKLETD FORKLET BASE_FORKLET [REPS=200]
#   e.g. BASE_FORKLET built from main in a clone of its own.
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
BASE_FORKLET=${3:?baseline forklet path}
REPS=${REPS:-200}
FK_TAG=bench-cli
. "$(dirname "$0")/../tests/lib/harness.sh"
. "$(dirname "$0")/lib.sh"
fk_setup
OUT=$T/results
: >"$OUT"

start_daemon
session s1
"$FORKLET" wait s1 --for=Running --timeout=300 || fail "s1 not Running"
"$FORKLET" exec s1 -- true || fail "exec s1 -- true"

# timed LABEL BIN ARGS...: one call, "LABEL MS" into $OUT (output dropped)
timed() {
        local label=$1 t0 t1
        shift
        t0=$EPOCHREALTIME
        "$@" >/dev/null 2>&1 || fail "$label: $* failed"
        t1=$EPOCHREALTIME
        echo "$label $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) * 1000}')" >>"$OUT"
}

for ((i = 0; i < REPS; i++)); do
        timed "true -" /bin/true
        for who in base new; do
                bin=$FORKLET
                [ $who = base ] && bin=$BASE_FORKLET
                timed "help $who" "$bin" --help
                timed "get $who" "$bin" get sessions
                timed "exec $who" "$bin" exec s1 -- true
        done
done

# q CMD WHO P: the P-quantile (ms) of CMD's calls by WHO
q() { awk -v c="$1" -v w="$2" '$1 == c && $2 == w {print $3}' "$OUT" | pct "$3" 2; }

echo "forklet CLI wall per call (ms), $REPS calls each, turns taken; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-32s | %-15s | %-15s | %s\n' command "base p50 / p90" "new p50 / p90" "base/new p50"
printf '%-32s | %-15s | %-15s | %s\n' "/bin/true" "$(q true - 0.5) / $(q true - 0.9)" "" ""
for c in help get exec; do
        case $c in
        help) what="forklet --help" ;;
        get) what="forklet get sessions" ;;
        exec) what="forklet exec s1 -- true" ;;
        esac
        b=$(q $c base 0.5)
        n=$(q $c new 0.5)
        printf '%-32s | %-15s | %-15s | %s\n' "$what" "$b / $(q $c base 0.9)" \
                "$n / $(q $c new 0.9)" "$(awk -v a="$b" -v b="$n" 'BEGIN {printf "%.2fx", a / b}')"
done
