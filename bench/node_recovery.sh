#!/usr/bin/env bash
# A node's replicas at 1M documents: the time to build them from PostgreSQL,
# and from kill -9 of the node to its replicas ready again (restarted at
# once, within --node-left-delay: it keeps them, loads its snapshots and
# replays the log's tail). Two `moeedb serve` nodes over one throwaway
# PostgreSQL 15 on loopback (fsync on) and one etcd; collection `big` of the
# default model (1024 + 32 dimensions), 2 shards x 2 replicas, filled through
# the store without the model (build/bench/store_write --into: random
# vectors, 300-byte texts), lexical index on (bench/node_recovery.mjs).
# ROUNDS=R repeats the tail and the kill R times; BASELINE=BIN2 (another
# build's moeedb) alternates the restarts between this build and BIN2 and
# prints the ratio of their median kill -9 to ready times.
# Usage: [ROUNDS=1] [BASELINE=BIN2] bash bench/node_recovery.sh [DOCS=1000000] [TAIL=20000]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
DOCS="${1:-1000000}"; TAIL="${2:-20000}"
WORK=$(pwd)/build/bench-recovery
rm -rf "$WORK"; mkdir -p "$WORK"
PG_FSYNC=on bash tests/pg/pg_cluster.sh start "$WORK/pg"
bash tests/cluster/etcd_server.sh start "$WORK/etcd"
cleanup() { pkill -KILL -f "$WORK/node" 2>/dev/null || true; bash tests/cluster/etcd_server.sh stop "$WORK/etcd" || true; bash tests/pg/pg_cluster.sh stop "$WORK/pg"; rm -rf "$WORK"; }
trap cleanup EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); cores: $(nproc); flags: $(grep -m1 -o 'avx512[a-z_0-9]*\|avx2' /proc/cpuinfo | sort -u | xargs)"
node bench/node_recovery.mjs --pg "$(cat "$WORK/pg/uri")" --etcd "$(cat "$WORK/etcd/endpoint")" --dir "$WORK" \
  --bin "$BIN" --fill ./build/bench/store_write --docs "$DOCS" --tail "$TAIL" \
  --rounds "${ROUNDS:-1}" ${BASELINE:+--baseline "$BASELINE"}
