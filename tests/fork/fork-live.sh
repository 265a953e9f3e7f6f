#!/bin/bash
# SPDX-License-Identifier: MIT
# Checkpoints that let the source run and copy-free rollback through forkletd on real QEMU (TCG),
# with a guest that writes memory all the time (a counter loop and a 16 MiB rewrite loop): the
# first checkpoint is live (background snapshot) or, where QEMU refuses that (a jailed QEMU 7.2
# has no userfaultfd), stop-and-copy with the reason recorded; rollback maps its RAM
# copy-on-write (no RAM file in the run dir, the QEMU maps origin/ram); a checkpoint of the
# rolled back (private RAM) session returns while it is Writing, a fork asked for meanwhile
# waits for Ready and continues the counter from the checkpoint's instant at the same PID;
# --wait waits for Ready; kill -9 of forkletd while Writing leaves the source running and no
# checkpoint listed; FORKLET_CHECKPOINT_MODE=stop-copy is recorded; the session stays forkable.
# Usage: fork-live.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=live
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

ok() { echo "ok - $*"; }
# ck_field NAME ID KEY: a scalar of `checkpoint inspect -o json`
ck_field() {
        "$FORKLET" checkpoint inspect "$1" "$2" -o json 2>/dev/null |
                sed -n "s/^ *\"$3\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" | head -n1
}
# qemus KEY: QEMU processes (the session's and helpers) whose command line names its run dir
qemus() {
        local p n=0
        for p in /proc/[0-9]*; do
                grep -qs "$T/run/sessions/$1/" "$p/cmdline" &&
                        tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q '^qemu-system' && n=$((n + 1))
        done
        echo $n
}

# forkletd's environment (an operator's token, say) does not reach the QEMU it starts
FK_PROBE_SECRET=must-not-leak start_daemon
session web
"$FORKLET" wait web --for=Running --timeout=240 || fail "web not Running"
qenv=$(tr '\0' '\n' <"/proc/$(field web pid)/environ") || fail "read the QEMU's environment"
if grep -q FK_PROBE_SECRET <<<"$qenv" || ! grep -q '^PATH=' <<<"$qenv"; then
        fail "the QEMU's environment: $(tr '\n' ' ' <<<"$qenv")"
fi
echo "ok - the QEMU got $(wc -l <<<"$qenv") variables of forkletd's environment, not FK_PROBE_SECRET"

# The counter stops in a copy: the guest agent writes a new fork id there before anything runs.
# Each value is renamed into place, so a reader never sees a file created but not yet written.
COUNTER='orig=$(cat /run/forklet/fork-id 2>/dev/null); i=0; echo $$ > /run/counter.pid
while [ "$(cat /run/forklet/fork-id 2>/dev/null)" = "$orig" ]; do
        i=$((i + 1)); echo $i > /run/counter.new; mv /run/counter.new /run/counter; sleep 0.05
done; echo $i > /run/counter.new && mv /run/counter.new /run/counter.final'
cpid=$("$FORKLET" exec web --detach -- sh -c "$COUNTER") || fail "start the counter"
"$FORKLET" exec web --detach -- sh -c \
        'while :; do head -c 16777216 /dev/urandom > /run/blob; done' >/dev/null ||
        fail "start the memory writer"
sleep 2
gpid=$(gsh web 'cat /run/counter.pid')

# ---- the first checkpoint: live where QEMU takes a background snapshot, else the fallback,
# recorded with QEMU's reason (a jailed QEMU 7.2 gets no userfaultfd: "not supported by host
# kernel"); the source runs on either way ----------------------------------------------------
ck0=$("$FORKLET" checkpoint create web --wait) || fail "first checkpoint"
mode0=$(ck_field web "$ck0" mode)
case $mode0 in
live) [ -n "$(ck_field web "$ck0" downtimeMs)" ] || fail "$ck0: live without downtimeMs" ;;
stop-copy) [ -n "$(ck_field web "$ck0" fallback)" ] || fail "$ck0: stop-copy without a fallback reason" ;;
*) fail "$ck0: mode '$mode0'" ;;
esac
# under TCG the session has the RAM tail (QEMU 7.2's precopy is exact then): live by precopy
rec=$T/state/sessions/default.web/state.json
if [ "$(jq -r .vm.ramTail "$rec")" = true ]; then
        [ "$mode0" = live ] && [ "$(ck_field web "$ck0" method)" = precopy ] ||
                fail "$ck0: a VM with the RAM tail checkpointed by $mode0/$(ck_field web "$ck0" method)"
        [ "$(ck_field web "$ck0" ramTail)" = true ] || fail "$ck0: meta lacks ramTail"
        # where the pause went: every step of the precopy switch-over, the disk switch included
        steps=$(ck_field web "$ck0" pauseSteps)
        [[ "$steps" =~ ^seen\ [0-9.]+\ switch\ [0-9.]+\ continue\ [0-9.]+\ completed\ [0-9.]+\ postmigrate\ [0-9.]+\ callback\ [0-9.]+\ cont\ [0-9.]+\ ms$ ]] &&
                [[ ! "$steps" =~ switch\ 0.00 ]] || fail "$ck0: pauseSteps '$steps'"
        echo "# $ck0 pause by step: $steps"
        grep -Eq -- "-m [0-9]+K " <(tr '\0' ' ' <"/proc/$(field web pid)/cmdline") ||
                fail "the VM with the RAM tail does not run with -m in KiB"
fi
ok "first checkpoint: $mode0 $(ck_field web "$ck0" method) ($(ck_field web "$ck0" fallback)), paused $(($(ck_field web "$ck0" pauseNs) / 1000)) us"

# ---- rollback maps the checkpoint's RAM copy-on-write ----------------------------------------
run=$T/run/sessions/default.web
used0=$(df -k --output=used "$T/run" | tail -n1)
t0=$(date +%s%N)
"$FORKLET" rollback web "$ck0" >/dev/null || fail "rollback to $ck0"
t1=$(date +%s%N)
used1=$(df -k --output=used "$T/run" | tail -n1)
qpid=$(field web pid)
rec=$T/state/sessions/default.web/state.json
[ "$(jq -r .vm.memPrivate "$rec")" = true ] || fail "rolled back VM does not map its RAM private"
[ "$(jq -r .vm.memPath "$rec")" = "$T/state/sessions/default.web/origin/ram" ] ||
        fail "rolled back VM's memPath: $(jq -r .vm.memPath "$rec")"
[ ! -e "$run/mem.ram" ] || fail "a RAM file in the run dir after rollback"
grep -q "origin/ram" "/proc/$qpid/maps" || fail "QEMU $qpid does not map the checkpoint's RAM"
ram=$(ck_field web "$ck0" ramBytes)
[ $(((used1 - used0) * 1024)) -lt $((ram / 2)) ] ||
        fail "runDir grew $(((used1 - used0) / 1024)) MiB on rollback (RAM $((ram / 1048576)) MiB)"
[ "$(gsh web 'cat /run/counter.pid')" = "$gpid" ] || fail "counter pid differs after rollback"
ok "rollback without a RAM copy in $(((t1 - t0) / 1000000)) ms (runDir +$((used1 - used0)) KiB)"
# the rollback gave the guest a new fork id: the counter ended; start it (and the writer) again
cpid=$("$FORKLET" exec web --detach -- sh -c "$COUNTER") || fail "start the counter again"
"$FORKLET" exec web --detach -- sh -c \
        'while :; do head -c 16777216 /dev/urandom > /run/blob; done' >/dev/null ||
        fail "start the memory writer again"
sleep 2
gpid=$(gsh web 'cat /run/counter.pid')

# ---- a checkpoint of private RAM: create returns once the guest runs, the RAM file forks map
# is written after it (Writing), live or not --------------------------------------------------
c0=$(gsh web 'cat /run/counter')
t0=$(date +%s%N)
ck=$("$FORKLET" checkpoint create web) || fail "checkpoint create of the rolled back session"
t1=$(date +%s%N)
st=$(ck_field web "$ck" status)
c1=$(gsh web 'cat /run/counter')
[ "$c1" -gt "$c0" ] || fail "the source's counter did not move on ($c0 -> $c1)"
pause=$(ck_field web "$ck" pauseNs)
[ "$pause" -gt 0 ] || fail "$ck: no pauseNs"
[ "$st" = Writing ] || fail "$ck is $st right after create (the RAM file is written after it)"
"$FORKLET" get session web -o json | grep -q '"status": "Writing"' ||
        fail "status.checkpoints does not show Writing"
ok "checkpoint ($(ck_field web "$ck" mode)) returned in $(((t1 - t0) / 1000000)) ms, paused $((pause / 1000)) us, status Writing"

# ---- a fork of a Writing checkpoint waits for Ready ------------------------------------------
[ "$(ck_field web "$ck" status)" = Writing ] || echo "note: $ck became Ready before the fork"
f=$("$FORKLET" fork web --from "$ck" --count 1) || fail "fork of a Writing checkpoint"
[ "$(ck_field web "$ck" status)" = Ready ] || fail "fork returned while $ck is $(ck_field web "$ck" status)"
"$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f not Running"
# the counter renames its final value into place, so a file seen is a file written
for _ in $(seq 100); do gsh "$f" 'test -s /run/counter.final' && break; sleep 0.2; done
fin=$(gsh "$f" 'cat /run/counter.final') || fail "$f: the counter did not continue in the fork"
[ "$(gsh "$f" 'cat /run/counter.pid')" = "$gpid" ] || fail "$f: the counter's pid differs"
# from the instant: not before c0, not after c1 (read after create returned) plus the few
# 50 ms steps the fork ran before its fork id arrived
[ "$fin" -ge "$c0" ] && [ "$fin" -le $((c1 + 40)) ] ||
        fail "$f: counter $fin not at the checkpoint instant (source $c0 before, $c1 after)"
[ "$(ck_field web "$ck" ramBytes)" -gt 16000000 ] || fail "$ck: ramBytes $(ck_field web "$ck" ramBytes)"
ok "fork of a Writing checkpoint waited for Ready; counter $fin in [$c0, $c1], pid $gpid"
"$FORKLET" delete "$f" >/dev/null || fail "delete $f"

# ---- --wait waits for Ready ------------------------------------------------------------------
ck2=$("$FORKLET" checkpoint create web --wait) || fail "checkpoint create --wait"
[ "$(ck_field web "$ck2" status)" = Ready ] || fail "--wait returned while $ck2 is not Ready"
[ -s "$T/state/sessions/default.web/checkpoints/$ck2/ram" ] || fail "$ck2 has no ram file"
[ ! -e "$T/state/sessions/default.web/checkpoints/$ck2/full" ] || fail "$ck2 kept its stream"
ok "checkpoint create --wait: $ck2 Ready, written in $(($(ck_field web "$ck2" writeNs) / 1000000)) ms"

# ---- kill -9 of forkletd while a checkpoint is Writing ---------------------------------------
qpid=$(field web pid)
ck3=$("$FORKLET" checkpoint create web) || fail "checkpoint before the kill"
[ "$(ck_field web "$ck3" status)" = Writing ] || fail "$ck3 not Writing before the kill"
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
start_daemon
"$FORKLET" wait web --for=Running --timeout=120 || fail "web not Running after the restart"
[ "$(field web pid)" = "$qpid" ] || fail "web was restarted ($(field web pid) != $qpid)"
"$FORKLET" checkpoint list web | grep -q "^$ck3 " && fail "$ck3 listed after kill -9 mid-write"
[ -e "$T/state/sessions/default.web/checkpoints/$ck3" ] && fail "$ck3 left on disk"
[ "$(qemus default.web)" = 1 ] || fail "$(qemus default.web) QEMUs of web after restart (helper left?)"
# (the counter shares one TCG vCPU with the memory writer: on a loaded host an iteration can
# take longer than a second, so it gets 15 s to move)
c2=$(gsh web 'cat /run/counter')
moved=
for _ in $(seq 30); do
        sleep 0.5
        [ "$(gsh web 'cat /run/counter')" -gt "$c2" ] && moved=1 && break
done
[ -n "$moved" ] || fail "web's counter stopped after the restart (at $c2; ended: $(gsh web 'cat /run/counter.final 2>&1'))"
ok "kill -9 while Writing: source $qpid runs on, $ck3 not listed, no helper left"
stop_daemon

# ---- the stop-and-copy fallback is recorded ---------------------------------------------------
FORKLET_CHECKPOINT_MODE=stop-copy start_daemon
ck4=$("$FORKLET" checkpoint create web --wait) || fail "stop-and-copy checkpoint"
[ "$(ck_field web "$ck4" mode)" = stop-copy ] || fail "$ck4: mode $(ck_field web "$ck4" mode)"
[ "$(ck_field web "$ck4" status)" = Ready ] || fail "$ck4: not Ready after --wait"
"$FORKLET" checkpoint inspect web "$ck4" -o json | grep -q '"fallback": "FORKLET_CHECKPOINT_MODE=stop-copy"' ||
        fail "$ck4: no fallback reason recorded"
ok "stop-and-copy recorded: paused $(($(ck_field web "$ck4" pauseNs) / 1000000)) ms"
stop_daemon
start_daemon

# ---- a checkpoint of the rolled back session is forkable -----------------------------------
ck5=$("$FORKLET" checkpoint create web --wait) || fail "checkpoint after rollback"
[ "$(ck_field web "$ck5" status)" = Ready ] || fail "$ck5 not Ready"
f=$("$FORKLET" fork web --from "$ck5" --count 1) || fail "fork of $ck5"
"$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f (of the rolled back session) not Running"
[ "$(gsh "$f" 'cat /run/counter.pid')" = "$gpid" ] || fail "$f: counter pid differs"
ok "the rolled back session's checkpoint ($(ck_field web "$ck5" mode)) is forkable"
echo "PASS"
