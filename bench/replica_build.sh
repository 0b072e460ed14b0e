#!/usr/bin/env bash
# Search p99 on a node while it builds a replica from PostgreSQL, beside its
# p99 idle (build/bench/replica_build: one process, no model). PostgreSQL 15
# on loopback, a throwaway server (tests/pg/pg_cluster.sh).
# Usage: bash bench/replica_build.sh [DOCS=1000000] [LEXICAL=1] [SHARD_OF=0] [ROUNDS=3]
# SHARD_OF=S: instead, one shard of S built from the store in the range layout
# (through the shard-key index) beside the modulo layout (the collection walked).
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
DOCS="${1:-1000000}"; LEXICAL="${2:-1}"; SHARD_OF="${3:-0}"; ROUNDS="${4:-3}"
WORK=$(pwd)/build/bench-replica
rm -rf "$WORK"; mkdir -p "$WORK"
bash tests/pg/pg_cluster.sh start "$WORK/pg"
trap 'bash tests/pg/pg_cluster.sh stop "$WORK/pg"; rm -rf "$WORK"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); cores: $(nproc)"
./build/bench/replica_build --store "$(cat "$WORK/pg/uri")" --index-dir "$WORK/indexes" --docs "$DOCS" --lexical "$LEXICAL" \
  --shard-of "$SHARD_OF" --rounds "$ROUNDS"
