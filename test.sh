#!/usr/bin/env bash
# Quick start, part 2: installs what is missing, builds everything with -j2 and runs the whole test
# suite through ctest. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")"
./deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure --timeout 900
