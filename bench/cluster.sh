#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/cluster: time from apply to Running for N sessions through the control plane (etcd +
# forklet-scheduler + three forkletd) against the same N applied to one standalone forkletd in
# the same run, and the control plane's event latencies (apply -> placed by the scheduler's
# watch + CAS -> seen by the node's watch) against an etcd put round trip.
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/cluster.sh BUILD_DIR [N]  (N: 20)
set -u
B=${1:?build dir}
N=${2:-20}
SRC=$(cd "$(dirname "$0")/.." && pwd)
IMG=${FORKLET_IMAGE_DIR:?set FORKLET_IMAGE_DIR}
FORKLETD=$B/agent/forkletd FORKLET=$B/cli/forklet SCHED=$B/scheduler/forklet-scheduler
T=$(mktemp -d /tmp/fk-bench-cluster-$$.XXXX)
P=/fk-bench-$$
PIDS=()
. "$SRC/tests/lib/harness.sh"

our_qemus() {
        local p
        for p in $(pgrep -f qemu-system 2>/dev/null); do
                grep -qs "$T/" "/proc/$p/cmdline" && echo "$p"
        done
}
kill_qemus() { for p in $(our_qemus); do kill -9 "$p"; done; }
cleanup() {
        for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
        kill_qemus
        cl_etcd_stop KILL
        fk_unmount_under "$T"
        rm -rf "$T"
}
trap cleanup EXIT
die() { echo "bench/cluster: $*" >&2; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# log time "HH:MM:SS.mmm" -> ms since midnight
log_ms() { awk -F'[:. ]' '{ print (($1 * 60 + $2) * 60 + $3) * 1000 + $4 }'; }

node_config() { # NAME DIR [ETCD]; runDir on a tmpfs, as /run on systemd hosts
        mkdir -p "$2/state" "$2/run" "$2/manifests"
        fk_run_tmpfs "$2/run" || die "mount a tmpfs on $2/run"
        cat <<EOT
apiVersion: forklet.dev/v1alpha1
kind: NodeConfig
nodeName: $1
stateDir: $2/state
runDir: $2/run
accel: ${FORKLET_TEST_ACCEL:-tcg}
manifestDir: $2/manifests
api: {socket: $2/run/api.sock}
sizeClasses:
  - {name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1024}
images:
  - {name: minimal, dir: $IMG}
capacity: {reserveMemoryMiB: 512, maxSessions: $N}
EOT
        [ -n "${3:-}" ] && echo "controlPlane: {etcd: [\"$3\"], prefix: $P}"
}
for i in $(seq 0 $((N - 1))); do
        printf -- '---\napiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: b%d}\n' "$i"
done >"$T/sessions.yaml"
count_running() { "$FORKLET" "$@" get sessions -o json | jq '[.items[] | select(.status.phase == "Running")] | length'; }
wait_running() { # seconds, forklet args...
        local t=$1
        shift
        cl_wait "$t" sh -c "[ \"\$(\"$FORKLET\" $* get sessions -o json | jq '[.items[] | select(.status.phase == \"Running\")] | length')\" = $N ]"
}

# Baseline: one standalone forkletd, local API.
node_config solo "$T/solo" >"$T/solo.yaml"
"$FORKLETD" --config "$T/solo.yaml" >"$T/solo.log" 2>&1 &
PIDS+=($!)
cl_wait 10 "$FORKLET" --socket "$T/solo/run/api.sock" get sessions >/dev/null 2>&1 ||
        die "solo forkletd"
t0=$(now_ms)
"$FORKLET" --socket "$T/solo/run/api.sock" apply -f "$T/sessions.yaml" >/dev/null || die "apply"
wait_running $((60 * N)) --socket "$T/solo/run/api.sock" || die "standalone: not all Running"
solo=$(($(now_ms) - t0))
kill "${PIDS[0]}"; wait "${PIDS[0]}"; PIDS=()
kill_qemus

# Cluster: etcd, scheduler, three forkletd.
cl_etcd_init && cl_etcd_start || die "etcd"
export FORKLET_ETCD=$CL_ETCD_URL FORKLET_ETCD_PREFIX=$P
for i in 1 2 3; do
        node_config "bench-n$i" "$T/n$i" "$CL_ETCD_URL" >"$T/n$i.yaml"
        "$FORKLETD" --config "$T/n$i.yaml" >"$T/n$i.log" 2>&1 &
        PIDS+=($!)
done
"$SCHED" >"$T/sched.out" 2>"$T/sched.log" &
PIDS+=($!)
cl_wait 30 sh -c "[ \$(\"$FORKLET\" get nodes | grep -c ' Ready ') = 3 ]" || die "nodes not Ready"
t0=$(now_ms)
apply_tod=$(date +%H:%M:%S.%N | cut -c1-12 | log_ms)
"$FORKLET" apply -f "$T/sessions.yaml" >/dev/null || die "cluster apply"
wait_running $((60 * N)) || die "cluster: not all Running"
cluster=$(($(now_ms) - t0))

# Latencies from the daemons' millisecond log stamps (same clock).
grep ': placed on ' "$T/sched.log" | cut -c1-12 | log_ms | sort -n >"$T/placed.ms"
cat "$T"/n?.log | grep 'assigned by the control plane' | cut -c1-12 | log_ms | sort -n >"$T/seen.ms"
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : 0) }'; }
placed_first=$(head -1 "$T/placed.ms")
placed_med=$(awk -v a="$apply_tod" '{ print $1 - a }' "$T/placed.ms" | median)
seen_med=$(paste "$T/placed.ms" "$T/seen.ms" | awk '{ print $2 - $1 }' | median)
for _ in 1 2 3 4 5; do
        s=$(date +%s%N); cl_ctl put "$P/bench/rtt" x >/dev/null; e=$(date +%s%N)
        echo $(((e - s) / 1000000))
done | median >"$T/rtt"
rtt=$(cat "$T/rtt")

printf '\nbench/cluster: %d sessions, TCG, 3 nodes on one host (%d CPUs)\n\n' "$N" "$(nproc)"
printf '| %-52s | %10s | %8s |\n' "measure" "ms" "ratio"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..54})" "------------" "----------"
printf '| %-52s | %10d | %8s |\n' "standalone: apply -> all Running (baseline)" "$solo" "1.00"
printf '| %-52s | %10d | %8.2f |\n' "cluster: apply -> all Running" "$cluster" "$(echo "$cluster / $solo" | bc -l)"
printf '| %-52s | %10d | %8s |\n' "etcdctl put (process + round trip, baseline)" "$rtt" "1.00"
printf '| %-52s | %10d | %8.2f |\n' "apply -> first placement (watch + CAS)" "$((placed_first - apply_tod))" "$(echo "($placed_first - $apply_tod) / ($rtt + 0.001)" | bc -l)"
printf '| %-52s | %10d | %8.2f |\n' "apply -> placed, median over sessions" "$placed_med" "$(echo "$placed_med / ($rtt + 0.001)" | bc -l)"
printf '| %-52s | %10d | %8.2f |\n' "placed -> node sees it (agent watch), median" "$seen_med" "$(echo "$seen_med / ($rtt + 0.001)" | bc -l)"
