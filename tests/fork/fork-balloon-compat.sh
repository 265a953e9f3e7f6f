#!/bin/bash
# SPDX-License-Identifier: MIT
# Sessions and checkpoints from before the balloon device, on real QEMU (TCG): forkletd of
# aefbc98 (built once by tests/agent/old-forkletd.sh) boots a session without the device and
# checkpoints it; this forkletd adopts the VM (its record has no "balloon": no give-back is
# tried but once, refused), forks the old checkpoint (its meta.json has no "balloon": the fork's
# QEMU has no device either, else the migration would fail) and rolls the session back to it;
# a new checkpoint of the old VM records balloon false and forks the same way.
# Usage: fork-balloon-compat.sh FORKLETD FORKLET   (root; exit 77 without the image, QEMU, or
# the old commit in the repository)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=bcompat
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

ok() { echo "ok - $*"; }
command -v jq >/dev/null || skip "jq not installed"
OLD=$(FK_OLD_REV=aefbc98 "$SRC/tests/agent/old-forkletd.sh" \
        "${FORKLET_BINARY_DIR:-$T}/old-forkletd-aefbc98") || {
        r=$?
        [ $r = 77 ] && skip "no old forkletd (see above)"
        fail "building the old forkletd failed ($r)"
}
NEW=$FORKLETD
# has_balloon NAME: its QEMU's command line has the device
has_balloon() {
        tr '\0' ' ' <"/proc/$("$FORKLET" get session "$1" -o json | jq -r .status.vm.pid)/cmdline" |
                grep -q virtio-balloon-device
}

FORKLETD=$OLD/agent/forkletd
start_daemon
session old
"$FORKLET" wait old --for=Running --timeout=300 || fail "old not Running under the old forkletd"
gsh old 'echo from-before >/workspace/note && sync' || fail "write /workspace/note"
ck=$("$FORKLET" checkpoint create old --wait) || fail "checkpoint under the old forkletd"
meta=$T/state/sessions/default.old/checkpoints/$ck/meta.json
jq -e 'has("balloon") | not' "$meta" >/dev/null || fail "the old forkletd wrote balloon in $meta"
has_balloon old && fail "the old forkletd's QEMU has a balloon"
pid=$("$FORKLET" get session old -o json | jq -r .status.vm.pid)
stop_daemon
ok "forkletd aefbc98 ran old (QEMU $pid, no balloon) and took $ck"

FORKLETD=$NEW
# (the old forkletd refuses the section: it did not know it)
fk_node_config "memoryGiveBack: {intervalSeconds: 3}" >"$T/node.yaml"
start_daemon
"$FORKLET" wait old --for=Running --timeout=60 || fail "old not Running after the restart"
[ "$("$FORKLET" get session old -o json | jq -r .status.vm.pid)" = "$pid" ] || fail "old was not adopted"
sleep 10
n=$(grep -c "session default.old: no memory given back: its QEMU has no balloon device" "$T/forkletd.log")
[ "$n" = 1 ] || fail "the adopted VM's give-back was tried $n times (want once, refused)"
grep -q "session default.old: gave" "$T/forkletd.log" && fail "memory given back by a VM without a balloon"
[ "$(gsh old 'cat /workspace/note')" = from-before ] || fail "old: exec after adoption"
ok "adopted: one give-back refused (no balloon device), the session runs on"

f=$("$FORKLET" fork old --from "$ck" --count 1) || fail "fork of the old checkpoint"
"$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f not Running"
has_balloon "$f" && fail "$f has a balloon device: its checkpoint's source had none"
[ "$(gsh "$f" 'cat /workspace/note')" = from-before ] || fail "$f: the note"
ok "a fork of the old checkpoint runs without the device"

ck2=$("$FORKLET" checkpoint create old --wait) || fail "a new checkpoint of the adopted VM"
[ "$(jq -r .balloon "$T/state/sessions/default.old/checkpoints/$ck2/meta.json")" = false ] ||
        fail "$ck2: balloon not recorded false"
f2=$("$FORKLET" fork old --from "$ck2" --count 1) || fail "fork of $ck2"
"$FORKLET" wait "$f2" --for=Running --timeout=240 || fail "$f2 not Running"
has_balloon "$f2" && fail "$f2 has a balloon device"
"$FORKLET" rollback old "$ck" >/dev/null || fail "rollback to the old checkpoint"
"$FORKLET" wait old --for=Running --timeout=240 || fail "old not Running after the rollback"
has_balloon old && fail "old has a balloon device after the rollback"
[ "$(gsh old 'cat /workspace/note')" = from-before ] || fail "old: the note after the rollback"
ok "a new checkpoint records balloon false; its fork and the rollback run without the device"

# a new session on this forkletd has the device
session fresh
"$FORKLET" wait fresh --for=Running --timeout=240 || fail "fresh not Running"
has_balloon fresh || fail "a new session has no balloon device"
ok "a new session has the device"
echo "PASS"
