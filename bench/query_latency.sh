#!/usr/bin/env bash
# One-text forwards (what a search query or a single-text request costs), one
# compute thread, with the packed few-row GEMM kernel (engine/kernels/panel_gemm.h)
# and without it (MOEEDB_PANEL_GEMM=off: OpenBLAS for every matmul, and so,
# with no packed copies, the ATen expert path too), in three interleaved
# pairs per model: ms per text and the ratio. build/bench/forward_paths
# separates the packed attention and expert paths.
# Usage: bash bench/query_latency.sh [N_TEXTS=200]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-200}"
BIN=./build/moeedb
WORK=build/bench-query
mkdir -p "$WORK"
if [ ! -f build/demo-model/model.safetensors ]; then
  $BIN model init --config bench/configs/olmoe-small.json --tokenizer tests/data/tokenizers/olmoe/tokenizer.json \
    --seed 0 --out build/demo-model
fi
awk -F, -v n="$N" '{ gsub(/"/, "", $1) } $1 != "" && k++ < n { print $1 }' tests/data/stsb-sample.csv > "$WORK/texts.txt"
rate() {  # MODEL MODE -> texts/s
  MOEEDB_PANEL_GEMM=$2 $BIN embed --model "$1" --stats --threads 1 --workers 1 --batch-tokens 1 \
    < "$WORK/texts.txt" 2> "$WORK/err" > /dev/null
  awk '/texts\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "texts/s,") print $i }' "$WORK/err"
}
for model in build/demo-model models/moeedb-tiny; do
  on_sum=0; off_sum=0; pairs=""
  for _ in 1 2 3; do
    on=$(rate "$model" on); off=$(rate "$model" off)
    on_sum=$(awk "BEGIN { print $on_sum + $on }"); off_sum=$(awk "BEGIN { print $off_sum + $off }")
    pairs="$pairs $(awk "BEGIN { printf \"%.2f\", $on / $off }")"
  done
  awk -v m="$model" -v on="$on_sum" -v off="$off_sum" -v p="$pairs" 'BEGIN {
    printf "%s: packed kernel %.2f ms/text (%.1f texts/s), OpenBLAS %.2f ms/text (%.1f texts/s): %.2fx (pairs%s)\n",
      m, 3000 / on, on / 3, 3000 / off, off / 3, on / off, p }'
done
