#!/bin/bash
# SPDX-License-Identifier: MIT
# Part of the test harness (sourced by harness.sh; functions only): a private etcd on free
# loopback ports under $T, killed by PID; etcdctl wrappers; bounded waits. Used by the cluster
# tests, api-tls and bench/cluster.sh. Needs: T (a directory the caller owns and removes), etcd +
# etcdctl (+ jq for most callers). cl_etcd_init sets CL_ETCD_URL; CL_ETCD_PID is the server.

# cl_free_port: a TCP port no socket uses, below the kernel's ephemeral range (an outgoing
# connection's local port there made etcd's bind fail: "address already in use"); random, so
# tests running at the same time do not walk the same sequence
cl_free_port() {
        local p lo=32768 span
        read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
        span=$((lo - 20000))
        [ "$span" -ge 1000 ] || span=30000
        for _ in $(seq 50); do
                p=$((20000 + RANDOM % span))
                ss -Htan "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
        done
        return 1
}

cl_etcd_init() {
        CL_ETCD_PID=
        export ETCDCTL_API=3
        CL_ETCD_CLIENT=$(cl_free_port) && CL_ETCD_PEER=$(cl_free_port) || return 1
        [ "$CL_ETCD_CLIENT" != "$CL_ETCD_PEER" ] || CL_ETCD_PEER=$((CL_ETCD_CLIENT + 1))
        CL_ETCD_URL=http://127.0.0.1:$CL_ETCD_CLIENT
        mkdir -p "$T/etcd"
}

# Starts etcd on the same ports and data dir every time; waits until it answers (20 s). Its
# first start, when another process took a port meanwhile, picks new ports (3 tries).
cl_etcd_start() {
        local first=1
        [ ! -d "$T/etcd/data" ] || first=0
        for _ in 1 2 3; do
                cl_etcd_start_once && return 0
                [ "$first" = 1 ] && grep -q 'address already in use' "$T/etcd/etcd.log" || return 1
                cl_etcd_stop
                rm -rf "$T/etcd/data"
                mv "$T/etcd/etcd.log" "$T/etcd/etcd-bind.log"
                cl_etcd_init || return 1
        done
        return 1
}

cl_etcd_start_once() {
        etcd --name fk --data-dir "$T/etcd/data" \
                --listen-client-urls "$CL_ETCD_URL" --advertise-client-urls "$CL_ETCD_URL" \
                --listen-peer-urls "http://127.0.0.1:$CL_ETCD_PEER" \
                --initial-advertise-peer-urls "http://127.0.0.1:$CL_ETCD_PEER" \
                --initial-cluster "fk=http://127.0.0.1:$CL_ETCD_PEER" >>"$T/etcd/etcd.log" 2>&1 &
        CL_ETCD_PID=$!
        for _ in $(seq 200); do
                cl_ctl endpoint health >/dev/null 2>&1 && return 0
                kill -0 "$CL_ETCD_PID" 2>/dev/null || break
                sleep 0.1
        done
        tail -n 20 "$T/etcd/etcd.log" >&2
        return 1
}

cl_etcd_stop() {
        [ -n "${CL_ETCD_PID:-}" ] || return 0
        kill "-${1:-TERM}" "$CL_ETCD_PID" 2>/dev/null
        wait "$CL_ETCD_PID" 2>/dev/null
        CL_ETCD_PID=
}

cl_ctl() { etcdctl --endpoints "$CL_ETCD_URL" --command-timeout=5s "$@"; }

# cl_wait SECONDS CMD...: runs CMD every 0.2 s until it succeeds; 1 on timeout (fk_wait).
cl_wait() { fk_wait "$@"; }
