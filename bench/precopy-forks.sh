#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/precopy-forks: forks of precopy checkpoints through a real forkletd (TCG): a guest
# rewrites 16 MiB in a loop and counts, and FK_PRECOPY_FORKS (12) times in a row a precopy
# checkpoint of it is taken (FORKLET_CHECKPOINT_MODE=precopy, --wait: through the helper QEMU
# to Ready) and forked; a fork counts as running when its counter continues from the checkpoint
# at the same PID, it rewrites 16 MiB itself, answers 3 s later and its console shows no oops or
# list corruption. Prints every fork and "N of M ran"; exit 1 unless all ran. What it showed:
# docs/fork-engine.md and docs/benchmarks.md.
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/precopy-forks.sh \
#   build/agent/forkletd build/cli/forklet
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=precopy
. "$(dirname "$0")/../tests/lib/harness.sh"
fk_setup

N=${FK_PRECOPY_FORKS:-12}
case $N in '' | *[!0-9]*) fail "FK_PRECOPY_FORKS=$N: a count of forks, 1..100" ;; esac
[ "$N" -ge 1 ] && [ "$N" -le 100 ] || fail "FK_PRECOPY_FORKS=$N: a count of forks, 1..100"
BAD='corruption|BUG:|Oops|general protection|Kernel panic|segfault'

# ck_field NAME ID KEY: a scalar of `checkpoint inspect -o json`
ck_field() {
        "$FORKLET" checkpoint inspect "$1" "$2" -o json 2>/dev/null |
                sed -n "s/^ *\"$3\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" | head -n1
}

FORKLET_CHECKPOINT_MODE=precopy start_daemon
session web
"$FORKLET" wait web --for=Running --timeout=240 || fail "web not Running"
# the counter ends in a copy once the guest agent wrote its new fork id
"$FORKLET" exec web --detach -- sh -c 'orig=$(cat /run/forklet/fork-id 2>/dev/null); i=0
echo $$ > /run/counter.pid
while [ "$(cat /run/forklet/fork-id 2>/dev/null)" = "$orig" ]; do
        i=$((i + 1)); echo $i > /run/counter; sleep 0.05
done; echo $i > /run/counter.final' >/dev/null || fail "start the counter"
"$FORKLET" exec web --detach -- sh -c \
        'while :; do head -c 16777216 /dev/urandom > /run/blob; done' >/dev/null ||
        fail "start the memory writer"
sleep 2
gpid=$(gsh web 'cat /run/counter.pid')

# fork_runs FORK: the fork's counter ended at the parent's PID, it rewrites memory itself and
# answers seconds later, and its kernel said nothing bad; prints why not
fork_runs() {
        local f=$1 fin log=$T/state/sessions/default.$1/console.log
        for _ in $(seq 100); do gsh "$f" 'test -e /run/counter.final' 2>/dev/null && break; sleep 0.2; done
        fin=$(gsh "$f" 'cat /run/counter.final' 2>/dev/null) || { echo "the counter did not end"; return 1; }
        [ "$(gsh "$f" 'cat /run/counter.pid')" = "$gpid" ] || { echo "the counter's pid differs"; return 1; }
        timeout 60 "$FORKLET" exec "$f" -- sh -c \
                'head -c 16777216 /dev/urandom > /run/mine && md5sum /run/mine >/dev/null' ||
                { echo "writing 16 MiB failed"; return 1; }
        sleep 3 # a fork with lost pages crashed within seconds (list corruption)
        [ "$(timeout 30 "$FORKLET" exec "$f" -- echo alive 2>/dev/null)" = alive ] ||
                { echo "no answer 3 s later"; return 1; }
        if grep -Eq "$BAD" "$log" 2>/dev/null; then
                echo "console: $(grep -Em1 "$BAD" "$log")"
                return 1
        fi
        echo "counter $fin"
}

ran=0
for i in $(seq "$N"); do
        ck=$("$FORKLET" checkpoint create web --wait) || fail "checkpoint $i"
        [ "$(ck_field web "$ck" method)" = precopy ] ||
                fail "$ck: method '$(ck_field web "$ck" method)' ($(ck_field web "$ck" fallback))"
        pause=$(($(ck_field web "$ck" pauseNs) / 1000))
        f=$("$FORKLET" fork web --from "$ck" --count 1) || fail "fork $i of $ck"
        if "$FORKLET" wait "$f" --for=Running --timeout=240 >/dev/null && why=$(fork_runs "$f"); then
                ran=$((ran + 1))
                ok "fork $i of $ck (paused $pause us, QEMU downtime $(ck_field web "$ck" downtimeMs) ms) runs: $why"
        else
                bad "fork $i of $ck (paused $pause us): ${why:-not Running}"
        fi
        "$FORKLET" delete "$f" >/dev/null || fail "delete $f"
        unlisted_within 120 "$f" || fail "$f still listed 120 s after delete"
        "$FORKLET" checkpoint delete web "$ck" >/dev/null || fail "delete $ck"
        why=
done
[ "$(gsh web 'echo alive')" = alive ] || fail "the source does not answer"
echo "# $ran of $N forks of precopy checkpoints ran"
[ "$ran" = "$N" ] || fail "$((N - ran)) of $N forks of precopy checkpoints did not run"
echo "PASS"
