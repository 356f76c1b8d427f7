#!/usr/bin/env bash
# Quick start, part 1: installs what is missing, builds the fusor CLI, and runs Fusor's main job on
# the bundled MobileNetV2 with embedded defaults: tune it end to end (calibrate this CPU on first
# use, search, measure on this CPU, store the plan in the local tuning database; a second run is a
# cache hit). Extra arguments replace the default command,
# e.g. ./demo.sh tune models/bert_base_encoder.onnx, or ./demo.sh plan explain models/resnet18.onnx
set -euo pipefail
cd "$(dirname "$0")"
./deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target fusor
if [ $# -eq 0 ]; then
  set -- tune models/mobilenet_v2.onnx
fi
exec ./build/client/fusor "$@"
