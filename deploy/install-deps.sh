#!/usr/bin/env bash
# Installs Fusor's build and test dependencies from Debian 12's apt repositories, ONNX Runtime
# (pinned) from PyPI for the Python package's parity tests, and oneDNN (deploy/onednn.env: pinned,
# checksum-verified source) built into /opt/fusor/onednn-VERSION.
# Idempotent: when everything is already installed it only checks (dpkg-query, an import, a stamp
# file) and exits, without touching the network. Must run as root (or via sudo) when something is
# missing.
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
  curl xz-utils ca-certificates  # the oneDNN source tarball (below)
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
# oneDNN: Debian 12 ships 2.6 only, so the version deploy/onednn.env pins is built from source
# into a versioned prefix of its own, where CMakeLists.txt looks for it (docs/decisions.md,
# "oneDNN 3.7.2").
# Only what Fusor runs is built: the CPU engine on GNU OpenMP (g++'s, which Fusor uses too), the
# inference primitives it creates, and the experimental ukernel (brgemm) API; no graph API, tests,
# examples or docs. The stamp records the source checksum and these options: a change rebuilds.
# shellcheck source=deploy/onednn.env
. "$(dirname "$0")/onednn.env"
ONEDNN_PREFIX=/opt/fusor/onednn-$ONEDNN_VERSION
ONEDNN_OPTIONS=(
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_LIBDIR=lib
  -DONEDNN_CPU_RUNTIME=OMP -DONEDNN_GPU_RUNTIME=NONE -DONEDNN_BUILD_GRAPH=OFF
  -DONEDNN_BUILD_EXAMPLES=OFF -DONEDNN_BUILD_TESTS=OFF -DONEDNN_BUILD_DOC=OFF
  -DONEDNN_ENABLE_WORKLOAD=INFERENCE -DONEDNN_EXPERIMENTAL_UKERNEL=ON
  "-DONEDNN_ENABLE_PRIMITIVE=BINARY;CONCAT;CONVOLUTION;DECONVOLUTION;ELTWISE;LAYER_NORMALIZATION;MATMUL;POOLING;REDUCTION;REORDER;RESAMPLING;RNN;SOFTMAX;SUM"
)
ONEDNN_STAMP="$ONEDNN_SHA256 ${ONEDNN_OPTIONS[*]}"
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

onednn_installed() {
  [ "$(cat "$ONEDNN_PREFIX/.fusor-stamp" 2>/dev/null)" = "$ONEDNN_STAMP" ]
}

# Downloads, verifies, builds (all cores) and installs oneDNN, then writes the stamp last, so an
# interrupted run builds again. 3.7.2 takes about 15 minutes on 2 idle cores.
install_onednn() {
  local work
  work=$(mktemp -d)
  trap 'rm -rf "'"$work"'"' EXIT
  echo "install-deps: building oneDNN $ONEDNN_VERSION into $ONEDNN_PREFIX" >&2
  curl -fsSL -o "$work/src.tar.xz" "$ONEDNN_URL"
  if ! echo "$ONEDNN_SHA256  $work/src.tar.xz" | sha256sum -c --quiet -; then
    echo "install-deps: $ONEDNN_URL does not have SHA-256 $ONEDNN_SHA256" >&2
    return 1
  fi
  mkdir "$work/src"
  tar -xJf "$work/src.tar.xz" -C "$work/src" --strip-components=1
  cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$ONEDNN_PREFIX" \
    "${ONEDNN_OPTIONS[@]}" >/dev/null
  cmake --build "$work/build" -j"$(nproc)"
  $SUDO rm -rf "$ONEDNN_PREFIX"
  $SUDO cmake --install "$work/build" >/dev/null
  echo "$ONEDNN_STAMP" | $SUDO tee "$ONEDNN_PREFIX/.fusor-stamp" >/dev/null
}

if [ ${#missing[@]} -eq 0 ] && "$install_peers" --check && onednn_installed; then
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
if ! onednn_installed; then
  install_onednn
fi
