#!/bin/bash
# SPDX-License-Identifier: MIT
# Checks the built minimal image (layout, module order, static agent, no device nodes, root
# ownership, sparse ext4 workspace, the tools: bash as /bin/sh, forklet-tools as pgrep/pkill/
# timeout/wget, busybox for the other applets, static /etc/hosts and nsswitch.conf) and that
# build-image.sh rebuilds only when an input changes.
# Env: FORKLET_IMAGE_DIR, FORKLET_BINARY_DIR, FORKLET_SOURCE_DIR. Exit 77: no image built.
set -u
IMG=${FORKLET_IMAGE_DIR:-}
AGENT=${FORKLET_BINARY_DIR:-}/vmm/guest/forklet-agent
TOOLS=${FORKLET_BINARY_DIR:-}/vmm/guest/tools/forklet-tools
SCRIPT=${FORKLET_SOURCE_DIR:-}/vmm/guest/build-image.sh
. "$(dirname "$0")/../lib/harness.sh"
[ -n "$IMG" ] && [ -f "$IMG/image.json" ] ||
        skip "no image in '$IMG' (cmake --build BUILD --target guest-image)"
fk_require_cmds cpio readelf dumpe2fs
fails=0
fail() { # counts and goes on (the harness's fail exits)
        echo "guest-image: FAIL: $*" >&2
        fails=$((fails + 1))
}
TMP=$(mktemp -d "$(dirname "$IMG")/guest-image-test.$$.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM

grep -q '"name":"minimal"' "$IMG/image.json" || fail "image.json name"
grep -q '"kernel":"vmlinuz"' "$IMG/image.json" && [ -s "$IMG/vmlinuz" ] || fail "kernel"
grep -q '"initrd":"initrd.img"' "$IMG/image.json" || fail "initrd name"
KVER=$(sed -n 's/.*"kernelVersion":"\([^"]*\)".*/\1/p' "$IMG/image.json")
[ -n "$KVER" ] || fail "kernelVersion missing"

zcat "$IMG/initrd.img" | cpio -itv --quiet >"$TMP/list" 2>/dev/null || fail "initrd is not a gzip cpio"
grep -q ' init -> /sbin/forklet-agent$' "$TMP/list" || fail "/init is not the agent"
grep -Eq '^-.* sbin/forklet-agent$' "$TMP/list" || fail "agent missing"
grep -Eq '^-.* bin/busybox$' "$TMP/list" || fail "busybox missing"
awk '$3 != "root" || $4 != "root"' "$TMP/list" | grep -q . && fail "entries not owned by root"
grep -Eq '^-.* bin/bash$' "$TMP/list" && grep -q ' bin/sh -> bash$' "$TMP/list" || fail "/bin/sh is not bash"
grep -Eq '^-.* usr/bin/forklet-tools$' "$TMP/list" || fail "forklet-tools missing"
for t in pgrep pkill timeout wget; do
        grep -q " usr/bin/$t -> forklet-tools\$" "$TMP/list" || fail "/usr/bin/$t is not forklet-tools"
done
for t in bin/ps usr/bin/nc sbin/ip bin/tar bin/gzip bin/vi bin/ash; do
        grep -q " $t -> /bin/busybox\$" "$TMP/list" || fail "$t is not a busybox applet link"
done
for f in etc/hosts etc/nsswitch.conf; do grep -Eq "^-.* $f\$" "$TMP/list" || fail "$f missing"; done
grep -Eq '^[cbp]' "$TMP/list" && fail "device nodes in the initramfs"

mkdir "$TMP/root"
(cd "$TMP/root" && zcat "$IMG/initrd.img" | cpio -id --quiet sbin/forklet-agent \
        lib/modules/forklet.order usr/bin/forklet-tools bin/bash etc/nsswitch.conf 2>/dev/null)
readelf -l "$TMP/root/sbin/forklet-agent" | grep -q INTERP && fail "agent is not static"
for b in usr/bin/forklet-tools bin/bash; do
        readelf -l "$TMP/root/$b" | grep -q INTERP && fail "$b is not static"
done
grep -qx 'hosts: files dns' "$TMP/root/etc/nsswitch.conf" || fail "nsswitch.conf hosts line"
ORDER=$TMP/root/lib/modules/forklet.order
pos() { grep -n "/$1.ko$" "$ORDER" | cut -d: -f1; }
for m in virtio_ring virtio virtio_mmio failover net_failover virtio_net virtio_console \
        virtio_blk virtio_balloon crc16 crc32c_generic mbcache jbd2 ext4; do
        [ -n "$(pos $m)" ] || fail "module $m not in forklet.order"
done
before() { [ "$(pos "$1")" -lt "$(pos "$2")" ] || fail "module $1 must load before $2"; }
before virtio_ring virtio
before virtio virtio_mmio
before failover net_failover
before net_failover virtio_net
before virtio virtio_console
before virtio virtio_blk
before virtio virtio_balloon
for d in crc16 mbcache jbd2 crc32c_generic; do before $d ext4; done
while read -r ko; do
        grep -q " lib/modules/$KVER/$ko$" "$TMP/list" || fail "$ko listed but not in the initrd"
done <"$ORDER"

dumpe2fs -h "$IMG/workspace.img" 2>/dev/null | grep -q 'Filesystem magic number' ||
        fail "workspace.img is not ext4"
[ "$(stat -c %s "$IMG/workspace.img")" -eq 1073741824 ] || fail "workspace.img is not 1 GiB"
[ "$(du -k "$IMG/workspace.img" | cut -f1)" -lt 102400 ] || fail "workspace.img is not sparse"

# Caching: a second run with the same inputs does nothing; a changed agent rebuilds.
if [ -x "$AGENT" ] && [ -x "$TOOLS" ] && [ -x "$SCRIPT" ]; then
        cp "$AGENT" "$TMP/agent"
        "$SCRIPT" "$TMP/out" "$TMP/agent" "$TOOLS" 2>"$TMP/log1" || fail "build: $(cat "$TMP/log1")"
        M1=$(stat -c %Y.%i "$TMP/out/initrd.img")
        "$SCRIPT" "$TMP/out" "$TMP/agent" "$TOOLS" 2>"$TMP/log2" || fail "rebuild failed"
        grep -q "up to date" "$TMP/log2" || fail "unchanged inputs rebuilt: $(cat "$TMP/log2")"
        [ "$(stat -c %Y.%i "$TMP/out/initrd.img")" = "$M1" ] || fail "initrd rewritten"
        printf 'x' >>"$TMP/agent"
        "$SCRIPT" "$TMP/out" "$TMP/agent" "$TOOLS" 2>"$TMP/log3" || fail "rebuild failed"
        grep -q "built" "$TMP/log3" || fail "changed agent did not rebuild: $(cat "$TMP/log3")"
else
        echo "guest-image: caching check skipped (no agent binary or script)" >&2
fi

echo "guest-image: $fails failures" >&2
[ $fails -eq 0 ]
