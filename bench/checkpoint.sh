#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/checkpoint: how long a checkpoint stops its source, live (and its older polled
# conversation) against stop-and-copy in the same run, for 256 MiB and 1 GiB guests with little and much touched RAM; and rollback to
# agent-ready. Through a real forkletd (the harness of tests/lib/harness.sh: tmpfs
# runDir, disk stateDir). Per checkpoint: QEMU's reported downtime (live only), forkletd's
# stop-to-cont time, and from outside the longest gap between replies of a 5 ms ping to the guest
# from its netns while the checkpoint is taken, against the same ping without one. The mode is
# switched with FORKLET_CHECKPOINT_MODE=stop-copy (forkletd restarts; VMs are adopted). After
# each cell's rollbacks, the rolled-back session's first two checkpoints, pinged the same way;
# then, after another rollback, the ping over IDLE_S s of idleness and the checkpoint after it;
# the same for lone forks (fork --count 1) of the checkpoint.
# Usage (root): FORKLET_IMAGE_DIR=build/images/minimal bench/checkpoint.sh build/agent/forkletd \
#   build/cli/forklet   [REPS=5 SIZES="256 1024" HIGH_256=150 HIGH_1024=700 (MiB written)]
#   [BASELINE_FORKLETD=path: mode "base" is that forkletd's live default, on a session of each
#   size it booted itself (what a boot sets up counts too); MODES then defaults to "base live"]
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
REPS=${REPS:-5}
SIZES=${SIZES:-256 1024}
FK_TAG=bench-ck
. "$(dirname "$0")/../tests/lib/harness.sh"
. "$(dirname "$0")/lib.sh"
fk_setup
command -v ping >/dev/null || skip "ping (iputils-ping) not installed"
FK_CLASSES=("{name: s256, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1024}"
        "{name: s1024, vcpus: 1, memoryMiB: 1024, cpu: 1.0, pids: 1024}")
fk_node_config >"$T/node.yaml"
OUT=$T/results
: >"$OUT"

# gap FILE: the longest gap (ms) between replies in a ping -D log
gap() {
        awk -F'[][]' '/bytes from/ {t = $2 * 1000; if (p) {d = t - p; if (d > m) m = d}; p = t}
                END {printf "%.1f", m}' "$1"
}
ck_json() { "$FORKLET" checkpoint inspect "$1" "$2" -o json; }
num() { sed -n "s/^ *\"$1\": *\([0-9]*\),*$/\1/p" | head -n1; }

# pinged NAME FILE CMD...: runs CMD while a 5 ms ping from NAME's netns to its guest logs to FILE
pinged() {
        local name=$1 file=$2 ns ip pp
        shift 2
        ns=$(field "$name" netns)
        ip=$(field "$name" guestIP)
        ip netns exec "$ns" ping -D -n -i 0.005 -W 1 "$ip" >"$file" 2>&1 &
        pp=$!
        sleep 1
        "$@"
        local rc=$?
        sleep 0.5
        kill "$pp" 2>/dev/null
        wait "$pp" 2>/dev/null
        return $rc
}

# MODES: the cells of each guest, each a forkletd restart (VMs adopted) with its
# FORKLET_CHECKPOINT_MODE: stop-copy; precopy-polled (precopy, the conversation polled as before
# QEMU's events and armed commands: the live baseline); live (forkletd's default method, LIVE_MODE
# to force one). The method each checkpoint used is in the raw lines.
BASELINE_FORKLETD=${BASELINE_FORKLETD-}
if [ -n "$BASELINE_FORKLETD" ]; then
        MODES=${MODES:-base live}
else
        MODES=${MODES:-stop-copy precopy-polled live}
fi
LIVE_MODE=${LIVE_MODE-}
NEW_FORKLETD=$FORKLETD
restart() {
        stop_daemon
        FORKLETD=$NEW_FORKLETD
        case $1 in
        live) FORKLET_CHECKPOINT_MODE=$LIVE_MODE start_daemon ;;
        base) FORKLETD=$BASELINE_FORKLETD FORKLET_CHECKPOINT_MODE=$LIVE_MODE start_daemon ;;
        *) FORKLET_CHECKPOINT_MODE=$1 start_daemon ;;
        esac
}
# the session a mode's cells use: base has its own, booted by the baseline forkletd
sname() { if [ "$2" = base ]; then echo "a$1"; else echo "b$1"; fi; }

# ck_pinged NAME [ARG...]: `checkpoint create NAME ARG...` under the 5 ms ping, after the same
# ping without one; sets CK (its id), GAP and BASE_GAP (the longest gaps, ms)
ck_pinged() {
        local name=$1
        shift
        pinged "$name" "$T/base.ping" sleep 1 || fail "baseline ping"
        BASE_GAP=$(gap "$T/base.ping")
        pinged "$name" "$T/ck.ping" "$FORKLET" checkpoint create "$name" "$@" >"$T/ck.id" ||
                fail "checkpoint of $name"
        CK=$(cat "$T/ck.id")
        GAP=$(gap "$T/ck.ping")
}
# pause_ms JSON: a checkpoint's pauseNs in ms
pause_ms() { awk -v n="$(echo "$1" | num pauseNs)" 'BEGIN {printf "%.1f", n / 1e6}'; }

# cell SIZE TOUCH MODE: REPS checkpoints; appends "SIZE TOUCH MODE qemu_ms pause_ms gap_ms base_ms"
cell() {
        local size=$1 touch=$2 mode=$3 name i ck j dt g b
        name=$(sname "$size" "$mode")
        for i in $(seq "$REPS"); do
                ck_pinged "$name"
                ck=$CK g=$GAP b=$BASE_GAP
                # the next one after this one is Ready (its helper competes for the CPUs)
                for j in $(seq 1200); do
                        ck_json "$name" "$ck" | grep -q '"status": "Writing"' || break
                        sleep 0.1
                done
                j=$(ck_json "$name" "$ck")
                want=live
                [ "$mode" = stop-copy ] && want=stop-copy
                echo "$j" | grep -q "\"mode\": \"$want\"" || fail "$ck: not $want: $j"
                dt=$(echo "$j" | num downtimeMs)
                me=$(echo "$j" | sed -n 's/^ *"method": *"\([a-z-]*\)",*$/\1/p' | head -n1)
                echo "$size $touch $mode ${dt:--} $(pause_ms "$j") $g $b ${me:--}" >>"$OUT"
                echo "# $name $ck $mode: $(echo "$j" | sed -n 's/^ *"pauseSteps": *"\(.*\)",*$/\1/p')" >&2
                LAST=$ck
                [ "$i" = "$REPS" ] || "$FORKLET" checkpoint delete "$name" "$ck" >/dev/null
        done
}

# after_rollback SIZE TOUCH CK: the first and the second checkpoint of session bSIZE right after
# a rollback (its VM restored, its RAM the checkpoint's mapped private); then another rollback to
# CK, IDLE_S (8) s of idleness under the ping (forkletd clears the restored VM's dirty bitmap
# once the session has been idle 3 s: that stall falls here), and the first checkpoint after it;
# then the same two cases for a lone fork of CK.
# Appends "SIZE TOUCH which qemu_ms pause_ms gap_ms base_ms" to $OUT_RB (idle: no checkpoint,
# "-" for its figures).
after_rollback() {
        local name=b$1 which j
        for which in first second; do
                ck_pinged "$name" --wait
                j=$(ck_json "$name" "$CK")
                echo "$1 $2 $which $(echo "$j" | num downtimeMs) $(pause_ms "$j") $GAP $BASE_GAP" >>"$OUT_RB"
        done
        "$FORKLET" rollback "$name" "$3" >/dev/null || fail "rollback $name"
        pinged "$name" "$T/idle.ping" sleep "${IDLE_S:-8}" || fail "idle ping"
        echo "$1 $2 idle-${IDLE_S:-8}s - - $(gap "$T/idle.ping") $BASE_GAP" >>"$OUT_RB"
        ck_pinged "$name" --wait
        j=$(ck_json "$name" "$CK")
        echo "$1 $2 first-after-idle $(echo "$j" | num downtimeMs) $(pause_ms "$j") $GAP $BASE_GAP" >>"$OUT_RB"
        # a lone fork of CK (fork --count 1): its first checkpoint right away, then, with that
        # fork deleted, another lone fork's after IDLE_S s of idleness (forkletd clears the
        # bitmap of a fork that is the only fork of its checkpoint once it has been idle 3 s)
        local f
        for which in fork-first fork-first-after-idle; do
                f=$("$FORKLET" fork "$name" --from "$3" --count 1) || fail "fork of $name"
                "$FORKLET" wait "$f" --for=Running --timeout=300 >/dev/null || fail "$f not Running"
                if [ "$which" = fork-first-after-idle ]; then
                        pinged "$f" "$T/idle.ping" sleep "${IDLE_S:-8}" || fail "idle ping"
                        echo "$1 $2 fork-idle-${IDLE_S:-8}s - - $(gap "$T/idle.ping") $BASE_GAP" >>"$OUT_RB"
                fi
                ck_pinged "$f" --wait
                j=$(ck_json "$f" "$CK")
                echo "$1 $2 $which $(echo "$j" | num downtimeMs) $(pause_ms "$j") $GAP $BASE_GAP" >>"$OUT_RB"
                "$FORKLET" delete "$f" >/dev/null || fail "delete $f"
                "$FORKLET" wait "$f" --for=Deleted --timeout=120 >/dev/null || fail "$f not deleted"
        done
}
OUT_RB=$T/results-rb
: >"$OUT_RB"

start_daemon
declare -A ROLL
for size in $SIZES; do
        name=b$size
        names=$name
        if [ -n "$BASELINE_FORKLETD" ]; then
                restart base
                names="a$size $name"
                FK_SESSION_CLASS=s$size session "a$size"
                "$FORKLET" wait "a$size" --for=Running --timeout=300 || fail "a$size not Running"
                restart live
        fi
        FK_SESSION_CLASS=s$size session "$name"
        "$FORKLET" wait "$name" --for=Running --timeout=300 || fail "$name not Running"
        for touch in low high; do
                if [ $touch = high ]; then
                        hv=HIGH_$size
                        mib=${!hv:-$((size * 6 / 10))}
                        for n in $names; do
                                # the guest's /run (a tmpfs of half its RAM) may hold less: the
                                # fill stops where it is full, and the MiB written are printed
                                got=$(gsh "$n" "head -c 1048576 /dev/urandom > /run/r1m && i=0 &&
                                        while [ \$i -lt $mib ] && cat /run/r1m >> /run/fill 2>/dev/null; do
                                                i=\$((i + 1)); done; echo \$i") || fail "fill $mib MiB in $n"
                                echo "# $n: $got of $mib MiB written into the guest's /run" >&2
                        done
                fi
                for mode in $MODES; do
                        restart "$mode"
                        cell "$size" "$touch" "$mode"
                        [ "$mode" = live ] && ck_live=$LAST
                done
                [ -n "${ck_live:-}" ] || fail "MODES must include live (the rollbacks use it)"
                # rollback to agent-ready, onto the live checkpoint's RAM (mapped, not copied)
                for i in 1 2 3; do
                        t0=$(date +%s%N)
                        "$FORKLET" rollback "$name" "$ck_live" >/dev/null || fail "rollback $name"
                        ROLL[$size.$touch]="${ROLL[$size.$touch]:-} $((($(date +%s%N) - t0) / 1000000))"
                done
                ram=$(ck_json "$name" "$ck_live" | num ramBytes)
                after_rollback "$size" "$touch" "$ck_live"

                echo "# $size MiB, $touch: checkpoint RAM $((ram / 1048576)) MiB" >&2
                for n in $names; do
                        for c in $("$FORKLET" checkpoint list "$n" | awk 'NR > 1 {print $1}'); do
                                "$FORKLET" checkpoint delete "$n" "$c" --cascade >/dev/null 2>&1
                        done
                done
        done
        for n in $names; do "$FORKLET" delete "$n" >/dev/null; done
done

echo
echo "source pause per checkpoint (ms), $REPS each, p50 / p90: forkletd's (QEMU's STOP to cont's"
echo "reply; stop-copy: its stop to cont), QEMU's downtime, and from outside the longest gap of a"
echo "5 ms ping during the checkpoint against the same ping without one; ratios: p50 against the"
echo "first mode's (the baseline)"
echo
echo "| guest | touched | mode | pause | QEMU downtime | ping | no-ck ping | pause ratio | ping ratio | ping over no-ck (p50) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
first=${MODES%% *}
for size in $SIZES; do
        for touch in low high; do
                sel() { awk -v s="$size" -v t="$touch" -v m="$1" -v c="$2" '$1 == s && $2 == t && $3 == m {print $c}' "$OUT"; }
                base=$(sel "$first" 5 | pct 0.5 1)
                gbase=$(sel "$first" 6 | pct 0.5 1)
                nb50=$(for m in $MODES; do sel "$m" 7; done | pct 0.5 1)
                nb90=$(for m in $MODES; do sel "$m" 7; done | pct 0.9 1)
                for mode in $MODES; do
                        p50=$(sel "$mode" 5 | pct 0.5 1)
                        g50=$(sel "$mode" 6 | pct 0.5 1)
                        printf "| %s MiB | %s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %sx | %sx | %s ms |\n" \
                                "$size" "$touch" "$mode" "$p50" "$(sel "$mode" 5 | pct 0.9 1)" \
                                "$(sel "$mode" 4 | pct 0.5 1)" "$(sel "$mode" 4 | pct 0.9 1)" \
                                "$g50" "$(sel "$mode" 6 | pct 0.9 1)" "$nb50" "$nb90" \
                                "$(awk -v a="$p50" -v b="$base" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')" \
                                "$(awk -v a="$g50" -v b="$gbase" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')" \
                                "$(awk -v a="$g50" -v b="$nb50" 'BEGIN {printf "%.1f", a - b}')"
                done
        done
done
echo
echo "rollback to agent-ready (ms, 3 each, onto the live checkpoint's RAM, no copy)"
for k in "${!ROLL[@]}"; do
        printf "%-12s %s  p50 %s\n" "$k" "${ROLL[$k]}" "$(echo ${ROLL[$k]} | tr ' ' '\n' | pct 0.5 1)"
done | sort
echo
echo "the first two checkpoints right after the last rollback (the restored VM's first migration"
echo "syncs a dirty bitmap in which every page is dirty), then after another rollback the ping over"
echo "${IDLE_S:-8} s of idleness (forkletd clears the bitmap in it) and the first checkpoint after it;"
echo "the same for a lone fork (fork --count 1) of that checkpoint: its first checkpoint right away,"
echo "and another one's after ${IDLE_S:-8} s idle: QEMU's downtime, forkletd's pause, the longest gap"
echo "of the 5 ms ping to the checkpointed guest during it and without a checkpoint, in ms"
echo
echo "| guest | touched | checkpoint | QEMU downtime | pause | ping | no-ck ping | ping over no-ck |"
echo "|---|---|---|---|---|---|---|---|"
awk '{printf "| %s MiB | %s | %s | %s | %s | %s | %s | %.1f ms |\n", $1, $2, $3, $4, $5, $6, $7, $6 - $7}' "$OUT_RB"
echo
echo "raw: size touch mode qemu_downtime_ms pause_ms ping_gap_ms baseline_gap_ms method"
cat "$OUT"
