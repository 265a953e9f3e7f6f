#!/bin/bash
# SPDX-License-Identifier: MIT
# forklet-scheduler against a real etcd without VMs: fake nodes (status documents + leased
# keys written with etcdctl), many sessions applied with forklet --etcd, then two schedulers
# started at once. Checks: every session placed exactly once (each node key has version 1,
# the schedulers' placed counts add up to the number of sessions, losers counted), capacity
# and nodeSelector respected, Unschedulable reported; revoking a node's lease marks its
# sessions Lost.
# Usage: cluster-sched-race.sh FORKLET FORKLET_SCHEDULER [N]  (exit 77 without etcd/jq)
set -u
FORKLET=${1:?forklet}
SCHED=${2:?forklet-scheduler}
N=${3:-300}
SRC=${FORKLET_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d /tmp/fk-sched-race-$$.XXXX)
P=/fk-race-$$
S1= S2=
. "$SRC/tests/lib/harness.sh"

skip() { echo "SKIP: $*" >&2; rm -rf "$T"; exit 77; }
fail() {
        echo "FAIL: $*" >&2
        for f in "$T"/sched-*.log; do echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; done
        exit 1
}
command -v etcd >/dev/null && command -v etcdctl >/dev/null || skip "etcd-server/etcd-client missing"
command -v jq >/dev/null || skip "jq missing"

cleanup() {
        [ -n "$S1" ] && kill "$S1" 2>/dev/null && wait "$S1" 2>/dev/null
        [ -n "$S2" ] && kill "$S2" 2>/dev/null && wait "$S2" 2>/dev/null
        cl_etcd_stop KILL
        rm -rf "$T"
}
trap cleanup EXIT
cl_etcd_init && cl_etcd_start || fail "etcd did not start"
export FORKLET_ETCD=$CL_ETCD_URL FORKLET_ETCD_PREFIX=$P

# fake_node NAME ZONE MAX_SESSIONS: a status document and a leased key (60 s TTL).
fake_node() {
        local lease
        cl_ctl put "$P/nodes/$1/status" "$(printf '{"nodeName":"%s","labels":{"zone":"%s"},"capacity":{"sessions":%d,"memoryMiB":100000,"cpus":2,"sizeClasses":{"small":{"vcpus":1,"memoryMiB":256,"sessions":%d}}},"usage":{"sessions":0,"memoryMiB":0,"localSessions":0,"localMemoryMiB":0}}' "$1" "$2" "$3" "$3")" >/dev/null || return 1
        lease=$(cl_ctl lease grant 60 | awk '{print $2}')
        cl_ctl put --lease="$lease" "$P/nodes/$1/lease" '{}' >/dev/null || return 1
        echo "$lease" >"$T/lease-$1"
}
# N sessions across nodes a..d of 1/3 N + 10 each, a few pinned to zone z2 (node c only).
MAX=$((N / 3 + 10))
fake_node node-a z1 "$MAX" && fake_node node-b z1 "$MAX" && fake_node node-c z2 "$MAX" ||
        fail "fake nodes"
fake_node node-d z1 1 || fail "fake node d" # tiny: capacity 1
cl_ctl lease revoke "$(cat "$T/lease-node-d")" >/dev/null # ...and NotReady: never used
for i in $(seq 0 $((N - 1))); do
        printf -- '---\napiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: s%d}\n' "$i"
        [ $((i % 10)) = 0 ] && printf 'spec: {nodeSelector: {zone: z2}}\n'
done >"$T/sessions.yaml"
printf -- 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: nowhere}\nspec: {nodeSelector: {zone: mars}}\n' >"$T/nowhere.yaml"
"$FORKLET" apply -f "$T/sessions.yaml" >"$T/apply.out" || fail "cluster apply"
[ "$(grep -c ' created$' "$T/apply.out")" = "$N" ] || fail "apply did not create $N sessions"
"$FORKLET" apply -f "$T/nowhere.yaml" >/dev/null || fail "apply nowhere"

# Two schedulers, started together, racing for the same sessions.
"$SCHED" --id A --log-level debug >"$T/sched-A.out" 2>"$T/sched-A.log" &
S1=$!
"$SCHED" --id B --log-level debug >"$T/sched-B.out" 2>"$T/sched-B.log" &
S2=$!
placed() { [ "$(cl_ctl get --prefix "$P/sessions/" --keys-only | grep -c '/node$')" = "$N" ]; }
cl_wait 120 placed || fail "not every session placed within 120 s"
cl_wait 20 sh -c "\"$FORKLET\" get session nowhere -o json | jq -e '.status.conditions[0].reason == \"Unschedulable\"' >/dev/null" ||
        fail "nowhere not reported Unschedulable"
kill "$S1" "$S2"
wait "$S1" "$S2"
S1= S2=
pa=$(sed -n 's/.*placed \([0-9]*\).*/\1/p' "$T/sched-A.out")
pb=$(sed -n 's/.*placed \([0-9]*\).*/\1/p' "$T/sched-B.out")
ra=$(sed -n 's/.*lost races \([0-9]*\).*/\1/p' "$T/sched-A.out")
rb=$(sed -n 's/.*lost races \([0-9]*\).*/\1/p' "$T/sched-B.out")
echo "scheduler A placed $pa (lost $ra races), B placed $pb (lost $rb races)"
[ $((pa + pb)) = "$N" ] || fail "placed $pa + $pb != $N: a session was placed twice or not at all"
cl_ctl get --prefix "$P/sessions/" -w json >"$T/all.json"
jq -r '.kvs[] | select(.key | @base64d | endswith("/node")) | "\(.key | @base64d) \(.version) \(.value | @base64d)"' \
        "$T/all.json" >"$T/nodes.txt"
[ "$(wc -l <"$T/nodes.txt")" = "$N" ] || fail "want $N node keys"
awk '$2 != 1 { bad = 1; print "rewritten: " $0 } END { exit bad }' "$T/nodes.txt" ||
        fail "a placement was overwritten (version > 1)"
for n in node-a node-b node-c; do
        c=$(awk -v n=$n '$3 == n' "$T/nodes.txt" | wc -l)
        echo "$n: $c sessions (max $MAX)"
        [ "$c" -le "$MAX" ] || fail "$n over capacity: $c > $MAX"
done
grep -q ' node-d$' "$T/nodes.txt" && fail "placed on NotReady node-d"
awk '$1 ~ /\/s[0-9]*0\/node$/ && $3 != "node-c" { bad = 1; print } END { exit bad }' \
        "$T/nodes.txt" || fail "nodeSelector zone=z2 not honoured"

# A node whose lease goes away: its sessions are reported Lost by a (new) scheduler.
"$SCHED" --id C >"$T/sched-C.out" 2>"$T/sched-C.log" &
S1=$!
cl_ctl lease revoke "$(cat "$T/lease-node-a")" >/dev/null || fail "revoke"
want=$(awk '$3 == "node-a"' "$T/nodes.txt" | wc -l)
lost() {
        [ "$("$FORKLET" get sessions -o json | jq '[.items[] | select(.status.phase == "Lost")] | length')" = "$want" ]
}
cl_wait 30 lost || fail "sessions of node-a not Lost"
"$FORKLET" get nodes | grep -q '^node-a  *NotReady' || fail "node-a not NotReady"
"$FORKLET" get nodes | grep -q '^node-b  *Ready' || fail "node-b not Ready"
echo "PASS: $N sessions placed once by two schedulers; $want Lost after node-a's lease expired"
