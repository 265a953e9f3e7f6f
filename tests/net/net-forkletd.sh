#!/bin/bash
# SPDX-License-Identifier: MIT
# Session networking end to end: forkletd runs inside a netns this test makes (the "node"),
# whose only uplink leads into a fake internet netns (HTTP hosts on TEST-NET addresses, a fake
# metadata service on 169.254.169.254, dnsmasq as their DNS). Real QEMU guests check, through
# their session resolver: allowed name -> HTTP 200, other name -> REFUSED, direct IP and
# metadata -> no connection, open egress -> everything; a live egress change without reboot;
# two sessions with the same guest IP at once; port-forward on loopback only; teardown and
# orphan cleanup. Nothing is routed through the host's interfaces.
# Usage: net-forkletd.sh FORKLETD FORKLET (root; exit 77 when a prerequisite is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=netd
# (sourced again, same PID and T, by the copy that runs in its own network namespace below)
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
for t in ip nft busybox unshare dnsmasq ss; do
        command -v $t >/dev/null 2>&1 || skip "$t not installed (scripts/install-deps.sh)"
done
[ -c /dev/net/tun ] || skip "/dev/net/tun missing"

if [ -z "${NET_TEST_INNER:-}" ]; then
        NET_TEST_INNER=1 exec unshare -n "$0" "$@"
fi

P=$$
INET="fki$P-inet" # the fake internet
PEER="fki$P-peer" # a bystander on the node's uplink, for the exposure check
UP="i$P"          # the node's uplink interface (leads only into the fake internet)
fk_cleanup_extra() { net_cleanup "$INET" "$PEER"; }
trap 'exit 1' INT TERM

# --- the node netns (this one) and its fake internet ---------------------------------------
fake_internet "$INET" "$UP" 80,8080 203.0.113.10 203.0.113.20 203.0.113.53 169.254.169.254
fake_dns "$INET" --address=/api.github.test/203.0.113.10 --address=/other.test/203.0.113.20 \
        --host-record=edge.cdn.test,203.0.113.10 --cname=www.github.test,edge.cdn.test \
        --local-ttl=5
sleep 0.5
printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 2 203.0.113.20 80 | grep -q "200 OK" ||
        fail "control: the node reaches the fake internet's HTTP host"
busybox nslookup api.github.test 203.0.113.53 2>&1 | grep -q 203.0.113.10 ||
        fail "control: dnsmasq answers in the fake internet"
ok "fake internet up (HTTP on 203.0.113.10/.20 and 169.254.169.254, dnsmasq on .53)"

fk_node_config "network: {uplinkPool: 198.18.0.0/16, uplinkInterface: \"$UP\", dns: [203.0.113.53]}" \
        >"$T/node.yaml"
manifest() { session "$1" "egress: $2" "ports: [8080]"; } # manifest NAME EGRESS-FLOW-LIST
gen() { "$FORKLET" get session "$1" -o json | jq -r "$2"; }
# egress NAME EGRESS-FLOW-LIST: a live change, waited for: forkletd applies the egress policy in
# the planner pass that observes the new generation (30 s at most)
egress() {
        local before g
        before=$(gen "$1" .metadata.generation)
        manifest "$1" "$2"
        for _ in $(seq 150); do
                g=$(gen "$1" .metadata.generation)
                [ "$g" -gt "$before" ] && [ "$(gen "$1" .status.observedGeneration)" = "$g" ] && return 0
                sleep 0.2
        done
        bad "$1: egress $2 not observed within 30 s (generation $g)"
}
# the harness's gsh, bounded in time and with stderr
gsh() { "$FORKLET" exec "$1" --timeout=60 -- sh -c "$2" 2>&1; }
# A only: busybox nslookup gives up on the first error, and dnsmasq refuses AAAA here
lookup() { gsh "$1" "busybox nslookup -type=a $2 10.0.2.3"; }
fetch() { # fetch SESSION IP [PORT]: prints the HTTP status line, nothing when no connection
        gsh "$1" "printf 'GET / HTTP/1.0\r\n\r\n' | busybox timeout 8 busybox nc -w 3 $2 ${3:-80} | head -n1"
}
start_daemon
manifest web "[api.github.test]"
"$FORKLET" wait web --for=Running --timeout=300 >/dev/null || fail "session web not Running"
pid=$(field web pid)
netns=$(field web netns)
[ -n "$netns" ] && ip netns list | grep -qw -- "$netns" && ok "status.network.netns $netns exists" ||
        bad "status.network.netns ($netns)"
expect "status.network.guestIP" 10.0.2.15 "$(field web guestIP)"
expect "QEMU runs inside the session netns" "$netns" "$(ip netns identify "$pid")"
expect "guest got its address from the kernel command line" "10.0.2.15/24" \
        "$(gsh web 'busybox ip -4 addr show')"

# --- egress: [api.github.test, www.github.test] --------------------------------------------
expect "allowed name resolves through the session resolver" "203.0.113.10" \
        "$(lookup web api.github.test)"
expect "allowed name answers HTTP 200" "200 OK" "$(fetch web 203.0.113.10)"
expect "other name is refused by the resolver" "REFUSED" "$(lookup web other.test)"
expect_not "direct connection to 203.0.113.20 by IP fails" "200" "$(fetch web 203.0.113.20)"
expect_not "metadata 169.254.169.254 fails" "200" "$(fetch web 169.254.169.254)"
expect "DNS to another resolver is dropped" "timed out\|no servers\|can't" \
        "$(gsh web 'busybox timeout 10 busybox nslookup api.github.test 203.0.113.53')"
expect "resolver counted refusals in status" '"refused": [1-9]' \
        "$("$FORKLET" get session web -o json)"
expect "describe shows the network and the resolver" \
        "Network: *netns $netns, guest 10.0.2.15, uplink 198.18.*, egress restricted" \
        "$("$FORKLET" describe web)"
tcpq=$(printf '\x00\x21\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03api\x06github\x04test\x00\x00\x01\x00\x01' |
        ip netns exec "$netns" busybox nc -w 3 10.0.2.3 53 | od -An -tx1 | tr -d ' \n')
expect "resolver answers over TCP too (length-prefixed, same id)" "^....1234.*cb00710a" "$tcpq"

# --- CNAME: only www.github.test (-> edge.cdn.test -> 203.0.113.10) is listed -----------------
egress web "[www.github.test]"
expect "api.github.test refused once unlisted" "REFUSED" "$(lookup web api.github.test)"
expect_not "its learned address left the set with it" "200" "$(fetch web 203.0.113.10)"
expect "a CNAME target alone is not listed" "REFUSED" "$(lookup web edge.cdn.test)"
expect "CNAME chain www.github.test -> edge.cdn.test resolves" "203.0.113.10" \
        "$(lookup web www.github.test)"
expect "the target of an allowed CNAME resolves on its own afterwards" "203.0.113.10" \
        "$(lookup web edge.cdn.test)"
expect "the CNAME target's address was learned: HTTP 200" "200 OK" "$(fetch web 203.0.113.10)"

# --- live change: open egress, then [other.test] -----------------------------------------------
egress web "[]"
expect "open egress: other.test resolves" "203.0.113.20" "$(lookup web other.test)"
expect "open egress: 203.0.113.20 answers" "200 OK" "$(fetch web 203.0.113.20)"
expect "open egress: api.github.test answers" "200 OK" "$(fetch web 203.0.113.10)"
egress web "[other.test]"
expect "flipped: api.github.test now refused" "REFUSED" "$(lookup web api.github.test)"
expect_not "flipped: 203.0.113.10 no longer reachable" "200" "$(fetch web 203.0.113.10)"
expect "flipped: other.test resolves" "203.0.113.20" "$(lookup web other.test)"
expect "flipped: other.test answers HTTP 200" "200 OK" "$(fetch web 203.0.113.20)"
# a name restricted to a port: its learned addresses go into the port's set only
egress web "[other.test:8080]"
# port 80 must close within 30 s (polled: kept from before the wait on observedGeneration)
for _ in $(seq 15); do
        [ "$(fetch web 203.0.113.20 80)" = "" ] && break
        sleep 2
done
expect "other.test:8080: resolves" "203.0.113.20" "$(lookup web other.test)"
expect "other.test:8080: port 8080 answers" "200 OK" "$(fetch web 203.0.113.20 8080)"
expect_not "other.test:8080: port 80 does not" "200" "$(fetch web 203.0.113.20 80)"
egress web "[other.test]"
expect "no reboot across egress changes (same QEMU pid)" "^$pid\$" "$(field web pid)"

# --- two sessions, same guest IP, both reach an allowed host at once ----------------------------
manifest web2 "[other.test]"
"$FORKLET" wait web2 --for=Running --timeout=300 >/dev/null || fail "session web2 not Running"
expect "second session has the same guest IP" 10.0.2.15 "$(field web2 guestIP)"
# learned addresses live for their TTL (floor 30 s): the boot above outlasted web's, so both
# resolve again right before connecting
lookup web other.test >/dev/null
lookup web2 other.test >/dev/null
fetch web 203.0.113.20 >"$T/a.out" &
a=$!
fetch web2 203.0.113.20 >"$T/b.out" &
b=$!
wait $a $b
expect "concurrent fetch from web" "200 OK" "$(cat "$T/a.out")"
expect "concurrent fetch from web2" "200 OK" "$(cat "$T/b.out")"

# --- two forks of one session: same guest IP and MAC, own netns, both reach an allowed host ------
ck=$("$FORKLET" checkpoint create web2) || fail "checkpoint create web2"
forks=$("$FORKLET" fork web2 --from "$ck" --count 2) || fail "fork web2"
for f in $forks; do
        "$FORKLET" wait "$f" --for=Running --timeout=300 >/dev/null || fail "$f not Running"
done
set -- $forks
expect "fork $1 keeps the guest IP" 10.0.2.15 "$(gsh "$1" 'busybox ip -4 addr show')"
expect "fork $2 keeps the guest IP" 10.0.2.15 "$(gsh "$2" 'busybox ip -4 addr show')"
[ "$(field "$1" netns)" != "$(field "$2" netns)" ] && ok "each fork has its own netns" ||
        bad "forks share a netns"
lookup "$1" other.test >/dev/null
lookup "$2" other.test >/dev/null
fetch "$1" 203.0.113.20 >"$T/f1.out" &
a=$!
fetch "$2" 203.0.113.20 >"$T/f2.out" &
b=$!
wait $a $b
expect "concurrent fetch from fork $1" "200 OK" "$(cat "$T/f1.out")"
expect "concurrent fetch from fork $2" "200 OK" "$(cat "$T/f2.out")"
expect "forks inherit the egress list: api.github.test refused" "REFUSED" \
        "$(lookup "$1" api.github.test)"
for f in $forks; do "$FORKLET" delete "$f" >/dev/null; done
for f in $forks; do "$FORKLET" wait "$f" --for=Deleted --timeout=120 >/dev/null; done

# --- port-forward ------------------------------------------------------------------------------
gsh web 'mkdir -p /tmp/www && echo guest-page >/tmp/www/index.html' >/dev/null
"$FORKLET" exec web --detach -- busybox httpd -f -p 8080 -h /tmp/www >/dev/null ||
        bad "start httpd in the guest"
# the detached httpd listens a moment after the exec returns: wait for it in the guest
gsh web 'for i in $(seq 50); do wget -q -O- http://127.0.0.1:8080/ >/dev/null && break; sleep 0.1; done' \
        >/dev/null
out=$("$FORKLET" port-forward web 18081:9999 2>&1)
rc=$?
[ $rc -ne 0 ] && printf '%s' "$out" | grep -q "spec.ports" && ok "port outside spec.ports refused: $out" ||
        bad "port outside spec.ports (rc $rc: $out)"
"$FORKLET" port-forward web 18080:8080 >"$T/pf.out" 2>&1 &
PF=$!
PIDS+=($PF)
for _ in $(seq 50); do grep -q "127.0.0.1:18080" "$T/pf.out" && break; sleep 0.1; done
get() { printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 5 "$1" 18080; }
expect "port-forward reaches the guest on 127.0.0.1" guest-page "$(get 127.0.0.1)"
expect "port-forward reaches the guest on ::1" guest-page "$(get ::1)"
getters=()
for i in 1 2 3 4 5 6 7 8; do
        get 127.0.0.1 >"$T/pf-$i.out" &
        getters+=($!)
done
wait "${getters[@]}"
n=$(cat "$T"/pf-*.out | grep -c guest-page)
[ "$n" = 8 ] && ok "8 concurrent port-forward connections" || bad "concurrent connections: $n/8"
expect "listeners on loopback only" "^127.0.0.1:18080 \[::1\]:18080 \$" \
        "$(ss -Hltn 'sport = :18080' | awk '{printf "%s ", $4}')"
# a pause longer than the CLI's 2 s look at the session: the forward waits, then serves again
# (a rollback or a restart passes through Starting or Pending the same way)
"$FORKLET" pause web >/dev/null || bad "pause web"
sleep 4.5
kill -0 $PF 2>/dev/null && ok "port-forward stays while the session is Paused: $(tail -n1 "$T/pf.out")" ||
        bad "port-forward ended on the pause: $(tail -n 3 "$T/pf.out")"
# a connection made while it is Paused waits for the resume
(printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 25 127.0.0.1 18080 >"$T/pf-paused.out" 2>&1) &
waiter=$!
sleep 1.5
"$FORKLET" resume web >/dev/null || bad "resume web"
wait "$waiter"
expect "a connection made during the pause is served after the resume" guest-page "$(cat "$T/pf-paused.out")"
expect "after resume: port-forward reaches the guest again" guest-page "$(get 127.0.0.1)"
ip netns add "$PEER"
ip link add "p$P" type veth peer name eth0 netns "$PEER"
ip addr add 192.0.2.9/30 dev "p$P"
ip link set "p$P" up
ip -n "$PEER" addr add 192.0.2.10/30 dev eth0
ip -n "$PEER" link set eth0 up
ip -n "$PEER" link set lo up
expect_not "nothing answers on the node's non-loopback address from another netns" guest-page \
        "$(printf 'GET / HTTP/1.0\r\n\r\n' | ip netns exec "$PEER" busybox nc -w 3 192.0.2.9 18080 2>&1)"
# a relay held open must not keep forkletd from stopping; after the restart the VM is adopted
# and its network re-attached (resolver back, policy unchanged)
(sleep 30 | busybox nc 127.0.0.1 18080 >/dev/null 2>&1) &
holder=$!
sleep 1
kill "$DPID"
for _ in $(seq 60); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.25; done
if kill -0 "$DPID" 2>/dev/null; then bad "forkletd stops within 15 s with a relay open"; else
        ok "forkletd stops with a port-forward relay open"
fi
wait "$DPID" 2>/dev/null
DPID=
kill "$holder" 2>/dev/null
start_daemon
"$FORKLET" wait web --for=Running --timeout=60 >/dev/null || bad "web adopted after restart"
expect "after restart: the re-attached resolver answers" "203.0.113.20" "$(lookup web other.test)"
expect "after restart: still REFUSED for unlisted names" "REFUSED" "$(lookup web api.github.test)"
expect_not "after restart: policy still closed for 203.0.113.10" "200" "$(fetch web 203.0.113.10)"
expect "after restart: port-forward works again" guest-page "$(get 127.0.0.1)"
# Rollbacks: the QEMU replaced lets go of the tap before it is killed, and the second one (a
# restored QEMU: private RAM) is not waited for; the new QEMU has the network at once.
# A restored copy keeps its MAC behind its own tap, so neither QEMU (RARP, ethertype 0x8035) nor
# the guest (gratuitous ARP: sender IP = target IP) announces it: frames on tap0 counted from
# before the rollback until 3 s after it (QEMU's 5 rounds take about a second).
announce_frames() { # NETNS STOPFILE: counts until STOPFILE exists (60 s at most), prints it
        ip netns exec "$1" python3 - "$2" <<'PY'
import os, socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind(("tap0", 0))
s.settimeout(0.1)
print("listening", flush=True)
end, n = time.monotonic() + 60, 0
while time.monotonic() < end and not os.path.exists(sys.argv[1]):
    try:
        f = s.recv(2048)
    except socket.timeout:
        continue
    kind = struct.unpack("!H", f[12:14])[0]
    if kind == 0x8035 or (kind == 0x0806 and len(f) >= 42 and f[28:32] == f[38:42]):
        n += 1
print(n, flush=True)
PY
}
ck=$("$FORKLET" checkpoint create web --wait) || bad "checkpoint of web"
for i in 1 2; do
        announce_frames "$netns" "$T/announce.$i.stop" >"$T/announce.$i" &
        cap=$!
        fk_wait 5 grep -q listening "$T/announce.$i" || bad "capture on tap0 of $netns started"
        "$FORKLET" rollback web "$ck" >/dev/null || bad "rollback $i of web"
        sleep 3
        touch "$T/announce.$i.stop"
        wait "$cap"
        expect "rollback $i: no RARP or gratuitous ARP on tap0" '^listening 0$' "$(tr '\n' ' ' <"$T/announce.$i" | sed 's/ $//')"
        lookup web other.test >/dev/null
        expect "after rollback $i: an allowed host answers" "200 OK" "$(fetch web 203.0.113.20)"
        expect "after rollback $i: port-forward reaches the guest" guest-page "$(get 127.0.0.1)"
done
manifest_stop() { sed -i 's/^spec:/spec:\n  state: Stopped/' "$T/web.yaml" && "$FORKLET" apply -f "$T/web.yaml" >/dev/null; }
manifest_stop
for _ in $(seq 120); do kill -0 $PF 2>/dev/null || break; sleep 0.5; done
if kill -0 $PF 2>/dev/null; then bad "port-forward still running after the session stopped"; else
        ok "port-forward ended when the session stopped: $(tail -n1 "$T/pf.out")"
fi

# --- teardown and orphan cleanup ------------------------------------------------------------
netns2=$(field web2 netns)
"$FORKLET" delete web >/dev/null
"$FORKLET" wait web --for=Deleted --timeout=120 >/dev/null || bad "web deleted"
ip netns list | grep -qw -- "$netns" && bad "netns $netns removed on delete" || ok "netns removed on delete"
expect_not "host NAT table of web removed" "forklet_$netns\b" "$(nft list tables)"
stop_daemon
# forget web2 behind forkletd's back: its network is now an orphan
w2pid=$(jq -r .vm.pid "$T"/state/sessions/default.web2/state.json)
kill -9 "$w2pid" 2>/dev/null
# (its jail's grants on host files, e.g. /dev/net/tun, go first: they would outlive the ledger)
u2=$(cat "$T/state/sessions/default.web2/jail-uid" 2>/dev/null)
while [ -n "$u2" ] && read -r f; do
        setfacl -x "u:$u2" "$f" 2>/dev/null
done <"$T/state/sessions/default.web2/jail-grants"
rm -rf "$T/state/sessions/default.web2" "$T/run/sessions/default.web2"
start_daemon
sleep 1
ip netns list | grep -qw -- "$netns2" && bad "orphan netns $netns2 removed at start" ||
        ok "orphan netns removed at forkletd start"
expect_not "no forklet host tables left" "forklet_" "$(nft list tables)"
expect_not "no session veths left on the node" "@if" "$(ip -br link | grep -v "$UP\|p$P")"
stop_daemon

# --- forkletd --remove-networks: this node's networks only ------------------------------------
ghost="${netns%-default.web}-default.ghost"
ip netns add "$ghost"
"$FORKLETD" --config "$T/node.yaml" --remove-networks >>"$T/forkletd.log" 2>&1 ||
        bad "forkletd --remove-networks failed"
ip netns list | grep -qw -- "$ghost" && bad "--remove-networks removed $ghost" ||
        ok "--remove-networks removed this node's leftover netns"
ip netns list | grep -qw -- "$INET" && ok "--remove-networks left other netns alone" ||
        bad "--remove-networks removed $INET"

# --- forkletd --decommission: the node's cgroups go too ---------------------------------------
# a session cgroup left behind (its VM gone), in every hierarchy that has the node's parent
parents=$(ls -d /sys/fs/cgroup/*/"$FK_CGROUP" /sys/fs/cgroup/"$FK_CGROUP" 2>/dev/null)
[ -n "$parents" ] || bad "no cgroup parent $FK_CGROUP before --decommission"
for p in $parents; do mkdir -p "$p/default.ghost"; done
"$FORKLETD" --config "$T/node.yaml" --decommission >>"$T/forkletd.log" 2>&1 ||
        bad "forkletd --decommission failed"
left=$(ls -d /sys/fs/cgroup/*/"$FK_CGROUP" /sys/fs/cgroup/"$FK_CGROUP" 2>/dev/null)
[ -z "$left" ] && ok "--decommission removed the leftover session cgroup and the parent" ||
        bad "--decommission left $left"

echo "# $FAILS failure(s)"
[ $FAILS -eq 0 ]
