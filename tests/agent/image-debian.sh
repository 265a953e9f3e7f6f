#!/bin/sh
# SPDX-License-Identifier: MIT
# Test fixture: builds the python image (build/images/debian: Debian 12 with python3, git, curl;
# scripts/build-image-debian.sh) unless the one there is newer than the script and the minimal
# image it takes its kernel, initrd and agent from. agent-debian and field-python need it.
# Usage: image-debian.sh   (root; FORKLET_BINARY_DIR, FORKLET_IMAGE_DIR from ctest)
set -eu
SRC=${FORKLET_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${FORKLET_BINARY_DIR:-$SRC/build}
MINIMAL=${FORKLET_IMAGE_DIR:-$BUILD/images/minimal}
OUT=$BUILD/images/debian
SCRIPT=$SRC/scripts/build-image-debian.sh

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (debootstrap)" >&2; exit 77; }
command -v debootstrap >/dev/null || { echo "FAIL: debootstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
fresh=1
for f in rootfs.img vmlinuz initrd.img workspace.img image.json; do
        [ -f "$OUT/$f" ] || fresh=0
done
if [ $fresh = 1 ]; then
        for dep in "$SCRIPT" "$MINIMAL/initrd.img" "$MINIMAL/vmlinuz"; do
                [ "$OUT/image.json" -nt "$dep" ] || fresh=0
        done
fi
if [ $fresh = 1 ]; then
        echo "image-debian: $OUT is up to date"
        exit 0
fi
start=$(date +%s)
"$SCRIPT" "$MINIMAL" "$OUT"
echo "image-debian: built $OUT in $(($(date +%s) - start)) s"
