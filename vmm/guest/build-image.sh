#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the default "minimal" guest image: Debian's kernel, a gzip cpio initramfs with
# busybox-static (its applets as symlinks), bash-static as /bin/sh, forklet-tools as pgrep,
# pkill, timeout and wget, the virtio/ext4 modules (load order in /lib/modules/forklet.order)
# and the static forklet agent (also /init), plus a 1 GiB sparse ext4 workspace image.
# Usage: build-image.sh OUTDIR AGENT_BINARY TOOLS_BINARY. Rebuilds only when an input's hash
# changes.
set -eu

if [ $# -ne 3 ]; then
        echo "usage: $0 OUTDIR AGENT_BINARY TOOLS_BINARY" >&2
        exit 2
fi
OUTDIR=$1
AGENT=$2
TOOLS=$3
SCRIPT=$(readlink -f "$0")
# Wanted modules, in load order; each is expanded with its dependencies from modules.dep.
# virtio_balloon (after virtio): forkletd inflates the balloon to take back the guest's free
# memory (docs/fork-engine.md, "Memory back to the host").
MODULES="virtio_ring virtio virtio_mmio failover net_failover virtio_net virtio_console
 virtio_blk virtio_balloon crc16 crc32c_generic mbcache jbd2 ext4 overlay"

die() {
        echo "build-image.sh: $*" >&2
        exit 1
}

for tool in apt-cache apt-get dpkg-deb depmod modprobe cpio gzip mkfs.ext4 sha256sum; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run scripts/install-deps.sh)"
done
[ -x "$AGENT" ] || die "agent binary $AGENT is not executable"
[ -x "$TOOLS" ] || die "tools binary $TOOLS is not executable"
[ -x /bin/busybox ] || die "/bin/busybox missing (install busybox-static)"
[ -x /bin/bash-static ] || die "/bin/bash-static missing (install bash-static)"
file_is_static() { ! LC_ALL=C readelf -l "$1" 2>/dev/null | grep -q 'INTERP'; }
file_is_static /bin/busybox || die "/bin/busybox is dynamic (install busybox-static)"
file_is_static "$TOOLS" || die "$TOOLS is not a static binary"

mkdir -p "$OUTDIR"
OUTDIR=$(readlink -f "$OUTDIR")
CACHE=$(dirname "$OUTDIR")/cache
mkdir -p "$CACHE"

# The kernel package linux-image-amd64 depends on, e.g. linux-image-6.1.0-56-amd64.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
if [ -z "$KPKG" ]; then
        # No package lists (apt-get update not run): fall back to a cached download.
        KDEB=$(ls "$CACHE"/linux-image-[0-9]*_amd64.deb 2>/dev/null | sort | tail -n 1 || true)
        [ -n "$KDEB" ] || die "cannot resolve linux-image-amd64 (run apt-get update)"
        KPKG=$(dpkg-deb -f "$KDEB" Package)
fi
KVER=${KPKG#linux-image-}
KDEB=$(ls "$CACHE"/"$KPKG"_*_amd64.deb 2>/dev/null | sort | tail -n 1 || true)
if [ -z "$KDEB" ]; then
        echo "build-image.sh: downloading $KPKG" >&2
        (cd "$CACHE" && apt-get download "$KPKG" >/dev/null 2>&1) || die "apt-get download $KPKG failed"
        KDEB=$(ls "$CACHE"/"$KPKG"_*_amd64.deb | sort | tail -n 1)
fi

BUSYBOX_VER=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || /bin/busybox | head -n 1)
STAMP=$( (
        sha256sum "$SCRIPT" "$AGENT" "$TOOLS" /bin/bash-static | cut -d' ' -f1
        echo "$BUSYBOX_VER"
        echo "$KVER"
        basename "$KDEB"
) | sha256sum | cut -d' ' -f1)
if [ -f "$OUTDIR/.stamp" ] && [ "$(cat "$OUTDIR/.stamp")" = "$STAMP" ] &&
        [ -f "$OUTDIR/vmlinuz" ] && [ -f "$OUTDIR/initrd.img" ] && [ -f "$OUTDIR/image.json" ] &&
        [ -f "$OUTDIR/workspace.img" ]; then
        echo "build-image.sh: $OUTDIR is up to date" >&2
        exit 0
fi

WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

dpkg-deb -x "$KDEB" "$WORK/kernel"
[ -f "$WORK/kernel/boot/vmlinuz-$KVER" ] || die "no vmlinuz-$KVER in $KDEB"
depmod -b "$WORK/kernel" "$KVER"

ROOT=$WORK/root
mkdir -p "$ROOT/bin" "$ROOT/sbin" "$ROOT/etc" "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/run" \
        "$ROOT/tmp" "$ROOT/root" "$ROOT/workspace" "$ROOT/usr/bin" "$ROOT/usr/sbin" \
        "$ROOT/lib/modules/$KVER"
cp /bin/busybox "$ROOT/bin/busybox"
# /bin/sh is bash: busybox's ash runs its own applet for any applet name before looking at
# PATH, so its broken wget -T (see vmm/guest/tools/wget.c) would win over the fixed one.
cp /bin/bash-static "$ROOT/bin/bash"
ln -s bash "$ROOT/bin/sh"
cp "$TOOLS" "$ROOT/usr/bin/forklet-tools"
chmod 0755 "$ROOT/bin/bash" "$ROOT/usr/bin/forklet-tools"
for tool in pgrep pkill timeout wget; do
        ln -s forklet-tools "$ROOT/usr/bin/$tool"
done
for applet in $(/bin/busybox --list-full); do
        case "$applet" in
        bin/busybox | linuxrc | init | sbin/init) continue ;;
        esac
        [ -e "$ROOT/$applet" ] || [ -L "$ROOT/$applet" ] || ln -s /bin/busybox "$ROOT/$applet"
done
cp "$AGENT" "$ROOT/sbin/forklet-agent"
chmod 0755 "$ROOT/sbin/forklet-agent"
# The agent binary is multi-call: as PID 1 it is the init.
ln -s /sbin/forklet-agent "$ROOT/init"
echo forklet >"$ROOT/etc/hostname"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$ROOT/etc/passwd"
printf 'root:x:0:\n' >"$ROOT/etc/group"
# Names: /etc/hosts first, then DNS (the init writes resolv.conf from forklet.dns=); only the
# files and dns sources, which static glibc has built in (no NSS module is ever loaded).
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n' \
        >"$ROOT/etc/nsswitch.conf"

# Resolve each module's dependencies in load order, dedup, copy the .ko files.
ORDER=$ROOT/lib/modules/forklet.order
: >"$ORDER"
for m in $MODULES; do
        modprobe -d "$WORK/kernel" -S "$KVER" --show-depends "$m" |
                sed -n 's/^insmod \([^ ]*\) *.*$/\1/p'
done | while read -r ko; do
        rel=${ko#"$WORK/kernel/lib/modules/$KVER/"}
        grep -qx "$rel" "$ORDER" && continue
        mkdir -p "$(dirname "$ROOT/lib/modules/$KVER/$rel")"
        cp "$ko" "$ROOT/lib/modules/$KVER/$rel"
        echo "$rel" >>"$ORDER"
done
for m in $MODULES; do
        grep -q "/$m.ko" "$ORDER" || die "module $m not found in $KPKG"
done

# newc cpio with every file owned by root, without needing root: no device nodes (the init
# mounts devtmpfs before opening /dev/console).
(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
        gzip -9 >"$WORK/initrd.img"

cp "$WORK/kernel/boot/vmlinuz-$KVER" "$WORK/vmlinuz"
printf '{"name":"minimal","kernel":"vmlinuz","initrd":"initrd.img","kernelVersion":"%s","workspace":"workspace.img"}\n' \
        "$KVER" >"$WORK/image.json"

if [ ! -f "$OUTDIR/workspace.img" ]; then
        mkdir "$WORK/empty"
        truncate -s 1G "$WORK/workspace.img"
        mkfs.ext4 -q -F -L workspace -d "$WORK/empty" "$WORK/workspace.img"
        mv "$WORK/workspace.img" "$OUTDIR/workspace.img"
fi
for f in vmlinuz initrd.img image.json; do
        mv "$WORK/$f" "$OUTDIR/$f"
done
echo "$STAMP" >"$OUTDIR/.stamp"
echo "build-image.sh: built $OUTDIR (kernel $KVER)" >&2
