#!/bin/bash
# SPDX-License-Identifier: MIT
# A status read touches no file (real QEMU): with 3 sessions of 2 checkpoints each, strace of
# forkletd during 100 `forklet get sessions -o json` counts fewer than 2 filesystem syscalls
# per request on average (the sampler's cgroup reads included), and the list still shows every
# checkpoint, a deleted one gone at once, and resources with their sample time.
# Usage: agent-reads.sh FORKLETD FORKLET   (root; exit 77 without the image, QEMU or strace)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=reads
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
command -v strace >/dev/null || skip "strace not installed"

SPID=
fk_cleanup_extra() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; }

start_daemon
for n in r1 r2 r3; do session "$n"; done
for n in r1 r2 r3; do "$FORKLET" wait "$n" --for=Running --timeout=300 >/dev/null || fail "$n not Running"; done
for n in r1 r2 r3; do
        # --wait: a live checkpoint's write (a helper QEMU) is forkletd's work, not a read's
        for _ in 1 2; do "$FORKLET" checkpoint create "$n" --wait >/dev/null || fail "checkpoint $n"; done
done
count_cks() { "$FORKLET" get sessions -o json | python3 -c "import json,sys
print(sum(len(s['status'].get('checkpoints', [])) for s in json.load(sys.stdin)['items']))"; }
[ "$(count_cks)" = 6 ] || fail "expected 6 checkpoints in the list, got $(count_cks)"
"$FORKLET" get session r1 -o json | python3 -c "import json,sys
r=json.load(sys.stdin)['status'].get('resources')
assert r and r['memoryCurrent'] > 0 and r['sampledAt'].endswith('Z'), r" || fail "resources with sampledAt"

strace -f -qq -o "$T/strace.log" -e trace=%file,getdents64,%stat -p "$DPID" &
SPID=$!
sleep 1 # attached
for _ in $(seq 100); do "$FORKLET" get sessions -o json >/dev/null || fail "get sessions"; done
kill "$SPID"; wait "$SPID" 2>/dev/null; SPID=
calls=$(grep -cvE '^[0-9]+ +(\+\+\+|---)|resumed>' "$T/strace.log")
echo "filesystem syscalls of forkletd during 100 reads: $calls"
[ "$calls" -lt 200 ] || { grep -oE '[a-z0-9_]+\([^,]*, *"[^"]*"' "$T/strace.log" | sed -E 's/^[a-z0-9_]+\([^"]*//' |
        sort | uniq -c | sort -rn | head -20 >&2
        fail "$calls filesystem syscalls for 100 reads (want < 200)"; }

# the list follows a delete at once (the job that changes it reloads it)
id=$("$FORKLET" checkpoint list r1 | awk 'NR==2 {print $1}')
"$FORKLET" checkpoint delete r1 "$id" >/dev/null || fail "checkpoint delete"
[ "$(count_cks)" = 5 ] || fail "deleted checkpoint still listed"
"$FORKLET" checkpoint list r1 | awk -v id="$id" '$1 == id {f = 1} END {exit !f}' &&
        fail "checkpoint list shows the deleted one"
# and survives a restart (loaded from the state dir once)
stop_daemon
start_daemon
[ "$(count_cks)" = 5 ] || fail "after restart: $(count_cks) checkpoints"
echo PASS
