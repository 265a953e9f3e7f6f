#!/bin/sh
# SPDX-License-Identifier: MIT
# The whole test suite, as CI runs it: dependencies, format check, -Werror build, guest image,
# clang-tidy, unit + integration tests (ctest), unit tests again under ASan+UBSan, and a short fuzz run.
# Run as root on Debian 12: integration tests boot real microVMs and create netns/cgroups.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

echo "== format check"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

echo "== build (-Werror) and guest image"
./scripts/build.sh

echo "== clang-tidy (a short list of checks, as errors)"
status=0
./scripts/tidy.sh build || status=1

echo "== unit and integration tests"
ctest --test-dir build --output-on-failure --timeout 900 || status=1

echo "== unit tests under ASan+UBSan"
cmake -S . -B build-asan -DFORKLET_SANITIZE=ON -DFORKLET_WERROR=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$(nproc)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --test-dir build-asan -L unit --output-on-failure || status=1

echo "== fuzz smoke run"
if [ -x tests/fuzz/run-smoke.sh ]; then
        tests/fuzz/run-smoke.sh build-fuzz "${FORKLET_FUZZ_SECONDS:-30}" || status=1
fi
exit $status
