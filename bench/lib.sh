#!/bin/bash
# SPDX-License-Identifier: MIT
# Shared by the shell benchmarks that source it after tests/lib/harness.sh (it defines
# functions only):
#   pct P [DECIMALS]  the P-quantile (0..1, nearest rank) of the numbers on stdin, "-" for none
#   bench_boot D      forkletd $FORKLETD_<D> boots session sD (Running), then stops (VMs stay)
#   bench_turns_table OUT TITLE...  the p50/max of each forkletd's "D MS [NOTE]" lines in OUT
#                     (base, then new) and the ratio of base's p50 to each

pct() {
        sort -n | awk -v p="$1" -v f="%.${2:-0}f" '{v[NR] = $1} END {if (!NR) {print "-"; exit}
                i = int((NR - 1) * p + 0.5) + 1; printf f, v[i]}'
}

bench_boot() {
        local v=FORKLETD_${1^^}
        FORKLETD=${!v}
        start_daemon
        session "s$1"
        "$FORKLET" wait "s$1" --for=Running --timeout=300 || fail "s$1 not Running"
        stop_daemon
}

bench_turns_table() {
        local out=$1 d v50 b50 notes
        shift
        printf '%s\n' "$@"
        printf '%-9s | %-5s %-5s | %-10s | %s\n' forkletd p50 max "vs base" notes
        b50=$(awk '$1 == "base" {print $2}' "$out" | pct 0.5)
        for d in base new; do
                v50=$(awk -v d="$d" '$1 == d {print $2}' "$out" | pct 0.5)
                notes=$(awk -v d="$d" '$1 == d {print $3}' "$out" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')
                printf '%-9s | %-5s %-5s | %-10s | %s\n' "$d" "$v50" \
                        "$(awk -v d="$d" '$1 == d {print $2}' "$out" | pct 1)" \
                        "$(awk -v a="$b50" -v b="$v50" 'BEGIN {printf "%.2fx", (b > 0 ? a / b : 0)}')" \
                        "$notes"
        done
}
