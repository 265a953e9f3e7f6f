#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: tests/docs/install-check.sh BUILD_DIR
# `cmake --install BUILD_DIR --prefix TMP` into a fresh temporary prefix, then checks that the
# binaries, the systemd unit, the example config, the man pages and the docs are where the docs
# say (docs/operations.md, "Installing") and that the installed binaries run. The prefix is
# removed on exit, also on failure.
set -u
build=${1:?usage: install-check.sh BUILD_DIR}
command -v cmake >/dev/null 2>&1 || { echo "SKIP: cmake not found" >&2; exit 77; }
prefix=$(mktemp -d /tmp/fk-install-check.XXXXXX) || exit 1
# cmake --install rewrites BUILD_DIR/install_manifest.txt: keep a real install's copy.
manifest=$build/install_manifest.txt
saved=
if [ -f "$manifest" ]; then
        saved=$prefix.manifest
        cp "$manifest" "$saved" || exit 1
fi
restore() {
        rm -rf "$prefix"
        if [ -n "$saved" ]; then
                mv "$saved" "$manifest"
        else
                rm -f "$manifest"
        fi
}
trap restore EXIT
trap 'exit 1' INT TERM
if ! out=$(cmake --install "$build" --prefix "$prefix" 2>&1); then
        printf '%s\n' "$out" >&2
        echo "FAIL: cmake --install $build --prefix $prefix" >&2
        exit 1
fi
fails=0
for f in sbin/forkletd bin/forklet bin/forklet-scheduler lib/systemd/system/forkletd.service \
        etc/forklet/node.yaml.example share/man/man1/forklet.1 share/man/man5/forklet-session.5 \
        share/man/man8/forkletd.8 share/doc/forklet/README.md share/doc/forklet/docs/README.md \
        share/doc/forklet/docs/design.md share/doc/forklet/examples/hello.yaml; do
        [ -s "$prefix/$f" ] || { echo "FAIL: not installed: $f" >&2; fails=$((fails + 1)); }
done
for b in sbin/forkletd bin/forklet bin/forklet-scheduler; do
        [ -x "$prefix/$b" ] && "$prefix/$b" --help >/dev/null 2>&1 ||
                { echo "FAIL: $b --help did not run" >&2; fails=$((fails + 1)); }
done
grep -q "^ExecStart=.*/forkletd --config " "$prefix/lib/systemd/system/forkletd.service" ||
        { echo "FAIL: forkletd.service has no ExecStart of forkletd" >&2; fails=$((fails + 1)); }
[ $fails -eq 0 ] || exit 1
echo "ok: installed into $prefix ($(find "$prefix" -type f | wc -l) files)"
