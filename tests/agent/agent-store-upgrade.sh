#!/bin/bash
# SPDX-License-Identifier: MIT
# The state layout upgrade on real QEMU (TCG): forkletd of c7d70cd (built once by
# old-forkletd.sh) runs a session and checkpoints it, stops (its VM keeps running, as on a
# restart), and this forkletd starts on the same stateDir: the VM is adopted (same QEMU pid, exec
# works, the guest's file is there), session.json, identity.json, lineage, disk/active and the
# run dir's vm.json are gone, state.json holds them with schemaVersion 1, and a checkpoint and a
# second restart work from it.
# Usage: agent-store-upgrade.sh FORKLETD FORKLET   (root; exit 77 without the image, QEMU, or
# the old commit in the repository)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=store-up
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

command -v jq >/dev/null || skip "jq not installed"
OLD=$("$(dirname "$0")/old-forkletd.sh") || {
        r=$?
        [ $r = 77 ] && skip "no old forkletd to upgrade from (see above)"
        fail "building the old forkletd failed ($r)"
}
NEW=$FORKLETD
SD=$T/state/sessions/default.up
RD=$T/run/sessions/default.up

FORKLETD=$OLD/agent/forkletd
start_daemon
session up
"$FORKLET" wait up --for=Running --timeout=300 || fail "up not Running under the old forkletd"
gsh up 'echo before-upgrade >/workspace/note && sync' || fail "write /workspace/note"
ck=$("$FORKLET" checkpoint create up) || fail "checkpoint under the old forkletd"
pid=$(field up pid)
for f in "$SD/session.json" "$SD/identity.json" "$SD/lineage" "$SD/disk/active" "$RD/vm.json"; do
        [ -f "$f" ] || fail "the old forkletd did not write $f"
done
[ -e "$SD/state.json" ] && fail "the old forkletd wrote state.json"
active=$(cat "$SD/disk/active")
stop_daemon
kill -0 "$pid" 2>/dev/null || fail "QEMU $pid did not outlive the old forkletd"
echo "ok: old forkletd ran up (QEMU $pid, checkpoint $ck) and stopped"

FORKLETD=$NEW
start_daemon
grep -q "session default.up: state upgraded to state.json (schemaVersion 1)" "$T/forkletd.log" ||
        fail "no upgrade logged"
"$FORKLET" wait up --for=Running --timeout=60 || fail "up not Running after the upgrade"
[ "$(field up pid)" = "$pid" ] || fail "up runs QEMU $(field up pid), not the adopted $pid"
"$FORKLET" get session up -o json | jq -e '.status.conditions[] | select(.type == "Ready" and
        .reason == "Adopted")' >/dev/null || fail "Ready is not Adopted"
[ "$(gsh up 'cat /workspace/note')" = before-upgrade ] || fail "exec after the upgrade"
for f in "$SD/session.json" "$SD/identity.json" "$SD/lineage" "$SD/restored" "$SD/disk/active" \
        "$RD/vm.json"; do
        [ -e "$f" ] && fail "$f left after the upgrade"
done
st=$SD/state.json
[ "$(jq -r .schemaVersion "$st")" = 1 ] || fail "state.json schemaVersion: $(jq -c .schemaVersion "$st")"
[ "$(jq -r .vm.pid "$st")" = "$pid" ] || fail "state.json vm.pid: $(jq -c .vm.pid "$st")"
[ "$(jq -r .lineage "$st")" = "$ck" ] || fail "state.json lineage: $(jq -c .lineage "$st")"
[ "$(jq -r .disk "$st")" = "$active" ] || fail "state.json disk: $(jq -c .disk "$st"), was $active"
[ "$(jq -r .session.manifest.metadata.name "$st")" = up ] || fail "state.json lacks the session"
jq -e .identity "$st" >/dev/null || fail "state.json lacks the identity"
"$FORKLET" checkpoint list up | grep -q "$ck" || fail "checkpoint $ck not listed after the upgrade"
echo "ok: QEMU $pid adopted, old files gone, state.json holds them"

ck2=$("$FORKLET" checkpoint create up) || fail "checkpoint after the upgrade"
[ "$(jq -r .lineage "$st")" = "$ck2" ] || fail "lineage not $ck2 after a checkpoint"
[ "$(jq -r .disk "$st")" != "$active" ] || fail "the active disk did not move with the checkpoint"
[ -f "$SD/disk/$(jq -r .disk "$st")" ] || fail "the active disk $(jq -r .disk "$st") is missing"
stop_daemon
start_daemon
"$FORKLET" wait up --for=Running --timeout=60 || fail "up not Running after a second restart"
[ "$(field up pid)" = "$pid" ] || fail "second restart: QEMU $(field up pid), not $pid"
[ "$(gsh up 'cat /workspace/note')" = before-upgrade ] || fail "exec after the second restart"
[ -e "$RD/vm.json" ] && fail "this forkletd wrote vm.json into the run dir"
"$FORKLET" delete up >/dev/null || fail "delete up"
"$FORKLET" wait up --for=Deleted --timeout=120 || fail "up not deleted"
pid_gone_within 30 "$pid" || fail "QEMU $pid still alive after delete"
echo "ok: a checkpoint and a second restart work from state.json"
echo "PASS"
