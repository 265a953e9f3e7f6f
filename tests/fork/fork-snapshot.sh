#!/bin/bash
# SPDX-License-Identifier: MIT
# Through forkletd + CLI on real QEMU: filesystem snapshots (workspace only, fsfreeze) and
# restore into a new session that boots fresh and runs afterStart again; declarative spec.forks
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
