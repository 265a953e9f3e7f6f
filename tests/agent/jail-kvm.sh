#!/bin/bash
# SPDX-License-Identifier: MIT
# The jail with KVM: a session's QEMU (accel kvm) opens /dev/kvm as its own uid, through the
# device node bound into its mount namespace and the ACL entry forkletd grants; deleting the
# session takes the entry back. Needs a /dev/kvm that opens, not one that can run a guest: it
# checks the QEMU process, not the guest's boot.
# Usage: jail-kvm.sh FORKLETD FORKLET   (root; exit 77 without /dev/kvm, the image or QEMU)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
[ -c /dev/kvm ] || { echo "SKIP: no /dev/kvm" >&2; exit 77; }
FORKLET_TEST_ACCEL=kvm
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
command -v getfacl >/dev/null && command -v setfacl >/dev/null || skip "getfacl/setfacl (acl) not installed"

# Our sessions' ACL entries on the host's /dev/kvm go, even when the test fails.
fk_cleanup_extra() {
        local f u
        for f in "$T"/state/sessions/*/jail-uid; do
                u=$(cat "$f" 2>/dev/null) && [ -n "$u" ] && setfacl -x "u:$u" /dev/kvm 2>/dev/null
        done
}

start_daemon
grep -q "accel kvm" "$T/forkletd.log" || fail "forkletd did not pick kvm"
session k
# Either QEMU runs and holds /dev/kvm (a host whose KVM runs guests), or it gets past opening
# /dev/kvm and creating the VM and then fails inside KVM code (a paravirtual-only KVM such as
# kvm-pvm aborts in kvm_buf_set_msrs): both prove the jailed uid opened the device. A refused
# open reads "Could not access KVM kernel module: Permission denied".
pid= held= died=
for _ in $(seq 480); do
        pid=$(field k pid)
        if [ -n "$pid" ] && [ "$pid" != 0 ] && [ -d "/proc/$pid" ]; then
                for f in /proc/$pid/fd/*; do
                        [ "$(readlink "$f" 2>/dev/null)" = /dev/kvm ] && held=1
                done
        fi
        died=$(grep -m1 "session default.k: failed: QEMU exited" "$T/forkletd.log")
        [ -n "$held" ] || [ -n "$died" ] && break
        sleep 0.25
done
u=$(cat "$T/state/sessions/default.k/jail-uid") || fail "k has no jail uid"
getfacl -pn /dev/kvm | grep -q "^user:$u:rw-" || fail "no grant for $u on /dev/kvm: $(getfacl -pn /dev/kvm)"
if [ -n "$held" ]; then
        [ "$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")" = "$u" ] || fail "k's QEMU does not run as $u"
        [ -c "/proc/$pid/root/dev/kvm" ] || fail "/dev/kvm is not in k's jail"
        echo "ok: k's QEMU runs as $u and holds /dev/kvm from its jail"
elif [ -n "$died" ]; then
        echo "$died" | grep -qi "permission denied\|could not access kvm" && fail "jailed QEMU could not open /dev/kvm: $died"
        echo "$died" | grep -q "target/i386/kvm/\|kvm_" || fail "QEMU died before using KVM: $died"
        echo "ok: k's QEMU (uid $u) opened /dev/kvm and ran KVM code; this KVM cannot run it: ${died##*QEMU exited: }"
else
        fail "k's QEMU never held /dev/kvm nor failed within 120 s"
fi

"$FORKLET" delete k >/dev/null
"$FORKLET" wait k --for=Deleted --timeout=120 || fail "k not deleted"
getfacl -pn /dev/kvm | grep -q "^user:$u:" && fail "uid $u keeps its grant on /dev/kvm after delete"
echo "ok: delete took the grant back"

# A node whose forkletd and VMs died without deleting their sessions: decommissioning it takes
# the grants back.
session k2
for _ in $(seq 240); do [ -s "$T/state/sessions/default.k2/jail-grants" ] && break; sleep 0.25; done
u2=$(cat "$T/state/sessions/default.k2/jail-uid") || fail "k2 has no jail uid"
getfacl -pn /dev/kvm | grep -q "^user:$u2:rw-" || fail "no grant for $u2 on /dev/kvm"
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
for p in /proc/[0-9]*; do grep -qs "$T/run" "$p/cmdline" && kill -9 "${p#/proc/}" 2>/dev/null; done
"$FORKLETD" --config "$T/node.yaml" --decommission || fail "forkletd --decommission"
getfacl -pn /dev/kvm | grep -q "^user:$u2:" && fail "uid $u2 keeps its grant after --decommission"
echo "PASS: jail-kvm"
