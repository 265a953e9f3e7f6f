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
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
command -v getfacl >/dev/null || skip "getfacl (acl) not installed"
command -v nsenter >/dev/null || skip "nsenter (util-linux) not installed"

qpid() { field "$1" pid; }

# status_of PID KEY: the value of KEY in /proc/PID/status
status_of() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }

# check_jailed PID: prints the uid after checking the process is jailed
check_jailed() {
        local p=$1 uid k
        uid=$(status_of "$p" Uid | awk '{print $1}')
        [ "$(status_of "$p" Uid)" = "$uid	$uid	$uid	$uid" ] || fail "pid $p: Uid $(status_of "$p" Uid)"
        [ "$(status_of "$p" Gid | awk '{print $1}')" = "$uid" ] || fail "pid $p: Gid $(status_of "$p" Gid)"
        # the node's range: the harness gives each test 64 uids of its own (FK_JAIL)
        [ "$uid" -ge "$FK_UID_BASE" ] && [ "$uid" -lt $((FK_UID_BASE + 64)) ] ||
                fail "pid $p: uid $uid outside the node's range $FK_UID_BASE+64"
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

# watch_helper NEEDLE OUT: waits (up to ~60 s) for a process whose command line holds NEEDLE
# and writes "uid seccomp mount-ns" of it to OUT; done once QEMU has applied its filter
# (Seccomp 2, a moment after exec), else OUT keeps the last look.
watch_helper() {
        local needle=$1 out=$2 i c p
        for i in $(seq 1 3000); do
                for c in $(grep -lF "$needle" /proc/[0-9]*/cmdline 2>/dev/null); do
                        p=${c#/proc/}
                        p=${p%/cmdline}
                        echo "$(status_of "$p" Uid | awk '{print $1}') $(status_of "$p" Seccomp)" \
                                "$(readlink "/proc/$p/ns/mnt")" >"$out"
                        grep -q '^[0-9]* 2 mnt:' "$out" && return 0
                done
                sleep 0.02
        done
        return 1
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

# The run dir belongs to the session's uid alone and holds nothing of forkletd's: the VM's
# record is in state.json, in the state dir (root's).
[ "$(stat -c '%u %a' "$T/run/sessions/default.a")" = "$ua 700" ] || fail "run dir of a: $(stat -c '%u %a' "$T/run/sessions/default.a")"
[ -e "$T/run/sessions/default.a/vm.json" ] && fail "forkletd wrote vm.json into a's run dir"
[ "$(jq -r .vm.pid "$T/state/sessions/default.a/state.json")" = "$pa" ] || fail "a's VM record does not name QEMU $pa"
# QEMU's own mount namespace: a read-only tmpfs root holding /usr, a few device nodes, a
# /proc of its own and exactly its session's files at their host paths.
[ "$(readlink /proc/$pa/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ] || fail "a's QEMU shares our mount namespace"
R=/proc/$pa/root
[ -S "$R$T/run/sessions/default.a/qmp.sock" ] || fail "a's QMP socket is not in its jail"
[ -e "$R/usr/bin/$(basename "$(readlink /proc/$pa/exe)")" ] || fail "QEMU's binary is not in its jail"
for f in /etc/passwd /etc/shadow /home /root /var/log "$T/node.yaml" "$T/forkletd.log" \
        "$T/run/api.sock" "$T/run/sessions/default.b" "$T/state/sessions/default.b" \
        "$T/state/sessions/default.a/state.json" "/dev/sda" "/dev/mem"; do
        [ -e "$R$f" ] && fail "$f is visible in a's jail"
done
[ "$(ls -A "$R/etc")" = ld.so.cache ] || fail "a's jail /etc holds $(ls -A "$R/etc" | tr '\n' ' ')"
# Read-only even for root in there; writable only where a bind says so (its run dir).
nsenter -t "$pa" -m -- touch /usr/fk-jail-probe 2>/dev/null && fail "a's jail /usr is writable"
nsenter -t "$pa" -m -- touch /fk-jail-probe 2>/dev/null && fail "a's jail root is writable"
asa() { nsenter -t "$pa" -m -- setpriv --reuid="$ua" --regid="$ua" --clear-groups -- "$@"; }
asa touch "$T/run/sessions/default.a/probe" || fail "a's uid cannot write its run dir in its jail"
asa rm "$T/run/sessions/default.a/probe"
asa head -c1 "$T/run/sessions/default.a/mem.ram" >/dev/null ||
        fail "a's uid cannot read its own RAM file in its jail (the checks below would prove nothing)"
# /proc in there shows a's uid its own processes only.
asa test -e "/proc/$pa" || fail "a's uid does not see its QEMU in the jail's /proc"
asa test -e "/proc/$pb" && fail "a's uid sees b's QEMU in the jail's /proc"
asa test -e "/proc/$DPID" && fail "a's uid sees forkletd in the jail's /proc"
# And on the host, a's uid still cannot read b's files.
for f in "$T/run/sessions/default.b/mem.ram" "$T/run/sessions/default.b/qmp.sock" \
        "$(ls "$T"/state/sessions/default.b/*/*.qcow2 "$T"/state/sessions/default.b/*.qcow2 2>/dev/null | head -n1)" \
        "$T/state/sessions/default.b/console.log"; do
        [ -n "$f" ] && [ -e "$f" ] || continue
        setpriv --reuid="$ua" --regid="$ua" --clear-groups head -c1 "$f" >/dev/null 2>&1 &&
                fail "a's uid read $f of session b"
done
echo "ok: a's QEMU sees only its own files in a read-only mount namespace; its uid cannot read b's"

# A guest still works inside the jail, and the uid is persistent across a restart.
[ "$(gsh a 'echo hi')" = hi ] || fail "exec in a"
stop_daemon
start_daemon
"$FORKLET" wait a --for=Running --timeout=120 || fail "a not Running after restart"
[ "$(qpid a)" = "$pa" ] || fail "a's QEMU was not adopted"
[ "$(cat "$T/state/sessions/default.a/jail-uid")" = "$ua" ] || fail "jail-uid of a changed"

# Checkpoint (migration to an fd: QEMU may not spawn) and a fork under its own uid.
gsh a 'echo before-fork > /workspace/mark' >/dev/null || fail "write mark"
ck=$("$FORKLET" checkpoint create a --wait) || fail "checkpoint create with -sandbox spawn=deny"
f=$("$FORKLET" fork a --from "$ck" --count 1) || fail "fork"
"$FORKLET" wait "$f" --for=Running --timeout=300 || fail "$f not Running"
uf=$(check_jailed "$(qpid "$f")") || exit 1
[ "$uf" != "$ua" ] && [ "$uf" != "$ub" ] || fail "fork shares a uid ($uf)"
check_fds "$(qpid "$f")" "default.$f"
[ "$(gsh "$f" 'cat /workspace/mark')" = before-fork ] || fail "fork lost the workspace"
[ "$(gsh a 'echo alive')" = alive ] || fail "a after the checkpoint"
echo "ok: checkpoint and fork with spawning denied; fork $f runs as $uf"

# The fork's QEMU opened the checkpoint's RAM file as its uid (QEMU 7.2 opens it read-write,
# so it was lent); once the fork runs, the grant is taken back: no ACL entry per live fork.
ram=$(ls -d "$T"/state/sessions/default.a/checkpoints/*/ram | head -n1)
[ -f "$ram" ] || fail "no RAM file in a's checkpoint"
getfacl -pn "$ram" | grep -q "^user:[0-9]" && fail "$ram still lent after the fork runs: $(getfacl -pn "$ram")"
# A checkpoint of the fork goes through the materialize helper QEMU: it runs jailed too (seen
# while it lives), and the checkpoint's RAM it made is forkletd's alone afterwards.
# (the helper's own run dir beside the fork's; --wait: it writes the RAM file after create)
watch_helper "$T/run/sessions/.default.$f.helper-" "$T/helper.seen" &
wpid=$!
ck2=$("$FORKLET" checkpoint create "$f" --wait) || fail "checkpoint of fork $f (jailed helper)"
wait "$wpid" || fail "the materialize helper QEMU was never seen with its filter: $(cat "$T/helper.seen" 2>/dev/null)"
read -r hu hs hns <"$T/helper.seen"
[ "$hu" = "$uf" ] && [ "$hs" = 2 ] && [ "$hns" != "$(readlink /proc/self/ns/mnt)" ] ||
        fail "materialize helper: uid $hu (want $uf), Seccomp $hs, mount ns $hns"
ram2=$(ls -d "$T"/state/sessions/default."$f"/checkpoints/*/ram | head -n1)
[ -f "$ram2" ] || fail "no RAM file in the fork's checkpoint"
[ "$(stat -c %u "$ram2")" = 0 ] || fail "$ram2 owned by $(stat -c %u "$ram2")"
getfacl -pn "$ram2" | grep -q "^user:[0-9]" && fail "$ram2 still lent: $(getfacl -pn "$ram2")"
g=$("$FORKLET" fork "$f" --from "$ck2" --count 1) || fail "fork of the fork"
"$FORKLET" wait "$g" --for=Running --timeout=300 || fail "$g not Running"
[ "$(gsh "$g" 'cat /workspace/mark')" = before-fork ] || fail "fork of the fork lost the workspace"
echo "ok: the materialize helper ran jailed; fork of a fork $g works"

# Deleting a fork takes its uid's grants back: the uid may go to a new session.
for s in "$g" "$f"; do
        "$FORKLET" delete "$s" >/dev/null
        "$FORKLET" wait "$s" --for=Deleted --timeout=120 || fail "$s not deleted"
done
for l in "$T"/state/sessions/default.a/disk/*; do
        getfacl -pn "$l" | grep -q "^user:$uf:" && fail "fork's uid $uf keeps a grant on $l after delete"
done
echo "ok: grants revoked on delete"
for s in a b; do "$FORKLET" delete $s >/dev/null; done
for s in a b; do "$FORKLET" wait $s --for=Deleted --timeout=120 || fail "$s not deleted"; done
echo "PASS: jail"
