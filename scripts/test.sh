#!/bin/sh
# SPDX-License-Identifier: MIT
# The whole test suite, as CI runs it: dependencies, format check, -Werror build, guest image,
# clang-tidy, unit + integration tests (ctest, in parallel), unit tests again under ASan+UBSan,
# and a short fuzz run (both built in the background during ctest). Each phase prints its wall
# time; a table of them ends the output.
# Run as root on Debian 12: integration tests boot real microVMs and create netns/cgroups.
# Knobs: FORKLET_TEST_JOBS (ctest -j, default nproc + 1: the integration tests spend much of
# their time waiting on guests), FORKLET_FUZZ_SECONDS (default 30, per fuzz target).
set -eu
cd "$(dirname "$0")/.."
jobs=${FORKLET_TEST_JOBS:-$(($(nproc) + 1))}
times=$(mktemp /tmp/fk-test-times.XXXXXX)
trap 'rm -f "$times"' EXIT
# a signal ends the script through exit, which runs the EXIT trap (sh runs none of its own)
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
t_all=$(date +%s)
t0=$t_all
phase() { # phase NAME: ends the running phase (its time goes to the table), starts NAME
        t=$(date +%s)
        [ -z "${cur:-}" ] || printf '%-28s %5d s\n' "$cur" $((t - t0)) >>"$times"
        cur=$1 t0=$t
        [ -z "$cur" ] || echo "== $cur"
}
status=0

phase "dependencies"
./scripts/install-deps.sh

phase "format check"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

phase "build (-Werror), guest image"
./scripts/build.sh

# The ASan+UBSan and fuzz builds need only the sources: they compile in the background (niced,
# the tests come first) while clang-tidy and ctest run; their logs are shown if they fail.
logs=build/test-logs
mkdir -p "$logs"
bg_build() { # bg_build NAME CMD...: runs CMD in the background, its time into $logs/NAME.time
        name=$1
        shift
        (
                s=$(date +%s)
                if nice -n 10 "$@" >"$logs/$name.log" 2>&1; then rc=0; else rc=$?; fi
                echo $(($(date +%s) - s)) >"$logs/$name.time"
                exit $rc
        ) &
}
bg_build asan sh -c 'cmake -S . -B build-asan -DFORKLET_SANITIZE=ON -DFORKLET_WERROR=ON \
        -DCMAKE_BUILD_TYPE=Debug && cmake --build build-asan -j"$(nproc)"'
asan_pid=$!
bg_build fuzz tests/fuzz/run-smoke.sh build-fuzz 0
fuzz_pid=$!
# bg_wait NAME PID: 0 when the background build succeeded; else prints its log
bg_wait() {
        if wait "$2"; then
                echo "($1 build: $(cat "$logs/$1.time") s in the background)"
                printf '%-28s %5s s\n' "  ($1 build, overlapped)" "$(cat "$logs/$1.time")" >>"$times"
                return 0
        fi
        echo "$1 build failed:" >&2
        cat "$logs/$1.log" >&2
        return 1
}

phase "clang-tidy"
./scripts/tidy.sh build || status=1

phase "ctest -j$jobs (unit, integration)"
ctest --test-dir build --output-on-failure --timeout 900 -j"$jobs" || status=1

phase "ASan+UBSan unit tests"
if bg_wait asan $asan_pid; then
        ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
                ctest --test-dir build-asan -L unit --output-on-failure -j"$jobs" || status=1
else
        status=1
fi

phase "fuzz smoke run"
if bg_wait fuzz $fuzz_pid; then
        tests/fuzz/run-smoke.sh build-fuzz "${FORKLET_FUZZ_SECONDS:-30}" || status=1
else
        status=1
fi
phase ""
echo "== wall time per phase"
cat "$times"
printf '%-28s %5d s\n' "total" $(($(date +%s) - t_all))
exit $status
