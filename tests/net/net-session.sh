#!/bin/bash
# SPDX-License-Identifier: MIT
# Integration test of the session network against the real kernel. The script re-runs itself in
# a fresh netns that plays the node; a fake "internet" netns (TEST-NET hosts 203.0.113.10/.20
# and a fake metadata service 169.254.169.254, each serving HTTP with busybox httpd) hangs off
# it, and a "guest" netns stands in for the VM on the session's bridge. Checks links, nft
# rulesets (golden dumps in tests/data/net/ruleset-*.nft), reachability per policy, teardown and
# orphan cleanup. Root only; exit 77 when a prerequisite is missing.
set -u

. "$(dirname "$0")/../lib/harness.sh"
fk_require_root
fk_require_cmds ip nft busybox unshare
[ -c /dev/net/tun ] || skip "/dev/net/tun missing"
TOOL=${FORKLET_BINARY_DIR:-}/tests/net-tool
[ -x "$TOOL" ] || skip "net-tool not built ($TOOL)"
DATA=${FORKLET_TEST_DATA:-$(dirname "$0")/../data}/net

if [ -z "${NET_TEST_INNER:-}" ]; then
        NET_TEST_INNER=1 exec unshare -n "$0" "$@"
fi

P=$$
S="fkt$P-s"     # session netns
S2="fkt$P-keep" # sessions for the orphan check
S3="fkt$P-orph"
INET="fki$P-inet"
G="fki$P-g"
PFX="t$P"
UP="i$P" # node's uplink interface, leads only into the fake internet
ST=$(mktemp -d /tmp/net-session.XXXXXX)
PIDS=""
fk_checks_init

cleanup() {
        for pid in $PIDS; do kill "$pid" 2>/dev/null; done
        for n in "$S" "$S2" "$S3" "$INET" "$G"; do
                ip netns del "$n" 2>/dev/null
        done
        rm -rf "$ST"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

check() { # check DESCRIPTION CMD...
        d=$1
        shift
        if "$@" >/dev/null 2>&1; then ok "$d"; else bad "$d"; fi
}
check_not() {
        d=$1
        shift
        if "$@" >/dev/null 2>&1; then bad "$d"; else ok "$d"; fi
}
tool() { "$TOOL" --state "$ST" --prefix "$PFX" --uplink "$UP" --deny 192.0.2.1 "$@"; }
fetch() { # fetch HOST [PORT]: an HTTP GET from the guest stand-in (busybox nc)
        printf 'GET / HTTP/1.0\r\n\r\n' |
                ip netns exec "$G" busybox timeout 5 busybox nc -w 2 "$1" "${2:-80}" |
                grep -q forklet-ok
}
ruleset() { # ruleset NAME: the session table against tests/data/net/ruleset-NAME.nft
        got="$ST/ruleset-$1.nft"
        ip netns exec "$S" nft list ruleset >"$got"
        if [ -n "${FORKLET_UPDATE_GOLDEN:-}" ]; then cp "$got" "$DATA/ruleset-$1.nft"; fi
        if diff -u "$DATA/ruleset-$1.nft" "$got"; then ok "ruleset $1 matches golden"; else
                bad "ruleset $1 differs from golden"
        fi
}

# --- the node and its fake internet --------------------------------------------------------
ip link set lo up
ip netns add "$INET"
ip link add "$UP" type veth peer name eth0 netns "$INET"
ip addr add 192.0.2.1/30 dev "$UP"
ip link set "$UP" up
ip route add 203.0.113.0/24 via 192.0.2.2
ip route add 169.254.169.254/32 via 192.0.2.2
ip -n "$INET" link set lo up
ip -n "$INET" addr add 192.0.2.2/30 dev eth0
for a in 203.0.113.10 203.0.113.20 169.254.169.254; do
        ip -n "$INET" addr add $a/32 dev lo
done
ip -n "$INET" link set eth0 up
mkdir -p "$ST/www"
echo forklet-ok >"$ST/www/index.html"
for port in 80 8080; do
        ip netns exec "$INET" busybox httpd -f -p $port -h "$ST/www" &
        PIDS="$PIDS $!"
done
sleep 0.3
# control: every target serves, so a failed fetch below is the policy's doing
for a in 203.0.113.10 203.0.113.20 169.254.169.254; do
        check "control: the node reaches $a" sh -c \
                "printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 2 $a 80 | grep -q forklet-ok"
done

# --- session with allow [203.0.113.10/32] --------------------------------------------------
out=$(tool setup "$S" 203.0.113.10/32) || {
        echo "not ok - setup: $out"
        exit 1
}
echo "# $out"
check "netns $S exists" sh -c "ip netns list | grep -qw '$S'"
check "tap0 in the session netns" ip -n "$S" link show tap0
check "tap0 is persistent and owned by root" \
        sh -c "ip -n '$S' -d link show tap0 | grep -q 'tun type tap.*persist on user root'"
check "tap0 enslaved to br0" sh -c "ip -n '$S' link show tap0 | grep -q 'master br0'"
check "uplink0 carries the netns end" \
        sh -c "ip -n '$S' -br addr show uplink0 | grep -q '198.18.0.2/30'"
check "default route via the host end" \
        sh -c "ip -n '$S' route show default | grep -q 'via 198.18.0.1 dev uplink0'"
# forwarding switched on through conf/default before the links were made (no ip_forward write,
# which spins on the rtnl lock), and ICMP redirects refused as turning on ip_forward would
for l in br0 uplink0 tap0; do
        check "$l forwards IPv4" sh -c "[ \"\$(ip netns exec '$S' cat /proc/sys/net/ipv4/conf/$l/forwarding)\" = 1 ]"
done
check "the session netns accepts no ICMP redirects" \
        sh -c "[ \"\$(ip netns exec '$S' cat /proc/sys/net/ipv4/conf/all/accept_redirects)\" = 0 ]"
check "host veth ${PFX}0 with 198.18.0.1/30" \
        sh -c "ip -br addr show ${PFX}0 | grep -q '198.18.0.1/30'"
check "host route to the session uplink" \
        sh -c "ip route get 198.18.0.2 | grep -q 'dev ${PFX}0'"
check "host NAT table out of $UP" sh -c "nft list table inet forklet_$S | grep -q 'oifname \"$UP\" masquerade'"
check "lease recorded" grep -q "^0 $S\$" "$ST/net/ipam"
ruleset cidr
check "net_join_netns: a child sees tap0 and uplink0 without ip -n" \
        sh -c "'$TOOL' --state '$ST' --prefix '$PFX' --uplink '$UP' --deny 192.0.2.1 exec '$S' \
        203.0.113.10/32 -- sh -c 'ip link show tap0 && ip link show uplink0'"
check_not "the node itself has no tap0" ip link show tap0

ip netns add "$G"
ip -n "$S" link add gx type veth peer name eth0 netns "$G"
ip -n "$S" link set gx master br0 up
ip -n "$G" link set lo up
ip -n "$G" addr add 10.0.2.15/24 dev eth0
ip -n "$G" link set eth0 up
ip -n "$G" route add default via 10.0.2.2

check "guest reaches its gateway" ip netns exec "$G" busybox ping -c1 -W2 10.0.2.2
check "allow [203.0.113.10/32]: reaches .10" fetch 203.0.113.10
check_not "allow [203.0.113.10/32]: not .20" fetch 203.0.113.20
check_not "metadata 169.254.169.254 never" fetch 169.254.169.254
check_not "node address 192.0.2.1 never" ip netns exec "$G" busybox ping -c1 -W1 192.0.2.1

# --- open policy, live update --------------------------------------------------------------
tool update "$S" >/dev/null || bad "update to open"
ruleset open
check "open: reaches .10" fetch 203.0.113.10
check "open: reaches .20" fetch 203.0.113.20
check_not "open: metadata 169.254.169.254 never" fetch 169.254.169.254

# --- ports ---------------------------------------------------------------------------------
tool update "$S" 203.0.113.20:8080 >/dev/null || bad "update to ports"
ruleset ports
check "ports: reaches .20:8080" fetch 203.0.113.20 8080
check_not "ports: not .20:80" fetch 203.0.113.20
check_not "ports: not .10" fetch 203.0.113.10

# --- names: the resolver fills a timeout set -----------------------------------------------
tool update "$S" name:example >/dev/null || bad "update to names"
ruleset names
check_not "names: .10 before the resolver allowed it" fetch 203.0.113.10
tool allow-addr "$S" name:example -- 203.0.113.10 60 || bad "allow-addr"
check "names: element with timeout in allow4" \
        sh -c "ip netns exec '$S' nft list set inet forklet allow4 | grep -q '203.0.113.10 timeout 1m'"
check "names: reaches .10 once allowed" fetch 203.0.113.10
check_not "names: not .20" fetch 203.0.113.20
check "names: DNS to the resolver is let through" \
        sh -c "ip netns exec '$S' nft list chain inet forklet guest_in | grep -q 'ip daddr 10.0.2.3 udp dport 53 accept'"

# --- IPv6 enforced -------------------------------------------------------------------------
"$TOOL" --state "$ST" --prefix "$PFX" --uplink "$UP" --deny 192.0.2.1 --deny 2001:db8:ffff::1 \
        --ipv6 update "$S" '[2001:db8::/32]:443' 203.0.113.10/32 name:example >/dev/null ||
        bad "update to v6"
ruleset v6

# --- teardown ------------------------------------------------------------------------------
ip netns del "$G"
tool teardown "$S" >/dev/null || bad "teardown"
check_not "teardown: netns gone" sh -c "ip netns list | grep -qw '$S'"
check_not "teardown: host veth gone" ip link show "${PFX}0"
check_not "teardown: host NAT table gone" nft list table inet "forklet_$S"
check_not "teardown: lease released" grep -q "$S" "$ST/net/ipam"
tool teardown "$S" >/dev/null && ok "teardown twice is a no-op" || bad "teardown twice"

# --- orphans -------------------------------------------------------------------------------
tool setup "$S2" >/dev/null || bad "setup $S2"
tool setup "$S3" >/dev/null || bad "setup $S3"
check "second session got another slot" grep -q "^1 $S3\$" "$ST/net/ipam"
out=$(tool orphans "fkt$P-" "$S2") || bad "orphans"
[ "$out" = "removed 1" ] && ok "orphans: removed 1" || bad "orphans: $out"
check_not "orphans: $S3 gone" sh -c "ip netns list | grep -qw '$S3'"
check_not "orphans: ${PFX}1 gone" ip link show "${PFX}1"
check "orphans: $S2 kept" sh -c "ip netns list | grep -qw '$S2'"
tool teardown "$S2" >/dev/null || bad "teardown $S2"
left=$(ip netns list | grep "fkt$P-" | grep -v "$INET")
[ -z "$left" ] && ok "nothing of the sessions left in ip netns list" || bad "left: $left"
left=$(ip -br link | grep "^$PFX")
[ -z "$left" ] && ok "no host veth left" || bad "left: $left"

echo "# $FAILS failure(s)"
[ "$FAILS" = 0 ]
