#!/bin/bash
# SPDX-License-Identifier: MIT
# A failing lifecycle.afterStart is a state, not a log line (real QEMU): AfterStart False with
# the exit code and the stderr tail, Ready False, declared checkpoints and forks wait with a
# condition that says why and no fork is made; with restartPolicy OnFailure the session boots
# again, and once afterStart succeeds the checkpoint is taken and the forks are made.
# Usage: agent-afterstart.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=afterstart
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

json() { "$FORKLET" get session "$1" -o json; }
cond() { # NAME TYPE -> "STATUS REASON|MESSAGE"
        json "$1" | python3 -c "import json,sys
for c in json.load(sys.stdin)['status'].get('conditions', []):
    if c['type'] == sys.argv[1]: print(c['status'], c['reason'] + '|' + c.get('message', ''))" "$2"
}
# cond_within SECONDS NAME TYPE PATTERN: the condition's "STATUS REASON|MESSAGE" matches
cond_within() {
        local i
        for i in $(seq $(($1 * 2))); do
                cond "$2" "$3" | grep -Eq "$4" && return 0
                sleep 0.5
        done
        echo "condition $3 of $2: '$(cond "$2" "$3")'" >&2
        return 1
}

start_daemon

# ---- restartPolicy Never: afterStart exits 3; the VM stays up for debugging ----------------
session hook 'lifecycle: {afterStart: ["sh", "-c", "echo first line >&2; echo boom-on-stderr >&2; exit 3"]}' \
        'checkpoints: [{name: ready}]' 'forks: {from: ready, count: 2}'
cond_within 60 hook AfterStart '^False Failed\|afterStart exited 3; stderr: .*boom-on-stderr' ||
        fail "AfterStart condition does not report exit 3 and stderr"
cond_within 5 hook Ready '^False AfterStartFailed\|afterStart exited 3' || fail "Ready not False/AfterStartFailed"
cond_within 5 hook CheckpointsTaken '^False AfterStartFailed' || fail "CheckpointsTaken not False"
cond_within 20 hook ForksReady '^False AfterStartFailed\|spec.forks waits for checkpoint ready' ||
        fail "ForksReady does not say why the forks wait"
"$FORKLET" get sessions | grep -q 'hook-fork' && fail "a fork was made although afterStart failed"
[ -z "$("$FORKLET" checkpoint list hook | sed 1d)" ] || fail "a declared checkpoint was taken"
"$FORKLET" describe hook | grep -q 'AfterStartFailed' || fail "describe does not show the failure"
[ "$("$FORKLET" exec hook -- echo alive)" = alive ] || fail "the VM of a failed afterStart is gone"
sleep 3
"$FORKLET" get sessions | grep -q 'hook-fork' && fail "a fork was made later"
"$FORKLET" delete hook >/dev/null || fail "delete hook"

# ---- restartPolicy OnFailure: fails once (a marker on the workspace disk), then succeeds ---
session retry 'restartPolicy: OnFailure' \
        'lifecycle: {afterStart: ["sh", "-c", "mkdir -p /workspace && if [ -f /workspace/once ]; then exit 0; fi; touch /workspace/once && sync && exit 4"]}' \
        'checkpoints: [{name: ready}]' 'forks: {from: ready, count: 1}'
cond_within 180 retry AfterStart '^True Succeeded' || fail "afterStart did not succeed after a restart"
"$FORKLET" describe retry | grep -q 'AfterStartFailed' || fail "the first failure left no event"
boots=$(grep -c 'session default.retry: running (pid' "$T/forkletd.log")
[ "$boots" -ge 2 ] || fail "restartPolicy OnFailure did not boot the session again ($boots boots)"
cond_within 60 retry CheckpointsTaken '^True Taken' || fail "checkpoint not taken after the retry"
exists_within 60 retry-fork-0 && "$FORKLET" wait retry-fork-0 --for=Running --timeout=180 >/dev/null || fail "the declared fork did not run"
cond_within 20 retry ForksReady '^True Created' || fail "ForksReady not True"
[ "$(field retry phase)" = Running ] || fail "retry is not Running"
echo "PASS"
