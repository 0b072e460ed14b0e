#!/usr/bin/env bash
# Store-only write throughput of both stores (build/bench/store_write: no
# model, precomputed vectors of the embedded default model's sizes, synced
# batches) by 1, 4 and 16 concurrent writers over 1 and 4 collections, and
# the bytes a document takes in each: RocksDB in a folder, and PostgreSQL 15
# on loopback with a synchronous standby (tests/pg/pg_cluster.sh with
# PG_STANDBY=1: fsync on, synchronous_commit = remote_apply, so an
# acknowledged batch is on both servers' disks and visible on the standby),
# its write pool as large as the writers (write_connections=). ROUNDS
# interleaved rounds.
# Usage: bash bench/store_write.sh [ROUNDS=2] [DOCS=32768] [BATCH=256]
# WRITERS and COLLECTIONS (lists) narrow the table. BASELINE=path/to/an/older/
# store_write runs that build's PostgreSQL store right after each run of this
# one, on the same server (a database of its own), its lines marked
# "baseline": an A/B of two versions of the write path in one script.
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
ROUNDS="${1:-2}"; DOCS="${2:-32768}"; BATCH="${3:-256}"
WRITERS="${WRITERS:-1 4 16}"; COLLECTIONS="${COLLECTIONS:-1 4}"
WORK=$(pwd)/build/bench-store
rm -rf "$WORK"; mkdir -p "$WORK"
PG_FSYNC=on PG_STANDBY=1 bash tests/pg/pg_cluster.sh start "$WORK/pg"
trap 'bash tests/pg/pg_cluster.sh stop "$WORK/pg"' EXIT
URI=$(cat "$WORK/pg/uri")
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); cores: $(nproc); disk: $(df -h "$WORK" | awk 'NR == 2 { print $1 }')"
echo "CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|avx512_vpopcntdq)$' | xargs)"
run=0
for r in $(seq 1 "$ROUNDS"); do
  for w in $WRITERS; do
    for c in $COLLECTIONS; do
      rm -rf "$WORK/rocks"
      ./build/bench/store_write --store "$WORK/rocks" --docs "$DOCS" --batch "$BATCH" --writers "$w" --collections "$c"
      # A database of its own per run: bytes per document from fresh tables.
      # With a baseline, the two alternate which goes first from round to round.
      if [ -n "${BASELINE:-}" ] && [ $((r % 2)) -eq 0 ]; then order="baseline current"
      elif [ -n "${BASELINE:-}" ]; then order="current baseline"
      else order="current"; fi
      for which in $order; do
        run=$((run + 1))
        /usr/lib/postgresql/15/bin/psql "$URI" -qc "CREATE DATABASE sw$run"
        if [ "$which" = current ]; then
          ./build/bench/store_write --store "${URI%/postgres}/sw$run?write_connections=$w" --docs "$DOCS" \
            --batch "$BATCH" --writers "$w" --collections "$c"
        else
          "$BASELINE" --store "${URI%/postgres}/sw$run?write_connections=$w" --docs "$DOCS" --batch "$BATCH" \
            --writers "$w" --collections "$c" | sed 's/^{/{"baseline":true,/'
        fi
        # Dropped once measured (its bytes are in the line above): the disk
        # holds one run's tables at a time, and each run starts after the
        # checkpoint DROP DATABASE makes.
        /usr/lib/postgresql/15/bin/psql "$URI" -qc "DROP DATABASE sw$run"
      done
    done
  done
done
