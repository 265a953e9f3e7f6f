#!/bin/bash
# SPDX-License-Identifier: MIT
# The "debian" image through forkletd + forklet: boots from its read-only root disk, python3,
# git and curl run, the root is writable (an overlay on the workspace disk) and /workspace is
# still the session's disk. The image-debian fixture builds the image (without it: skip, 77).
# Usage: agent-debian.sh FORKLETD FORKLET   (root; FORKLET_DEBIAN_IMAGE_DIR overrides the dir)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=deb
IMG=${FORKLET_DEBIAN_IMAGE_DIR:-${FORKLET_BINARY_DIR:-build}/images/debian}
FK_IMAGE_FILES="rootfs.img vmlinuz"
FK_IMAGE_HINT="debian image not built: scripts/build-image-debian.sh; not part of CI"
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

FK_CLASSES=("{name: medium, vcpus: 1, memoryMiB: 512, cpu: 1.0, pids: 1024}")
FK_IMAGES=("{name: debian, dir: $IMG}")
fk_node_config >"$T/node.yaml"
start_daemon
FK_SESSION_CLASS=medium FK_SESSION_IMAGE=debian session deb
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
