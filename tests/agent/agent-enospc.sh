#!/bin/bash
# SPDX-License-Identifier: MIT
# Two filesystems and a full stateDir, as on a stock host: runDir on the harness's tmpfs and
# stateDir on ext4 (a loop image: copy_file_range answers EXDEV between them). Checkpoint, fork
# and rollback work across them. With guest RAM bigger than the free space (filler files) a
# checkpoint is refused before it starts, and a fork's (its size shows only in the RAM stream)
# fails half-way leaving nothing; with stateDir full, snapshot, fork, rollback, pause and apply
# (new session, changed spec) are refused too, each with "no space left on the device holding
# stateDir (N MiB free, M needed)" (HTTP 507); the sessions keep running and answer exec, the
# spec is the stored one, nothing partial is listed or left. Once the fillers are gone the same
# calls work; forkletd starts again on what it wrote while the disk was full (audit log) and
# removes partial checkpoints and snapshots (as a kill -9 leaves them) of a session that runs on.
# Usage: agent-enospc.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=enospc
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

MOUNTS=()

# After forkletd and the QEMUs got SIGKILL (fk_cleanup), before rm -rf: decommission first (it
# reads the jail's grant ledgers in stateDir), then unmount once the QEMUs let go of the files
# (the loop device goes with its mount: autoclear).
fk_cleanup_extra() {
        local m
        "$FORKLETD" --config "$T/node.yaml" --decommission >/dev/null 2>&1
        for m in "${MOUNTS[@]}"; do
                for _ in $(seq 50); do umount "$m" 2>/dev/null && break; sleep 0.2; done
                mountpoint -q "$m" && umount -l "$m"
        done
}

command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 not installed"
mountpoint -q "$T/run" || skip "the harness did not mount a tmpfs on runDir (FK_LAYOUT=single?)"
# a stateDir of 768 MiB (no root reserve; a live checkpoint holds its stream and the RAM file
# made from it at once): fillers make it small, deleting them frees it
truncate -s 768M "$T/state.img" && mkfs.ext4 -q -m 0 -b 4096 "$T/state.img" ||
        fail "mkfs.ext4 $T/state.img"
mount -o loop "$T/state.img" "$T/state" || skip "cannot mount a loop device"
MOUNTS+=("$T/state")

avail_mib() { echo $(($(stat -f -c '%a * %S' "$T/state") / 1048576)); }

# fill_to MIB: filler files leave MIB MiB free in stateDir (0: nothing, not even a block)
fill_to() {
        local a
        a=$(($(stat -f -c '%a * %S' "$T/state")))
        fallocate -l $((a - ($1 + 1) * 1048576)) "$T/state/filler-$1" || fail "fallocate a filler"
        [ "$1" = 0 ] || return 0
        for bs in 1M 64k 4k; do dd if=/dev/zero bs=$bs >>"$T/state/filler-0" 2>/dev/null; done
        [ "$(stat -f -c %a "$T/state")" = 0 ] || fail "stateDir not full after the fillers"
}

# expect_full WHAT OUTPUT: OUTPUT is the CLI's ENOSPC error
expect_full() {
        echo "$2" | grep -Eq "no space left on the device holding stateDir \([0-9]+ MiB free, [0-9]+ MiB needed\)" ||
                fail "$1: not the ENOSPC message: $2"
        echo "$2" | grep -q "HTTP 507" || fail "$1: not HTTP 507: $2"
        echo "$1 refused: $2"
}

# nothing_partial: no staging dir or temporary file anywhere in stateDir, no snapshot
nothing_partial() {
        local left
        left=$(find "$T/state" \( -name '.*.partial' -o -name '*.tmp.*' -o -name 'full' \) -print)
        [ -z "$left" ] || fail "$1 left behind: $left"
        [ "$(ls -A "$T/state/snapshots" 2>/dev/null | grep -vx "${snap:-}")" = "" ] ||
                fail "$1 left a snapshot: $(ls -A "$T/state/snapshots")"
}

sessions() { "$FORKLET" get sessions -o json | sed -n 's/^ *"name": "\([^"]*\)".*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# alive WHAT [SESSION]: SESSION (web) runs and answers exec after WHAT
alive() {
        local s=${2:-web}
        [ "$(gsh "$s" 'echo alive')" = alive ] || fail "$s does not answer exec after $1"
        [ "$(field "$s" phase)" = Running ] || fail "$s is $(field "$s" phase) after $1"
}

start_daemon
session web
"$FORKLET" wait web --for=Running --timeout=240 >/dev/null || fail "web not Running"

# ---- across filesystems (runDir tmpfs <-> stateDir): checkpoint, fork, rollback --------------
gsh web 'echo before > /workspace/mark && sync' || fail "write in web"
ck=$("$FORKLET" checkpoint create web) || fail "checkpoint from runDir to another filesystem"
f=$("$FORKLET" fork web --from "$ck" --count 1) || fail "fork"
"$FORKLET" wait "$f" --for=Running --timeout=240 >/dev/null || fail "$f not Running"
[ "$(gsh "$f" 'cat /workspace/mark')" = before ] || fail "$f lacks the checkpoint's file"
"$FORKLET" delete "$f" >/dev/null && "$FORKLET" wait "$f" --for=Deleted --timeout=120 >/dev/null ||
        fail "delete $f"
gsh web 'echo after > /workspace/mark && sync' || fail "write in web"
"$FORKLET" rollback web "$ck" | grep -q "rolled back" || fail "rollback from stateDir to runDir"
[ "$(gsh web 'cat /workspace/mark')" = before ] || fail "rollback did not bring the file back"

# ---- a fork's checkpoint: its private RAM streams into stateDir, the stream's size is known
# only once written (the check before it counts what the fork started from); then the helper's
# RAM does not fit: refused half-way, after the pause, leaving nothing ----------------------------
f=$("$FORKLET" fork web --from "$ck" --count 1) || fail "fork"
"$FORKLET" wait "$f" --for=Running --timeout=240 >/dev/null || fail "$f not Running"
# (the guest's /tmp is a tmpfs of half its 206 MiB)
out=$(gsh "$f" 'dd if=/dev/urandom of=/tmp/fill bs=1M count=60 2>&1 && echo ok' 2>&1)
echo "$out" | grep -q '^ok$' || fail "fill the fork's memory: $out"
ckram=$(($(stat -c %b "$T/state/sessions/default.web/checkpoints/$ck/ram") * 512 / 1048576))
fill_to $((2 * ckram + 50)) # > the check before (2 x RAM + 8), < stream + its copy
# (live: create returns once the fork runs again; the helper's write fails in the background,
# so --wait fails and the reason is the session's CheckpointFailed event)
out=$("$FORKLET" checkpoint create "$f" --wait 2>&1) && fail "a fork's checkpoint bigger than the free space became Ready"
ev=$("$FORKLET" get session "$f" -o json | grep -o '"message": "checkpoint ck_[0-9a-f]*: writing failed: [^"]*"')
echo "$ev" | grep -Eq "no space left on the device holding stateDir \([0-9]+ MiB free, [0-9]+ MiB needed\)" ||
        fail "checkpoint of a fork (half-way): not the ENOSPC message: $out / $ev"
alive "a checkpoint that failed half-way" "$f"
[ "$("$FORKLET" checkpoint list "$f" | tail -n +2 | grep -c .)" = 0 ] || fail "a failed checkpoint is listed"
nothing_partial "a checkpoint that failed half-way"
echo "$ev" | grep -q "checkpoint (materialize): " || fail "the fork's checkpoint did not fail at the helper's RAM: $ev"
"$FORKLET" delete "$f" >/dev/null && "$FORKLET" wait "$f" --for=Deleted --timeout=120 >/dev/null ||
        fail "delete $f"
rm "$T/state/filler-"*

# ---- guest RAM bigger than stateDir's free space: the checkpoint is refused before the pause
# (web was rolled back: it maps the checkpoint's RAM; a cold boot gives it a RAM file of its own)
"$FORKLET" stop web >/dev/null && "$FORKLET" start web >/dev/null || fail "stop and start web"
out=$(gsh web 'dd if=/dev/urandom of=/tmp/fill bs=1M count=90 2>&1 && echo ok' 2>&1)
echo "$out" | grep -q '^ok$' || fail "fill guest memory: $out"
fill_to 70
ram=$(($(stat -c %b "$T/run/sessions/default.web/mem.ram") * 512 / 1048576))
avail=$(avail_mib)
[ "$ram" -gt "$avail" ] || fail "guest RAM ($ram MiB) fits the free space ($avail MiB): no test"
out=$("$FORKLET" checkpoint create web 2>&1) && fail "a checkpoint bigger than the free space succeeded"
expect_full "checkpoint" "$out"
echo "$out" | grep -Eq "\($avail MiB free, [0-9]+ MiB needed\)" || fail "checkpoint: free space misreported: $out"
need=$(echo "$out" | sed -n 's/.* \([0-9]*\) MiB needed.*/\1/p')
[ "$need" -ge "$ram" ] || fail "checkpoint: $need MiB needed, but the RAM alone is $ram MiB"
alive "a refused checkpoint"
[ "$("$FORKLET" checkpoint list web | tail -n +2 | grep -c .)" = 1 ] || fail "a refused checkpoint is listed"
nothing_partial "a refused checkpoint"

# ---- stateDir full: snapshot, fork, rollback, pause, apply ------------------------------------
fill_to 0
out=$("$FORKLET" snapshot create web 2>&1) && fail "snapshot on a full stateDir succeeded"
expect_full "snapshot" "$out"
out=$("$FORKLET" fork web --from "$ck" --count 1 2>&1) && fail "fork on a full stateDir succeeded"
expect_full "fork" "$out"
[ "$(sessions)" = web ] || fail "a refused fork exists: $(sessions)"
out=$("$FORKLET" rollback web "$ck" 2>&1) && fail "rollback on a full stateDir succeeded"
expect_full "rollback" "$out"
out=$("$FORKLET" pause web 2>&1) && fail "pause with a full stateDir succeeded"
expect_full "pause" "$out"
# session_yaml NAME [SPEC LINE]: a Session manifest in $T/NAME.yaml
session_yaml() {
        {
                printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: %s}\n' "$1"
                printf 'spec:\n  sizeClass: small\n  image: minimal\n'
                [ $# -lt 2 ] || printf '  %s\n' "$2"
        } >"$T/$1.yaml"
}
session_yaml new
out=$("$FORKLET" apply -f "$T/new.yaml" 2>&1) && fail "apply of a new session on a full stateDir succeeded"
expect_full "apply (new)" "$out"
"$FORKLET" get session new >/dev/null 2>&1 && fail "a session whose store write failed exists"
[ -e "$T/state/sessions/default.new" ] && fail "a refused apply left its state dir"
gen=$(field web generation)
session_yaml web 'state: Paused'
out=$("$FORKLET" apply -f "$T/web.yaml" 2>&1) && fail "apply of a changed spec on a full stateDir succeeded"
expect_full "apply (changed)" "$out"
[ "$(field web generation)" = "$gen" ] || fail "a refused apply changed the generation ($gen -> $(field web generation))"
sleep 3 # a spec left in memory would be acted on by now
alive "refused calls on a full stateDir"
[ "$("$FORKLET" checkpoint list web | tail -n +2 | grep -c .)" = 1 ] || fail "a refused call listed a checkpoint"
nothing_partial "refused calls on a full stateDir"
[ "$(ls "$T/state/sessions")" = default.web ] || fail "session dirs left: $(ls "$T/state/sessions")"

# ---- space back: the same calls work ---------------------------------------------------------
rm "$T/state/filler-"*
ck2=$("$FORKLET" checkpoint create web) || fail "checkpoint once space is back"
snap=$("$FORKLET" snapshot create web) || fail "snapshot once space is back"
echo "$snap" | grep -Eqx 'snap_[0-9a-f]+' || fail "snapshot id '$snap'"
f=$("$FORKLET" fork web --from "$ck2" --count 1) || fail "fork once space is back"
session_yaml new
"$FORKLET" apply -f "$T/new.yaml" >/dev/null || fail "apply once space is back"
for s in "$f" new; do
        "$FORKLET" wait "$s" --for=Running --timeout=240 >/dev/null || fail "$s not Running"
        [ "$(gsh "$s" 'echo alive')" = alive ] || fail "$s does not answer exec"
done
[ "$(gsh "$f" 'test -s /tmp/fill && echo kept')" = kept ] || fail "$f lacks the filled memory"
"$FORKLET" rollback web "$ck" | grep -q "rolled back" || fail "rollback once space is back"
alive "a rollback once space is back"

# ---- a restart: what forkletd wrote while stateDir was full does not stop it, and what a
# checkpoint or snapshot killed half-way (kill -9) left is removed although web keeps running
kill -9 "$DPID" && wait "$DPID" 2>/dev/null
DPID=
for p in "$T/state/sessions/default.web/checkpoints/.ck_0123456789abcdef.partial" \
        "$T/state/snapshots/.snap_0123456789abcdef.partial"; do
        mkdir -p "$p" && echo x >"$p/ram" || fail "plant $p"
done
start_daemon
"$FORKLET" wait web --for=Running --timeout=60 >/dev/null || fail "web not adopted after a restart"
alive "a restart"
nothing_partial "a restart"
"$FORKLET" audit verify >/dev/null || fail "audit log broken by the full stateDir"

# ---- a runDir tmpfs too small for a new guest's RAM: refused before QEMU starts (a guest
# whose RAM file cannot grow dies of SIGBUS), the running ones untouched ----------------------
used=$((($(stat -f -c %b "$T/run") - $(stat -f -c %f "$T/run")) * $(stat -f -c %S "$T/run") / 1048576))
mount -o remount,size=$((used + 64))m "$T/run" || fail "shrink the runDir tmpfs"
session_yaml tiny
"$FORKLET" apply -f "$T/tiny.yaml" >/dev/null || fail "apply tiny"
for _ in $(seq 60); do [ "$(field tiny phase)" = Failed ] && break; sleep 0.5; done
"$FORKLET" describe tiny | grep -q 'no space left on the device holding runDir' ||
        fail "a boot into a full runDir is not refused with the runDir message"
alive "a refused boot"
mount -o remount,size=8g "$T/run" || fail "grow the runDir tmpfs"
"$FORKLET" delete tiny >/dev/null
echo "PASS: agent-enospc"
