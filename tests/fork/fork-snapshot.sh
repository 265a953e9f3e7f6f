#!/bin/bash
# SPDX-License-Identifier: MIT
# Through forkletd + CLI on real QEMU: filesystem snapshots (workspace only, fsfreeze) and
# restore into a new session that boots fresh and runs afterStart again, list, inspect and delete
# (refused while a restored session or a fork of its checkpoint boots on it); declarative spec.forks
# (scale up and down); a failed checkpoint leaves the session running and lists nothing, and a
# partial checkpoint left behind is removed on the next start; a fork outlives its parent.
# Usage: fork-snapshot.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

start_daemon
session app \
        'lifecycle: {afterStart: ["sh", "-c", "echo started >> /workspace/starts; httpd -p 8080 -h /workspace"]}' \
        'checkpoints: [{name: base}]' 'forks: {from: base, count: 2}'
"$FORKLET" wait app --for=Running --timeout=240 || fail "app not Running"

# ---- spec.forks: two forks of the declarative checkpoint, then scaled down to one ------------
for f in app-fork-0 app-fork-1; do
        exists_within 240 "$f" && "$FORKLET" wait "$f" --for=Running --timeout=240 ||
                fail "spec.forks: $f"
done
[ "$(gsh app-fork-1 'cat /workspace/starts')" = started ] || fail "fork lacks the parent's file"
sed -i 's/count: 2/count: 1/' "$T/app.yaml"
"$FORKLET" apply -f "$T/app.yaml" >/dev/null || fail "apply count: 1"
"$FORKLET" wait app-fork-1 --for=Deleted --timeout=120 || fail "spec.forks did not scale down"
"$FORKLET" get session app-fork-0 >/dev/null || fail "scale down removed app-fork-0"

# ---- snapshot + restore -------------------------------------------------------------------------
gsh app 'echo in-snapshot > /workspace/kept; sleep 100000 & echo $! > /tmp/sleeper' >/dev/null ||
        fail "prepare app"
snap=$("$FORKLET" snapshot create app) || fail "snapshot create"
echo "$snap" | grep -Eqx 'snap_[0-9a-f]+' || fail "snapshot id '$snap'"
gsh app 'echo after > /workspace/later' || fail "write after snapshot"
gsh app 'echo still-writable > /workspace/kept2' || fail "app's disk not writable after snapshot"
"$FORKLET" restore "$snap" --name app2 | grep -q "session/app2" || fail "restore"
"$FORKLET" wait app2 --for=Running --timeout=240 || fail "app2 not Running"
for _ in $(seq 120); do gsh app2 'pidof httpd' >/dev/null 2>&1 && break; sleep 0.5; done
[ "$(gsh app2 'cat /workspace/kept')" = in-snapshot ] || fail "restored disk lacks the file"
gsh app2 'test -e /workspace/later' && fail "restored disk has a file written after the snapshot"
[ "$(gsh app2 'cat /workspace/starts')" = "started
started" ] || fail "afterStart did not run again on restore"
gsh app2 'pidof httpd' >/dev/null || fail "afterStart's httpd not running in app2"
gsh app2 'pidof sleep' >/dev/null && fail "a process survived a filesystem snapshot (must boot fresh)"
# the declared checkpoint is taken after afterStart; a live one is listed once the guest runs
# again (precopy copies the RAM first), so give it time
for _ in $(seq 240); do
        "$FORKLET" get session app2 -o json | grep -q '"checkpoints": \[\]' || break
        sleep 0.5
done
"$FORKLET" get session app2 -o json | grep -q '"checkpoints": \[\]' &&
        fail "app2 did not take its spec.checkpoints"

# ---- snapshot list, inspect and delete: not while a disk chain has it at its bottom ----------
"$FORKLET" snapshot list | grep -Eq "^$snap +app .* default/app2\$" ||
        fail "snapshot list: $("$FORKLET" snapshot list)"
info=$("$FORKLET" snapshot inspect "$snap" -o json) || fail "snapshot inspect"
[ "$(echo "$info" | jq -r '[.id, .namespace, .session, (.usedBy | join(","))] | join(" ")')" = \
        "$snap default app default/app2" ] || fail "snapshot inspect: $info"
echo "$info" | jq -e '.sizeBytes > 0 and (.created | test("^[0-9]{4}-"))' >/dev/null ||
        fail "snapshot inspect: size or created: $info"
"$FORKLET" -n other snapshot inspect "$snap" >/dev/null 2>&1 && fail "another namespace sees $snap"
out=$("$FORKLET" snapshot delete "$snap" 2>&1) && fail "deleted a snapshot app2 boots on"
echo "$out" | grep -q 'default/app2' || fail "refused delete does not name app2: $out"
# a fork of app2's checkpoint has the snapshot at the bottom of its chain too (its origin/ links)
ck2=$("$FORKLET" checkpoint list app2 | awk 'NR == 2 { print $1 }')
"$FORKLET" fork app2 --from "$ck2" --count 1 >/dev/null || fail "fork app2"
"$FORKLET" wait app2-fork-0 --for=Running --timeout=240 || fail "app2-fork-0 not Running"
"$FORKLET" delete app2 >/dev/null && "$FORKLET" wait app2 --for=Deleted --timeout=120 ||
        fail "delete app2"
out=$("$FORKLET" snapshot delete "$snap" 2>&1) && fail "deleted a snapshot app2-fork-0 boots on"
echo "$out" | grep -q 'default/app2-fork-0' || fail "refused delete does not name the fork: $out"
[ "$(gsh app2-fork-0 'cat /workspace/kept')" = in-snapshot ] || fail "app2-fork-0's disk"
"$FORKLET" delete app2-fork-0 >/dev/null && "$FORKLET" wait app2-fork-0 --for=Deleted --timeout=120 ||
        fail "delete app2-fork-0"
"$FORKLET" snapshot delete "$snap" | grep -qx "snapshot/$snap deleted" || fail "snapshot delete"
[ -e "$T/state/snapshots/$snap" ] && fail "$snap's files are still there"
"$FORKLET" snapshot list | grep -q "$snap" && fail "a deleted snapshot is listed"
out=$("$FORKLET" snapshot inspect "$snap" 2>&1) && fail "inspect of a deleted snapshot"
echo "$out" | grep -q "not found" || fail "inspect of a deleted snapshot: $out"
out=$("$FORKLET" restore "$snap" --name app3 2>&1) && fail "restore of a deleted snapshot"
echo "$out" | grep -q "not found" || fail "restore of a deleted snapshot: $out"

# ---- a failed checkpoint leaves the session running, nothing partial ------------------------
sd=$T/state/sessions/default.app
mv "$sd/checkpoints" "$sd/checkpoints.real" && touch "$sd/checkpoints"
"$FORKLET" checkpoint create app >/dev/null 2>&1 && fail "checkpoint into a blocked dir succeeded"
rm "$sd/checkpoints" && mv "$sd/checkpoints.real" "$sd/checkpoints"
[ "$(gsh app 'echo alive')" = alive ] || fail "session not running after a failed checkpoint"
n=$("$FORKLET" checkpoint list app | tail -n +2 | grep -c .)
[ "$n" = 1 ] || fail "a failed checkpoint is listed ($n checkpoints)"
mkdir -p "$sd/checkpoints/.ck_0123456789abcdef.partial" && touch "$sd/checkpoints/.ck_0123456789abcdef.partial/ram"
sed -i 's/^spec:$/spec:\n  state: Stopped/' "$T/app.yaml"
"$FORKLET" apply -f "$T/app.yaml" >/dev/null && "$FORKLET" wait app --for=Stopped --timeout=60 || fail "stop app"
sed -i '/state: Stopped/d' "$T/app.yaml"
"$FORKLET" apply -f "$T/app.yaml" >/dev/null && "$FORKLET" wait app --for=Running --timeout=240 || fail "restart app"
[ -e "$sd/checkpoints/.ck_0123456789abcdef.partial" ] && fail "partial checkpoint not removed on start"
[ "$(gsh app 'cat /workspace/kept2')" = still-writable ] || fail "disk lost across stop/start after snapshot"

# ---- a fork outlives its parent (its origin and layers are hard links of its own) -------------
"$FORKLET" delete app >/dev/null || fail "delete app"
"$FORKLET" wait app --for=Deleted --timeout=120 || fail "app not deleted"
[ "$(gsh app-fork-0 'cat /workspace/starts')" = started ] || fail "fork hurt by its parent's delete"
"$FORKLET" stop app-fork-0 --timeout=120 >/dev/null || fail "stop app-fork-0"
"$FORKLET" start app-fork-0 --timeout=240 >/dev/null || fail "start app-fork-0 without its parent"
"$FORKLET" wait app-fork-0 --for=Running --timeout=240 || fail "app-fork-0 not Running"
[ "$(gsh app-fork-0 'cat /workspace/starts')" = "started
started" ] || fail "fork's disk after its parent's delete and a cold start"
"$FORKLET" get session app-fork-0 -o json | grep -q '"session": "app"' || fail "forkOf lost"
echo PASS
