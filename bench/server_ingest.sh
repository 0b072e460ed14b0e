#!/usr/bin/env bash
# The server's embedding throughput against the CLI's best, per format, on
# the OLMoE-shaped model (bench/batch_scaling.sh's): 128 texts of about 256
# tokens (STS-B sentences joined), in 3 interleaved rounds of
#   1. `moeedb embed --stats` with the default flags (the CLI's best forward size,
#      bench/batch_scaling.sh);
#   2. `moeedb serve` (default flags) under 16 concurrent keep-alive clients
#      (build/bench/load_bench: C++, PER_REQUEST texts a request, as RAG
#      frameworks send their chunks, every text once), which share the 2
#      cores: the client's own CPU time is printed beside.
# Prints each round's tokens/s and the medians' ratio server / CLI best.
# Usage: bash bench/server_ingest.sh [ROUNDS=3] [FORMATS="int8 bf16"] [PER_REQUEST=8]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"; FORMATS="${2:-int8 bf16}"; PER_REQUEST="${3:-8}"
BIN=./build/moeedb
source bench/olmoe_shaped_model.sh
WORK=build/bench-server-ingest
mkdir -p "$WORK"
awk -F, '{ gsub(/"/, ""); for (i = 1; i <= 2; i++) if ($i != "") { s = s (s == "" ? "" : " ") $i; if (length(s) >= 1000) { print s; s = ""; if (++n == 128) exit } } }' \
  tests/data/stsb-sample.csv > "$WORK/texts.txt"
[ "$(wc -l < "$WORK/texts.txt")" = 128 ] || { echo "could not build 128 texts" >&2; exit 1; }
echo "CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512.*|avx_vnni)$' | tr '\n' ' ')"
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
cli_rate() {  # tokens/s of `moeedb embed --stats` with the given flags
  $BIN embed --model "$MODEL" "$@" --stats < "$WORK/texts.txt" 2> "$WORK/cli.err" > /dev/null
  awk '/tokens\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "tokens/s") print $i }' "$WORK/cli.err"
}
for FMT in $FORMATS; do
  case "$FMT" in
    int8) FLAGS="--quant int8" ;;
    bf16) FLAGS="--dtype bf16" ;;
    f32) FLAGS="" ;;
    *) echo "unknown format $FMT" >&2; exit 2 ;;
  esac
  rm -rf "$WORK/db"
  # shellcheck disable=SC2086
  $BIN serve --db "$WORK/db" --model "$MODEL" $FLAGS --port 0 --served-model-name bench > "$WORK/serve.out" 2> "$WORK/serve.err" &
  SERVER=$!
  trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 1 600); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.2; done
  PORT=$(grep -o '127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2)
  [ -n "$PORT" ] || { cat "$WORK/serve.err" >&2; exit 1; }
  # A first pass warms the server (first touch of its activation memory).
  ./build/bench/load_bench "$PORT" 16 all "$WORK/texts.txt" "$PER_REQUEST" bench > /dev/null
  : > "$WORK/cli.rates"; : > "$WORK/srv.rates"
  for r in $(seq 1 "$ROUNDS"); do
    # shellcheck disable=SC2086
    best=$(cli_rate $FLAGS)
    ./build/bench/load_bench "$PORT" 16 all "$WORK/texts.txt" "$PER_REQUEST" bench > "$WORK/load.out"
    s=$(awk '/server_tokens_per_s/ { print $2 }' "$WORK/load.out")
    echo "$FMT round $r: CLI $best tokens/s; server $s tokens/s ($(grep -o 'client CPU.*' "$WORK/load.out"))"
    echo "$best" >> "$WORK/cli.rates"; echo "$s" >> "$WORK/srv.rates"
  done
  kill -TERM $SERVER; wait $SERVER || true; trap - EXIT
  cm=$(median < "$WORK/cli.rates"); sm=$(median < "$WORK/srv.rates")
  echo "$FMT: server / CLI best tokens/s (medians) = $sm / $cm = $(awk "BEGIN { printf \"%.3f\", $sm / $cm }") (>= 0.9)"
done
