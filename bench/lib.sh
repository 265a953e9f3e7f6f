#!/bin/bash
# SPDX-License-Identifier: MIT
# Shared by the shell benchmarks that source it after tests/lib/harness.sh (it defines
# functions only):
#   pct P [DECIMALS]  the P-quantile (0..1, nearest rank) of the numbers on stdin, "-" for none
#   bench_boot D      forkletd $FORKLETD_<D> boots session sD (Running), then stops (VMs stay)
#   bench_node MIB [LINES...]  after fk_setup: one size class "small" of MIB MiB and 1 vCPU,
#                     the node config (with LINES) in $T/node.yaml, and an empty $OUT
#   bench_turns_table OUT TITLE...  the p50/max of each forkletd's "D MS [NOTE]" lines in OUT
#                     (base, then new) and the ratio of base's p50 to each
#   bench_boot_steps NAME  "disk qemu restore agent identity total" (ms, tab-separated) of the
#                     session's last boot (status.bootTiming)
#   bench_steps_row OUT D K BASE_K  a row of a steps table: the lines "D K WALL <bench_boot_steps>"
#                     of OUT, their wall p50/p90 and steps' medians, and the ratio of the wall
#                     p50 of the lines "base BASE_K ..." to theirs (bench_steps_head: its head)
#   bench_fill NAME MIB  the session's guest writes MIB MiB of random data into its /run tmpfs
#                     (nothing for 0)

pct() {
        sort -n | awk -v p="$1" -v f="%.${2:-0}f" '{v[NR] = $1} END {if (!NR) {print "-"; exit}
                i = int((NR - 1) * p + 0.5) + 1; printf f, v[i]}'
}

bench_node() {
        FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: $1, cpu: 1.0, pids: 1024}")
        shift
        fk_node_config "$@" >"$T/node.yaml"
        OUT=$T/results
        : >"$OUT"
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

bench_boot_steps() {
        "$FORKLET" get session "$1" -o json | jq -r '.status.bootTiming |
                [.diskMs, .qemuMs, .restoreMs, .agentMs, .identityMs, .totalMs] | map(. // 0 | round) | @tsv'
}

bench_fill() {
        [ "$2" = 0 ] || gsh "$1" "head -c 1048576 /dev/urandom >/run/r1m &&
                i=0 && while [ \$i -lt $2 ]; do cat /run/r1m; i=\$((i + 1)); done >/run/fill" ||
                fail "fill $2 MiB in $1"
}

bench_steps_head() {
        printf "%-9s %-7s | %-13s | %-5s %-7s %-8s %-7s %-9s %-7s | %s\n" forkletd "$1" "wall p50/p90" \
                disk qemu restore agent identity total "wall vs $2"
}

bench_steps_row() {
        local out=$1 d=$2 k=$3 b50 w50
        sel() { awk -v d="$d" -v k="$k" -v c="$1" '$1 == d && $2 == k {print $c}' "$out"; }
        b50=$(awk -v k="$4" '$1 == "base" && $2 == k {print $3}' "$out" | pct 0.5)
        w50=$(sel 3 | pct 0.5)
        printf "%-9s %-7s | %5s / %-5s | %-5s %-7s %-8s %-7s %-9s %-7s | %.2fx\n" "$d" "$k" \
                "$w50" "$(sel 3 | pct 0.9)" "$(sel 4 | pct 0.5)" "$(sel 5 | pct 0.5)" "$(sel 6 | pct 0.5)" \
                "$(sel 7 | pct 0.5)" "$(sel 8 | pct 0.5)" "$(sel 9 | pct 0.5)" \
                "$(awk -v a="$b50" -v b="$w50" 'BEGIN {print (b > 0 ? a / b : 0)}')"
}
