#!/bin/bash
# SPDX-License-Identifier: MIT
# Learned resolver addresses survive a forkletd restart. forkletd runs in a netns this test
# makes, behind a fake internet (HTTP hosts on TEST-NET addresses, dnsmasq). A real QEMU guest
# resolves two allowed names once; forkletd is stopped and started again (adoption), then
# killed with SIGKILL and started again. Each time the guest keeps connecting to the cached
# addresses without resolving again (a probe loop in the guest runs across both restarts), the
# sets still hold them with their remaining timeout and name, a not-allowed IP stays blocked,
# there is one egress table; a name taken off the list after the restart loses its address,
# and the other address expires at its TTL as before.
# Usage: net-restart.sh FORKLETD FORKLET (root; exit 77 when a prerequisite is missing)
set -u

FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
TTL=90 # network.dnsMinTTL: long enough for two restarts under TCG, short enough to wait out

for t in ip nft busybox unshare dnsmasq; do
        command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed" >&2; exit 77; }
done
[ -c /dev/net/tun ] || { echo "SKIP: /dev/net/tun missing" >&2; exit 77; }
if [ -z "${NET_TEST_INNER:-}" ]; then
        [ "$(id -u)" = 0 ] || { echo "SKIP: needs root" >&2; exit 77; }
        NET_TEST_INNER=1 exec unshare -n "$0" "$@"
fi

FK_TAG=netrs
FK_IMAGE_FILES="vmlinuz initrd.img"
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

INET="fkr$$-inet" # the fake internet
UP="r$$"          # the node's uplink interface (leads only into the fake internet)
fk_cleanup_extra() { net_cleanup "$INET"; }
trap 'exit 1' INT TERM

# --- the node netns (this one) and its fake internet ---------------------------------------
fake_internet "$INET" "$UP" 80 203.0.113.10 203.0.113.20 203.0.113.30 203.0.113.53
fake_dns "$INET" --address=/api.restart.test/203.0.113.10 \
        --address=/other.restart.test/203.0.113.20 --address=/blocked.test/203.0.113.30 \
        --local-ttl=5
sleep 0.5
printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 2 203.0.113.30 80 | grep -q "200 OK" ||
        fail "control: the node reaches the fake internet's HTTP host"
ok "fake internet up (HTTP on 203.0.113.10/.20/.30, dnsmasq on .53)"

fk_node_config "network: {uplinkPool: 198.18.0.0/16, uplinkInterface: \"$UP\", dns: [203.0.113.53], dnsMinTTL: $TTL}" \
        >"$T/node.yaml"

gx() { "$FORKLET" exec "$1" --timeout=60 -- sh -c "$2" 2>&1; }
lookup() { gx web "busybox nslookup -type=a $1 10.0.2.3"; }
fetch() { # fetch IP: the HTTP status line, nothing when no connection
        gx web "printf 'GET / HTTP/1.0\r\n\r\n' | busybox timeout 8 busybox nc -w 3 $1 80 | head -n1"
}
nftns() { ip netns exec "$NETNS" nft "$@" 2>&1; }
# expires_s IP: seconds left on IP's element in allow4 (empty when absent)
expires_s() {
        nftns list set inet forklet allow4 | tr ',{}' '\n\n\n' | grep -F "$1 " |
                sed -n 's/.*expires \([0-9hms.]*\).*/\1/p' | head -n1 |
                awk '{ s = 0; x = $0; if (match(x, /[0-9]+h/)) s += 3600 * substr(x, RSTART, RLENGTH - 1);
                       if (match(x, /[0-9]+m[^s]/) || match(x, /[0-9]+m$/)) s += 60 * substr(x, RSTART, RLENGTH - 1);
                       if (match(x, /[0-9.]+s/)) s += substr(x, RSTART, RLENGTH - 1); printf "%d\n", s }'
}
dns_queries() { "$FORKLET" get session web -o json | sed -n 's/.*"queries": *\([0-9]*\).*/\1/p'; }

start_daemon
session web "egress: [api.restart.test, other.restart.test]"
"$FORKLET" wait web --for=Running --timeout=300 >/dev/null || fail "session web not Running"
NETNS=$(field web netns)
QPID=$(field web pid)
[ -n "$NETNS" ] || fail "no status.network.netns"

# --- learn: the guest resolves both names once ------------------------------------------------
expect "api.restart.test resolves" 203.0.113.10 "$(lookup api.restart.test)"
expect "other.restart.test resolves" 203.0.113.20 "$(lookup other.restart.test)"
T0=$(date +%s)
expect "learned: 203.0.113.10 answers" "200 OK" "$(fetch 203.0.113.10)"
expect_not "control: 203.0.113.30 (never allowed) is blocked" 200 "$(fetch 203.0.113.30)"
expect "the element carries the name that learned it" 'comment "api.restart.test"' \
        "$(nftns list set inet forklet allow4)"

# a probe loop in the guest, across both restarts: the cached allowed IP and the blocked IP,
# one line each per round, ended by /tmp/probe.stop (bounded: 120 rounds)
gx web "cat >/tmp/probe.sh <<'EOF'
i=0
while [ \$i -lt 120 ] && [ ! -e /tmp/probe.stop ]; do
        a=\$(printf 'GET / HTTP/1.0\r\n\r\n' | busybox timeout 4 busybox nc -w 2 203.0.113.10 80 | head -n1)
        b=\$(printf 'GET / HTTP/1.0\r\n\r\n' | busybox timeout 4 busybox nc -w 2 203.0.113.30 80 | head -n1)
        echo \"A \${a:-none}\" >>/tmp/probe.log
        echo \"B \${b:-none}\" >>/tmp/probe.log
        i=\$((i + 1))
        sleep 0.5
done
touch /tmp/probe.done
EOF" >/dev/null
"$FORKLET" exec web --detach -- sh /tmp/probe.sh >/dev/null || bad "start the probe loop in the guest"
sleep 3

# after_restart HOW N: checks (N: the how-manieth restart) once forkletd adopted the VM again
after_restart() {
        local left elapsed set
        "$FORKLET" wait web --for=Running --timeout=120 >/dev/null || bad "$1: web adopted"
        expect "$1: same QEMU (adopted, not rebooted)" "^$QPID\$" "$(field web pid)"
        set=$(nftns list set inet forklet allow4)
        expect "$1: the set still holds 203.0.113.10 with a timeout" \
                "203.0.113.10 timeout [0-9hms]* expires" "$(printf '%s' "$set" | tr ',{}' '\n\n\n')"
        expect "$1: and its name" 'comment "api.restart.test"' "$set"
        left=$(expires_s 203.0.113.10)
        elapsed=$(($(date +%s) - T0))
        if [ -n "$left" ] && [ "$left" -le $((TTL - elapsed + 2)) ] && [ "$left" -gt 0 ]; then
                ok "$1: the remaining timeout was kept (${left}s left, ${elapsed}s after learning)"
        else
                bad "$1: remaining timeout '${left}' after ${elapsed}s of ${TTL}s"
        fi
        expect "$1: one egress table in the session netns" "^table inet forklet\$" \
                "$(nftns list tables)"
        expect "$1: the cached IP answers without resolving again" "200 OK" "$(fetch 203.0.113.10)"
        expect_not "$1: 203.0.113.30 is still blocked" 200 "$(fetch 203.0.113.30)"
        expect "$1: the guest did not resolve again (0 queries since the restart)" "^0\$" \
                "$(dns_queries)"
        expect "$1: forkletd logged that it kept both learned addresses" "^$2\$" \
                "$(grep -c "kept 2 address(es) the resolver had learned" "$T/forkletd.log")"
}

stop_daemon
start_daemon
after_restart "stop/start" 1
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
start_daemon
after_restart "SIGKILL/start" 2

gx web "touch /tmp/probe.stop" >/dev/null
for _ in $(seq 60); do
        gx web "[ -e /tmp/probe.done ] && echo done" | grep -q done && break
        sleep 1
done
probe=$(gx web "cat /tmp/probe.log")
na=$(printf '%s\n' "$probe" | grep -c '^A ')
expect "probe loop ran across both restarts ($na rounds)" "^A " "$probe"
expect_not "probe: the cached allowed IP never failed across the restarts" '^A none' "$probe"
expect_not "probe: the blocked IP never answered (fail closed)" '^B HTTP' "$probe"

# --- live update after the restart: a name taken off the list loses its address -----------
session web "egress: [other.restart.test]"
sleep 2
expect_not "api.restart.test taken off: 203.0.113.10 left the set" "203.0.113.10" \
        "$(nftns list set inet forklet allow4)"
expect_not "api.restart.test taken off: no connection" 200 "$(fetch 203.0.113.10)"
expect "other.restart.test kept its address" "203.0.113.20" "$(nftns list set inet forklet allow4)"
expect "other.restart.test answers" "200 OK" "$(fetch 203.0.113.20)"

# --- the kept address expires at its TTL as before --------------------------------------------
left=$(expires_s 203.0.113.20)
[ -n "$left" ] && [ "$left" -le "$TTL" ] || bad "203.0.113.20 has ${left:-no} expiry"
sleep $((${left:-0} + 2))
expect_not "after its TTL 203.0.113.20 left the set" "203.0.113.20" \
        "$(nftns list set inet forklet allow4)"
expect_not "after its TTL 203.0.113.20 is blocked" 200 "$(fetch 203.0.113.20)"
expect "resolving again allows it again" "203.0.113.20" "$(lookup other.restart.test)"
expect "and it answers" "200 OK" "$(fetch 203.0.113.20)"

"$FORKLET" delete web >/dev/null
"$FORKLET" wait web --for=Deleted --timeout=120 >/dev/null || bad "web deleted"
stop_daemon
echo "# $FAILS failure(s)"
[ $FAILS -eq 0 ]
