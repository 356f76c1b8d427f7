#!/usr/bin/env bash
# Installs Fusor's build and test dependencies from Debian 12's apt repositories, and ONNX Runtime
# (pinned) from PyPI for the Python package's parity tests.
# Idempotent: when everything is already installed it only checks (dpkg-query, an import) and
# exits, without touching the network. Must run as root (or via sudo) when something is missing.
# --fuzz also installs clang and libFuzzer with the sanitizer runtimes, for the fuzz harnesses of
# tests/fuzz (cmake -DFUSOR_FUZZ=ON; tests/fuzz/README.md).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev sqlite3
  libpqxx-dev  # the PostgreSQL plan store (db/postgres_plan_store.h)
  postgresql-15  # the tests start a real PostgreSQL server (tests/db/test_postgres.h)
  libspdlog-dev libfmt-dev
  libdnnl-dev
  libonnx-dev
  libonnx-testdata  # ONNX conformance models: the attribute sweep and the import fuzz seeds (tests/fuzz)
  libcli11-dev
  nlohmann-json3-dev
  libcpp-httplib-dev  # fusord's Prometheus /metrics listener (server/metrics_http.h)
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev   # libcrypto's SHA-256 (base/sha256.h); openssl makes the TLS tests' certificates
  openssl
  gnuplot-nox  # `fusor costmodel validate --plot` (the scatter plot in docs/costmodel.md)
  graphviz     # `fusor plan show --svg` (dot)
  python3 python3-onnx python3-numpy  # tools/fill_weights.py: filled models for the parity tests
  libonnx-testdata  # ONNX's backend test cases, run by tests/conformance
  python3-dev pybind11-dev python3-pytest  # the fusor Python package (python/) and its tests
)
# ONNX Runtime (the version deploy/onnxruntime-version pins) for the Python package's parity tests
# and the peer bench comes from PyPI into Debian's python3 (the one python/CMakeLists.txt builds and
# tests for), through deploy/install-peers.sh.
install_peers="$(dirname "$0")/install-peers.sh"
if [ "${1:-}" = "--fuzz" ]; then
  PACKAGES+=(clang-14 libfuzzer-14-dev libclang-rt-14-dev libomp-14-dev)
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--fuzz]" >&2
  exit 2
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ] && "$install_peers" --check; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$install_peers"
