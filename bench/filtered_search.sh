#!/usr/bin/env bash
# A filtered search through a selective payload index (a filter keeping 1 %)
# beside the unfiltered search and the same filter without the index (a full
# scan), in one process (build/bench/filtered_search: RocksDB, no model).
# Usage: bash bench/filtered_search.sh [DOCS=1000000] [INDEX=flat] [DIM_HS=384]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
DOCS="${1:-1000000}"; INDEX="${2:-flat}"; DIM_HS="${3:-384}"
WORK=$(pwd)/build/bench-filtered
rm -rf "$WORK"
trap 'rm -rf "$WORK"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); cores: $(nproc)"
./build/bench/filtered_search --dir "$WORK" --docs "$DOCS" --index "$INDEX" --dim-hs "$DIM_HS"
