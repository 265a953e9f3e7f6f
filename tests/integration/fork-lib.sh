#!/bin/bash
# SPDX-License-Identifier: MIT
# Shared by the fork-*.sh integration tests: a temp node (stateDir/runDir under /tmp), forkletd
# start/stop, teardown of every QEMU the test's forkletd started, and small status helpers.
# Source it after setting FORKLETD, FORKLET; it sets T, IMG, SRC and the EXIT trap.
set -u

SRC=${FORKLET_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
IMG=${FORKLET_IMAGE_DIR:-}
T=/tmp/fk-fork-$$
DPID=

skip() { echo "SKIP: $*" >&2; exit 77; }
fail() {
        echo "FAIL: $*" >&2
        [ -f "$T/forkletd.log" ] && { echo "--- forkletd.log (tail)" >&2; tail -n 40 "$T/forkletd.log" >&2; }
        exit 1
}

[ "$(id -u)" = 0 ] || skip "needs root"
[ -n "$IMG" ] && [ -f "$IMG/vmlinuz" ] && [ -f "$IMG/workspace.img" ] ||
        skip "guest image missing in '$IMG' (cmake --build BUILD --target guest-image)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
command -v qemu-img >/dev/null || skip "qemu-img not installed"

# The netns prefix forkletd uses for this node: "fk" + 24 bits of FNV-1a of stateDir + "-".
netns_prefix() {
        local s=$T/state h=2166136261 i c
        for ((i = 0; i < ${#s}; i++)); do
                printf -v c '%d' "'${s:i:1}"
                h=$((((h ^ c) * 16777619) & 0xffffffff))
        done
        printf 'fk%06x-' $((h & 0xffffff))
}

fk_cleanup() {
        local p f n pre
        [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
        for p in $(ls /proc | grep -E '^[0-9]+$'); do
                # only a QEMU of this test (its command line names our run dir)
                grep -qs "$T/run" "/proc/$p/cmdline" && kill -9 "$p" 2>/dev/null
        done
        sleep 0.2
        # session networks outlive forkletd (adopted on restart): remove this node's netns
        # (the veth's host end and the nft tables inside go with it)
        pre=$(netns_prefix)
        for n in $(ip netns list 2>/dev/null | awk '{print $1}'); do
                case "$n" in "$pre"*) ip netns delete "$n" 2>/dev/null ;; esac
        done
        # session cgroups go with their sessions (or their killed QEMUs); the parent is ours
        for _ in $(seq 40); do
                for p in /sys/fs/cgroup/*/fk-test-fork-$$/* /sys/fs/cgroup/*/fk-test-fork-$$ \
                        /sys/fs/cgroup/fk-test-fork-$$/* /sys/fs/cgroup/fk-test-fork-$$; do
                        [ -d "$p" ] && rmdir "$p" 2>/dev/null
                done
                ls -d /sys/fs/cgroup/*/fk-test-fork-$$ /sys/fs/cgroup/fk-test-fork-$$ \
                        >/dev/null 2>&1 || break
                sleep 0.25
        done
        # the session networks forkletd made for this node (netns, host veths, NAT tables)
        [ -f "$T/node.yaml" ] && "$FORKLETD" --config "$T/node.yaml" --remove-networks >/dev/null 2>&1
        [ -n "${FORKLET_TEST_KEEP:-}" ] && echo "kept $T" >&2 || rm -rf "$T"
}
trap fk_cleanup EXIT

mkdir -p "$T/state" "$T/run" "$T/manifests"
cat >"$T/node.yaml" <<EOT
apiVersion: forklet.dev/v1alpha1
kind: NodeConfig
nodeName: test-$$
stateDir: $T/state
runDir: $T/run
accel: ${FORKLET_TEST_ACCEL:-tcg}
cgroupParent: fk-test-fork-$$
manifestDir: $T/manifests
api: {socket: $T/run/api.sock}
sizeClasses:
  - {name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1024}
images:
  - {name: minimal, dir: $IMG}
EOT
export FORKLET_SOCKET=$T/run/api.sock

start_daemon() {
        "$FORKLETD" --config "$T/node.yaml" --log-level debug >>"$T/forkletd.log" 2>&1 &
        DPID=$!
        for _ in $(seq 100); do
                "$FORKLET" get sessions >/dev/null 2>&1 && return 0
                kill -0 "$DPID" 2>/dev/null || fail "forkletd exited at start"
                sleep 0.1
        done
        fail "forkletd did not answer on $FORKLET_SOCKET within 10 s"
}

stop_daemon() {
        kill "$DPID" && wait "$DPID"
        DPID=
}

# field NAME KEY: first scalar value of "KEY" in `get session NAME -o json`
field() {
        "$FORKLET" get session "$1" -o json | sed -n "s/^ *\"$2\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" | head -n1
}

# session NAME [YAML lines for spec...]: writes $T/NAME.yaml and applies it
session() {
        local name=$1
        shift
        {
                printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: %s}\n' "$name"
                printf 'spec:\n  sizeClass: small\n  image: minimal\n'
                for l in "$@"; do printf '  %s\n' "$l"; done
        } >"$T/$name.yaml"
        "$FORKLET" apply -f "$T/$name.yaml" >/dev/null || fail "apply $name"
}

# sh NAME SCRIPT: runs sh -c SCRIPT in the guest, prints stdout
gsh() {
        "$FORKLET" exec "$1" -- sh -c "$2"
}

# gone_within SECONDS PATH...: the paths disappear
gone_within() {
        local s=$1 i p left
        shift
        for i in $(seq $((s * 4))); do
                left=0
                for p in "$@"; do [ -e "$p" ] && left=1; done
                [ $left = 0 ] && return 0
                sleep 0.25
        done
        return 1
}
