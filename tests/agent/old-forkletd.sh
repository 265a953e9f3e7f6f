#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds forkletd and forklet of an older commit (default c7d70cd, the last one with the state
# layout before state.json) into OUT (default $FORKLET_BINARY_DIR/old-forkletd), once: a second
# call finds them built. The source comes from `git archive`, so the repository is not touched.
# Prints the directory holding agent/forkletd and cli/forklet. Exit 77 when git or that commit
# is not there (a shallow clone): the upgrade test then skips.
# Usage: old-forkletd.sh [OUT]
set -eu
REV=${FK_OLD_REV:-c7d70cd}
SRC=${FORKLET_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OUT=${1:-${FORKLET_BINARY_DIR:?FORKLET_BINARY_DIR or OUT}/old-forkletd}
B=$OUT/build

if [ -x "$B/agent/forkletd" ] && [ -x "$B/cli/forklet" ] && [ "$(cat "$OUT/rev" 2>/dev/null)" = "$REV" ]; then
        echo "$B"
        exit 0
fi
command -v git >/dev/null || { echo "SKIP: git not installed (needed to build forkletd $REV)" >&2; exit 77; }
git -C "$SRC" rev-parse -q --verify "$REV^{commit}" >/dev/null ||
        { echo "SKIP: commit $REV is not in $SRC (a shallow clone? git fetch --unshallow)" >&2; exit 77; }
rm -rf "$OUT"
mkdir -p "$OUT/src"
git -C "$SRC" archive "$REV" | tar -x -C "$OUT/src"
{
        cmake -S "$OUT/src" -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
                cmake --build "$B" -j"$(nproc)" --target forkletd forklet
} >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log" >&2; echo "FAIL: build of $REV" >&2; exit 1; }
echo "$REV" >"$OUT/rev"
echo "$B"
