#!/bin/bash
# SPDX-License-Identifier: MIT
# The fork engine through forkletd + CLI on real QEMU (TCG): afterStart + spec.checkpoints;
# the fork test from the field (httpd with a 6-7 KB index.html, checkpoint, fork 3: same guest
# PID, HTTP 200, same bytes, different /dev/urandom, own fork id); checkpoints belong to their
# session; a fork's own (materialized) checkpoint, its rollback and a fork of it; checkpoint
# delete refused while forks depend on it, then --cascade; two concurrent checkpoint creates;
# the rollback test from the field (kill the server, delete its dir, roll back; the guest's
# clock caught up with the host's), also of a Paused session. Restored QEMUs are given no
# kernel.
# Usage: fork-agent.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

GET_STATUS="printf 'GET /index.html HTTP/1.0\r\n\r\n' | nc 127.0.0.1 8080 | head -n1"
GET_SUM="printf 'GET /index.html HTTP/1.0\r\n\r\n' | nc 127.0.0.1 8080 | sed '1,/^\r\$/d' | sha256sum"
RAND="head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'"

# check_server SESSION PID SUM: the first command is the check; server at PID, 200, same bytes
check_server() {
        [ "$(gsh "$1" "cat /proc/$2/comm")" = httpd ] || fail "$1: pid $2 is not httpd"
        gsh "$1" "$GET_STATUS" | grep -q " 200 " || fail "$1: GET did not return 200"
        [ "$(gsh "$1" "$GET_SUM")" = "$3" ] || fail "$1: served bytes differ"
}

# the stub kernels an older forkletd started restored QEMUs on are removed at start
mkdir -p "$T/run/restore-kernels" && : >"$T/run/restore-kernels/vmlinuz-1-2-3" ||
        fail "mkdir $T/run/restore-kernels"
start_daemon
[ ! -e "$T/run/restore-kernels" ] || fail "forkletd left $T/run/restore-kernels"
session web \
        'lifecycle: {afterStart: ["sh", "-c", "mkdir -p /workspace/www && head -c 4900 /dev/urandom | base64 > /workspace/www/index.html && httpd -p 8080 -h /workspace/www"]}' \
        'checkpoints: [{name: ready}]'
"$FORKLET" wait web --for=Running --timeout=240 || fail "web not Running"
fk_check_ram web
# a cold boot under TCG (RAM tail) cleared QEMU's migration dirty bitmap before Running, so its
# first live checkpoint's sync does not find every page dirty (vmm_dirty_log_reset); forks do not
if [ "$(field web accel)" = tcg ]; then
        [ -n "$(field web dirtyLogMs)" ] || fail "web: no dirtyLogMs in status.bootTiming"
        grep -q "migration dirty bitmap cleared (QEMU's sync [0-9]* ms)" "$T/forkletd.log" ||
                fail "web: no 'migration dirty bitmap cleared' in forkletd's log"
fi
for _ in $(seq 240); do
        "$FORKLET" checkpoint list web | grep -q " ready " && break
        sleep 0.5
done
"$FORKLET" checkpoint list web | grep -q " ready " || fail "spec.checkpoints ready not taken"
"$FORKLET" get session web -o json | grep -q '"id": "ck_' || fail "status.checkpoints has no id"
size=$(gsh web 'wc -c < /workspace/www/index.html')
[ "$size" -gt 6000 ] && [ "$size" -lt 7000 ] || fail "index.html is $size bytes"
pid=$(gsh web 'pidof httpd')
[ -n "$pid" ] || fail "afterStart did not start httpd"
sum=$(gsh web 'sha256sum < /workspace/www/index.html')
[ "$(gsh web "$GET_SUM")" = "$sum" ] || fail "parent serves other bytes"

# ---- checkpoint, fork 3 -----------------------------------------------------------------------
ck=$("$FORKLET" checkpoint create web) || fail "checkpoint create"
ck_at=$(date +%s)
echo "$ck" | grep -Eqx 'ck_[0-9a-f]+' || fail "checkpoint id '$ck'"
"$FORKLET" checkpoint list web | grep -q "^$ck " || fail "$ck not listed"
"$FORKLET" checkpoint inspect web "$ck" | grep -q "^ramBytes: [1-9]" || fail "checkpoint inspect"
t0=$(date +%s%N)
names=$("$FORKLET" fork web --from "$ck" --count 3) || fail "fork"
[ "$(echo $names)" = "web-fork-0 web-fork-1 web-fork-2" ] || fail "fork printed '$names'"
for f in $names; do
        "$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f not Running"
done
echo "fork x3 through forkletd: $((($(date +%s%N) - t0) / 1000000)) ms to Running"
for f in $names; do check_server "$f" "$pid" "$sum"; done
rnd=$(for s in web $names; do gsh "$s" "$RAND"; echo; done | sort -u | grep -c .)
[ "$rnd" = 4 ] || fail "/dev/urandom repeats across parent and forks ($rnd distinct of 4)"
for f in $names; do
        id=$(field "$f" forkId)
        [ -n "$id" ] || fail "$f: no status.forkId"
        [ "$(gsh "$f" 'cat /run/forklet/identity')" = "$id" ] || fail "$f: /run/forklet/identity"
        [ "$(gsh "$f" 'cat /run/forklet/fork-id')" = "$id" ] || fail "$f: /run/forklet/fork-id"
        [ "$(gsh "$f" 'echo $FORKLET_FORK_ID')" = "$id" ] || fail "$f: FORKLET_FORK_ID"
        "$FORKLET" get session "$f" -o json | grep -q "\"checkpoint\": \"$ck\"" ||
                fail "$f: status.forkOf does not name $ck"
done
# the fork timing breakdown: status.bootTiming and one ForkTiming event per fork; the steps
# inside the boot add up to no more than the total
for f in $names; do
        j=$("$FORKLET" get session "$f" -o json)
        echo "$j" | grep -q '"reason": "ForkTiming"' || fail "$f: no ForkTiming event"
        # a restored QEMU is given no kernel: its guest comes from the stream
        qpid=$(field "$f" pid)
        args=$(tr '\0' ' ' <"/proc/$qpid/cmdline") || fail "$f: no cmdline of QEMU $qpid"
        case $args in *" -incoming defer"*) ;; *) fail "$f: QEMU $qpid is not a restore: $args" ;; esac
        case $args in *" -kernel "* | *" -initrd "* | *" -append "*)
                fail "$f: QEMU $qpid was given a kernel: $args" ;;
        esac
        # ... and under TCG runs lean: THP off, glibc malloc on one arena (vmm/env.c)
        if [ "$(field "$f" accel)" = tcg ]; then
                grep -q '^THP_enabled:[[:space:]]*0$' "/proc/$qpid/status" ||
                        fail "$f: QEMU $qpid has transparent huge pages on"
                tr '\0' '\n' <"/proc/$qpid/environ" | grep -q '^GLIBC_TUNABLES=.*glibc.malloc.arena_max=1' ||
                        fail "$f: QEMU $qpid runs without glibc.malloc.arena_max=1"
        fi
        [ -z "$(field "$f" dirtyLogMs)" ] || fail "$f: a fork cleared the dirty bitmap in its boot"
        steps=$(for k in links disk netns cgroup jail spawn qemu restore agent identity total; do
                v=$(field "$f" "${k}Ms"); echo "$k=${v:-0}"; done | tr '\n' ' ')
        echo "$f bootTiming: $steps"
        echo "$steps" | awk '{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[kv[1]] = kv[2]}
                sum = v["links"] + v["disk"] + v["netns"] + v["cgroup"] + v["jail"] + v["spawn"]
                sum += v["qemu"] + v["restore"] + v["agent"] + v["identity"]
                exit !(v["restore"] > 0 && v["spawn"] > 0 && v["agent"] > 0 && v["total"] > 0 &&
                       sum <= v["total"] + 1)}' || fail "$f: status.bootTiming does not add up: $steps"
done
"$FORKLET" get session web -o json | grep -q '"web-fork-2"' || fail "status.forks of web"
[ "$("$FORKLET" checkpoint list web-fork-0 | tail -n +2 | grep -c .)" = 0 ] ||
        fail "a fork inherited its parent's checkpoints"
gsh web-fork-1 'echo only-in-fork-1 > /workspace/www/mine && sync' || fail "write in fork-1"
[ -z "$(gsh web 'cat /workspace/www/mine 2>/dev/null')" ] || fail "fork's write seen by parent"
[ -z "$(gsh web-fork-2 'cat /workspace/www/mine 2>/dev/null')" ] || fail "fork's write seen by sibling"

# a fork's crash affects nobody else
kill -9 "$(field web-fork-2 pid)" || fail "kill web-fork-2's QEMU"
"$FORKLET" wait web-fork-2 --for=Failed --timeout=30 >/dev/null 2>&1 || fail "crash not noticed"
for s in web web-fork-0 web-fork-1; do
        gsh "$s" "$GET_STATUS" | grep -q " 200 " || fail "$s hurt by a sibling fork's crash"
done

# ---- a checkpoint belongs to its session ----------------------------------------------------
out=$("$FORKLET" rollback web-fork-0 "$ck" 2>&1) && fail "fork rolled back to the parent's checkpoint"
echo "$out" | grep -q "not found" && echo "$out" | grep -q "belongs to session default/web" ||
        fail "rollback to parent's checkpoint: '$out'"
"$FORKLET" fork web-fork-0 --from "$ck" --count 1 2>/dev/null && fail "fork from another's checkpoint"

# ---- a fork's own checkpoint (materialized), rollback to it, fork of it ------------------------
ck2=$("$FORKLET" checkpoint create web-fork-0) || fail "checkpoint of a fork"
gsh web-fork-0 "kill $pid; rm -rf /workspace/www" || fail "kill in fork"
"$FORKLET" rollback web-fork-0 "$ck2" | grep -q "rolled back" || fail "rollback fork to own"
check_server web-fork-0 "$pid" "$sum"
ff=$("$FORKLET" fork web-fork-0 --from "$ck2" --count 1) || fail "fork of a fork"
[ "$ff" = web-fork-0-fork-0 ] || fail "fork of a fork named '$ff'"
"$FORKLET" wait "$ff" --for=Running --timeout=240 || fail "$ff not Running"
check_server "$ff" "$pid" "$sum"

# ---- the rollback test from the field (in place: same name, same PID, files back) ------------
gsh web "kill $pid; rm -rf /workspace/www; sync" || fail "kill + rm in web"
gsh web "$GET_STATUS" | grep -q " 200 " && fail "server still answers after kill"
qemu_before=$(field web pid)
ns_before=$(field web netns)
# a cold-booted QEMU keeps THP (its code buffer fills anyway); the rolled-back one runs lean
grep -q '^THP_enabled:[[:space:]]*1$' "/proc/$qemu_before/status" ||
        fail "web's cold-booted QEMU has transparent huge pages off"
# free page hinting is opt-in (FORKLET_BALLOON_HINT=on): its price is paid by every fork
tr '\0' ' ' <"/proc/$qemu_before/cmdline" | grep -q 'free-page-hint' &&
        fail "web's QEMU has free page hinting, which forkletd's environment did not ask for"
# the guest's clock stood still since the checkpoint: at least 5 s for the restore to make up
gap=$(($(date +%s) - ck_at))
[ "$gap" -ge 5 ] || sleep $((5 - gap))
# web's cgroup memory limit (v1 or v2), watched through the rollback: its boot makes room for
# the replaced VM's RAM file, set aside until the new VM runs, and takes it back then
memlim=$(ls /sys/fs/cgroup/memory/$FK_CGROUP/default.web/memory.limit_in_bytes \
        /sys/fs/cgroup/$FK_CGROUP/default.web/memory.max 2>/dev/null | head -n1)
[ -n "$memlim" ] || fail "no memory limit file for web's cgroup"
read -r lim0 <"$memlim"
(
        most=$lim0
        for _ in $(seq 3000); do
                [ -e "$T/rb.done" ] && break
                read -r v <"$memlim" && [ "$v" -gt "$most" ] && most=$v && echo "$most" >"$T/lim.most"
                sleep 0.003
        done
) &
watcher=$!
t0=$(date +%s%N)
"$FORKLET" rollback web "$ck" | grep -q "rolled back" || fail "rollback web"
echo "rollback through forkletd: $((($(date +%s%N) - t0) / 1000000)) ms"
touch "$T/rb.done"
wait "$watcher"
# the guest's clock between the host's before and after the exec (its latency is not skew)
h0=$(date +%s)
g=$(gsh web 'date +%s') || fail "date in web"
h1=$(date +%s)
[ "$g" -ge $((h0 - 2)) ] && [ "$g" -le $((h1 + 2)) ] ||
        fail "the guest's clock ($g) is off the host's ($h0..$h1) after the rollback"
check_server web "$pid" "$sum"
[ "$(field web phase)" = Running ] || fail "web not Running after rollback"
fk_check_ram web
[ "$(field web pid)" != "$qemu_before" ] || fail "rollback kept the old QEMU"
# The booted QEMU was killed, not waited for, and its RAM file set aside
# (runDir/sessions/.replaced) for its pages to go once the new VM runs: soon after the rollback
# nothing holds them, neither the file nor a process mapping it.
aside=$T/run/sessions/.replaced/default.web.ram
for _ in $(seq 100); do
        held=$(grep -l -e "$T/run/sessions/default.web/mem.ram" -e "$aside" /proc/[0-9]*/maps 2>/dev/null)
        [ -z "$held" ] && [ ! -e "$aside" ] && ! kill -0 "$qemu_before" 2>/dev/null && break
        sleep 0.1
done
[ -z "$held" ] || fail "the booted VM's RAM file is still mapped after the rollback: $held"
[ -e "$aside" ] && fail "the booted VM's RAM file $aside is still there after the rollback"
kill -0 "$qemu_before" 2>/dev/null && fail "the replaced QEMU pid $qemu_before still runs"
[ -e "$T/run/sessions/default.web/mem.ram" ] && fail "the booted VM's RAM file is still in the run dir"
[ -s "$T/lim.most" ] || fail "web's memory limit ($lim0) was not raised for the set-aside RAM file"
echo "web's memory limit: $lim0, $(cat "$T/lim.most") during the rollback"
for _ in $(seq 50); do # reset right after the file goes
        read -r lim1 <"$memlim"
        [ "$lim1" = "$lim0" ] && break
        sleep 0.1
done
[ "$lim1" = "$lim0" ] || fail "web's memory limit is $lim1 after the rollback, not $lim0 again"
if [ "$(field web accel)" = tcg ]; then
        grep -q '^THP_enabled:[[:space:]]*0$' "/proc/$(field web pid)/status" ||
                fail "web's rolled-back QEMU has transparent huge pages on"
fi
[ "$(field web netns)" = "$ns_before" ] || fail "rollback changed the netns ($ns_before -> $(field web netns))"
id=$(field web forkId)
[ -n "$id" ] && [ "$(gsh web 'cat /run/forklet/identity')" = "$id" ] || fail "rollback identity"
# the rolled-back VM's migration dirty bitmap is cleared once web has been idle 3 s, not in the
# setup of its next live checkpoint (with the RAM tail that sync holds QEMU's main loop)
if [ "$(jq -r .vm.ramTail "$T/state/sessions/default.web/state.json")" = true ]; then
        # cleared WHO WHAT: forkletd's log says WHO's bitmap was cleared after the WHAT (within
        # 20 s of idleness); prints the line
        cleared() {
                local line msg="session default.$1: migration dirty bitmap cleared after the $2"
                for _ in $(seq 200); do
                        grep -q "$msg" "$T/forkletd.log" && break
                        sleep 0.1
                done
                line=$(grep "$msg" "$T/forkletd.log") ||
                        fail "$1's dirty bitmap was not cleared within 20 s of idleness after the $2"
                echo "# $1: ${line#*session default.$1: }"
        }
        cleared web rollback
        [ "$(gsh web 'cat /run/forklet/identity')" = "$id" ] || fail "web after its bitmap was cleared"
        # ... and a fork's once it is the only fork of its checkpoint ($ff, idle since the
        # rollback above began), not the forks of web's fan-out while two of them are there,
        # unless one was rolled back to a checkpoint of its own (web-fork-0)
        cleared "$ff" fork
        cleared web-fork-0 rollback
        ! grep -E "session default.web-fork-[0-2]: migration dirty bitmap cleared after the fork" \
                "$T/forkletd.log" ||
                fail "a fork of web's fan-out had its dirty bitmap cleared while its siblings are there"
        check_server "$ff" "$pid" "$sum"
fi
ck3=$("$FORKLET" checkpoint create web) || fail "checkpoint after rollback"
"$FORKLET" checkpoint list web | grep "^$ck3 " | grep -q "$ck" || fail "parent of $ck3 is not $ck"
"$FORKLET" rollback web ck_00000000 2>&1 | grep -q "not found" || fail "rollback to unknown id"

# ---- a Paused session: its frozen QEMU is thawed to end (not every step of vmm_stop timing out,
# 11.5 s), the session comes back at the checkpoint and stays Paused (spec.state) -------------
gsh web "kill $pid; rm -rf /workspace/www; sync" || fail "kill + rm in web before the pause"
"$FORKLET" pause web >/dev/null || fail "pause web"
old=$(field web pid)
t0=$(date +%s%N)
"$FORKLET" rollback web "$ck" | grep -q "rolled back" || fail "rollback of Paused web"
echo "rollback of a Paused session: $((($(date +%s%N) - t0) / 1000000)) ms"
! grep -E "(discard|stop) pid $old: " "$T/forkletd.log" ||
        fail "the Paused session's QEMU $old did not end at once"
[ "$(field web phase)" = Paused ] || fail "web is $(field web phase) after its rollback, not Paused"
"$FORKLET" resume web >/dev/null || fail "resume web"
check_server web "$pid" "$sum"

# ---- forkletd restart: forks are adopted (same QEMU) and keep their identity ----------------
qpid=$(field web-fork-1 pid)
id=$(field web-fork-1 forkId)
stop_daemon
start_daemon
"$FORKLET" wait web-fork-1 --for=Running --timeout=60 || fail "web-fork-1 not adopted"
[ "$(field web-fork-1 pid)" = "$qpid" ] || fail "restart booted web-fork-1 again"
[ "$(gsh web-fork-1 'echo $FORKLET_FORK_ID')" = "$id" ] || fail "fork id lost across restart"
fk_check_ram web
gsh web "$GET_STATUS" | grep -q " 200 " || fail "web does not serve after the restart"

# ---- layers: delete refused while forks depend on a checkpoint ---------------------------------
out=$("$FORKLET" checkpoint delete web "$ck" 2>&1) && fail "deleted a checkpoint forks depend on"
echo "$out" | grep -q "web-fork-0" && echo "$out" | grep -q "web-fork-2" ||
        fail "dependents not named: '$out'"
# the forks' QEMUs end without a crash: their guests reset the NIC at poweroff, which crashed a
# restored QEMU 7.2 whose virtio-net offered the guest announce (timer_del(NULL)); the kernel
# names a segfaulting thread by its id
tids=""
for f in $names $ff; do
        p=$(field "$f" pid)
        [ -n "$p" ] || continue # web-fork-2: killed above, Failed
        tr '\0' ' ' <"/proc/$p/cmdline" | grep -q "virtio-net-device,[^ ]*,guest_announce=off" ||
                fail "$f's QEMU (pid $p) offers the guest announce: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>&1 | grep -o "virtio-net-device[^ ]*")"
        tids="$tids $(ls "/proc/$p/task")"
done
"$FORKLET" checkpoint delete web "$ck" --cascade >/dev/null || fail "delete --cascade"
for f in $names $ff; do "$FORKLET" wait "$f" --for=Deleted --timeout=120 || fail "$f not deleted"; done
for t in $tids; do
        dmesg 2>/dev/null | grep -q "qemu-system-x86\[$t\]: segfault" && fail "a fork's QEMU (thread $t) crashed when deleted"
done
echo "ok - the forks' QEMUs ended without a crash ($(wc -w <<<"$tids") threads)"
"$FORKLET" checkpoint list web | grep -q "^$ck " && fail "$ck still listed"

# ---- concurrent checkpoint requests coalesce -------------------------------------------------
before=$("$FORKLET" checkpoint list web | tail -n +2 | grep -c .)
"$FORKLET" checkpoint create web >"$T/c1" 2>&1 &
p1=$!
"$FORKLET" checkpoint create web >"$T/c2" 2>&1 &
p2=$!
wait $p1 || fail "first concurrent create: $(cat "$T/c1")"
wait $p2 || fail "second concurrent create: $(cat "$T/c2")"
[ "$(cat "$T/c1")" = "$(cat "$T/c2")" ] || fail "concurrent creates: $(cat "$T/c1") vs $(cat "$T/c2")"
after=$("$FORKLET" checkpoint list web | tail -n +2 | grep -c .)
[ "$after" = $((before + 1)) ] || fail "concurrent creates made $((after - before)) checkpoints"
echo PASS
