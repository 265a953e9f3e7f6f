#!/bin/sh
# SPDX-License-Identifier: MIT
# clang-tidy over the project's C sources with a short list of checks, all of them errors.
# Usage: scripts/tidy.sh [BUILD_DIR]   (default build; configures it with compile commands)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
command -v clang-tidy >/dev/null || { echo "clang-tidy not installed (scripts/install-deps.sh)" >&2; exit 1; }
cmake -S . -B "$build" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
checks='-*,bugprone-assert-side-effect,bugprone-bool-pointer-implicit-conversion,bugprone-infinite-loop,bugprone-macro-repeated-side-effects,bugprone-misplaced-operator-in-strlen-in-alloc,bugprone-posix-return,bugprone-signed-char-misuse,bugprone-string-literal-with-embedded-nul,bugprone-suspicious-memset-usage,bugprone-suspicious-semicolon,bugprone-terminating-continue,bugprone-too-small-loop-variable,misc-redundant-expression'
# sources in the compile database: the libraries, daemons, CLI and tests
git ls-files '*.c' | xargs clang-tidy -p "$build" --quiet --checks="$checks" --warnings-as-errors='*' \
        --extra-arg=-Wno-unknown-warning-option
echo "clang-tidy: clean ($checks)"
