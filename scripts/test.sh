#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
# End-to-end: moeedb serve with the real npm clients (openai, @langchain/openai).
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error && MOEEDB_BIN="$PWD/../../build/moeedb" npm test)
