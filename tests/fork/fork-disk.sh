#!/bin/bash
# SPDX-License-Identifier: MIT
# The per-session workspace disk through forkletd: a qcow2 overlay in the session's state dir
# over the image's workspace.img, mounted on /workspace; kept across stop/start, removed on
# delete; two sessions do not see each other's files; a chain deeper than 16 layers (one per
# checkpoint) is compacted on the next start without losing data or older checkpoints; a
# checkpoint leaves the page cache of the chain's files (QEMU opens them with drop-cache=off); a
# forkletd that adopts a VM whose disk QEMU switched without a record stores QEMU's file.
# Usage: fork-disk.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

# the chain must grow past 16 here: the start-time compaction is what this checks
FORKLET_LIVE_COMPACT=off start_daemon
session wsa
session wsb
"$FORKLET" wait wsa --for=Running --timeout=240 || fail "wsa not Running"
"$FORKLET" wait wsb --for=Running --timeout=240 || fail "wsb not Running"
sd=$T/state/sessions/default.wsa
active=$(jq -er .disk "$sd/state.json") || fail "no active disk recorded"
qemu-img info -U "$sd/disk/$active" | grep -q "backing file: $IMG/workspace.img" ||
        fail "overlay not backed by the image's workspace.img"
gsh wsa 'grep -q " /workspace ext4" /proc/mounts' || fail "/workspace not mounted"
gsh wsa 'echo kept-across-restart >/workspace/note && sync' || fail "write /workspace/note"
[ "$(gsh wsb 'cat /workspace/note 2>/dev/null')" = "" ] || fail "wsb sees wsa's file"

sed -i 's/^spec:$/spec:\n  state: Stopped/' "$T/wsa.yaml"
"$FORKLET" apply -f "$T/wsa.yaml" >/dev/null || fail "apply Stopped"
"$FORKLET" wait wsa --for=Stopped --timeout=60 || fail "wsa not Stopped"
[ -f "$sd/disk/$active" ] || fail "disk removed on stop"
sed -i '/state: Stopped/d' "$T/wsa.yaml"
"$FORKLET" apply -f "$T/wsa.yaml" >/dev/null || fail "apply Running"
"$FORKLET" wait wsa --for=Running --timeout=240 || fail "wsa not Running again"
[ "$(gsh wsa 'cat /workspace/note')" = kept-across-restart ] || fail "file lost across stop/start"

# ---- the overlay a checkpoint leaves keeps discard=unmap: a deleted file shrinks it ----------
"$FORKLET" checkpoint create wsa --wait >/dev/null || fail "checkpoint before the discard check"
layer=$sd/disk/$(jq -r .disk "$sd/state.json")
gsh wsa 'head -c 33554432 /dev/urandom >/workspace/big && sync' || fail "write 32 MiB"
before=$(du -k "$layer" | cut -f1)
gsh wsa 'rm /workspace/big && sync && fstrim /workspace' || fail "rm and fstrim in the guest"
after=$(du -k "$layer" | cut -f1)
[ "$before" -gt 30000 ] && [ "$after" -lt $((before - 25000)) ] ||
        fail "fstrim after a checkpoint: the active layer went from $before to $after KiB"
echo "ok - a deleted 32 MiB file leaves the checkpoint's new overlay: $before -> $after KiB"

# ---- a checkpoint's cont keeps the chain's page cache (drop-cache=off on every file QEMU
# opens: the -drive's chain and the overlay each checkpoint adds). Its migration inactivated
# every file and cont reopened it; by default QEMU drops a file's whole page cache there. ------
chain_files() { qemu-img info -U --backing-chain --output=json "$sd/disk/$(jq -r .disk "$sd/state.json")" |
        jq -r '.[].filename'; }
chain=$(chain_files) || fail "read the chain"
[ "$(wc -l <<<"$chain")" -ge 3 ] || fail "chain of $(wc -l <<<"$chain") files before the cache check"
while read -r f; do cat "$f" >/dev/null; done <<<"$chain"
"$FORKLET" checkpoint create wsa --wait >/dev/null || fail "checkpoint for the cache check"
# the same files under the new top (the old top is the checkpoint's layer now, renamed)
chain=$(chain_files | tail -n +2) || fail "read the chain after the checkpoint"
while read -r f; do
        read -r res size < <(fincore -n -b -o RES,SIZE "$f")
        [ "$size" -gt 0 ] && [ "$res" -ge $((size * 9 / 10)) ] ||
                fail "$f: $res of $size bytes in the page cache after a checkpoint's cont"
done <<<"$chain"
echo "ok - the $(wc -l <<<"$chain") files of the chain stay in the page cache across a checkpoint"

# ---- a disk switch QEMU made that the killed forkletd did not record (a checkpoint's, between
# the switch and the store): the next forkletd asks QEMU which file disk0 writes and stores it,
# so what the guest writes after it survives a stop/start ------------------------------------
qpid=$(field wsa pid)
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
old_top=$(jq -r .disk "$sd/state.json")
qemu-img create -q -f qcow2 -b "$old_top" -F qcow2 "$sd/disk/switched.qcow2" || fail "overlay"
chown "$(stat -c %u "/proc/$qpid")" "$sd/disk/switched.qcow2" && chmod 600 "$sd/disk/switched.qcow2"
python3 - "$T/run/sessions/default.wsa/qmp.sock" "$sd/disk/switched.qcow2" <<'PY' || fail "switch disk0 behind forkletd's back"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
def cmd(c, a=None):
    f.write(json.dumps({"execute": c, "arguments": a or {}}) + "\n"); f.flush()
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            if "error" in m: sys.exit("%s: %s" % (c, m["error"]))
            return m
f.readline()
cmd("qmp_capabilities")
cmd("blockdev-add", {"driver": "qcow2", "node-name": "fkovtest", "backing": None,
                     "file": {"driver": "file", "filename": sys.argv[2]}})
cmd("blockdev-snapshot", {"node": "disk0", "overlay": "fkovtest"})
PY
FORKLET_LIVE_COMPACT=off start_daemon
"$FORKLET" wait wsa --for=Running --timeout=120 || fail "wsa not Running after the restart"
[ "$(field wsa pid)" = "$qpid" ] || fail "wsa was restarted"
[ "$(jq -r .disk "$sd/state.json")" = switched.qcow2 ] ||
        fail "the store names $(jq -r .disk "$sd/state.json"), QEMU writes switched.qcow2"
grep -q "the adopted VM writes switched.qcow2, not $old_top" "$T/forkletd.log" || fail "not logged"
gsh wsa 'echo after-the-switch >/workspace/switched && sync' || fail "write after the switch"
sed -i 's/^spec:$/spec:\n  state: Stopped/' "$T/wsa.yaml"
"$FORKLET" apply -f "$T/wsa.yaml" >/dev/null && "$FORKLET" wait wsa --for=Stopped --timeout=60 || fail "stop"
sed -i '/state: Stopped/d' "$T/wsa.yaml"
"$FORKLET" apply -f "$T/wsa.yaml" >/dev/null && "$FORKLET" wait wsa --for=Running --timeout=240 || fail "start"
[ "$(gsh wsa 'cat /workspace/switched')" = after-the-switch ] ||
        fail "what the guest wrote on the unrecorded overlay is lost after stop/start"
echo "ok - an unrecorded disk switch is taken from QEMU at adoption; the guest's writes kept"

# ---- chains deeper than 16 layers are compacted on the next start -----------------------------
depth() { qemu-img info -U --backing-chain "$sd/disk/$(jq -r .disk "$sd/state.json")" | grep -c '^image:'; }
for i in $(seq 17); do
        gsh wsa "echo $i > /workspace/gen && sync" || fail "write gen $i"
        id=$("$FORKLET" checkpoint create wsa) || fail "checkpoint $i"
        [ "$i" = 5 ] && ck5=$id
done
[ "$(depth)" -ge 18 ] || fail "chain depth $(depth) after 17 checkpoints"
sed -i 's/^spec:$/spec:\n  state: Stopped/' "$T/wsa.yaml"
"$FORKLET" apply -f "$T/wsa.yaml" >/dev/null && "$FORKLET" wait wsa --for=Stopped --timeout=60 || fail "stop"
sed -i '/state: Stopped/d' "$T/wsa.yaml"
"$FORKLET" apply -f "$T/wsa.yaml" >/dev/null && "$FORKLET" wait wsa --for=Running --timeout=240 || fail "start"
[ "$(depth)" = 2 ] || fail "chain not compacted: depth $(depth)"
grep -q "disk chain compacted" "$T/forkletd.log" || fail "compaction not logged"
[ "$(gsh wsa 'cat /workspace/gen')" = 17 ] || fail "data lost by compaction"
[ "$(gsh wsa 'cat /workspace/note')" = kept-across-restart ] || fail "old data lost by compaction"
"$FORKLET" rollback wsa "$ck5" >/dev/null || fail "rollback to an early checkpoint"
[ "$(gsh wsa 'cat /workspace/gen')" = 5 ] || fail "rollback after compaction: wrong disk"

"$FORKLET" delete wsa >/dev/null || fail "delete"
gone_within 60 "$sd" || fail "state dir (disk) left after delete"
[ -f "$IMG/workspace.img" ] || fail "delete removed the image's base disk"
echo PASS
