#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: tests/fuzz/run-smoke.sh BUILD_DIR SECONDS
# Configures a clang build with FORKLET_FUZZ=ON in BUILD_DIR, builds the manifest fuzzer and
# runs it for SECONDS on a copy of the seed corpus. Exits non-zero on a crash (the reproducer
# is left in BUILD_DIR as crash-*/leak-*/timeout-*).
set -eu

build=${1:?usage: run-smoke.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run-smoke.sh BUILD_DIR SECONDS}
src=$(cd "$(dirname "$0")/../.." && pwd)

cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DFORKLET_FUZZ=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target fuzz-manifest

work=$(mktemp -d /tmp/fk-fuzz-corpus.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
cp "$src"/tests/fuzz/corpus/* "$work"/

build_abs=$(cd "$build" && pwd)
"$build_abs/tests/fuzz/fuzz-manifest" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
        -rss_limit_mb=2048 -dict="$src/tests/fuzz/manifest.dict" \
        -artifact_prefix="$build_abs/" -print_final_stats=1 "$work"
