#!/usr/bin/env bash
# Routing-mode figures on an OLMoE-shaped random model (hidden 1024, 8 layers,
# 64 experts x 512, top-8, vocab 50304):
#   1. SSMoE precompute: first load (computes the spectral centroids and caches
#      them) vs second load (reads the cache), same process command both times;
#   2. embed tokens/s with learned (top-8) vs top1 routing on the same texts,
#      and the ratio;
#   3. MoE Lens: per-layer cosine of top-1 vs top-8 block outputs.
# Usage: bash bench/routing.sh [N_TEXTS (default 32)] [THREADS (default all)]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-32}"
THREADS="${2:-$(nproc)}"
BIN=./build/moeedb
WORK=build/bench-routing
MODEL=$WORK/model
mkdir -p "$WORK"
if [ ! -f "$MODEL/model.safetensors" ]; then
  $BIN model init --config bench/configs/olmoe-shaped-8l.json \
    --tokenizer tests/data/tokenizers/olmoe/tokenizer.json --seed 0 --out "$MODEL"
fi
$BIN model info --model "$MODEL"
# N texts of about 256 tokens each, cut from the corpus-like STS-B train sentences.
TEXTS=$WORK/texts.txt
if [ ! -f "$TEXTS" ] || [ "$(wc -l < "$TEXTS")" -ne "$N" ]; then
  awk -F, -v n="$N" '{ buf = buf " " $1 } length(buf) > 1100 { print substr(buf, 2, 1100); buf = ""; if (++k == n) exit }' \
    tests/data/stsb-sample.csv > "$TEXTS"
fi
now() { date +%s.%N; }
secs() { awk "BEGIN { printf \"%.2f\", $2 - $1 }"; }

CACHE=$WORK/cache
rm -rf "$CACHE"
echo "== SSMoE spectral centroids (c=0.5, k=50, canonical)"
t0=$(now); echo "warm-up text" | MOEEDB_CACHE_DIR=$CACHE $BIN embed --model "$MODEL" --routing ssmoe --threads "$THREADS" >/dev/null; t1=$(now)
echo "warm-up text" | MOEEDB_CACHE_DIR=$CACHE $BIN embed --model "$MODEL" --routing ssmoe --threads "$THREADS" >/dev/null; t2=$(now)
echo "first load (computes, writes cache): $(secs $t0 $t1) s; second load (reads cache): $(secs $t1 $t2) s"

tokens=$($BIN tokenize --model "$MODEL" < "$TEXTS" | awk '{ s += NF } END { print s }')
echo "== embed throughput, $N texts, $tokens tokens (prompt excluded), $THREADS threads"
for routing in learned top1; do
  t0=$(now); $BIN embed --model "$MODEL" --routing $routing --threads "$THREADS" < "$TEXTS" >/dev/null; t1=$(now)
  s=$(secs $t0 $t1)
  eval "time_$routing=$s"
  echo "$routing: $s s, $(awk "BEGIN { printf \"%.0f\", $tokens / $s }") tokens/s (model load included)"
done
echo "top1 / learned tokens/s ratio: $(awk "BEGIN { printf \"%.2f\", $time_learned / $time_top1 }")"
echo "== MoE Lens: cos(top-1 output, top-8 output) per layer, last token"
head -n "$N" "$TEXTS" | $BIN lens --model "$MODEL" --threads "$THREADS"
