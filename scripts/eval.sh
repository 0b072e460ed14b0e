#!/usr/bin/env bash
# Evaluates the embedded default model with the harness on the full test sets,
# next to the baselines: TF-IDF, all-MiniLM-L6-v2 (the anchor and teacher),
# the language model it was trained from (the training-free MoEE setup), and
# random weights of the same shape and tokenizer. Writes one JSON object per run to OUT/results.jsonl, the tables
# to OUT/tables.txt and the Spearman-vs-alpha plots to OUT/*.png.
#
#   scripts/eval.sh [MODEL_DIR] [LM_DIR] [EVAL_DATA_DIR] [OUT_DIR]
#   defaults:       models/moeedb-tiny  models/moeedb-tiny-lm  ../shared/data/eval  build/eval-results
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
MODEL="${1:-models/moeedb-tiny}"
LM="${2:-models/moeedb-tiny-lm}"
DATA="${3:-../shared/data/eval}"
OUT="${4:-build/eval-results}"
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
: > "$OUT/tables.txt"

# Random weights twice: with the language model's causal attention (beside
# the LM's rows) and with the default's bidirectional attention (beside the
# default's rows: the same architecture as the model it is compared with).
RANDOM_MODEL="$OUT/random-model"
if [ ! -f "$RANDOM_MODEL/model.safetensors" ]; then
  "$BIN" model init --config "$LM/config.json" --tokenizer "$LM/tokenizer.json" --seed 0 --out "$RANDOM_MODEL"
fi
RANDOM_BIDI="$OUT/random-model-bidirectional"
if [ ! -f "$RANDOM_BIDI/model.safetensors" ]; then
  "$BIN" model init --config "$MODEL/config.json" --tokenizer "$MODEL/tokenizer.json" --seed 0 --out "$RANDOM_BIDI"
fi

run() {  # label, then the eval arguments
  local label="$1"; shift
  echo "== $label" | tee -a "$OUT/tables.txt" >&2
  "$BIN" eval "$@" 2>>"$OUT/tables.txt" | sed "s/^{/{\"label\":\"$label\",/" >> "$OUT/results.jsonl"
  tail -n 8 "$OUT/tables.txt" >&2
}
tasks() {  # label prefix, then the model arguments
  local label="$1"; shift
  run "$label-sts" sts "$@" --data "$DATA/stsb"
  run "$label-retrieval" retrieval "$@" --data "$DATA/cranfield"
  run "$label-classify" classify "$@" --data "$DATA/banking77"
}

run tfidf-sts sts --baseline tfidf --data "$DATA/stsb"
run tfidf-retrieval retrieval --baseline tfidf --data "$DATA/cranfield"
run tfidf-classify classify --baseline tfidf --data "$DATA/banking77"
# The distillation teacher (Universal Sentence Encoder lite, offline in Node) on STS-B.
(cd eval/teacher && npm ci --no-audit --no-fund --loglevel=error)
node eval/teacher/eval_sts.js "$DATA/stsb" | sed 's/^{/{"label":"teacher-sts",/' >> "$OUT/results.jsonl"
# The quality anchor and the default's teacher: all-MiniLM-L6-v2 (HS alone,
# eval/teacher/minilm.py under onnxruntime) on every task, from its vectors
# of the texts the tasks embed (made afresh: a few minutes on 2 cores).
PY="$(bash scripts/python_env.sh teacher)"
"$BIN" eval texts --data "$DATA" > "$OUT/anchor-texts.jsonl"
rm -f "$OUT/minilm.f32"
"$PY" eval/teacher/minilm.py embed-jsonl "$OUT/anchor-texts.jsonl" "$OUT/minilm.f32"
MINILM=(--vectors "$OUT/anchor-texts.jsonl,$OUT/minilm.f32" --label all-MiniLM-L6-v2)
tasks minilm "${MINILM[@]}"
run minilm-retrieval-test retrieval "${MINILM[@]}" --data "$DATA/cranfield" --queries test

# The default setup: what moeedb embed/ingest/search use with no flags.
run default-sts sts --model "$MODEL" --data "$DATA/stsb" --plot "$OUT/sts-default.png"
run default-retrieval retrieval --model "$MODEL" --data "$DATA/cranfield"
run default-classify classify --model "$MODEL" --data "$DATA/banking77"
# Hybrid search (HS, RW, BM25): settings chosen on the tuning half of the
# Cranfield queries (even-numbered), reported on the other half.
run default-retrieval-tune retrieval --model "$MODEL" --data "$DATA/cranfield" --queries tune --tune
run default-retrieval-test retrieval --model "$MODEL" --data "$DATA/cranfield" --queries test
run tfidf-retrieval-test retrieval --baseline tfidf --data "$DATA/cranfield" --queries test
# The default model with the training-free poolings instead of its trained
# pooler, and with RW read at the last token instead of its default.
for pooling in last mean layers-mean; do
  tasks "default-hs_$pooling" --model "$MODEL" --hs-pooling "$pooling"
done
tasks default-rw_last --model "$MODEL" --rw-pooling last
# The routing modes on the default model.
for routing in ssmoe top1; do
  run "default-$routing-sts" sts --model "$MODEL" --routing "$routing" --data "$DATA/stsb"
done
# The language model before embedding training (training-free MoEE, no prompt:
# its better setup) and random weights of the same shape.
tasks lm-none --model "$LM" --prompt none
tasks random-none --model "$RANDOM_MODEL" --prompt none
# Random weights with each training-free pooling and the mean RW: what each
# of the default's rows is compared with.
for pooling in mean layers-mean; do
  tasks "random-none-hs_$pooling" --model "$RANDOM_MODEL" --prompt none --hs-pooling "$pooling"
done
tasks random-none-rw_mean --model "$RANDOM_MODEL" --prompt none --rw-pooling mean
# Bidirectional random weights with each training-free pooling, RW as the mean.
for pooling in last mean layers-mean; do
  tasks "random-bidi-hs_$pooling" --model "$RANDOM_BIDI" --prompt none --hs-pooling "$pooling" --rw-pooling mean
done
for model in lm random; do
  dir="$LM"; [ "$model" = random ] && dir="$RANDOM_MODEL"
  run "$model-prompteol-sts" sts --model "$dir" --prompt prompteol --data "$DATA/stsb"
done
run lm-none-hs_mean-sts sts --model "$LM" --prompt none --hs-pooling mean --data "$DATA/stsb"
node eval/tables.js "$OUT/results.jsonl" > "$OUT/tables.md"
echo "results: $OUT/results.jsonl, tables: $OUT/tables.txt, $OUT/tables.md" >&2
