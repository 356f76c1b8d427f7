#!/usr/bin/env bash
# Installs the peer bench's ONNX Runtime (bench/peers/package.json: onnxruntime-node, pinned with
# package-lock.json) into bench/peers/node_modules. `--ignore-scripts`: the package's install
# script downloads a GPU build, which fails on CPU-only machines; the CPU binary the bench uses
# ships inside the package. Idempotent: skips the install when the pinned version is present.
set -euo pipefail

# Node.js (with npm) is on every machine of this kind; Debian's own npm package conflicts with the
# nodesource nodejs these machines carry, so it is not installed from here.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-peers: Node.js and npm are needed for the peer bench (https://nodejs.org)" >&2
  exit 1
fi
cd "$(dirname "$0")/../bench/peers"
want=$(node -p "require('./package.json').dependencies['onnxruntime-node']")
have=$(node -p "try { require('./node_modules/onnxruntime-node/package.json').version } catch (e) { '' }")
if [ "$have" = "$want" ]; then
  exit 0
fi
npm ci --ignore-scripts --no-audit --no-fund
