#!/bin/bash
# SPDX-License-Identifier: MIT
# Memory back to the host through forkletd on real QEMU (TCG): a booted session's guest writes
# and frees 150 MiB; its RAM file (share=on, on runDir's tmpfs) keeps them allocated until the
# periodic give-back (the balloon inflated to the guest's free memory, then deflated) punches
# them out; a live checkpoint's precopy save skips the guest's free pages (free page hinting)
# instead of reading every page in, and the give-back after its Writing phase takes what the
# guest freed out again. Forks of that checkpoint and the session rolled back to it map the
# checkpoint's RAM file copy-on-write (with the balloon device, as their source had it): their
# guests write and free memory too, no give-back ever runs for them, and the checkpoint's RAM
# file keeps its hash and its allocated size. A checkpoint requested while a give-back runs
# does not wait for it, nor does a pause (a spec change): the give-back stops (in its wait for
# the guest's stats, or inflating) and says it was cut short.
# Usage: fork-give-back.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=gback
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

ok() { echo "ok - $*"; }
# a guest under TCG takes up to ~20 s to write 150 MiB to fresh pages on a loaded host
INTERVAL=40
# a QEMU with root's capabilities (no jail, forkletd keeps them all) takes its live checkpoints
# by background snapshot: without CAP_SYS_PTRACE QEMU 7.2 gets no userfaultfd here
# (vm.unprivileged_userfaultfd=0) and falls back to stop-and-copy, which reads no page in
FK_JAIL="{uidBase: $FK_UID_BASE, uidCount: 0}"
FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: 384, cpu: 1.0, pids: 1024}")
fk_node_config "memoryGiveBack: {intervalSeconds: $INTERVAL, thresholdMiB: 32, marginMiB: 16}" \
        "hardening: {dropCapabilities: false}" >"$T/node.yaml"
# the balloon's free page hinting is off unless forkletd's environment asks for it
export FORKLET_BALLOON_HINT=on

# mib FILE: its allocated size in MiB (what it holds of the host's memory on a tmpfs)
mib() { stat -c '%b %B' "$1" | awk '{ printf "%d", $1 * $2 / 1048576 }'; }
# checks NAME: the give-back lines of session NAME in the log (a give-back or a check)
checks() { grep -cE "session default\.$1: (gave|memory check|no memory given back)" "$T/forkletd.log"; }
# next_check NAME N SECONDS: waits until NAME has more than N such lines
next_check() {
        local i
        for i in $(seq $(($3 * 2))); do
                [ "$(checks "$1")" -gt "$2" ] && return 0
                sleep 0.5
        done
        return 1
}
# churn NAME MIB: the guest writes MIB MiB to its tmpfs and frees them again
churn() { gsh "$1" "head -c $(($2 * 1048576)) /dev/zero > /run/churn && rm /run/churn && echo done"; }

start_daemon
session web
"$FORKLET" wait web --for=Running --timeout=240 || fail "web not Running"
ram=$(jq -r '.vm.memPath' "$T/state/sessions/default.web/state.json")
[ "$(jq -r '.vm.balloon' "$T/state/sessions/default.web/state.json")" = true ] ||
        fail "web's VM record has no balloon"
[ "$(jq -r '.vm.balloonHint' "$T/state/sessions/default.web/state.json")" = true ] ||
        fail "web's VM record has no free page hinting"
tr '\0' ' ' <"/proc/$("$FORKLET" get session web -o json | jq -r .status.vm.pid)/cmdline" | grep -q 'virtio-balloon-device,id=balloon0,deflate-on-oom=on,free-page-hint=on' ||
        fail "web's QEMU has no balloon device"
zcat "$IMG/initrd.img" | cpio -t 2>/dev/null | grep -q 'virtio_balloon.ko$' || fail "no virtio_balloon in the initrd"
gsh web 'grep -q "^virtio_balloon " /proc/modules' || fail "virtio_balloon not loaded in the guest"
ok "web runs with the balloon device and the guest's virtio_balloon"

# ---- the periodic give-back: write and free 150 MiB, between two checks -------------------
# right after a check, so the churn fits before the next one (on a loaded host it may not:
# then the measurement is void and the cycle is tried again)
for try in 1 2 3; do
        n=$(checks web)
        next_check web "$n" $((INTERVAL + 60)) || fail "no periodic memory check within $((INTERVAL + 60)) s"
        n=$(checks web)
        before=$(mib "$ram")
        [ "$(churn web 150)" = done ] || fail "the guest could not write 150 MiB"
        freed=$(mib "$ram")
        [ "$(checks web)" = "$n" ] && break
        echo "# a check ran during the churn (try $try): again"
        [ $try = 3 ] && fail "a check ran during each of 3 churns"
done
next_check web "$n" $((INTERVAL + 60)) || fail "no memory check after the churn"
sleep 1
after=$(mib "$ram")
echo "# RAM file (MiB): before $before, after writing and freeing 150 MiB $freed, after the give-back $after"
# (some of the 150 MiB may land on pages the file held already: freed earlier, not given back)
[ "$freed" -ge $((before + 100)) ] || fail "the RAM file grew only $before -> $freed MiB"
[ "$after" -le $((freed - 110)) ] || fail "the give-back left $after of $freed MiB"
grep -q "session default.web: gave .* (periodic check" "$T/forkletd.log" || fail "no give-back logged"
"$FORKLET" get session web -o json | jq -e '.status.events[] | select(.reason == "MemoryReturned")' >/dev/null ||
        fail "no MemoryReturned event"
# the pages came back to the guest: it can use them all again
[ "$(churn web 150)" = done ] || fail "the guest cannot use its memory after the give-back"
ok "write+free 150 MiB: RAM file $before -> $freed -> $after MiB (given back); the guest reuses it"

# ---- a live checkpoint reads every page in; the give-back after its Writing phase --------
pre_ck=$(mib "$ram")
gave0=$(grep -c "session default.web: gave .*: RAM file" "$T/forkletd.log")
ck=$("$FORKLET" checkpoint create web --wait) || fail "checkpoint"
mode=$("$FORKLET" checkpoint inspect web "$ck" -o json | jq -r .mode)
[ "$("$FORKLET" checkpoint inspect web "$ck" -o json | jq -r .balloon)" = true ] ||
        fail "$ck: meta.json does not record the balloon"
if [ "$mode" = live ]; then
        # the first give-back since: the one after the Writing phase, or a periodic check that
        # came first; its line says what the RAM file held before and after
        pat="session default.web: gave .*: RAM file"
        for _ in $(seq 240); do [ "$(grep -c "$pat" "$T/forkletd.log")" -gt "$gave0" ] && break; sleep 0.5; done
        line=$(grep "$pat" "$T/forkletd.log" | sed -n "$((gave0 + 1))p")
        [ -n "$line" ] || fail "no give-back after the live checkpoint within 120 s"
        grep -q "session default.web: .*(after a live checkpoint" "$T/forkletd.log" ||
                fail "no give-back job after the live checkpoint's Writing phase"
        read_in=$(echo "$line" | sed -n 's/.*RAM file \([0-9]*\)\.[0-9] -> \([0-9]*\)\.[0-9] MiB.*/\1/p')
        after_ck=$(echo "$line" | sed -n 's/.*RAM file \([0-9]*\)\.[0-9] -> \([0-9]*\)\.[0-9] MiB.*/\2/p')
        method=$("$FORKLET" checkpoint inspect web "$ck" -o json | jq -r .method)
        echo "# checkpoint $ck (live, $method): RAM file $pre_ck MiB before, $read_in MiB once written, $after_ck MiB after the give-back"
        [ "$("$FORKLET" checkpoint inspect web "$ck" -o json | jq -r .balloonHint)" = true ] ||
                fail "$ck: meta.json does not record the balloon's free page hinting"
        # free page hinting keeps a precopy save off the guest's free pages: it reads in fewer
        # than half of the file's holes (without it, all: 384 MiB; 2026-12-05: 262 -> 273)
        if [ "$method" = precopy ]; then
                [ "$read_in" -le $((pre_ck + (384 - pre_ck) / 2)) ] ||
                        fail "a live save read the guest's free pages in: RAM file $pre_ck -> $read_in of 384 MiB (free page hinting?)"
        fi
        # what the guest wrote and freed (150 MiB) goes back after it
        [ "$after_ck" -le $((read_in - 100)) ] || fail "after the checkpoint: $read_in -> $after_ck MiB"
        [ "$(mib "$ram")" -le $((after_ck + 32)) ] || fail "the RAM file is back at $(mib "$ram") MiB"
        ok "live checkpoint: RAM file $pre_ck -> $read_in -> $after_ck MiB after the give-back"
else
        echo "# $ck is $mode ($("$FORKLET" checkpoint inspect web "$ck" -o json | jq -r .fallback)): no page read in"
fi

# ---- a request does not wait behind a give-back: the give-back stops early ----------------
# another live checkpoint after the guest wrote and freed 150 MiB: the give-back after its
# Writing phase has a second or more of inflating to do (stats, then ~150 MiB under TCG); a
# checkpoint request right after it starts cuts it short, and the give-back says so. On a
# loaded host the request may come only once the give-back is over (or in its last poll: then
# it says "a request came as it ended"): nothing was left to cut, and the step is tried again,
# up to 3 times.
if [ "$mode" = live ]; then
        started="session default.web: giving memory back (after a live checkpoint)"
        # it stops in the wait for the guest's stats (the balloon untouched) or while inflating
        cut="session default.web: (gave .*\(after a live checkpoint: .*cut short|memory check \(after a live checkpoint\) stopped before the guest's stats came): a request was waiting"
        ended="session default\.web: (gave .*|memory check .*|giving memory back .* failed: .*)"
        # giving_back WHAT: churn 150 MiB, a live checkpoint (--wait), and back once the
        # give-back after it has started; prints the log line where it started
        giving_back() {
                local n i line
                [ "$(churn web 150)" = done ] || fail "churn before the $1 checkpoint"
                n=$(grep -cF "$started" "$T/forkletd.log")
                "$FORKLET" checkpoint create web --wait >/dev/null || fail "$1 checkpoint"
                for i in $(seq 600); do
                        line=$(grep -nF "$started" "$T/forkletd.log" | sed -n "$((n + 1))s/:.*//p")
                        [ -n "$line" ] && echo "$line" && return 0
                        sleep 0.05
                done
                fail "no give-back started after the $1 checkpoint"
        }
        # cut_short FROM: the give-back started on log line FROM stopped early for the request
        cut_short() {
                awk -v from="$1" 'NR > from' "$T/forkletd.log" | grep -E "$ended" | head -n1 | grep -qE "$cut"
        }
        # during WHAT UNDO COMMAND...: a give-back after a live checkpoint, then COMMAND while it
        # runs (UNDO after a void try); 3 tries; prints the ms COMMAND took
        during() {
                local what=$1 undo=$2 from t0 ms try
                shift 2
                for try in 1 2 3; do
                        from=$(giving_back "$what") || exit 1
                        t0=$(date +%s%N)
                        "$@" >/dev/null || fail "$what during the give-back: $*"
                        ms=$((($(date +%s%N) - t0) / 1000000))
                        cut_short "$from" && echo "$ms" && return 0
                        grep -E "$ended" "$T/forkletd.log" | tail -n1 >&2
                        echo "# the give-back was not cut short (try $try): again" >&2
                        $undo >/dev/null || fail "$undo"
                done
                fail "the give-back was not cut short by the $what in 3 tries"
        }
        ms=$(during "checkpoint request" : "$FORKLET" checkpoint create web) || exit 1
        case $(grep -oE "$cut" "$T/forkletd.log" | tail -n1) in
        *"stats came"*) how="before the guest's stats came" ;;
        *) how="while inflating" ;;
        esac
        ok "a checkpoint request during the give-back after a live checkpoint: the give-back stopped early ($how), checkpoint in $ms ms"

        # ... nor does a spec change: pause (spec.state) while the next give-back runs
        ms=$(during pause "$FORKLET resume web --timeout=60" "$FORKLET" pause web --timeout=60) || exit 1
        "$FORKLET" resume web --timeout=60 >/dev/null || fail "resume after the pause"
        ok "a pause during the give-back after a live checkpoint: the give-back stopped early, Paused in $ms ms"
fi

# ---- forks and the rolled-back session never give back; the checkpoint's RAM is intact ----
ckram=$T/state/sessions/default.web/checkpoints/$ck/ram
sum0=$(sha256sum <"$ckram")
alloc0=$(mib "$ckram")
forks=$("$FORKLET" fork web --from "$ck" --count 2) || fail "fork"
for f in $forks; do
        "$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f not Running"
        [ "$(jq -r '.vm.balloon' "$T/state/sessions/default.$f/state.json")" = true ] ||
                fail "$f: no balloon (its checkpoint's source had one)"
        [ "$(jq -r '.vm.memPrivate' "$T/state/sessions/default.$f/state.json")" = true ] ||
                fail "$f: RAM not private"
done
"$FORKLET" rollback web "$ck" >/dev/null || fail "rollback"
"$FORKLET" wait web --for=Running --timeout=240 || fail "web not Running after the rollback"
for s in $forks web; do
        [ "$(churn "$s" 150)" = done ] || fail "$s: churn"
done
fork_checks=0
for f in $forks; do fork_checks=$((fork_checks + $(checks "$f"))); done
n=$(checks web)
sleep $((INTERVAL * 2 + 10))
for f in $forks; do fork_checks=$((fork_checks - $(checks "$f"))); done
[ "$fork_checks" = 0 ] || fail "a give-back ran for a fork"
[ "$(checks web)" = "$n" ] || fail "a give-back ran for the rolled-back session"
for s in $forks web; do
        [ "$(gsh "$s" 'echo alive')" = alive ] || fail "$s does not answer"
done
[ "$(sha256sum <"$ckram")" = "$sum0" ] || fail "the checkpoint's RAM file changed"
[ "$(mib "$ckram")" = "$alloc0" ] || fail "the checkpoint's RAM file's allocation changed ($alloc0 -> $(mib "$ckram") MiB)"
ok "2 forks and the rollback churned 150 MiB each, no give-back for them; $ck's RAM (${alloc0} MiB) unchanged"

echo "PASS"
