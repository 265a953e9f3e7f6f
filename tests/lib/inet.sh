#!/bin/bash
# SPDX-License-Identifier: MIT
# Part of the test harness (sourced by harness.sh; functions only): the fake internet for the
# network tests that put forkletd behind one (net-forkletd, net-restart, guest-tools): a netns
# with HTTP hosts on TEST-NET addresses, reached only through the calling netns' uplink, and its
# DNS server. Call them inside the test's own `unshare -n`, after fk_setup; the test's
# fk_cleanup_extra calls net_cleanup. The servers' PIDs go to PIDS.

# net_cleanup NETNS...: the servers this library started, then the given netns
net_cleanup() {
        local p n
        for p in ${PIDS[@]+"${PIDS[@]}"}; do kill "$p" 2>/dev/null; done
        for n in "$@"; do ip netns del "$n" 2>/dev/null; done
}

# fake_internet INET UP PORTS ADDR...: a veth UP (192.0.2.1/29, this netns) to eth0 in the new
# netns INET (192.0.2.2/29); ADDRs on INET's loopback, routed here via 192.0.2.2 (203.0.113.0/24
# as a whole, others one by one); busybox httpd serving $T/www ("forklet-ok") on each of PORTS
# (comma-separated) in INET.
fake_internet() {
        local inet=$1 up=$2 ports=$3 a port
        shift 3
        mkdir -p "$T/www"
        echo forklet-ok >"$T/www/index.html"
        ip link set lo up
        ip netns add "$inet"
        ip link add "$up" type veth peer name eth0 netns "$inet"
        ip addr add 192.0.2.1/29 dev "$up"
        ip link set "$up" up
        ip route add 203.0.113.0/24 via 192.0.2.2
        ip -n "$inet" link set lo up
        ip -n "$inet" addr add 192.0.2.2/29 dev eth0
        for a in "$@"; do
                ip -n "$inet" addr add "$a/32" dev lo
                case $a in 203.0.113.*) ;; *) ip route add "$a/32" via 192.0.2.2 ;; esac
        done
        ip -n "$inet" link set eth0 up
        for port in ${ports//,/ }; do
                ip netns exec "$inet" busybox httpd -f -p "$port" -h "$T/www" &
                PIDS+=($!)
        done
}

# fake_dns INET RECORD-OPTION...: dnsmasq on 203.0.113.53:53 in INET answering only the given
# records (--address=/NAME/IP, --cname=..., ...), log in $T/dnsmasq.log
fake_dns() {
        local inet=$1
        shift
        ip netns exec "$inet" dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv \
                --no-hosts --user=root --listen-address=203.0.113.53 --bind-interfaces --port=53 \
                --pid-file="$T/dnsmasq.pid" "$@" 2>"$T/dnsmasq.log" &
        PIDS+=($!)
}
