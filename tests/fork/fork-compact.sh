#!/bin/bash
# SPDX-License-Identifier: MIT
# Live compaction of a running session's disk chain through forkletd on real QEMU (TCG, jailed):
# 16 checkpoints of a session that writes a distinct file before each keep the live chain at most
# 2 layers above its bottom (qemu-img's view of the top and the qcow2 files QEMU holds open), the
# jail's uid loses the layers QEMU dropped, every file is intact in the running guest, forks of
# an early and a late checkpoint see exactly their files, the precopy cont step does not grow as
# it does with compaction off (FORKLET_LIVE_COMPACT=off, 16 more checkpoints of the same
# session in the same run, from a chain as short), a
# a large layer stays as the anchor and what lies above it is streamed onto it, a forkletd killed
# mid-stream leaves a consistent chain that the restarted one finishes, deleting checkpoints
# frees their layers once no chain needs them (an anchor only with the last checkpoint over
# it), and deleting the session
# cancels a stream that runs, and a pause during a stream cancels it (the compaction starts over
# once the session runs again).
# Usage: fork-compact.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=compact
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
fk_require_cmds qemu-img getfacl jq

MAX_LAYERS=2 # AGENT_DISK_LIVE_MAX_LAYERS
NA=16        # checkpoints with compaction, and as many without
sd=$T/state/sessions/default.web
top() { echo "$sd/disk/$(jq -r .disk "$sd/state.json")"; }
# files in the live chain per the headers, the bottom counted
depth() { qemu-img info -U --backing-chain "$(top)" | grep -c '^image:'; }
# qcow2 files the session's QEMU holds open (a layer QEMU still reopens at cont)
open_qcow2() { ls -l "/proc/$(field web pid)/fd" 2>/dev/null | grep -c '\.qcow2'; }
compactions() { grep -c 'disk chain compacted live' "$T/forkletd.log"; }
ck_json() { "$FORKLET" checkpoint inspect web "$1" -o json; }
# the cont step of a precopy checkpoint's pauseSteps, ms
cont_ms() { ck_json "$1" | jq -r .pauseSteps | sed -n 's/.* cont \([0-9.]*\) ms$/\1/p'; }
# the guest reads /workspace from its disk again, not from its page cache
drop_caches() { gsh "$1" 'sync && echo 3 > /proc/sys/vm/drop_caches' || fail "$1: drop caches"; }
median() { sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# settle WHEN [FILES]: no stream left to run (the session idle, the chain within the bound, or
# at most FILES files)
settle() {
        local files=${2:-$((MAX_LAYERS + 1))}
        fk_wait 60 eval "[ \$(depth) -le $files ] && [ \"\$(field web phase)\" = Running ]" ||
                fail "$1: the live chain has $(depth) files (bound: $files)"
}
# checkpoints N TAG: N checkpoints of web, a file TAG-i written before each; ids in CK[TAG-i],
# cont and pause ms in CONT[TAG-i] and PAUSE[TAG-i]
declare -A CK CONT PAUSE
checkpoints() {
        local i id
        for i in $(seq "$1"); do
                gsh web "echo $2-$i > /workspace/$2-$i && sync" || fail "write /workspace/$2-$i"
                id=$("$FORKLET" checkpoint create web --wait) || fail "checkpoint $2-$i"
                CK[$2-$i]=$id
                CONT[$2-$i]=$(cont_ms "$id")
                [ -n "${CONT[$2-$i]}" ] || fail "$id: no cont step in pauseSteps '$(ck_json "$id" | jq -r .pauseSteps)'"
                # layers of a few KiB: each is streamed onto the bottom at once
                [ "${3:-}" = settle ] && settle "checkpoint $2-$i" 2
                PAUSE[$2-$i]=$(ck_json "$id" | jq -r '.pauseNs / 1e6 * 100 | round / 100')
                echo "# $2-$i $id: pause ${PAUSE[$2-$i]} ms (QEMU downtime $(ck_json "$id" | jq -r .downtimeMs) ms), cont ${CONT[$2-$i]} ms, chain $(depth) files, QEMU holds $(open_qcow2) qcow2 fds"
        done
}

start_daemon
session web
"$FORKLET" wait web --for=Running --timeout=240 || fail "web not Running"
[ "$(jq -r .vm.ramTail "$sd/state.json")" = true ] || skip "the VM has no RAM tail: checkpoints are not precopy here"
juid=$(stat -c %u "/proc/$(field web pid)") || fail "QEMU's uid"
[ "$juid" != 0 ] || fail "the session's QEMU runs as root: no jail to check"

# ---- NA checkpoints: the chain stays bounded ------------------------------------------------
checkpoints $NA a settle
[ "$(compactions)" -ge $((NA / MAX_LAYERS)) ] ||
        fail "$NA checkpoints: $(compactions) live compactions logged, expected $((NA / MAX_LAYERS))"
[ "$(open_qcow2)" -le 3 ] || fail "QEMU holds $(open_qcow2) qcow2 fds after the compaction"
echo "ok - $NA checkpoints: the live chain has $(depth) files, $(compactions) compactions"
# the layers out of the live chain: still on disk for the checkpoints, not the jail's any more
live=$(qemu-img info -U --backing-chain "$(top)" | sed -n 's/^image: //p')
for i in 1 4 5; do
        l=$(ck_json "${CK[a-$i]}" | jq -r .disk)
        [ -f "$l" ] || fail "layer of a-$i ($l) removed"
        if grep -qxF "$l" <<<"$live"; then continue; fi
        ! getfacl -n "$l" 2>/dev/null | grep -q "^user:$juid:" || fail "$l is out of the live chain and still granted to uid $juid"
done
getfacl -n "$(top)" | grep -q "^user:$juid:rw" || fail "the top is not granted to uid $juid"
echo "ok - layers out of the live chain keep their files, the jail's uid lost them"
drop_caches web
for i in $(seq $NA); do
        [ "$(gsh web "cat /workspace/a-$i")" = "a-$i" ] || fail "/workspace/a-$i lost in the running guest"
done
echo "ok - every file intact in the running guest"

# ---- forks of an early and a late checkpoint see exactly their files -------------------------
check_files() { # NAME N: a-1..a-N there, a-(N+1)..a-NA not
        local i want
        drop_caches "$1"
        for i in $(seq $NA); do
                want=$([ "$i" -le "$2" ] && echo "a-$i" || echo absent)
                [ "$(gsh "$1" "cat /workspace/a-$i 2>/dev/null || echo absent")" = "$want" ] ||
                        fail "$1: /workspace/a-$i is not $want"
        done
}
for i in 1 7; do
        f=$("$FORKLET" fork web --from "${CK[a-$i]}" --count 1) || fail "fork of a-$i"
        "$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f not Running"
        check_files "$f" "$i"
        # the fork's chain (its overlay over a-i's small layer, shared by hard link) is not
        # streamed: a fan-out must not copy the checkpoint's layer into every fork
        fsd=$T/state/sessions/default.$f
        fn=$(qemu-img info -U --backing-chain "$fsd/disk/$(jq -r .disk "$fsd/state.json")" | grep -c '^image:')
        [ "$fn" = 3 ] || fail "$f: its chain has $fn files, not 3 (its overlay, a-$i's layer, the bottom)"
        ! grep -q "streaming .* into $fsd/" "$T/forkletd.log" || fail "$f's chain was streamed"
        "$FORKLET" delete "$f" >/dev/null || fail "delete $f"
        gone_within 90 "$T/state/sessions/default.$f" || fail "$f's state dir stays"
done
echo "ok - forks of a-1 and a-7 see exactly their files"

# ---- the anchor, then kill -9 mid-stream: the chain stays consistent, the next forkletd finishes
# (a forkletd whose streams copy 8 MiB a second: what lies above the bottom then takes seconds,
# QEMU runs on with the job while no forkletd is there)
stop_daemon
FORKLET_LIVE_COMPACT_SPEED=8388608 start_daemon
"$FORKLET" wait web --for=Running --timeout=120 || fail "web not Running after a restart"
n0=$(compactions)
streams() { grep -c 'streaming .* disk layers' "$T/forkletd.log"; }
declare -A BIGHASH
# big WHO: 64 MiB of random bytes into /workspace/big-WHO, then a checkpoint of web as CK[WHO]
big() {
        gsh web "head -c 67108864 /dev/urandom > /workspace/big-$1 && sync" || fail "write big-$1"
        BIGHASH[$1]=$(gsh web "sha256sum /workspace/big-$1 | cut -c1-64") || fail "hash big-$1"
        CK[$1]=$("$FORKLET" checkpoint create web --wait) || fail "checkpoint $1"
}
# b-1's layer holds 64 MiB: it stays, the anchor, and the next checkpoints' small layers are
# streamed onto it
big b-1
lb1=$(ck_json "${CK[b-1]}" | jq -r .disk)
settle "after b-1"
for i in 2 3; do
        gsh web "echo b-$i > /workspace/b-$i && sync" || fail "write b-$i"
        CK[b-$i]=$("$FORKLET" checkpoint create web --wait) || fail "checkpoint b-$i"
        settle "after b-$i"
done
[ "$(streams)" -ge 1 ] && grep -q 'streaming 1 disk layers into .*(onto .*, the anchor)' "$T/forkletd.log" ||
        fail "no stream onto the anchor after b-2 and b-3: $(grep 'streaming' "$T/forkletd.log" | tail -n 2)"
qemu-img info -U --backing-chain "$(top)" | grep -q "^image: .*/$(basename "$lb1")$" ||
        fail "b-1's layer (the anchor) is out of the live chain"
[ "$(depth)" = 3 ] || fail "the live chain over the anchor has $(depth) files, not 3"
fk_wait 30 eval "[ \$(compactions) -ge $((n0 + 2)) ]" || fail "the streams onto the anchor were not logged as compactions"
n4=$(compactions)
echo "ok - a 64 MiB layer stays as the anchor: the small layers above it streamed onto it, chain 3 files"
# 64 MiB more is more than a quarter of the anchor: the stream goes onto the bottom, 128 MiB
streams0=$(streams)
big b-4
fk_wait 60 eval "[ \$(streams) -gt $streams0 ]" || fail "no stream after b-4 (chain $(depth) files)"
grep 'streaming' "$T/forkletd.log" | tail -n 1 | grep -q 'the bottom' ||
        fail "b-4's stream is not onto the bottom: $(grep 'streaming' "$T/forkletd.log" | tail -n 1)"
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
[ "$(compactions)" = "$n4" ] || fail "the 128 MiB stream ended before kill -9"
killed=mid-stream
# the chain resolves; QEMU may be writing the top (the stream runs on): clusters it allocated
# but has not referenced yet show as leaks (exit 3), never as errors (exit 2)
qemu-img info -U --backing-chain "$(top)" >/dev/null || fail "the chain does not resolve after kill -9 $killed"
qemu-img check -U "$(top)" >"$T/check.out" 2>&1
rc=$?
[ $rc = 0 ] || [ $rc = 3 ] || fail "qemu-img check of the top after kill -9 $killed: exit $rc, $(grep -c ERROR "$T/check.out") errors"
start_daemon
"$FORKLET" wait web --for=Running --timeout=120 || fail "web not Running after the restart"
settle "after the restart"
fk_wait 60 eval "[ \$(open_qcow2) -le 3 ]" || fail "QEMU holds $(open_qcow2) qcow2 fds after the restart"
grep -q 'a disk stream a previous forkletd started has ended' "$T/forkletd.log" ||
        fail "the restarted forkletd did not wait for the stream QEMU ran on"
drop_caches web
for w in b-1 b-4; do
        [ "$(gsh web "sha256sum /workspace/big-$w | cut -c1-64")" = "${BIGHASH[$w]}" ] || fail "/workspace/big-$w changed"
done
for i in $(seq $NA); do [ "$(gsh web "cat /workspace/a-$i")" = "a-$i" ] || fail "a-$i lost"; done
for i in 2 3; do [ "$(gsh web "cat /workspace/b-$i")" = "b-$i" ] || fail "b-$i lost"; done
echo "ok - kill -9 $killed: the restarted forkletd adopted web, chain $(depth) files, every file there"

# ---- deleting checkpoints frees their layers once no chain needs them -------------------------
# layer OF: the checkpoint's frozen layer; chain_of LAYER: the files of its chain
layer() { ck_json "${CK[$1]}" | jq -r .disk; }
chain_of() { qemu-img info -U --backing-chain "$1" | sed -n 's/^image: //p'; }
lb2=$(layer b-2)
lb3=$(layer b-3)
lb4=$(layer b-4)
chain_of "$lb3" | grep -qxF "$lb1" || fail "b-3's layer does not lie over b-1's (the anchor)"
chain_of "$lb4" | grep -qxF "$lb1" || fail "b-4's layer does not lie over b-1's (the anchor)"
chain_of "$lb4" | grep -qxF "$lb2" && fail "b-4's layer lies over b-2's: the stream onto the anchor did not take it out"
"$FORKLET" checkpoint delete web "${CK[b-1]}" >/dev/null || fail "delete b-1"
"$FORKLET" checkpoint delete web "${CK[b-2]}" >/dev/null || fail "delete b-2"
"$FORKLET" checkpoint delete web "${CK[b-3]}" >/dev/null || fail "delete b-3"
fk_wait 30 eval "[ ! -e '$lb2' ] && [ ! -e '$lb3' ]" || fail "layers of deleted checkpoints stay: $(ls "$sd/disk")"
[ -f "$lb1" ] || fail "b-1's layer removed while b-4's chain uses it"
"$FORKLET" checkpoint delete web "${CK[b-4]}" >/dev/null || fail "delete b-4"
fk_wait 30 eval "[ ! -e '$lb1' ] && [ ! -e '$lb4' ]" ||
        fail "the anchor's layer stays once no chain needs it: $(ls "$sd/disk")"
l1=$(layer a-1)
l2=$(layer a-2)
"$FORKLET" checkpoint delete web "${CK[a-2]}" >/dev/null || fail "delete a-2"
fk_wait 30 eval "[ ! -e '$l2' ]" || fail "a-2's layer stays, and no chain lies over it"
[ -f "$l1" ] || fail "a-1's layer removed (a-1 is kept)"
f=$("$FORKLET" fork web --from "${CK[a-1]}" --count 1) || fail "fork of a-1 after the deletes"
"$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f not Running"
check_files "$f" 1
"$FORKLET" delete "$f" >/dev/null || fail "delete $f"
echo "ok - deleting b-1..b-4 and a-2 freed their layers (the anchor's only once b-4 went), a-1 forks"

# ---- the cont step against compaction off, the same session --------------------------------
stop_daemon
FORKLET_LIVE_COMPACT=off start_daemon
"$FORKLET" wait web --for=Running --timeout=120 || fail "web not Running with compaction off"
checkpoints $NA c
[ "$(depth)" -ge $((NA + 1)) ] || fail "compaction off: the chain has $(depth) files after $NA checkpoints"
# the last 4 of each phase, both from a chain of 2 files: 3 files at their cont with
# compaction, 15-18 without; the least of each, as the host's load only adds to a cont (one
# run had 99 ms with compaction)
last4() { for i in $(seq $((NA - 3)) $NA); do echo "${CONT[$1-$i]}"; done; }
on=$(last4 a | sort -g | head -n1)
off=$(last4 c | sort -g | head -n1)
echo "# cont ms, compaction on:  $(for i in $(seq $NA); do printf '%s ' "${CONT[a-$i]}"; done)"
echo "# cont ms, compaction off: $(for i in $(seq $NA); do printf '%s ' "${CONT[c-$i]}"; done)"
echo "# pause ms, compaction on:  $(for i in $(seq $NA); do printf '%s ' "${PAUSE[a-$i]}"; done)"
echo "# pause ms, compaction off: $(for i in $(seq $NA); do printf '%s ' "${PAUSE[c-$i]}"; done)"
# Printed, not asserted: under ctest -j3 on 2 cores the load's noise exceeds the effect (one
# suite run had 8.21 ms with compaction against 7.87 without, conts of 2.6-173 ms around them),
# and a timing must not fail CI; the chain's depth above is what compaction must keep, and the
# timing is a benchmark's (docs/benchmarks.md#where-the-precopy-pause-goes).
echo "# cont of checkpoints $((NA - 3))-$NA: at least $on ms (median $(last4 a | median)) with live compaction, $off ms (median $(last4 c | median)) without"
grep -E 'disk chain compacted live|disk stream a previous|disk layer' "$T/forkletd.log" | sed 's/^/# /'
"$FORKLET" rollback web "${CK[a-7]}" >/dev/null || fail "rollback to a-7"
check_files web 7
echo "ok - rollback to a-7 sees exactly a-1..a-7"

# ---- deleting the session cancels a stream that runs (1 MiB a second, 16 MiB or more) -----------
stop_daemon
FORKLET_LIVE_COMPACT_SPEED=1048576 start_daemon
"$FORKLET" wait web --for=Running --timeout=120 || fail "web not Running after a restart"
streams0=$(streams)
n=0
# 16 MiB before each checkpoint until a stream starts: one onto the bottom, which copies 16 MiB
# or more at 1 MiB a second (a-7's small layer is no anchor; a 16 MiB one would be, and the next
# 16 MiB more than a quarter of it)
while [ "$(streams)" = "$streams0" ] && [ $n -lt 6 ]; do
        n=$((n + 1))
        gsh web "head -c 16777216 /dev/urandom > /workspace/big2-$n && sync" || fail "write 16 MiB"
        "$FORKLET" checkpoint create web --wait >/dev/null || fail "checkpoint d-$n"
done
fk_wait 60 eval "[ \$(streams) -gt $streams0 ]" || fail "no stream after $n checkpoints of the rolled back web"
# ... a pause does not wait for it: the stream is cancelled, the chain kept, and once web runs
# again the compaction starts over
cut() { grep -c 'live disk compaction cut short' "$T/forkletd.log"; }
cut0=$(cut)
comp0=$(compactions)
d0=$(depth)
t0=$(date +%s%N)
"$FORKLET" pause web --timeout=60 >/dev/null || fail "pause during the stream"
pause_ms=$((($(date +%s%N) - t0) / 1000000))
[ "$(cut)" -gt "$cut0" ] || fail "the stream was not cut short by the pause (Paused in $pause_ms ms)"
[ "$(compactions)" = "$comp0" ] || fail "the stream completed before the pause"
[ "$(depth)" = "$d0" ] || fail "the chain changed from $d0 to $(depth) files across the cancelled stream"
[ "$pause_ms" -lt 8000 ] || fail "Paused after $pause_ms ms: the pause waited for the stream (16 MiB or more at 1 MiB/s)"
# the guest is paused: nothing writes the top, whose header and clusters the cancel left
qemu-img check -U "$(top)" >"$T/check.out" 2>&1 || fail "qemu-img check of the top after the cancelled stream: $(tail -n 3 "$T/check.out")"
streams1=$(streams)
t0=$(date +%s%N)
"$FORKLET" resume web --timeout=60 >/dev/null || fail "resume after the pause"
resume_ms=$((($(date +%s%N) - t0) / 1000000))
fk_wait 60 eval "[ \$(streams) -gt $streams1 ]" || fail "the compaction did not start over once web ran again"
# the stream that starts over as the resume ends keeps the session busy: the resume's wait for
# Running does not wait for it (it did, 16 s, when the stream won the race to the session)
[ "$resume_ms" -lt 8000 ] || fail "the resume took $resume_ms ms: it waited for the stream that started over"
echo "ok - a pause during a stream: Paused in $pause_ms ms, the stream cancelled (chain $d0 files kept, the top clean), started over on resume (Running in $resume_ms ms)"
t0=$SECONDS
"$FORKLET" delete web >/dev/null || fail "delete web"
gone_within 90 "$sd" || fail "state dir left after delete"
grep -q 'stream cancelled: the session is going' "$T/forkletd.log" ||
        fail "the delete did not cancel the stream"
echo "ok - deleting web cancelled its stream, gone in $((SECONDS - t0)) s"
echo PASS
