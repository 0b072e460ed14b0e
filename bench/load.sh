#!/usr/bin/env bash
# Server throughput against the CLI on the same texts (batching efficiency).
# For each T (texts per request), three interleaved pairs of:
#   1. `moeedb embed --stats` on N texts: texts/s, model load excluded;
#   2. `moeedb serve` under C concurrent keep-alive clients for S/3 seconds,
#      T texts per request: requests/s, texts/s, p50/p99 latency.
# Then the ratio of the mean server texts/s to the mean CLI texts/s (and each
# pair's ratio), the mean texts per model forward, and how many worker-seconds
# per second the model ran (at most --workers). Interleaving short pairs
# keeps the machine's drift (±15 % within minutes here) out of the ratio.
# Usage: bash bench/load.sh [CLIENTS=16] [SECONDS=15] [N_TEXTS=1000] [T_LIST="1 16"]
set -euo pipefail
cd "$(dirname "$0")/.."
C="${1:-16}"; S="${2:-15}"; N="${3:-1000}"; T_LIST="${4:-1 16}"
PAIRS=3
SEG=$(awk "BEGIN { print $S / $PAIRS }")
BIN=./build/moeedb
MODEL=build/demo-model
WORK=build/bench-load
mkdir -p "$WORK"
if [ ! -f "$MODEL/model.safetensors" ]; then
  $BIN model init --config bench/configs/olmoe-small.json --tokenizer tests/data/tokenizers/olmoe/tokenizer.json \
    --seed 0 --out "$MODEL"
fi
awk -F, -v n="$N" '{ gsub(/"/, "", $1) } $1 != "" && k++ < n { print $1 }' tests/data/stsb-sample.csv > "$WORK/texts.txt"
cli_rate() {
  $BIN embed --model "$MODEL" --stats < "$WORK/texts.txt" 2> "$WORK/cli.err" > /dev/null
  echo "CLI embed (model load excluded): $(cat "$WORK/cli.err")" >&2
  awk '/texts\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "texts/s,") print $i }' "$WORK/cli.err"
}
rm -rf "$WORK/db"
$BIN serve --db "$WORK/db" --model "$MODEL" --port 0 --served-model-name demo --threads "${SERVE_THREADS:-0}" ${SERVE_FLAGS:-} > "$WORK/serve.out" 2> "$WORK/serve.err" &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.2; done
PORT=$(grep -o '127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2)
prev_sum=0; prev_count=0; prev_busy=0
for T in $T_LIST; do
  cli_sum=0; srv_sum=0; pair_ratios=""
  for _ in $(seq 1 $PAIRS); do
    cli=$(cli_rate)
    ./build/bench/load_bench "$PORT" "$C" "$SEG" "$WORK/texts.txt" "$T" demo | tee "$WORK/load.out"
    srv=$(awk '/server_texts_per_s/ { print $2 }' "$WORK/load.out")
    cli_sum=$(awk "BEGIN { print $cli_sum + $cli }"); srv_sum=$(awk "BEGIN { print $srv_sum + $srv }")
    pair_ratios="$pair_ratios $(awk "BEGIN { printf \"%.2f\", $srv / $cli }")"
  done
  metrics=$(curl -s "http://127.0.0.1:$PORT/metrics" 2>/dev/null || true)
  sum=$(echo "$metrics" | awk '/^moeedb_batch_size_texts_sum/ { print $2 }'); count=$(echo "$metrics" | awk '/^moeedb_batch_size_texts_count/ { print $2 }')
  busy=$(echo "$metrics" | awk '/^moeedb_model_busy_seconds_total/ { print $2 }')
  busy_rate="?"
  if [ -n "$busy" ]; then busy_rate=$(awk "BEGIN { printf \"%.2f\", ($busy - $prev_busy) / $S }"); prev_busy=$busy; fi
  rounds="?"
  if [ -n "$sum" ] && [ -n "$count" ]; then rounds=$(awk "BEGIN { printf \"%.1f\", ($sum - $prev_sum) / ($count - $prev_count) }"); prev_sum=$sum; prev_count=$count; fi
  echo "server / CLI texts/s: $(awk "BEGIN { printf \"%.2f\", $srv_sum / $cli_sum }") (means $(awk "BEGIN { printf \"%.1f / %.1f\", $srv_sum / $PAIRS, $cli_sum / $PAIRS }"); pairs$pair_ratios; $C clients x $T texts/request; $rounds texts per model forward; model workers busy $busy_rate s per s)"
done
