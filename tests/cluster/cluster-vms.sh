#!/bin/bash
# SPDX-License-Identifier: MIT
# Cluster mode end to end with real QEMU: a private etcd, three forkletd on this machine (own
# node names, state/run/manifest dirs, sockets, uplink pools, cgroup parents, labels) and
# forklet-scheduler. N sessions applied with forklet --etcd are placed within capacity and all
# reach Running (one QEMU each); exec is routed to the right node; restarting etcd makes every
# agent reconnect and resume (a session applied afterwards runs, no VM is booted twice); a
# killed forkletd's node turns NotReady within the lease TTL and its sessions Lost; a cluster
# delete stops the VM.
# Usage: cluster-vms.sh FORKLETD FORKLET FORKLET_SCHEDULER [N]  (root; 77 when etcd/QEMU/image
# are missing). N defaults to $FORKLET_CLUSTER_SESSIONS or 6 (20 is the full run: slow on TCG).
set -u
FORKLETD=${1:?forkletd}
FORKLET=${2:?forklet}
SCHED=${3:?forklet-scheduler}
N=${4:-${FORKLET_CLUSTER_SESSIONS:-6}}
SRC=${FORKLET_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
IMG=${FORKLET_IMAGE_DIR:-}
TTL=10
T=$(mktemp -d /tmp/fk-cluster-$$.XXXX)
P=/fk-cl-$$
DPIDS=(- - -)
SPID=
. "$SRC/tests/lib/harness.sh"

skip() { echo "SKIP: $*" >&2; rm -rf "$T"; exit 77; }
fail() {
        echo "FAIL: $*" >&2
        for f in "$T"/n*.log "$T"/sched.log; do
                [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 25 "$f" >&2; }
        done
        "$FORKLET" get sessions >&2 2>&1
        exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root"
[ -n "$IMG" ] && [ -f "$IMG/vmlinuz" ] || skip "guest image missing in '$IMG'"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing"
command -v etcd >/dev/null && command -v etcdctl >/dev/null && command -v jq >/dev/null ||
        skip "etcd-server, etcd-client or jq missing"

our_qemus() { # PIDs of QEMU processes whose command line names our temp dir
        local p
        for p in $(pgrep -f qemu-system 2>/dev/null); do
                grep -qs "$T/" "/proc/$p/cmdline" && echo "$p"
        done
}
cleanup() {
        local p
        [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
        for p in "${DPIDS[@]}"; do
                [ "$p" != - ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
        done
        for p in $(our_qemus); do kill -9 "$p" 2>/dev/null; done
        cl_etcd_stop KILL
        for f in "$T"/n*.yaml; do
                [ -f "$f" ] && "$FORKLETD" --config "$f" --decommission >/dev/null 2>&1
        done
        fk_unmount_under "$T"
        rm -rf "$T"
        # each node's cgroup parent (and session cgroups a killed node left), children first
        for _ in $(seq 40); do
                rmdir /sys/fs/cgroup/*/forklet-cl$$-n*/* /sys/fs/cgroup/*/forklet-cl$$-n* \
                        /sys/fs/cgroup/forklet-cl$$-n*/* /sys/fs/cgroup/forklet-cl$$-n* 2>/dev/null
                ls -d /sys/fs/cgroup/*/forklet-cl$$-n* /sys/fs/cgroup/forklet-cl$$-n* \
                        >/dev/null 2>&1 || break
                sleep 0.25
        done
}
trap cleanup EXIT

cl_etcd_init && cl_etcd_start || fail "etcd did not start"
export FORKLET_ETCD=$CL_ETCD_URL FORKLET_ETCD_PREFIX=$P
MAX=$(((N + 2) / 3 + 1))
for i in 1 2 3; do
        mkdir -p "$T/n$i/state" "$T/n$i/run" "$T/n$i/manifests"
        fk_run_tmpfs "$T/n$i/run" || fail "mount a tmpfs on $T/n$i/run" # as /run on systemd hosts
        cat >"$T/n$i.yaml" <<EOT
apiVersion: forklet.dev/v1alpha1
kind: NodeConfig
nodeName: cl$$-n$i
stateDir: $T/n$i/state
runDir: $T/n$i/run
accel: ${FORKLET_TEST_ACCEL:-tcg}
manifestDir: $T/n$i/manifests
api: {socket: $T/n$i/run/api.sock}
network: {uplinkPool: 198.18.$((i * 16)).0/20, uplinkInterface: ""}
cgroupParent: forklet-cl$$-n$i
labels: {zone: z$i}
sizeClasses:
  - {name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1024}
images:
  - {name: minimal, dir: $IMG}
capacity: {reserveMemoryMiB: 512, maxSessions: $MAX}
controlPlane: {etcd: ["$CL_ETCD_URL"], prefix: $P}
EOT
done
start_node() {
        "$FORKLETD" --config "$T/n$1.yaml" >>"$T/n$1.log" 2>&1 &
        DPIDS[$(($1 - 1))]=$!
}
start_node 1 && start_node 2 && start_node 3
"$SCHED" --log-level info >"$T/sched.out" 2>"$T/sched.log" &
SPID=$!
ready_nodes() { "$FORKLET" get nodes | grep -c " Ready "; }
cl_wait 30 sh -c "[ \$(\"$FORKLET\" get nodes | grep -c ' Ready ') = 3 ]" || fail "3 nodes not Ready"

for i in $(seq 0 $((N - 1))); do
        printf -- '---\napiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: s%d}\n' "$i"
done >"$T/sessions.yaml"
t0=$SECONDS
"$FORKLET" apply -f "$T/sessions.yaml" >/dev/null || fail "cluster apply"
running() { "$FORKLET" get sessions -o json | jq '[.items[] | select(.status.phase == "Running")] | length'; }
cl_wait $((120 + 60 * N)) sh -c "[ \$(\"$FORKLET\" get sessions -o json | jq '[.items[] | select(.status.phase == \"Running\")] | length') = $N ]" ||
        fail "not all $N sessions Running"
echo "all $N sessions Running $((SECONDS - t0)) s after apply"
"$FORKLET" get sessions
"$FORKLET" get nodes
"$FORKLET" get sessions -o json >"$T/s.json"
for i in 1 2 3; do
        c=$(jq --arg n "cl$$-n$i" '[.items[] | select(.status.nodeName == $n)] | length' "$T/s.json")
        [ "$c" -le "$MAX" ] || fail "node $i runs $c sessions > maxSessions $MAX"
done
[ "$(our_qemus | wc -l)" = "$N" ] || fail "want $N QEMU processes, have $(our_qemus | wc -l)"

# exec goes to the node that runs the session
# (only that node's forkletd knows s0: another node's API answers "not found")
out=$("$FORKLET" exec s0 -- sh -c 'echo hello from $((6 * 7))') || fail "exec s0"
[ "$out" = "hello from 42" ] || fail "exec s0 printed '$out'"
node0=$(jq -r '.items[] | select(.metadata.name == "s0") | .status.nodeName' "$T/s.json")
other=$(((${node0##*-n} % 3) + 1))
FORKLET_ETCD= "$FORKLET" --socket "$T/n$other/run/api.sock" exec s0 -- true 2>/dev/null &&
        fail "s0 exists on node $other too"

# etcd restart: agents reconnect and resume their watches; nothing boots twice.
before=$(our_qemus | sort | tr '\n' ' ')
cl_etcd_stop TERM
sleep 2
cl_etcd_start || fail "etcd did not restart"
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: after}\n' >"$T/after.yaml"
"$FORKLET" apply -f "$T/after.yaml" >/dev/null || fail "apply after etcd restart"
"$FORKLET" wait after --for=Running --timeout=300 >/dev/null || fail "after not Running"
for p in $before; do kill -0 "$p" 2>/dev/null || fail "QEMU $p died across the etcd restart"; done
[ "$(our_qemus | wc -l)" = $((N + 1)) ] || fail "duplicate or missing VM after etcd restart"
boots=$(cat "$T"/n*.log | grep -c ': booting$')
[ "$boots" = $((N + 1)) ] || fail "$boots boots for $((N + 1)) sessions"
echo "etcd restarted: $N VMs untouched, watch resumed (session 'after' placed and Running)"

# kill -9 the forkletd running s0: its node turns NotReady within the TTL, sessions Lost.
idx=${node0##*-n}
kill -9 "${DPIDS[$((idx - 1))]}"
wait "${DPIDS[$((idx - 1))]}" 2>/dev/null
DPIDS[$((idx - 1))]=-
t0=$SECONDS
cl_wait $((TTL + 10)) sh -c "\"$FORKLET\" get nodes | grep -q '^$node0  *NotReady'" ||
        fail "$node0 not NotReady within $((TTL + 10)) s"
echo "$node0 NotReady $((SECONDS - t0)) s after its forkletd was killed (lease TTL $TTL s)"
cl_wait 15 sh -c "\"$FORKLET\" get session s0 -o json | jq -e '.status.phase == \"Lost\"' >/dev/null" ||
        fail "s0 not Lost"

# delete on a live node stops the VM
victim=$("$FORKLET" get sessions -o json |
        jq -r --arg n "$node0" '[.items[] | select(.status.nodeName != $n)][0].metadata.name')
vpid=$("$FORKLET" get session "$victim" -o json | jq -r '.status.vm.pid')
"$FORKLET" delete "$victim" >/dev/null || fail "cluster delete"
cl_wait 60 sh -c "! kill -0 $vpid 2>/dev/null" || fail "QEMU of $victim still running"
echo "PASS: $N sessions on 3 nodes; exec routed; etcd restart; NotReady + Lost; delete"
