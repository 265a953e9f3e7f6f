#!/bin/bash
# SPDX-License-Identifier: MIT
# A placement the node's admission refuses is handed back: a real forkletd (no VM ever boots:
# its allocatable memory is below one session's charge) publishes admission's numbers; a
# session placed on it anyway (as a scheduler with a stale view would) waits Pending
# InsufficientMemory, then after controlPlane.releasePendingAfterSeconds the node deletes the
# placement and forklet-scheduler places it on a node with room, never back on this one.
# Usage: cluster-release.sh FORKLETD FORKLET FORKLET_SCHEDULER  (root; 77 without etcd/jq)
set -u
FORKLETD=${1:?forkletd}
FORKLET=${2:?forklet}
SCHED=${3:?forklet-scheduler}
SRC=${FORKLET_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d /tmp/fk-release-$$.XXXX)
P=/fk-rel-$$
NODE=rel$$-a
CG=forklet-rel$$
DPID='' SPID=''
. "$SRC/tests/lib/harness.sh"

skip() { echo "SKIP: $*" >&2; rm -rf "$T"; exit 77; }
fail() {
        echo "FAIL: $*" >&2
        for f in "$T"/node.log "$T"/sched.log; do
                [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 25 "$f" >&2; }
        done
        exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root"
command -v etcd >/dev/null && command -v etcdctl >/dev/null && command -v jq >/dev/null ||
        skip "etcd-server, etcd-client or jq missing"

cleanup() {
        [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
        [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
        cl_etcd_stop KILL
        [ -f "$T/node.yaml" ] && "$FORKLETD" --config "$T/node.yaml" --remove-networks >/dev/null 2>&1
        fk_unmount_under "$T"
        rm -rf "$T"
        rmdir /sys/fs/cgroup/*/$CG /sys/fs/cgroup/$CG 2>/dev/null
        return 0
}
trap cleanup EXIT

cl_etcd_init && cl_etcd_start || fail "etcd did not start"
export FORKLET_ETCD=$CL_ETCD_URL FORKLET_ETCD_PREFIX=$P
# allocatable = MemTotal - reserve = 200 MiB: less than one small (256 + 64 overhead)
total=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
mkdir -p "$T/state" "$T/run" "$T/manifests" "$T/images"
fk_run_tmpfs "$T/run" || fail "mount a tmpfs on $T/run" # as /run on systemd hosts
: >"$T/images/vmlinuz"
: >"$T/images/initrd.img"
cat >"$T/node.yaml" <<EOT
apiVersion: forklet.dev/v1alpha1
kind: NodeConfig
nodeName: $NODE
stateDir: $T/state
runDir: $T/run
accel: tcg
manifestDir: $T/manifests
api: {socket: $T/run/api.sock}
network: {uplinkPool: 198.18.240.0/20, uplinkInterface: ""}
cgroupParent: $CG
sizeClasses:
  - {name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1024}
images:
  - {name: minimal, dir: $T/images}
capacity: {reserveMemoryMiB: $((total - 200)), maxSessions: 4, qemuOverheadMiB: 64}
controlPlane: {etcd: ["$CL_ETCD_URL"], prefix: $P, releasePendingAfterSeconds: 3}
EOT
"$FORKLETD" --config "$T/node.yaml" >>"$T/node.log" 2>&1 &
DPID=$!
status() { cl_ctl get --print-value-only "$P/nodes/$NODE/status"; }
cl_wait 30 sh -c "etcdctl --endpoints $CL_ETCD_URL get --print-value-only $P/nodes/$NODE/status | grep -q ." ||
        fail "node status not published"
# the published numbers are admission's: the charge includes qemuOverheadMiB
st=$(status)
echo "$st" | jq -e '.capacity.sizeClasses.small.chargeMiB == 320 and
        .capacity.sizeClasses.small.forkChargeMiB == 128 and .capacity.memoryMiB == 200 and
        .capacity.qemuOverheadMiB == 64 and .capacity.sizeClasses.small.sessions == 0 and
        .allocatable.sizeClasses.small.sessions == 0' >/dev/null ||
        fail "node status does not carry admission's numbers: $st"

# a second node with room (a status document and a leased key, no forkletd)
cl_ctl put "$P/nodes/rel$$-b/status" '{"nodeName":"rel-b","labels":{},"capacity":{"sessions":4,"memoryMiB":8192,"cpus":4,"vcpus":16,"sizeClasses":{"small":{"vcpus":1,"memoryMiB":256,"chargeMiB":320,"sessions":4}}},"usage":{"sessions":0,"memoryMiB":0,"localSessions":0,"localMemoryMiB":0}}' >/dev/null ||
        fail "fake node"
lease=$(cl_ctl lease grant 120 | awk '{print $2}')
cl_ctl put --lease="$lease" "$P/nodes/rel$$-b/lease" '{}' >/dev/null || fail "fake node lease"

printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: stale}\n' >"$T/s.yaml"
"$FORKLET" apply -f "$T/s.yaml" >/dev/null || fail "cluster apply"
# placed where admission refuses, as a scheduler with a stale view would
cl_ctl put "$P/sessions/default/stale/node" "$NODE" >/dev/null || fail "put node key"
sess() { cl_ctl get --print-value-only "$P/sessions/default/stale/$1"; }
cl_wait 30 sh -c "etcdctl --endpoints $CL_ETCD_URL get --print-value-only $P/sessions/default/stale/status | jq -e '.phase == \"Pending\" and .conditions[0].reason == \"InsufficientMemory\"' >/dev/null" ||
        fail "stale not Pending InsufficientMemory on $NODE: $(sess status)"
t0=$SECONDS
cl_wait 30 sh -c "[ -z \"\$(etcdctl --endpoints $CL_ETCD_URL get --print-value-only $P/sessions/default/stale/node)\" ]" ||
        fail "placement not released: node=$(sess node)"
echo "placement released $((SECONDS - t0)) s after the session went Pending"
grep -q "placement released" "$T/node.log" || fail "node did not log the release"
# the node dropped it: its own API no longer lists it
cl_wait 10 sh -c "! FORKLET_ETCD= \"$FORKLET\" --socket \"$T/run/api.sock\" get session stale >/dev/null 2>&1" ||
        fail "the node still holds stale after releasing it"

# a scheduler reads both nodes' documents: never back on $NODE, placed on the one with room
"$SCHED" --log-level info >"$T/sched.out" 2>"$T/sched.log" &
SPID=$!
cl_wait 30 sh -c "[ \"\$(etcdctl --endpoints $CL_ETCD_URL get --print-value-only $P/sessions/default/stale/node)\" = rel$$-b ]" ||
        fail "not placed on rel$$-b: node=$(sess node)"
# one more session: no node but rel-b has room; $NODE is refused for memory
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: second}\n' >"$T/s2.yaml"
"$FORKLET" apply -f "$T/s2.yaml" >/dev/null || fail "apply second"
cl_wait 30 sh -c "[ \"\$(etcdctl --endpoints $CL_ETCD_URL get --print-value-only $P/sessions/default/second/node)\" = rel$$-b ]" ||
        fail "second not placed on rel$$-b"
cl_ctl lease revoke "$lease" >/dev/null
echo "PASS: released after admission refused it, re-placed on the node with room"
