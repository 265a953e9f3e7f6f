#!/bin/bash
# SPDX-License-Identifier: MIT
# The default image's tools, each doing something real in a real QEMU guest: wget by name
# through the session resolver against a fake internet (TEST-NET hosts, dnsmasq), wget errors
# and -T (busybox-static's own -T crashes) without a signal, ps, pgrep/pkill on a detached
# process, nc both ways, ip, tar + gzip round trip, timeout's GNU exit codes, vi driven by -c
# commands, localhost from /etc/hosts; each both exec'd directly and from sh -c (bash). Then
# the CLI against this forkletd: wait on a missing session fails at once, apply errors name
# the file and line, checkpoint/rollback events have their own reasons.
# Usage: guest-tools.sh FORKLETD FORKLET   (root; exit 77 when a prerequisite is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=tools
# (sourced again, same PID and T, by the copy that runs in its own network namespace below)
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
for t in ip nft busybox unshare dnsmasq; do
        command -v $t >/dev/null 2>&1 || skip "$t not installed (scripts/install-deps.sh)"
done
[ -c /dev/net/tun ] || skip "/dev/net/tun missing"
if [ -z "${NET_TEST_INNER:-}" ]; then
        NET_TEST_INNER=1 exec unshare -n "$0" "$@"
fi

P=$$
INET="fkt$P-inet"
UP="t$P"
fk_cleanup_extra() { net_cleanup "$INET"; }
trap 'exit 1' INT TERM

fake_internet "$INET" "$UP" 80,8080 203.0.113.10 203.0.113.53
# a server that accepts and never answers (for wget -T): nc reads a FIFO nobody writes to
mkfifo "$T/silent"
ip netns exec "$INET" busybox nc -l -p 81 <>"$T/silent" >/dev/null 2>&1 &
PIDS+=($!)
fake_dns "$INET" --address=/web.tools.test/203.0.113.10 --address=/other.tools.test/203.0.113.10
fk_node_config "network: {uplinkPool: 198.18.0.0/16, uplinkInterface: \"$UP\", dns: [203.0.113.53]}" \
        >"$T/node.yaml"
# gsh NAME SCRIPT: sh -c SCRIPT in the guest, bounded in time, stdout and stderr; `rc=N` last
gsh() {
        "$FORKLET" exec "$1" --timeout=60 -- sh -c "$2" 2>&1
        echo "rc=$?"
}
start_daemon
session box "egress: [web.tools.test]"
"$FORKLET" wait box --for=Running --timeout=300 >/dev/null || fail "session box not Running"

# --- wget: by name through the session resolver, and errors as exit codes, not signals --------
expect "wget by name fetches the page" "^forklet-ok rc=0\$" \
        "$(gsh box 'wget -q -O- http://web.tools.test/' | tr '\n' ' ' | sed 's/ $//')"
out=$(gsh box 'wget -q -O- http://127.0.0.1:1/')
expect "wget to a closed port says why" "Connection refused" "$out"
expect "wget to a closed port exits 1 (no signal)" "rc=1\$" "$out"
out=$(gsh box 'wget -q -O- http://other.tools.test/')
expect "wget of a name the resolver refuses says why" "bad address 'other.tools.test'" "$out"
expect "wget of a refused name exits 1 (no signal)" "rc=1\$" "$out"
out=$("$FORKLET" exec box --timeout=60 -- wget -q -O- http://127.0.0.1:1/ 2>&1)
rc=$?
[ $rc -ge 1 ] && [ $rc -lt 128 ] && ok "wget exec'd directly exits $rc: $out" ||
        bad "wget exec'd directly exits $rc (a signal is >= 128): $out"

out=$(gsh box 'wget -q -T 3 -O- http://web.tools.test/')
expect "wget -T 3 fetches the page (no SIGSEGV)" "^forklet-ok" "$out"
expect "wget -T 3 exits 0" "rc=0\$" "$out"
start=$(date +%s)
out=$(gsh box 'wget -q -T 2 -O- http://web.tools.test:81/')
took=$(($(date +%s) - start))
expect "wget -T 2 against a silent server times out" "download timed out" "$out"
expect "wget -T 2 timeout exits 1" "rc=1\$" "$out"
[ $took -lt 30 ] && ok "wget -T 2 gave up in ${took}s" || bad "wget -T 2 took ${took}s"
out=$("$FORKLET" exec box --timeout=60 -- wget -qT2 -O- http://web.tools.test/ 2>&1)
expect "wget -qT2 exec'd directly fetches the page" "^forklet-ok" "$out"
gsh box 'wget -q -O /tmp/page.html http://web.tools.test/ && cat /tmp/page.html' >"$T/page"
expect "wget -O FILE writes the page" "^forklet-ok" "$(cat "$T/page")"
gsh box 'mkdir -p /tmp/www && echo local-page >/tmp/www/index.html' >/dev/null
"$FORKLET" exec box --detach -- busybox httpd -f -p 8080 -h /tmp/www >/dev/null ||
        bad "start httpd in the guest"
out=$(gsh box 'for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O- http://localhost:8080/ && break; sleep 0.5; done')
expect "localhost resolves from /etc/hosts" "^local-page" "$out"

# --- ps, pgrep, pkill ---------------------------------------------------------------------------
pid=$("$FORKLET" exec box --detach -- sleep 7777) || bad "exec --detach sleep"
expect "ps lists the detached sleep" "sleep 7777" "$(gsh box 'ps')"
expect "pgrep -x finds it by name" "^$pid rc=0\$" "$(gsh box 'pgrep -x sleep' | tr '\n' ' ' | sed 's/ $//')"
expect "pgrep -f finds it by command line (direct exec)" "^$pid\$" \
        "$("$FORKLET" exec box --timeout=60 -- pgrep -f 'sleep 7777' 2>&1)"
expect "pgrep -l prints the name" "^$pid sleep" "$(gsh box 'pgrep -l -x sleep')"
expect "pgrep with no match exits 1" "^rc=1\$" "$(gsh box 'pgrep -x no-such-name')"
expect "pkill ends it" "rc=0" "$(gsh box 'pkill -x sleep')"
out=$(gsh box 'for i in 1 2 3 4 5 6 7 8 9 10; do pgrep -x sleep >/dev/null || { echo gone; break; }; sleep 0.3; done')
expect "the sleep is gone after pkill" "^gone" "$out"

# --- timeout ------------------------------------------------------------------------------------
start=$(date +%s)
expect "timeout 2 sleep 30 exits 124" "^rc=124\$" "$(gsh box 'timeout 2 sleep 30')"
took=$(($(date +%s) - start))
[ $took -lt 20 ] && ok "timeout ended sleep in ${took}s" || bad "timeout took ${took}s"
"$FORKLET" exec box --timeout=60 -- timeout 1 sleep 30
expect "timeout exec'd directly exits 124" "^124\$" "$?"
expect "timeout passes the command's status through" "^rc=3\$" "$(gsh box 'timeout 10 sh -c "exit 3"')"
expect "timeout -s KILL exits 137" "rc=137\$" "$(gsh box 'timeout -s KILL 1 sleep 30')"

# --- nc: a listener in the guest, and out to the fake internet ----------------------------------
"$FORKLET" exec box --detach -- sh -c 'nc -l -p 7000 >/tmp/nc.got' >/dev/null || bad "nc -l"
out=$(gsh box 'for i in 1 2 3 4 5 6 7 8 9 10; do echo hello-nc | nc -w 2 127.0.0.1 7000 && break; sleep 0.3; done; sleep 0.5; cat /tmp/nc.got')
expect "nc carries a line to a guest listener" "^hello-nc" "$out"
out=$(gsh box "printf 'GET / HTTP/1.0\\r\\nHost: web.tools.test\\r\\n\\r\\n' | nc -w 5 web.tools.test 80")
expect "nc reaches the test host by name" "200 OK" "$out"
expect "nc reads the page" "forklet-ok" "$out"

# --- ip -----------------------------------------------------------------------------------------
expect "ip addr shows the guest address" "inet 10.0.2.15/24" "$(gsh box 'ip -4 addr show dev eth0')"
expect "ip route shows the default route" "default via 10.0.2.2 dev eth0" "$(gsh box 'ip route')"

# --- tar + gzip ---------------------------------------------------------------------------------
out=$(gsh box 'set -e; rm -rf /tmp/tz; mkdir -p /tmp/tz/src/sub; cd /tmp/tz
        seq 1 20000 >src/numbers; echo nested >src/sub/file; ln -s numbers src/link
        tar -czf t.tgz src; gzip -t t.tgz; mkdir out; tar -xzf t.tgz -C out
        cmp src/numbers out/src/numbers; cmp src/sub/file out/src/sub/file
        [ "$(readlink out/src/link)" = numbers ]; tar -tzf t.tgz | sort | tr "\n" " "
        gzip -9 -c src/numbers >n.gz; gunzip -c n.gz | cmp - src/numbers
        echo; echo sizes $(stat -c %s src/numbers n.gz)')
expect "tar -czf/-xzf round trip is identical (files, dirs, symlink)" "src/sub/file" "$out"
expect "tar + gzip round trip exits 0" "rc=0\$" "$out"
sizes=$(printf '%s' "$out" | sed -n 's/^sizes \([0-9]*\) \([0-9]*\)$/\1 \2/p')
set -- $sizes
[ -n "${2:-}" ] && [ "$2" -lt $(($1 / 2)) ] && ok "gzip -9 compresses ($1 -> $2 bytes)" ||
        bad "gzip -9 sizes '$sizes'"

# --- vi, scripted -------------------------------------------------------------------------------
out=$(gsh box "printf 'alpha\\nbeta\\ngamma\\n' >/tmp/v.txt; vi -c '%s/beta/BETA/' -c '1d' -c 'wq' /tmp/v.txt </dev/null >/dev/null 2>&1; cat /tmp/v.txt")
expect "vi -c commands edit the file" "^BETA gamma rc=0\$" "$(printf '%s' "$out" | tr '\n' ' ' | sed 's/ $//')"

# --- the shell ----------------------------------------------------------------------------------
expect "sh is bash (PATH lookups, not busybox ash applets)" "^bash rc=0\$" \
        "$(gsh box 'readlink /bin/sh' | tr '\n' ' ' | sed 's/ $//')"

# --- CLI: wait on a missing session, apply errors against the file, fork-engine events ---------
start=$(date +%s)
out=$("$FORKLET" wait no-such-session --for=Running --timeout=120 2>&1)
rc=$?
took=$(($(date +%s) - start))
[ $rc = 1 ] && [ $took -lt 10 ] && ok "wait on a missing session fails at once ($out)" ||
        bad "wait on a missing session: rc $rc after ${took}s: $out"
expect "it says not found" "session default/no-such-session not found" "$out"
"$FORKLET" wait no-such-session --for=Deleted --timeout=120 >/dev/null 2>&1 &&
        ok "wait --for=Deleted on a missing session succeeds" || bad "wait --for=Deleted"
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: huge}\nspec:\n  sizeClass: enormous\n' \
        >"$T/huge.yaml"
out=$("$FORKLET" apply -f "$T/huge.yaml" 2>&1)
expect "apply error names the file, line and column" "$T/huge.yaml:5:14: spec.sizeClass: unknown" "$out"
expect_not "apply error does not say <json>" "<json>" "$out"
ck=$("$FORKLET" checkpoint create box) || bad "checkpoint create box"
"$FORKLET" rollback box "$ck" >/dev/null || bad "rollback box $ck"
"$FORKLET" wait box --for=Running --timeout=120 >/dev/null || bad "box Running after rollback"
ev=$("$FORKLET" describe box | sed -n '/^Events:/,$p')
expect "describe: Checkpointed, Normal" "Normal  *Checkpointed  *checkpoint $ck taken" "$ev"
expect "describe: RollingBack, Normal" "Normal  *RollingBack  *rolling back to checkpoint $ck" "$ev"
expect "describe: RolledBack, Normal" "Normal  *RolledBack  *rolled back to checkpoint $ck" "$ev"
expect_not "describe: no Warning events" "Warning" "$ev"
expect "the rolled-back guest answers" "^back rc=0\$" "$(gsh box 'echo back' | tr '\n' ' ' | sed 's/ $//')"

[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo PASS
