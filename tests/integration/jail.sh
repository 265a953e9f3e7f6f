#!/bin/bash
# SPDX-License-Identifier: MIT
# The QEMU jail through forkletd and real QEMU: each session's QEMU runs as its own uid from the
# node's range with no capabilities, no_new_privs and QEMU's seccomp filter (Seccomp: 2), holds
# no fd of forkletd's, cannot read another session's files (as that uid), keeps its uid across a
# forkletd restart; a checkpoint and a fork work with spawning denied (fd: migration), the fork
# under a uid of its own.
# Usage: jail.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
. "$(dirname "$0")/fork-lib.sh"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"

qpid() { field "$1" pid; }

# status_of PID KEY: the value of KEY in /proc/PID/status
status_of() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }

# check_jailed PID: prints the uid after checking the process is jailed
check_jailed() {
        local p=$1 uid k
        uid=$(status_of "$p" Uid | awk '{print $1}')
        [ "$(status_of "$p" Uid)" = "$uid	$uid	$uid	$uid" ] || fail "pid $p: Uid $(status_of "$p" Uid)"
        [ "$(status_of "$p" Gid | awk '{print $1}')" = "$uid" ] || fail "pid $p: Gid $(status_of "$p" Gid)"
        [ "$uid" -ge 200000 ] && [ "$uid" -lt 265536 ] || fail "pid $p: uid $uid outside the range"
        for k in CapInh CapPrm CapEff CapBnd CapAmb; do
                [ "$(status_of "$p" $k)" = 0000000000000000 ] || fail "pid $p: $k $(status_of "$p" $k)"
        done
        [ "$(status_of "$p" Seccomp)" = 2 ] || fail "pid $p: Seccomp $(status_of "$p" Seccomp)"
        [ "$(status_of "$p" NoNewPrivs)" = 1 ] || fail "pid $p: NoNewPrivs not set"
        [ -z "$(status_of "$p" Groups)" ] || fail "pid $p: supplementary groups $(status_of "$p" Groups)"
        grep -q '^Max core file size *0 ' "/proc/$p/limits" || fail "pid $p: core limit not 0"
        grep -q '^Max open files *4096 ' "/proc/$p/limits" || fail "pid $p: NOFILE not 4096"
        echo "$uid"
}

# check_fds PID KEY: no fd of QEMU points at forkletd's files or another session's directory
check_fds() {
        local p=$1 key=$2 f t
        for f in /proc/$p/fd/*; do
                t=$(readlink "$f") || continue
                case $t in
                "$T/forkletd.log" | "$T/node.yaml" | "$T/run/api.sock") fail "pid $p holds $t" ;;
                "$T"/run/sessions/* | "$T"/state/sessions/*)
                        case $t in
                        "$T/run/sessions/$key"/* | "$T/state/sessions/$key"/*) ;;
                        # a fork's RAM and disk layers are its parent's checkpoint
                        "$T"/state/sessions/*/checkpoints/* | "$T"/state/sessions/*/disk/layer-*) ;;
                        *) fail "pid $p ($key) holds $t" ;;
                        esac
                        ;;
                esac
        done
}

start_daemon
session a
session b
for s in a b; do "$FORKLET" wait $s --for=Running --timeout=300 || fail "$s not Running"; done
pa=$(qpid a)
pb=$(qpid b)
ua=$(check_jailed "$pa") || exit 1
ub=$(check_jailed "$pb") || exit 1
[ "$ua" != "$ub" ] || fail "a and b share uid $ua"
check_fds "$pa" default.a
check_fds "$pb" default.b
echo "ok: a runs as $ua, b as $ub: no capabilities, seccomp on, no_new_privs, rlimits"

# The run dir belongs to the session's uid alone; forkletd's vm.json stays root's.
[ "$(stat -c '%u %a' "$T/run/sessions/default.a")" = "$ua 700" ] || fail "run dir of a: $(stat -c '%u %a' "$T/run/sessions/default.a")"
[ "$(stat -c %u "$T/run/sessions/default.a/vm.json")" = 0 ] || fail "vm.json not root's"
# As a's uid: its own RAM file opens, b's does not (nor b's disk or console log).
setpriv --reuid="$ua" --regid="$ua" --clear-groups head -c1 "$T/run/sessions/default.a/mem.ram" >/dev/null ||
        fail "a's uid cannot read its own RAM file (the check below would prove nothing)"
for f in "$T/run/sessions/default.b/mem.ram" "$T/run/sessions/default.b/qmp.sock" \
        "$(ls "$T"/state/sessions/default.b/*/*.qcow2 "$T"/state/sessions/default.b/*.qcow2 2>/dev/null | head -n1)" \
        "$T/state/sessions/default.b/console.log"; do
        [ -n "$f" ] && [ -e "$f" ] || continue
        setpriv --reuid="$ua" --regid="$ua" --clear-groups head -c1 "$f" >/dev/null 2>&1 &&
                fail "a's uid read $f of session b"
done
echo "ok: a's uid cannot read b's RAM, socket, disk or console log"

# A guest still works inside the jail, and the uid is persistent across a restart.
[ "$(gsh a 'echo hi')" = hi ] || fail "exec in a"
stop_daemon
start_daemon
"$FORKLET" wait a --for=Running --timeout=120 || fail "a not Running after restart"
[ "$(qpid a)" = "$pa" ] || fail "a's QEMU was not adopted"
[ "$(cat "$T/state/sessions/default.a/jail-uid")" = "$ua" ] || fail "jail-uid of a changed"

# Checkpoint (migration to an fd: QEMU may not spawn) and a fork under its own uid.
gsh a 'echo before-fork > /workspace/mark' >/dev/null || fail "write mark"
ck=$("$FORKLET" checkpoint create a) || fail "checkpoint create with -sandbox spawn=deny"
f=$("$FORKLET" fork a --from "$ck" --count 1) || fail "fork"
"$FORKLET" wait "$f" --for=Running --timeout=300 || fail "$f not Running"
uf=$(check_jailed "$(qpid "$f")") || exit 1
[ "$uf" != "$ua" ] && [ "$uf" != "$ub" ] || fail "fork shares a uid ($uf)"
check_fds "$(qpid "$f")" "default.$f"
[ "$(gsh "$f" 'cat /workspace/mark')" = before-fork ] || fail "fork lost the workspace"
[ "$(gsh a 'echo alive')" = alive ] || fail "a after the checkpoint"
echo "ok: checkpoint and fork with spawning denied; fork $f runs as $uf"

"$FORKLET" delete "$f" >/dev/null
"$FORKLET" wait "$f" --for=Deleted --timeout=120 || fail "$f not deleted"
for s in a b; do "$FORKLET" delete $s >/dev/null; done
for s in a b; do "$FORKLET" wait $s --for=Deleted --timeout=120 || fail "$s not deleted"; done
echo "PASS: jail"
