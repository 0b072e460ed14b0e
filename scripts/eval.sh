#!/usr/bin/env bash
# Evaluates a model folder with the harness on the full evaluation sets, next
# to the baselines (TF-IDF, and a random-weight model of the same shape and
# tokenizer), for every routing mode and the pooling ablations. Writes one JSON
# object per run to OUT/results.jsonl, the tables to OUT/tables.txt and the
# Spearman-vs-alpha plots to OUT/*.png.
#
#   scripts/eval.sh [MODEL_DIR] [EVAL_DATA_DIR] [OUT_DIR]
#   defaults:       models/moeedb-tiny  ../shared/data/eval  build/eval
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-models/moeedb-tiny}"
DATA="${2:-../shared/data/eval}"
OUT="${3:-build/eval}"
BIN=./build/moeedb
[ -x "$BIN" ] || bash scripts/setup.sh
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
: > "$OUT/tables.txt"

RANDOM_MODEL="$OUT/random-model"
if [ ! -f "$RANDOM_MODEL/model.safetensors" ]; then
  "$BIN" model init --config "$MODEL/config.json" --tokenizer "$MODEL/tokenizer.json" --seed 0 --out "$RANDOM_MODEL"
fi

run() {  # label, then the eval arguments
  local label="$1"; shift
  echo "== $label" | tee -a "$OUT/tables.txt" >&2
  "$BIN" eval "$@" 2>>"$OUT/tables.txt" | sed "s/^{/{\"label\":\"$label\",/" >> "$OUT/results.jsonl"
  tail -n 8 "$OUT/tables.txt" >&2
}

run tfidf-sts sts --baseline tfidf --data "$DATA/stsb"
run tfidf-retrieval retrieval --baseline tfidf --data "$DATA/cranfield"
run tfidf-classify classify --baseline tfidf --data "$DATA/banking77"

# The shipped model under PromptEOL (MoEE's prompt) and without a prompt (the
# reference's "none" template), which suits a model this small better.
for prompt in prompteol none; do
  run "trained-learned-$prompt-sts" sts --model "$MODEL" --prompt "$prompt" --data "$DATA/stsb" --plot "$OUT/sts-learned-$prompt.png"
  run "trained-learned-$prompt-retrieval" retrieval --model "$MODEL" --prompt "$prompt" --data "$DATA/cranfield"
  run "trained-learned-$prompt-classify" classify --model "$MODEL" --prompt "$prompt" --data "$DATA/banking77"
  run "random-$prompt-sts" sts --model "$RANDOM_MODEL" --prompt "$prompt" --data "$DATA/stsb"
  run "random-$prompt-retrieval" retrieval --model "$RANDOM_MODEL" --prompt "$prompt" --data "$DATA/cranfield"
  run "random-$prompt-classify" classify --model "$RANDOM_MODEL" --prompt "$prompt" --data "$DATA/banking77"
done
# The other routing modes, with the shipped model's recommended prompt.
for routing in ssmoe top1; do
  run "trained-$routing-none-sts" sts --model "$MODEL" --routing "$routing" --prompt none --data "$DATA/stsb"
  run "trained-$routing-none-retrieval" retrieval --model "$MODEL" --routing "$routing" --prompt none --data "$DATA/cranfield"
  run "trained-$routing-none-classify" classify --model "$MODEL" --routing "$routing" --prompt none --data "$DATA/banking77"
done
# Pooling ablations on STS-B (MoEE Table 5; training-free multi-layer pooling).
for prompt in prompteol none; do
  for pooling in "--hs-pooling mean" "--hs-pooling layers-mean" "--rw-pooling mean" "--hs-pooling mean --rw-pooling mean"; do
    label="$(echo "$pooling" | sed 's/--hs-pooling /hs_/; s/--rw-pooling /rw_/g; s/ /+/g')"
    # shellcheck disable=SC2086
    run "trained-$prompt-$label-sts" sts --model "$MODEL" --prompt "$prompt" $pooling --data "$DATA/stsb"
    # shellcheck disable=SC2086
    run "random-$prompt-$label-sts" sts --model "$RANDOM_MODEL" --prompt "$prompt" $pooling --data "$DATA/stsb"
  done
done
echo "results: $OUT/results.jsonl, tables: $OUT/tables.txt" >&2
