#!/bin/bash
# SPDX-License-Identifier: MIT
# A store write that fails changes nothing (issue 14): with a session's state dir immutable
# (chattr +i), `forklet apply` of a changed spec fails naming the errno (the API answers 500),
# `get session -o json` still shows the old spec, a refused spec.state Running boots nothing, a
# refused delete deletes nothing and a refused stop leaves the VM running; after chattr -i the
# same requests go through. The attribute is cleared on any exit.
# Usage: agent-store-immutable.sh FORKLETD FORKLET   (root; exit 77 without the image, QEMU or a
# stateDir filesystem that takes chattr +i)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=store-imm
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

command -v chattr >/dev/null || skip "chattr not installed (e2fsprogs)"
command -v jq >/dev/null || skip "jq not installed"
command -v curl >/dev/null || skip "curl not installed"
SD=$T/state/sessions/default.imm
# the trap's rm -rf needs the dir mutable again (runs before it: fk_cleanup calls this first)
fk_cleanup_extra() { [ -d "$SD" ] && chattr -i "$SD" 2>/dev/null; true; }
probe=$T/state/chattr-probe
mkdir "$probe" || fail "mkdir $probe"
if ! msg=$(chattr +i "$probe" 2>&1); then
        rmdir "$probe"
        skip "chattr +i refused on $T/state ($(stat -f -c %T "$T/state")): $msg; needs ext4, xfs, btrfs or tmpfs on Linux >= 6.0"
fi
chattr -i "$probe" && rmdir "$probe" || fail "chattr -i $probe"

status_of_apply() { # the HTTP status of applying $T/imm.yaml
        curl -s --unix-socket "$FORKLET_SOCKET" -o "$T/reply.json" -w '%{http_code}' \
                -X POST -H 'Content-Type: application/yaml' --data-binary @"$T/imm.yaml" \
                http://forklet/api/v1alpha1/sessions
}
greeting() { "$FORKLET" get session imm -o json | jq -r '.spec.env.GREETING'; }
generation() { "$FORKLET" get session imm -o json | jq -r '.metadata.generation'; }

start_daemon
session imm "state: Stopped" "env: {GREETING: one}"
"$FORKLET" wait imm --for=Stopped --timeout=60 || fail "imm not Stopped"
[ "$(jq -r .schemaVersion "$SD/state.json")" = 1 ] || fail "no state.json with schemaVersion 1"
gen=$(generation)

chattr +i "$SD" || fail "chattr +i $SD"
lsattr -d "$SD" | grep -q '^....i' || fail "$SD not immutable"
# a changed spec: refused with the errno, the old spec stays (in memory and on disk)
sed -i 's/GREETING: one/GREETING: two/' "$T/imm.yaml"
out=$("$FORKLET" apply -f "$T/imm.yaml" 2>&1) && fail "apply succeeded with $SD immutable: $out"
echo "$out" | grep -q "Operation not permitted" || fail "apply's message lacks the errno: $out"
echo "$out" | grep -q "state.json" || fail "apply's message does not name state.json: $out"
code=$(status_of_apply)
[ "$code" = 500 ] || fail "API answered $code to a failed store write: $(cat "$T/reply.json")"
[ "$(jq -r .reason "$T/reply.json")" = InternalError ] || fail "reason: $(cat "$T/reply.json")"
[ "$(greeting)" = one ] || fail "get shows GREETING=$(greeting) after a failed apply"
[ "$(generation)" = "$gen" ] || fail "generation moved to $(generation) after a failed apply"
[ "$(jq -r .session.manifest.spec.env.GREETING "$SD/state.json")" = one ] || fail "state.json changed"
echo "ok: a changed spec is refused (HTTP 500, $(echo "$out" | tail -n1)) and the old one stays"

# spec.state Running refused: nothing boots
sed -i 's/state: Stopped/state: Running/' "$T/imm.yaml"
"$FORKLET" apply -f "$T/imm.yaml" >/dev/null 2>&1 && fail "apply Running succeeded with $SD immutable"
"$FORKLET" start imm >/dev/null 2>&1 && fail "start succeeded with $SD immutable"
sleep 5
[ "$("$FORKLET" get session imm -o json | jq -r .spec.state)" = Stopped ] || fail "spec.state changed"
[ "$(field imm phase)" = Stopped ] || fail "phase $(field imm phase) after a refused start"
for p in /proc/[0-9]*; do
        grep -qs "$T/run/sessions/default.imm/" "$p/cmdline" && fail "a QEMU ${p#/proc/} runs for imm"
done
"$FORKLET" delete imm >/dev/null 2>&1 && fail "delete succeeded with $SD immutable"
"$FORKLET" get session imm >/dev/null || fail "imm gone after a refused delete"
echo "ok: refused start and delete change nothing, no QEMU"

# mutable again: the same requests go through
chattr -i "$SD" || fail "chattr -i $SD"
"$FORKLET" apply -f "$T/imm.yaml" >/dev/null || fail "apply after chattr -i"
"$FORKLET" wait imm --for=Running --timeout=240 || fail "imm not Running after chattr -i"
[ "$(gsh imm 'echo $GREETING')" = two ] || fail "the guest does not see GREETING=two"
[ "$(jq -r .session.manifest.spec.env.GREETING "$SD/state.json")" = two ] || fail "state.json not updated"
pid=$(field imm pid)
[ "$(jq -r .vm.pid "$SD/state.json")" = "$pid" ] || fail "state.json's vm.pid is not QEMU $pid"

# a running VM: a refused stop leaves it running
chattr +i "$SD" || fail "chattr +i $SD (running)"
"$FORKLET" stop imm >/dev/null 2>&1 && fail "stop succeeded with $SD immutable"
sleep 3
kill -0 "$pid" 2>/dev/null || fail "QEMU $pid gone after a refused stop"
[ "$(gsh imm 'echo alive')" = alive ] || fail "exec after a refused stop"
chattr -i "$SD" || fail "chattr -i $SD (running)"
"$FORKLET" delete imm >/dev/null || fail "delete after chattr -i"
"$FORKLET" wait imm --for=Deleted --timeout=120 || fail "imm not deleted"
pid_gone_within 30 "$pid" || fail "QEMU $pid still alive after delete"
[ -e "$SD" ] && fail "$SD left after delete"
echo "ok: after chattr -i the spec, the boot and the delete go through"
echo "PASS"
