#!/usr/bin/env bash
# Store-only write throughput of both stores (build/bench/store_write: no
# model, precomputed vectors of the embedded default model's sizes, synced
# batches) and the bytes a document takes in each: RocksDB in a folder, and
# PostgreSQL 15 on loopback (a throwaway server, tests/pg/pg_cluster.sh, with
# fsync on: an acknowledged batch is on disk). ROUNDS interleaved rounds.
# Usage: bash bench/store_write.sh [ROUNDS=3] [DOCS=20000] [BATCH=256]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
ROUNDS="${1:-3}"; DOCS="${2:-20000}"; BATCH="${3:-256}"
WORK=$(pwd)/build/bench-store
rm -rf "$WORK"; mkdir -p "$WORK"
PG_FSYNC=on bash tests/pg/pg_cluster.sh start "$WORK/pg"
trap 'bash tests/pg/pg_cluster.sh stop "$WORK/pg"' EXIT
URI=$(cat "$WORK/pg/uri")
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); cores: $(nproc); disk: $(df -h "$WORK" | awk 'NR == 2 { print $1 }')"
for r in $(seq 1 "$ROUNDS"); do
  rm -rf "$WORK/rocks"
  ./build/bench/store_write --store "$WORK/rocks" --docs "$DOCS" --batch "$BATCH"
  ./build/bench/store_write --store "$URI" --docs "$DOCS" --batch "$BATCH"
done
