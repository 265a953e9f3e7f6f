#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/give-back: a session's resident RAM before, right after (create returned: the guest
# runs, the checkpoint is Writing) and a minute after a live checkpoint, without and with the balloon give-back (memoryGiveBack.enabled false / true) in
# the same run. Through a real forkletd (the harness of tests/lib/harness.sh: tmpfs runDir,
# disk stateDir; no jail and root's capabilities kept, so QEMU 7.2 gets a userfaultfd and takes
# the live checkpoint by background snapshot). The
# guest (MIB MiB) keeps TOUCH MiB in a file of its tmpfs. Resident RAM: the allocated size of its
# RAM file (guest memory on the host's tmpfs) and QEMU's RSS (which maps that file).
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/give-back.sh build/agent/forkletd \
#   build/cli/forklet   [MIB=512 TOUCH=118 SETTLE=40 AFTER=60 INTERVAL=30]
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
MIB=${MIB:-512}
TOUCH=${TOUCH:-118}
SETTLE=${SETTLE:-40}
AFTER=${AFTER:-60}
INTERVAL=${INTERVAL:-30}
FK_TAG=bench-gb
. "$(dirname "$0")/../tests/lib/harness.sh"
fk_setup
FK_JAIL="{uidBase: $FK_UID_BASE, uidCount: 0}"
FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: $MIB, cpu: 1.0, pids: 1024}")
OUT=$T/results
: >"$OUT"

mib() { stat -c '%b %B' "$1" | awk '{ printf "%d", $1 * $2 / 1048576 }'; }
rss() { awk '/^VmRSS:/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
# sample NAME: "RAMFILE/RSS" in MiB
sample() {
        local st=$T/state/sessions/default.$1/state.json
        echo "$(mib "$(jq -r .vm.memPath "$st")")/$(rss "$(jq -r .vm.pid "$st")")"
}

# run ENABLED: one forkletd with memoryGiveBack.enabled ENABLED, one session, one checkpoint
run() {
        local name=gb-$1 before right later ck method t0 left
        fk_node_config "memoryGiveBack: {enabled: $1, intervalSeconds: $INTERVAL}" \
                "hardening: {dropCapabilities: false}" >"$T/node.yaml"
        start_daemon
        session "$name"
        "$FORKLET" wait "$name" --for=Running --timeout=300 || fail "$name not Running"
        gsh "$name" "head -c $((TOUCH * 1048576)) /dev/urandom > /run/touched" ||
                fail "$name: touch $TOUCH MiB"
        # the first periodic check (on: the boot's leftovers go) has passed in both runs
        sleep "$SETTLE"
        before=$(sample "$name")
        t0=$(date +%s)
        ck=$("$FORKLET" checkpoint create "$name") || fail "$name: checkpoint"
        right=$(sample "$name")
        for _ in $(seq 600); do
                [ "$("$FORKLET" checkpoint inspect "$name" "$ck" -o json | jq -r .status)" = Ready ] &&
                        break
                sleep 0.2
        done
        left=$((AFTER - ($(date +%s) - t0)))
        [ "$left" -le 0 ] || sleep "$left"
        later=$(sample "$name")
        method=$("$FORKLET" checkpoint inspect "$name" "$ck" -o json |
                jq -r '[.mode, (.method // .fallback // "")] | join(" ")')
        printf '%s|%s|%s|%s|%s\n' "$1" "$before" "$right" "$later" "$method" >>"$OUT"
        "$FORKLET" delete "$name" >/dev/null
        unlisted_within 120 "$name" || fail "$name not deleted"
        stop_daemon
}

run false
run true

echo "$(qemu-system-x86_64 --version | head -n 1); guest $MIB MiB, $TOUCH MiB touched; a minute = $AFTER s"
printf '%-10s %-16s %-16s %-16s %s\n' "give-back" "before" "right after" "${AFTER} s after" \
        "checkpoint"
printf '%-10s %-16s %-16s %-16s %s\n' "" "(file/RSS MiB)" "(file/RSS MiB)" "(file/RSS MiB)" ""
while IFS='|' read -r on b r l m; do
        printf '%-10s %-16s %-16s %-16s %s\n' "$([ "$on" = true ] && echo on || echo off)" "$b" "$r" \
                "$l" "$m"
done <"$OUT"
awk -F'|' '{split($4, a, "/"); v[$1] = a[1]} END {if (v["true"] > 0)
        printf "RAM file %d s after the checkpoint: %.1fx smaller with the give-back\n", '"$AFTER"', v["false"] / v["true"]}' "$OUT"
