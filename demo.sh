#!/usr/bin/env bash
# Quick start, part 1: installs what is missing, builds the fusor CLI, and runs Fusor's main job on
# the bundled ResNet-18 with embedded defaults. Extra arguments replace the default model command,
# e.g. ./demo.sh inspect models/bert_base_encoder.onnx --json
set -euo pipefail
cd "$(dirname "$0")"
./deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target fusor
if [ $# -eq 0 ]; then
  set -- inspect models/resnet18.onnx
fi
exec ./build/client/fusor "$@"
