#!/bin/bash
# SPDX-License-Identifier: MIT
# forkletd's least privilege on the real thing: every thread of forkletd holds exactly the kept
# capabilities (CapBnd/CapPrm/CapEff, nothing inheritable or ambient) from start to after a
# session booted (netns, tap, resolver on :53, nft, cgroup, jailed QEMU), ran an exec, was
# checkpointed and forked; the kept set (no CAP_SYS_PTRACE) can still read a jailed fork QEMU's
# smaps_rollup (its PSS charge); hardening.dropCapabilities: false keeps everything.
# Usage: agent-privileges.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"

# The kept set, written out independently of agent/jail/privileges.c (capability numbers from
# linux/capability.h): chown 0, dac_override 1, fowner 3, kill 5, setgid 6, setuid 7,
# setpcap 8, net_bind_service 10, net_admin 12, sys_admin 21.
KEPT_NAMES=chown,dac_override,fowner,kill,setgid,setuid,setpcap,net_bind_service,net_admin,sys_admin
want=0
for c in 0 1 3 5 6 7 8 10 12 21; do want=$((want | (1 << c))); done
WANT=$(printf '%016x' $want)

status_of() { sed -n "s/^$2:[[:space:]]*//p" "$1"; }

# check_caps PID BND PRM_EFF: every thread of PID has these sets, none inheritable or ambient
check_caps() {
        local p=$1 bnd=$2 prm=$3 st caps n=0
        for st in /proc/"$p"/task/*/status; do
                # one read per thread: a thread that ended since the glob (a job's worker) is
                # skipped, not read as empty sets
                caps=$(cat "$st" 2>/dev/null) || continue
                [ -n "$caps" ] || continue
                st_of() { printf '%s\n' "$caps" | sed -n "s/^$1:[[:space:]]*//p"; }
                [ "$(st_of CapBnd)" = "$bnd" ] || fail "$st: CapBnd $(st_of CapBnd), want $bnd"
                [ "$(st_of CapPrm)" = "$prm" ] || fail "$st: CapPrm $(st_of CapPrm), want $prm"
                [ "$(st_of CapEff)" = "$prm" ] || fail "$st: CapEff $(st_of CapEff), want $prm"
                [ "$(st_of CapInh)" = 0000000000000000 ] || fail "$st: CapInh $(st_of CapInh)"
                [ "$(st_of CapAmb)" = 0000000000000000 ] || fail "$st: CapAmb $(st_of CapAmb)"
                n=$((n + 1))
        done
        echo "$n"
}

# ---- the drop at start ---------------------------------------------------------------------
start_daemon
n=$(check_caps "$DPID" "$WANT" "$WANT") || exit 1
grep -q "capabilities: kept cap_${KEPT_NAMES//,/,cap_};" "$T/forkletd.log" ||
        fail "no 'capabilities: kept' line naming the set in forkletd's log"

# ---- a session boots, execs, checkpoints and forks with it ---------------------------------
session priv
"$FORKLET" wait priv --for=Running --timeout=300 || fail "priv not Running"
[ "$(gsh priv 'echo hello-$((6 * 7))')" = hello-42 ] || fail "exec in priv"
ck=$("$FORKLET" checkpoint create priv) || fail "checkpoint create"
f=$("$FORKLET" fork priv --from "$ck" --count 1) || fail "fork"
"$FORKLET" wait "$f" --for=Running --timeout=300 || fail "$f not Running"
[ "$(gsh "$f" 'echo forked-$((6 * 7))')" = forked-42 ] || fail "exec in $f"
[ "$(gsh priv 'echo parent-ok')" = parent-ok ] || fail "exec in the parent after the fork"
n=$(check_caps "$DPID" "$WANT" "$WANT") || exit 1
[ "$n" -gt 1 ] || fail "forkletd runs $n thread(s); the check must cover its worker threads"

# forkletd reads a fork QEMU's smaps_rollup (another uid) for its PSS charge: the kernel lets
# CAP_SYS_ADMIN (or CAP_PERFMON) do that without CAP_SYS_PTRACE; proven with exactly the kept set
# (and, so the check means something, refused with none of it)
q=$(field "$f" pid)
[ "$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$q/status")" != 0 ] ||
        fail "fork QEMU $q runs as root: the PSS check below would prove nothing"
setpriv --inh-caps=-all --bounding-set=-all,+"${KEPT_NAMES//,/,+}" \
        grep -q '^Pss:' "/proc/$q/smaps_rollup" || fail "kept set cannot read smaps_rollup of $q"
setpriv --inh-caps=-all --bounding-set=-all grep -q '^Pss:' "/proc/$q/smaps_rollup" 2>/dev/null &&
        fail "smaps_rollup of $q readable with no capability: the check above proves nothing"

# ---- hardening.dropCapabilities: false keeps every capability (VMs are adopted) ------------
stop_daemon
echo "hardening: {dropCapabilities: false}" >>"$T/node.yaml"
start_daemon
"$FORKLET" wait priv --for=Running --timeout=60 || fail "priv not adopted"
all=$(status_of /proc/self/status CapBnd)
check_caps "$DPID" "$all" "$(status_of /proc/self/status CapPrm)" >/dev/null || exit 1
grep -q "capabilities: all kept (hardening.dropCapabilities: false)" "$T/forkletd.log" ||
        fail "no 'all kept' line in forkletd's log"
echo "agent-privileges: ok (kept $WANT in $n threads; session, checkpoint and fork worked)"
