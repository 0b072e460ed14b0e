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
source bench/serve_bench.sh
serve_bench_texts "$WORK/texts.txt"
serve_bench_cpu_flags
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
  # shellcheck disable=SC2086
  serve_bench_start --model "$MODEL" $FLAGS --served-model-name bench
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
  serve_bench_stop
  cm=$(median < "$WORK/cli.rates"); sm=$(median < "$WORK/srv.rates")
  echo "$FMT: server / CLI best tokens/s (medians) = $sm / $cm = $(awk "BEGIN { printf \"%.3f\", $sm / $cm }") (>= 0.9)"
done
