#!/bin/bash
# SPDX-License-Identifier: MIT
# The "debian" image through forkletd + forklet: boots from its read-only root disk, python3,
# git and curl run, the root is writable (tmpfs overlay) and /workspace is still the session's
# disk. The image is built on demand (scripts/build-image-debian.sh), never in CI: without it
# this test skips (77).
# Usage: agent-debian.sh FORKLETD FORKLET   (root; FORKLET_DEBIAN_IMAGE_DIR overrides the dir)
set -u

FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
IMG=${FORKLET_DEBIAN_IMAGE_DIR:-${FORKLET_BINARY_DIR:-build}/images/debian}
T=/tmp/fk-deb-$$
DPID=

skip() { echo "SKIP: $*" >&2; exit 77; }
fail() {
        echo "FAIL: $*" >&2
        [ -f "$T/forkletd.log" ] && { echo "--- forkletd.log (tail)" >&2; tail -n 20 "$T/forkletd.log" >&2; }
        exit 1
}

[ "$(id -u)" = 0 ] || skip "needs root"
[ -f "$IMG/rootfs.img" ] && [ -f "$IMG/vmlinuz" ] ||
        skip "debian image not built in '$IMG' (scripts/build-image-debian.sh; not part of CI)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"

cleanup() {
        local p f
        [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
        for f in "$T"/run/sessions/*/vm.json; do
                [ -f "$f" ] || continue
                p=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$f")
                [ -n "$p" ] && grep -qs "$T/run" "/proc/$p/cmdline" && kill -9 "$p" 2>/dev/null
        done
        # the session networks forkletd made for this node (netns, host veths, NAT tables)
        [ -f "$T/node.yaml" ] && "$FORKLETD" --config "$T/node.yaml" --remove-networks >/dev/null 2>&1
        rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$T/state" "$T/run" "$T/manifests"
cat >"$T/node.yaml" <<EOF2
apiVersion: forklet.dev/v1alpha1
kind: NodeConfig
nodeName: deb-$$
stateDir: $T/state
runDir: $T/run
accel: ${FORKLET_TEST_ACCEL:-tcg}
manifestDir: $T/manifests
api: {socket: $T/run/api.sock}
sizeClasses:
  - {name: medium, vcpus: 1, memoryMiB: 512, cpu: 1.0, pids: 1024}
images:
  - {name: debian, dir: $IMG}
EOF2
export FORKLET_SOCKET=$T/run/api.sock
"$FORKLETD" --config "$T/node.yaml" --log-level debug >>"$T/forkletd.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do
        "$FORKLET" get sessions >/dev/null 2>&1 && break
        sleep 0.1
done
cat >"$T/deb.yaml" <<EOF2
apiVersion: forklet.dev/v1alpha1
kind: Session
metadata: {name: deb}
spec: {sizeClass: medium, image: debian}
EOF2
"$FORKLET" apply -f "$T/deb.yaml" >/dev/null || fail "apply"
"$FORKLET" wait deb --for=Running --timeout=300 || fail "deb not Running"
x() { "$FORKLET" exec deb -- "$@"; }
grep -q bookworm <<<"$(x cat /etc/os-release)" || fail "not Debian 12: $(x cat /etc/os-release)"
[ "$(x python3 -c 'print(6 * 7)')" = 42 ] || fail "python3"
x git --version | grep -q "^git version" || fail "git"
x curl --version | grep -q "^curl " || fail "curl"
x sh -c 'echo hi > /etc/forklet-test && cat /etc/forklet-test' | grep -qx hi || fail "root not writable"
x sh -c 'grep " /workspace " /proc/mounts' | grep -q ext4 || fail "/workspace not mounted"
x sh -c 'cd /workspace && git init -q repo && cd repo && echo x > f && git add f &&
        git -c user.email=a@b -c user.name=t commit -qm one && git log --oneline' | grep -q one ||
        fail "git commit in /workspace"
"$FORKLET" delete deb >/dev/null || fail "delete"
echo "PASS"
