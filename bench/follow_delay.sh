#!/usr/bin/env bash
# Log following across nodes: two `moeedb serve` nodes over one PostgreSQL 15
# database (a throwaway server on loopback, tests/pg/pg_cluster.sh, fsync on),
# each with its own index folder and the default --follow-ms; documents
# written through node A at RATE writes/s, found by searches on node B
# (bench/follow_delay.mjs). Prints the delay's p50/p99/max in ms.
# Usage: bash bench/follow_delay.sh [WRITES=200] [RATE=20] [FOLLOW_MS=200]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
WRITES="${1:-200}"; RATE="${2:-20}"; FOLLOW_MS="${3:-200}"
WORK=$(pwd)/build/bench-follow
rm -rf "$WORK"; mkdir -p "$WORK"
PG_FSYNC=on bash tests/pg/pg_cluster.sh start "$WORK/pg"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; bash tests/pg/pg_cluster.sh stop "$WORK/pg"; }
trap cleanup EXIT
DB=$(cat "$WORK/pg/uri")
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); cores: $(nproc); --follow-ms $FOLLOW_MS"
for node in a b; do
  "$BIN" serve --db "$DB" --index-dir "$WORK/$node" --port 0 --follow-ms "$FOLLOW_MS" > "$WORK/$node.out" 2> "$WORK/$node.err" &
  PIDS+=($!)
done
for node in a b; do
  for _ in $(seq 1 300); do grep -q listening "$WORK/$node.out" 2>/dev/null && break; sleep 0.2; done
  grep -q listening "$WORK/$node.out" || { cat "$WORK/$node.err" >&2; exit 1; }
done
A=$(grep -o 'http://[0-9.:]*' "$WORK/a.out" | head -1); B=$(grep -o 'http://[0-9.:]*' "$WORK/b.out" | head -1)
node bench/follow_delay.mjs "$A" "$B" "$WRITES" "$RATE"
