#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs every Debian package forklet's build, guest image and tests need.
set -eu
if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps.sh: run as root (apt-get needs it)" >&2
        exit 1
fi
export DEBIAN_FRONTEND=noninteractive
PKGS="build-essential cmake pkg-config git clang clang-format clang-tidy libclang-rt-14-dev
 libyaml-dev libjansson-dev libmicrohttpd-dev libgnutls28-dev libcmocka-dev libcurl4-openssl-dev
 libnl-3-dev libnl-route-3-dev libnftnl-dev libmnl-dev
 qemu-system-x86 qemu-utils e2fsprogs busybox-static cpio gzip xz-utils zstd kmod
 iproute2 iputils-ping nftables procps psmisc util-linux etcd-server etcd-client jq strace
 prometheus curl dnsmasq-base debootstrap acl openssl groff-base bash-static python3
 fonts-dejavu-core chromium skopeo umoci docker-registry"
missing=""
for p in $PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
        apt-get update
        # shellcheck disable=SC2086
        apt-get install -y --no-install-recommends $missing
fi
# node and npm for the MCP SDK client test (tests/cli/mcp-sdk.sh). Only when node is
# absent: a node installed another way (a nodejs package that carries npm itself) conflicts
# with Debian's npm package.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        apt-get update
        apt-get install -y --no-install-recommends nodejs npm
fi
