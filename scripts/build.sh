#!/bin/sh
# SPDX-License-Identifier: MIT
# Configures and builds forklet (warnings as errors) in ./build and builds the minimal guest image
# into build/images/minimal (cached: rebuilt only when its inputs change).
set -eu
cd "$(dirname "$0")/.."
cmake -S . -B build -DFORKLET_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
cmake --build build --target guest-image
