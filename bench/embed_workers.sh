#!/usr/bin/env bash
# `moeedb embed` on one 256-token text: the default worker count against each
# explicit --workers setting, in the same run, on the OLMoE-shaped random
# checkpoint of bench/embed_throughput.sh (hidden 1024, 8 layers, 64 experts
# top-8). Tokens/s come from `embed --stats` (model load excluded), the median
# of REPS runs each (the settings take turns); the last line is the default's ratio to the best setting.
# Usage: bash bench/embed_workers.sh [REPS=7]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-7}"
MODEL=build/bench-embed/olmoe-shaped-8l
mkdir -p build/bench-embed
if [ ! -f "$MODEL/model.safetensors" ]; then
  ./build/moeedb model init --config bench/configs/olmoe-shaped-8l.json \
    --tokenizer tests/data/tokenizers/olmoe/tokenizer.json --seed 0 --out "$MODEL"
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); cores: $(nproc);" \
     "flags: $(grep -m1 -o -w -E 'avx512f|avx512_bf16|avx512_vnni|avx2|avx_vnni' /proc/cpuinfo | sort -u | xargs)"
# One text of exactly 256 token ids (ids 1000..1255), so no tokenizer runs.
seq 1000 1255 | xargs > build/bench-embed/one-text.ids

# The settings take turns, REPS rounds, so drifts in the machine's speed
# fall on all of them alike.
declare -A runs
settings=("default" "1" "2")
for _ in $(seq "$REPS"); do
  for w in "${settings[@]}"; do
    flags=(); [ "$w" != default ] && flags=(--workers "$w")
    r=$(./build/moeedb embed --model "$MODEL" --ids --stats "${flags[@]}" < build/bench-embed/one-text.ids 2>&1 >/dev/null |
        sed -n 's/.* \([0-9.]*\) tokens\/s$/\1/p')
    runs[$w]="${runs[$w]:-} $r"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
best=0
for w in "${settings[@]}"; do
  m=$(echo "${runs[$w]}" | median)
  label="--workers $w"; [ "$w" = default ] && { label="default (no --workers)"; default=$m; }
  printf '%-24s %8.1f tokens/s  (runs:%s)\n' "$label" "$m" "${runs[$w]}"
  best=$(awk -v a="$best" -v b="$m" 'BEGIN { print (b > a ? b : a) }')
done
awk -v d="$default" -v b="$best" 'BEGIN { printf "default / best: %.3f\n", d / b }'
