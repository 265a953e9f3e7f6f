#!/bin/bash
# SPDX-License-Identifier: MIT
# Guests that die or stall, on real QEMU (TCG): a kernel panic (sysrq c) leaves Running as
# GuestPanicked and restartPolicy OnFailure boots it again; a pvpanic report (port 0x505) does
# too; a guest filling its RAM keeps forklet-agent (oom_score_adj -1000) or is reported GuestOOM;
# a full filesystem under the workspace disk stops the VM (DiskPressure, exec fails at once)
# and it continues once space is freed; a frozen guest agent is GuestUnresponsive within
# interval * threshold + slack. describe shows the console tail, /metrics the counters.
# Usage: agent-health.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=health
MNT=
fk_cleanup_extra() {
        if [ -n "$MNT" ] && mountpoint -q "$MNT"; then
                umount "$MNT" 2>/dev/null || umount -l "$MNT"
        fi
}
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
command -v jq >/dev/null || skip "jq not installed"

INTERVAL=3 THRESHOLD=3
fk_node_config "health: {livenessIntervalSeconds: $INTERVAL, failureThreshold: $THRESHOLD}" \
        "diskPressure: {resume: auto, minFreeMiB: 8}" >"$T/node.yaml"

json() { "$FORKLET" get session "$1" -o json; }
# cond NAME TYPE: "STATUS REASON" of a condition
cond() { json "$1" | jq -r --arg t "$2" '.status.conditions[] | select(.type == $t) | "\(.status) \(.reason)"'; }
metric() { curl -s --unix-socket "$FORKLET_SOCKET" http://x/metrics | grep "^$1 " | awk '{print $2}'; }

# wait_for SECONDS DESC CMD...: CMD succeeds within SECONDS (polled every 0.5 s)
wait_for() {
        local s=$1 what=$2 i
        shift 2
        for i in $(seq $((s * 2))); do
                "$@" && return 0
                sleep 0.5
        done
        fail "$what: not within $s s"
}
failed_with() { [ "$(json "$1" | jq -r .status.lastFailure.reason)" = "$2" ]; }
phase_is() { [ "$(field "$1" phase)" = "$2" ]; }
cond_is() { [ "$(cond "$1" "$2" | cut -d' ' -f1)" = "$3" ]; }
describes() { "$FORKLET" describe "$1" | grep -q "$2"; }
died_of_memory() { failed_with "$1" GuestOOM || failed_with "$1" GuestPanicked; }
reads() { [ "$("$FORKLET" exec "$1" -- cat "$2" 2>/dev/null)" = "$3" ]; }
gone() { ! "$FORKLET" get session "$1" >/dev/null 2>&1; }

start_daemon

# ---- (a) sysrq panic, restartPolicy OnFailure; (b) memory filled, the agent survives --------
session pan "restartPolicy: OnFailure"
session oom
"$FORKLET" wait pan --for=Running --timeout=300 || fail "pan not Running"
"$FORKLET" wait oom --for=Running --timeout=300 || fail "oom not Running"
pid0=$(json pan | jq -r .status.vm.pid)
"$FORKLET" exec pan --detach -- sh -c 'sleep 1; echo c > /proc/sysrq-trigger' >/dev/null ||
        fail "detached sysrq"
t0=$(date +%s)
wait_for 30 "pan GuestPanicked" failed_with pan GuestPanicked
echo "panic seen after $(($(date +%s) - t0)) s: $(json pan | jq -r .status.lastFailure.message)"
"$FORKLET" describe pan | grep -q "GuestPanicked: the guest kernel panicked: Kernel panic - not syncing" ||
        fail "describe does not say why: $("$FORKLET" describe pan)"
# ended once it printed its report and rebooted (at most 3 s after the panic line), or killed
pid_gone_within 10 "$pid0" || fail "the panicked QEMU $pid0 still runs"
# OnFailure: boots again (a new QEMU) and answers; a wait for Running does not take the dying
# VM's phase for it (it did once, and the console checks below then ran before the new boot)
"$FORKLET" wait pan --for=Running --timeout=300 || fail "pan not Running again"
[ "$(json pan | jq -r .status.vm.pid)" != "$pid0" ] || fail "wait --for=Running returned on the panicked QEMU"
# the failed boot's console (rotated to console.log.1 by the new boot) ends with the tail shown
last=$(json pan | jq -r '.status.lastFailure.consoleTail[-1]' | cut -c1-60)
[ "$(json pan | jq '.status.lastFailure.consoleTail | length')" = 10 ] || fail "not 10 console lines"
# the whole report: QEMU is ended once the guest printed what follows the panic line (its
# registers and call trace) and rebooted, not at that line
[ "$(json pan | jq -r '.status.lastFailure.consoleTail[-1]' | grep -c "Kernel panic - not syncing")" = 0 ] ||
        fail "the console tail ends at the panic line: $(json pan | jq -c .status.lastFailure.consoleTail)"
grep -qF -- "$last" "$T/state/sessions/default.pan/console.log.1" || fail "tail '$last' not in the log"
"$FORKLET" describe pan | grep -qF -- "$last" || fail "describe shows no console tail"
[ "$(gsh pan 'echo back')" = back ] || fail "pan does not answer after its restart"

# the agent's pid in the guest (PID 1 is the same binary: the init)
AGENT_PID='$(pidof forklet-agent | tr " " "\n" | grep -vx 1)'
[ "$(gsh oom "cat /proc/$AGENT_PID/oom_score_adj")" = -1000 ] ||
        fail "forklet-agent is not exempt from the OOM killer"
[ "$(gsh oom 'cat /proc/self/oom_score_adj')" = 0 ] || fail "a command inherits the agent's -1000"
# tail holds everything waiting for a newline: 400 MiB in a 256 MiB guest
"$FORKLET" exec oom -- sh -c 'head -c 419430400 /dev/zero | tail >/dev/null'
rc=$?
[ $rc = 137 ] || fail "the memory hog exited $rc, not killed (137)"
[ "$(gsh oom 'echo alive')" = alive ] || fail "the agent did not survive the OOM"
phase_is oom Running || fail "oom left Running"
grep -q "Out of memory: Killed process [0-9]* (tail)" "$T/state/sessions/default.oom/console.log" ||
        fail "console shows no OOM kill"
wait_for 10 "GuestOOM event" describes oom 'GuestOOM .*Killed process'

[ "$(metric forklet_guest_oom_kills_total)" -ge 1 ] || fail "OOM kills not counted"
"$FORKLET" delete pan >/dev/null && "$FORKLET" delete oom >/dev/null || fail "delete pan, oom"

# ---- (a2) pvpanic; (b2) RAM filled through tmpfs: the agent or a GuestOOM report -----------
session pvp
session fill
"$FORKLET" wait pvp --for=Running --timeout=300 || fail "pvp not Running"
"$FORKLET" wait fill --for=Running --timeout=300 || fail "fill not Running"
pid0=$(json pvp | jq -r .status.vm.pid)
# what the pvpanic driver writes on a panic: bit 0 (PANICKED) to port 0x505
"$FORKLET" exec pvp --detach -- sh -c 'sleep 1; printf "\001" | dd of=/dev/port bs=1 seek=1285 count=1' \
        >/dev/null || fail "detached pvpanic write"
wait_for 30 "pvp GuestPanicked" failed_with pvp GuestPanicked
json pvp | jq -r .status.lastFailure.message | grep -q pvpanic || fail "pvp: $(json pvp | jq -c .status.lastFailure)"
# lastFailure is set when the failure is seen; the phase follows once the planner ended the VM
wait_for 60 "pvp Failed (restartPolicy Never)" phase_is pvp Failed
[ "$(metric 'forklet_guest_failures_total{reason="GuestPanicked"}')" = 2 ] ||
        fail "the two panics are not counted: $(metric 'forklet_guest_failures_total{reason="GuestPanicked"}')"
pid_gone_within 10 "$pid0" || fail "the paused QEMU $pid0 was not ended"
out=$("$FORKLET" exec pvp -- true 2>&1) && fail "exec in a Failed session"
echo "$out" | grep -q "Failed" || fail "exec error does not say Failed: $out"

"$FORKLET" exec fill -- sh -c 'dd if=/dev/zero of=/tmp/f bs=1M; dd if=/dev/zero of=/run/f bs=1M' \
        >/dev/null 2>&1
sleep 3
if [ "$(timeout 60 "$FORKLET" exec fill -- echo alive 2>/dev/null)" = alive ]; then
        echo "fill: the agent survived a full RAM"
else
        wait_for 30 "fill reported GuestOOM or GuestPanicked" died_of_memory fill
        msg=$(json fill | jq -r .status.lastFailure.message)
        echo "fill: $msg"
        case "$msg" in "QEMU (pid "*) fail "fill: the message does not say why: $msg" ;; esac
fi
"$FORKLET" delete pvp >/dev/null && "$FORKLET" delete fill >/dev/null || fail "delete pvp, fill"

# ---- (c) disk pressure: the workspace overlay on a 64 MiB tmpfs half taken by a filler ------
MNT=$T/state/sessions/default.disk/disk
mkdir -p "$MNT" && mount -t tmpfs -o size=64M,mode=0700 fk-health-disk "$MNT" || fail "mount tmpfs"
dd if=/dev/zero of="$MNT/filler" bs=1M count=32 status=none || fail "filler"
stops0=$(metric forklet_disk_io_error_stops_total)
session disk
"$FORKLET" wait disk --for=Running --timeout=300 || fail "disk not Running"
ls "$MNT"/*.qcow2 >/dev/null || fail "the overlay is not on the small filesystem"
"$FORKLET" exec disk --detach -- sh -c \
        'dd if=/dev/zero of=/workspace/big bs=1M count=48 conv=fsync 2>/dev/null; echo $? >/workspace/dd.rc; sync' \
        >/dev/null || fail "detached dd"
wait_for 90 "DiskPressure True" cond_is disk DiskPressure True
[ "$(cond disk DiskPressure)" = "True NoSpace" ] || fail "DiskPressure: $(cond disk DiskPressure)"
[ "$(cond disk Ready)" = "False DiskIOError" ] || fail "Ready: $(cond disk Ready)"
phase_is disk Paused || fail "disk is $(field disk phase), not Paused"
t0=$(date +%s%N)
out=$(timeout 20 "$FORKLET" exec disk -- echo hi 2>&1) && fail "exec answered in a stopped VM"
ms=$((($(date +%s%N) - t0) / 1000000))
[ $ms -lt 5000 ] || fail "exec took $ms ms to fail"
echo "$out" | grep -q "disk" || fail "exec error does not name the disk: $out"
[ "$(metric forklet_disk_io_error_stops_total)" -gt "$stops0" ] || fail "io-error stop not counted"
# a forkletd restart adopts the stopped VM as it is (no agent to wait for); metrics start over
stop_daemon
start_daemon
wait_for 30 "disk adopted" phase_is disk Paused
[ "$(cond disk DiskPressure)" = "True NoSpace" ] || fail "adopted DiskPressure: $(cond disk DiskPressure)"
rm -f "$MNT/filler"
wait_for 60 "DiskPressure False" cond_is disk DiskPressure False
"$FORKLET" wait disk --for=Running --timeout=60 || fail "disk not Running again"
wait_for 120 "dd finished" reads disk /workspace/dd.rc 0
[ "$(gsh disk 'echo ok')" = ok ] || fail "disk does not answer"
grep -q "DiskPressure" <("$FORKLET" describe disk) || fail "describe shows no DiskPressure"
"$FORKLET" delete disk >/dev/null || fail "delete disk"
wait_for 60 "disk deleted" gone disk
umount "$MNT" || fail "umount $MNT" # forkletd emptied it (the mount point itself stays)
MNT=

# ---- (d) liveness: the guest agent frozen (SIGSTOP) -------------------------------------
session live
"$FORKLET" wait live --for=Running --timeout=300 || fail "live not Running"
"$FORKLET" exec live --detach -- sh -c "sleep 1; kill -STOP $AGENT_PID" >/dev/null ||
        fail "detached kill -STOP"
t0=$(date +%s)
wait_for $((INTERVAL * THRESHOLD + 30)) "live GuestUnresponsive" failed_with live GuestUnresponsive
echo "unresponsive after $(($(date +%s) - t0)) s: $(json live | jq -r .status.lastFailure.message)"
wait_for 60 "live Failed" phase_is live Failed
curl -s --unix-socket "$FORKLET_SOCKET" http://x/metrics | grep -q '^forklet_guest_failures_total{reason="GuestUnresponsive"} [1-9]' ||
        fail "GuestUnresponsive not counted"
"$FORKLET" delete live >/dev/null || fail "delete live"
echo "agent-health: ok"
