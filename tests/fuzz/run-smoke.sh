#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: tests/fuzz/run-smoke.sh BUILD_DIR SECONDS   (SECONDS 0: configure and build only)
# Configures a clang build with FORKLET_FUZZ=ON in BUILD_DIR, builds the manifest and agent
# frame fuzzers and runs each for SECONDS on a copy of its seed corpus. Exits non-zero on a crash (the reproducer
# is left in BUILD_DIR as crash-*/leak-*/timeout-*). The two targets run at the same time.
set -eu

build=${1:?usage: run-smoke.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run-smoke.sh BUILD_DIR SECONDS}
src=$(cd "$(dirname "$0")/../.." && pwd)

cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DFORKLET_FUZZ=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target fuzz-manifest fuzz-agent-frames
[ "$seconds" != 0 ] || exit 0

work=$(mktemp -d /tmp/fk-fuzz-corpus.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/manifest" "$work/agent"
cp "$src"/tests/fuzz/corpus/* "$work/manifest"/
cp "$src"/tests/fuzz/corpus-agent/* "$work/agent"/

build_abs=$(cd "$build" && pwd)
# Both targets at once (one core each); each one's output is printed when both are done.
"$build_abs/tests/fuzz/fuzz-manifest" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
        -rss_limit_mb=2048 -dict="$src/tests/fuzz/manifest.dict" \
        -artifact_prefix="$build_abs/" -print_final_stats=1 "$work/manifest" >"$work/manifest.log" 2>&1 &
p1=$!
"$build_abs/tests/fuzz/fuzz-agent-frames" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$build_abs/" -print_final_stats=1 "$work/agent" \
        >"$work/agent.log" 2>&1 &
p2=$!
rc=0 r1=0 r2=0
wait $p1 || r1=1
wait $p2 || r2=1
for t in "manifest $r1 fuzz-manifest" "agent $r2 fuzz-agent-frames"; do
        set -- $t
        echo "--- $3"
        # all of a failed run's log (the crash report), the final stats of a clean one
        if [ "$2" = 1 ]; then cat "$work/$1.log"; rc=1; else tail -n 15 "$work/$1.log"; fi
done
exit $rc
