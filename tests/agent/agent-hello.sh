#!/bin/bash
# SPDX-License-Identifier: MIT
# forkletd + forklet against real QEMU: apply examples/hello.yaml, wait Running, the guest's
# clock (clocksource, tickless idle, pace against the host's), exec (output, stderr, exit
# status, stdin, env), get -o json|yaml, describe, forkletd restart (the VM is
# adopted, not duplicated), spec.state Paused/Stopped/Running, delete (QEMU gone, no files
# left); then the manifest-directory variant.
# Usage: agent-hello.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
# FORKLET_TEST_ACCEL picks the accelerator (default tcg: nested KVM is unreliable on CI hosts).
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=hello
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

# session_gone SECONDS PID SESSIONKEY: QEMU exited and no run/state files are left
session_gone() {
        pid_gone_within "$1" "$2" && gone_within "$1" "$T/run/sessions/$3" "$T/state/sessions/$3"
}

# a bad boot limit is said once and the default kept (the boot below still succeeds)
FORKLET_BOOT_TIMEOUT_S=5 start_daemon

# ---- API flow -----------------------------------------------------------------------------
out=$("$FORKLET" apply -f "$SRC/examples/hello.yaml") || fail "apply"
[ "$out" = "session/hello created" ] || fail "apply printed '$out'"
out=$("$FORKLET" apply -f "$SRC/examples/hello.yaml") || fail "re-apply"
[ "$out" = "session/hello unchanged" ] || fail "re-apply printed '$out'"
"$FORKLET" wait hello --for=Running --timeout=180 || fail "hello not Running"
grep -q "FORKLET_BOOT_TIMEOUT_S=5 ignored: give 10 to 3600 (seconds); boots may take 120 s" \
        "$T/forkletd.log" || fail "a bad FORKLET_BOOT_TIMEOUT_S was not reported"

pid=$(field hello pid)
[ -n "$pid" ] && kill -0 "$pid" || fail "status.vm.pid '$pid' is not alive"
[ "$(field hello phase)" = Running ] || fail "phase is not Running"
fk_check_ram hello
"$FORKLET" get session hello -o json | grep -q '"observedGeneration": 1' || fail "observedGeneration"
"$FORKLET" get session hello -o yaml | grep -q "phase: Running" || fail "get -o yaml"
"$FORKLET" describe hello | grep -Eq "^Phase: +Running" || fail "describe"

kernel=$("$FORKLET" exec hello -- uname -r) || fail "exec uname -r"
[ -n "$kernel" ] || fail "uname -r printed nothing"
echo "guest kernel: $kernel"

# The guest's clock: under TCG on a host with an invariant TSC (argv.c: -cpu qemu64,+arat and
# tsc=reliable) the guest keeps the TSC as its clocksource and its tick stops when idle (no
# fallback to jiffies, which lose ticks under TCG: a coarse clock that runs slow, and a 250 Hz
# tick in every idle guest); its clock keeps pace with the host's either way.
if [ "${FORKLET_TEST_ACCEL:-tcg}" = tcg ] && grep -qw constant_tsc /proc/cpuinfo &&
        grep -qw nonstop_tsc /proc/cpuinfo; then
        cs=$("$FORKLET" exec hello -- cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
        [ "$cs" = tsc ] || fail "guest clocksource '$cs', expected tsc"
        "$FORKLET" exec hello -- grep -q "nohz_mode *: 2" /proc/timer_list ||
                fail "the guest's tick is not tickless high-resolution (timer_list: nohz_mode)"
fi
g0=$("$FORKLET" exec hello -- cut -d' ' -f1 /proc/uptime) && h0=$(date +%s.%N) && sleep 3 &&
        g1=$("$FORKLET" exec hello -- cut -d' ' -f1 /proc/uptime) && h1=$(date +%s.%N) ||
        fail "exec cat /proc/uptime"
awk -v g="$g0 $g1" -v h="$h0 $h1" 'BEGIN { split(g, a, " "); split(h, b, " ");
        d = (a[2] - a[1]) - (b[2] - b[1]); exit !(d > -0.5 && d < 0.5) }' ||
        fail "guest uptime moved $g0 -> $g1 while the host's clock moved $h0 -> $h1"

out=$("$FORKLET" exec hello -- sh -c 'echo out; echo err >&2; exit 3' 2>"$T/stderr")
rc=$?
[ "$rc" = 3 ] || fail "exit status $rc, expected 3"
[ "$out" = out ] || fail "stdout '$out', expected 'out'"
[ "$(cat "$T/stderr")" = err ] || fail "stderr '$(cat "$T/stderr")', expected 'err'"

out=$("$FORKLET" exec hello -- sh -c 'echo $GREETING') || fail "exec env"
[ "$out" = hello-from-forklet ] || fail "spec.env not in exec: '$out'"
out=$(printf 'piped\n' | "$FORKLET" exec hello -i -- cat) || fail "exec -i"
[ "$out" = piped ] || fail "exec -i echoed '$out'"
"$FORKLET" exec hello -- /no/such/binary 2>/dev/null
[ $? = 127 ] || fail "a missing guest binary should exit 127"
"$FORKLET" logs hello | grep -q . || fail "console log is empty"
"$FORKLET" get sessions | grep -Eq "^hello +Running +$pid " || fail "get sessions table"

# ---- restart: the running VM is adopted, not booted twice -------------------------------
stop_daemon
kill -0 "$pid" || fail "QEMU died with forkletd"
start_daemon
"$FORKLET" wait hello --for=Running --timeout=30 || fail "hello not Running after restart"
[ "$(field hello pid)" = "$pid" ] || fail "restart started a second VM"
fk_check_ram hello
out=$("$FORKLET" exec hello -- echo again) || fail "exec after restart"
[ "$out" = again ] || fail "exec after restart printed '$out'"

# ---- spec.state: Paused (QMP stop/cont) and Stopped (graceful stop, state kept) -------------
with_state() {
        sed "s/^spec:\$/spec:\n  state: $1/" "$SRC/examples/hello.yaml" >"$T/hello-$1.yaml"
        "$FORKLET" apply -f "$T/hello-$1.yaml"
}
[ "$(with_state Paused)" = "session/hello configured" ] || fail "apply state: Paused"
"$FORKLET" wait hello --for=Paused --timeout=30 || fail "hello not Paused"
[ "$(field hello pid)" = "$pid" ] || fail "pausing changed the VM"
"$FORKLET" exec hello -- true 2>/dev/null && fail "exec into a Paused session must fail"
"$FORKLET" apply -f "$SRC/examples/hello.yaml" >/dev/null || fail "apply state: Running"
"$FORKLET" wait hello --for=Running --timeout=30 || fail "hello not resumed"
[ "$("$FORKLET" exec hello -- echo resumed)" = resumed ] || fail "exec after resume"
[ "$(with_state Stopped)" = "session/hello configured" ] || fail "apply state: Stopped"
"$FORKLET" wait hello --for=Stopped --timeout=60 || fail "hello not Stopped"
pid_gone_within 30 "$pid" || fail "QEMU $pid still alive after state: Stopped"
[ -e "$T/run/sessions/default.hello" ] && fail "run dir left after state: Stopped"
jq -e .session.manifest "$T/state/sessions/default.hello/state.json" >/dev/null || fail "stored session lost on stop"
jq -e .vm "$T/state/sessions/default.hello/state.json" >/dev/null && fail "VM record kept after stop"
"$FORKLET" apply -f "$SRC/examples/hello.yaml" >/dev/null || fail "apply state: Running again"
"$FORKLET" wait hello --for=Running --timeout=180 || fail "hello not Running after stop"
pid=$(field hello pid)
[ "$("$FORKLET" exec hello -- echo rebooted)" = rebooted ] || fail "exec after reboot"

# ---- delete -------------------------------------------------------------------------------
"$FORKLET" delete hello | grep -qx "session/hello deleted" || fail "delete"
session_gone 60 "$pid" default.hello || fail "QEMU $pid or session files still there after delete"
unlisted_within 10 hello || fail "session still listed 10 s after its files were removed"

# ---- manifest directory ----------------------------------------------------------------------
sed 's/name: hello/name: dirhello/' "$SRC/examples/hello.yaml" >"$T/manifests/.dirhello.tmp"
mv "$T/manifests/.dirhello.tmp" "$T/manifests/dirhello.yaml"
# (wait fails at once on a session forkletd does not know yet: let it see the file first)
for _ in $(seq 40); do "$FORKLET" get session dirhello >/dev/null 2>&1 && break; sleep 0.25; done
"$FORKLET" wait dirhello --for=Running --timeout=180 || fail "dirhello not Running"
pid2=$(field dirhello pid)
[ -n "$pid2" ] && kill -0 "$pid2" || fail "dirhello pid '$pid2' not alive"
"$FORKLET" delete dirhello 2>/dev/null && fail "deleting a manifest-dir session via the API must fail"
printf 'kind: [\n' >"$T/manifests/broken.yaml"
sleep 1
kill -0 "$DPID" || fail "an invalid manifest file crashed forkletd"
grep -q "broken.yaml" "$T/forkletd.log" || fail "invalid manifest not reported in the log"
rm "$T/manifests/dirhello.yaml"
session_gone 60 "$pid2" default.dirhello || fail "dirhello VM or files still there after rm"

# ---- QEMU dies: Failed with the reason; restartPolicy OnFailure boots it again ------------
sed -e 's/name: hello/name: crashy/' -e 's/^spec:$/spec:\n  restartPolicy: OnFailure/' \
        "$SRC/examples/hello.yaml" >"$T/crashy.yaml"
"$FORKLET" apply -f "$T/crashy.yaml" >/dev/null || fail "apply crashy"
"$FORKLET" wait crashy --for=Running --timeout=180 || fail "crashy not Running"
pid3=$(field crashy pid)
kill -9 "$pid3"
"$FORKLET" wait crashy --for=Failed --timeout=10 >/dev/null ||
        "$FORKLET" describe crashy | grep -q VMExited || fail "QEMU exit not noticed"
"$FORKLET" describe crashy | grep -q "SIGKILL\|signal" || fail "exit reason not reported"
"$FORKLET" wait crashy --for=Running --timeout=180 || fail "OnFailure did not reboot crashy"
pid4=$(field crashy pid)
[ "$pid4" != "$pid3" ] || fail "crashy still reports the dead pid"
"$FORKLET" delete crashy >/dev/null || fail "delete crashy"
session_gone 60 "$pid4" default.crashy || fail "crashy VM or files left"

echo "PASS"
