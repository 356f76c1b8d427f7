#!/usr/bin/env bash
# Installs ONNX Runtime, the version deploy/onnxruntime-version pins, from PyPI for Debian's
# /usr/bin/python3 (or FUSOR_PEER_PYTHON): the peer Fusor is measured against (bench/peers:
# peer_bench's ort_runner.py, profile.py) and the Python package's parity tests' reference
# (tests/python, bench/python_onnxruntime_parity.py). deploy/install-deps.sh runs it.
# --no-deps keeps apt's NumPy and protobuf in place: importing and running onnxruntime needs NumPy
# alone (its other requirements serve its tools). Debian 12's NumPy (1.24) must meet the pinned
# wheel's own NumPy requirement: check it when the pin moves.
# Idempotent: when the pinned version imports it exits without touching the network. --check only
# tells (exit 0: installed, 1: not). Must run as root (or via sudo) when it installs.
set -euo pipefail

version="$(< "$(dirname "$0")/onnxruntime-version")"
python="${FUSOR_PEER_PYTHON:-/usr/bin/python3}"
installed() {
  "$python" -c "import onnxruntime, sys; sys.exit(onnxruntime.__version__ != '$version')" \
    2>/dev/null
}
if [ "${1:-}" = "--check" ]; then
  installed
  exit
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--check]" >&2
  exit 2
fi
if installed; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-peers: installing onnxruntime==$version for $python" >&2
$SUDO "$python" -m pip install -q --break-system-packages --no-deps --no-cache-dir \
  "onnxruntime==$version"
