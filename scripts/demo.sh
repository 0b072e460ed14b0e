#!/usr/bin/env bash
# The main job, for now: set up, make an OLMoE-shaped model with the real OLMoE
# tokenizer (random weights until the trained default model ships), embed a few
# texts, and show what moeedb computes for each: token count, HS and RW sizes,
# the expert each MoE layer's router prefers at the last token, and the
# cosine similarity of the texts' HS and RW vectors to the first text.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

MODEL="build/demo-model"
if [ ! -f "$MODEL/model.safetensors" ]; then
  ./build/moeedb model init --config bench/configs/olmoe-small.json \
    --tokenizer tests/data/tokenizers/olmoe/tokenizer.json --seed 0 --out "$MODEL"
fi
./build/moeedb model info --model "$MODEL"

TEXTS=(
  "A man is playing a flute."
  "A man plays the flute."
  "Stock markets fell sharply on Tuesday."
  "The cat sleeps on the warm windowsill."
)
start=$(date +%s.%N)
printf '%s\n' "${TEXTS[@]}" | ./build/moeedb embed --model "$MODEL" > build/demo-embeddings.jsonl
end=$(date +%s.%N)

awk -v experts="$(grep -o '"num_experts": *[0-9]*' "$MODEL/config.json" | grep -o '[0-9]*$')" '
  function cosine(a, b, n,   i, d, na, nb) { d = na = nb = 0
    for (i = 1; i <= n; i++) { d += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i] }
    return d / sqrt(na * nb) }
  {
    split($0, parts, /[][]/)
    nh = split(parts[2], hs, ","); nr = split(parts[4], rw, ",")
    match($0, /"tokens":[0-9]+/); tokens = substr($0, RSTART + 9, RLENGTH - 9)
    if (NR == 1) { for (i = 1; i <= nh; i++) hs0[i] = hs[i]; for (i = 1; i <= nr; i++) rw0[i] = rw[i] }
    top = ""
    for (l = 0; l < nr / experts; l++) { best = 1
      for (e = 2; e <= experts; e++) if (rw[l * experts + e] > rw[l * experts + best]) best = e
      top = top sprintf("%d ", best - 1) }
    printf "text %d: %s tokens, hs %d dims, rw %d dims; cos to text 1: hs %.3f rw %.3f; top expert per layer: %s\n",
      NR, tokens, nh, nr, cosine(hs, hs0, nh), cosine(rw, rw0, nr), top
  }' build/demo-embeddings.jsonl
echo "embedded ${#TEXTS[@]} texts in $(awk "BEGIN { printf \"%.2f\", $end - $start }") s (including model load); vectors in build/demo-embeddings.jsonl"
