#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the "debian" guest image, the python image (the test suite's image-debian fixture runs
# it; it downloads ~150 MB of Debian packages and takes a minute or two): a debootstrap of Debian 12 (bookworm, minbase) with python3, git,
# curl and ca-certificates, the forklet agent and the kernel modules, as a read-only ext4
# rootfs.img (the guest runs it under an overlay whose writable layer is on the workspace disk).
# The kernel and initrd (init + agent + modules) are the minimal image's, so build that first.
# Usage (root): scripts/build-image-debian.sh [MINIMAL_DIR [OUT_DIR]]
#   default MINIMAL_DIR build/images/minimal, OUT_DIR build/images/debian.
#   MIRROR=URL overrides the Debian mirror (default: the one apt on this host uses).
set -eu

SRC=$(cd "$(dirname "$0")/.." && pwd)
MINIMAL=$(readlink -f "${1:-$SRC/build/images/minimal}")
OUT=${2:-$SRC/build/images/debian}
SUITE=bookworm
PACKAGES=python3,git,curl,ca-certificates

die() {
        echo "build-image-debian.sh: $*" >&2
        exit 1
}

[ "$(id -u)" = 0 ] || die "needs root (debootstrap chroots)"
command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
for tool in mkfs.ext4 cpio gzip du; do
        command -v "$tool" >/dev/null || die "$tool not found (run scripts/install-deps.sh)"
done
for f in vmlinuz initrd.img image.json workspace.img; do
        [ -f "$MINIMAL/$f" ] ||
                die "$MINIMAL/$f missing: build the minimal image first (cmake --build build --target guest-image)"
done

# The mirror apt already uses here (deb822 .sources or a classic sources.list line).
if [ -z "${MIRROR:-}" ]; then
        MIRROR=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
                awk '/^URIs:/ { u = $2 } /^Suites:/ && / '"$SUITE"'( |$)/ && u !~ /security/ { print u; exit }')
fi
if [ -z "${MIRROR:-}" ]; then
        MIRROR=$(grep -hs "^deb .* $SUITE " /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
                grep -v security | awk '{ print $2; exit }')
fi
[ -n "${MIRROR:-}" ] || die "no Debian mirror found in the apt sources; set MIRROR=URL"

mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
WORK=$(mktemp -d "$(dirname "$OUT")/debian-build.XXXXXX")
cleanup() {
        # debootstrap may leave /proc or /sys mounted inside the target on failure.
        for m in proc sys dev/pts dev; do
                mountpoint -q "$WORK/root/$m" 2>/dev/null && umount -l "$WORK/root/$m"
        done
        rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ROOT=$WORK/root
echo "build-image-debian.sh: debootstrap $SUITE (minbase + $PACKAGES)" >&2
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1 || {
        tail -n 20 "$WORK/debootstrap.log" >&2
        die "debootstrap failed"
}
rm -rf "$ROOT/var/cache/apt/archives"/*.deb "$ROOT/var/lib/apt/lists"/*

# The agent and the modules come from the minimal initrd, so both images run the same agent
# against the same kernel.
mkdir -p "$WORK/initrd"
(cd "$WORK/initrd" && gzip -dc "$MINIMAL/initrd.img" | cpio -id --quiet)
install -m 0755 "$WORK/initrd/sbin/forklet-agent" "$ROOT/sbin/forklet-agent"
mkdir -p "$ROOT/lib/modules" "$ROOT/workspace"
cp -a "$WORK/initrd/lib/modules/." "$ROOT/lib/modules/"
echo forklet >"$ROOT/etc/hostname"

# Size: the tree plus a quarter, at least 64 MiB of slack (the rootfs is mounted read-only).
KIB=$(du -sk "$ROOT" | cut -f1)
SIZE=$((KIB + KIB / 4 + 65536))
truncate -s "${SIZE}K" "$WORK/rootfs.img"
mkfs.ext4 -q -F -L forklet-root -d "$ROOT" "$WORK/rootfs.img"

KVER=$(sed -n 's/.*"kernelVersion":"\([^"]*\)".*/\1/p' "$MINIMAL/image.json")
printf '{"name":"debian","suite":"%s","packages":"%s","kernel":"vmlinuz","initrd":"initrd.img","kernelVersion":"%s","rootfs":"rootfs.img","workspace":"workspace.img"}\n' \
        "$SUITE" "$PACKAGES" "$KVER" >"$WORK/image.json"
cp "$MINIMAL/vmlinuz" "$MINIMAL/initrd.img" "$WORK/"
cp --sparse=always "$MINIMAL/workspace.img" "$WORK/"
for f in rootfs.img vmlinuz initrd.img workspace.img image.json; do
        mv "$WORK/$f" "$OUT/$f"
done
echo "build-image-debian.sh: built $OUT ($(du -sh "$OUT/rootfs.img" | cut -f1) rootfs, kernel $KVER)" >&2
