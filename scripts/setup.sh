#!/usr/bin/env bash
# Installs the Debian 12 packages moeedb needs (only when something is
# missing: idempotent and quick on a ready machine), then configures and
# builds everything into build/ with CMake + Ninja + ccache. With --tests it
# also installs what only the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp libicu-dev nlohmann-json3-dev
  libfaiss-dev libhnswlib-dev librocksdb-dev libboost-dev libcli11-dev
  libgtest-dev libbenchmark-dev libxapian-dev libroaring-dev libpng-dev zlib1g-dev libre2-dev libpqxx-dev libssl-dev)

# Node.js and npm run the end-to-end tests with the real npm clients; machines
# that ship a Node.js (20+) keep theirs.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi

# --tests: also what only the test suite needs (Chromium for the console's browser
# test; clang-14 with its libFuzzer and sanitizer runtimes for the fuzz harnesses;
# PostgreSQL 15, whose throwaway server the store tests start: tests/pg/pg_cluster.sh;
# Patroni and etcd for the cluster soak's short run: scripts/cluster.sh; iproute2
# for its hosts in network namespaces: scripts/cluster/netns.mjs).
if [ "${1:-}" = "--tests" ]; then PACKAGES+=(chromium clang-14 libclang-rt-14-dev postgresql-15 patroni etcd-server curl iproute2); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

BUILD_TYPE="${BUILD_TYPE:-Release}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
ninja -C build
