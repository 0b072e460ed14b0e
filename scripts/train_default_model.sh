#!/usr/bin/env bash
# Reproduces the embedded default model models/moeedb-tiny from the language
# model models/moeedb-tiny-lm (whose own card says how it was trained):
#   0. the teacher's vectors (Universal Sentence Encoder lite, offline in Node)
#      for the training sentences, frequent words and modern-English corpus
#      sentences (eval/teacher/sentences.js --corpus);
#   1. stage 1, distillation: the model, switched to bidirectional attention,
#      and a pooler with learned token weights learn to reproduce the
#      teacher's vectors;
#   2. stage 2, pairs: contrastive pairs, CoSENT on STS-B train, Banking77
#      label pairs and continued distillation, from stage 1's folder;
#   3. stage 3, the same pairs again from stage 2's folder;
#   4. stage 4, side terms: the training-free poolings and the mean router
#      logits trained as sentence vectors too, stage 3's own vectors the
#      teacher;
#   5. stage 5, passages: the same, with inverse-cloze pairs from the
#      OpenStax textbooks (a sentence and the rest of its paragraph) and
#      texts of up to 128 tokens;
#   6. the calibration statistics of the shipped folder.
# Every stage checkpoints into its folder and resumes when run again; the
# teacher's vectors resume too. Hours on 2 cores (MODEL_CARD.md has the times).
#
#   scripts/train_default_model.sh [DATA_DIR] [WORK_DIR] [OUT_MODEL_DIR]
#   defaults:                      ../shared/data  build/train  models/moeedb-tiny
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
D="${1:-../shared/data}"
W="${2:-build/train}"
OUT="${3:-models/moeedb-tiny}"
mkdir -p "$W/teacher"

# 0. Teacher vectors (append-only list: vectors of a shorter list stay valid).
(cd eval/teacher && npm ci --no-audit --no-fund --loglevel=error)
# The shipped model used the list's first 240,987 texts: the training
# sentences (108,987), 20,000 frequent words, 112,000 corpus sentences.
node eval/teacher/sentences.js "$D" "$W/teacher/all.txt" --corpus
head -n 240987 "$W/teacher/all.txt" > "$W/teacher/texts.txt"
node eval/teacher/embed.js "$W/teacher/texts.txt" "$W/teacher/vectors.f32"   # about an hour on 2 cores

# 1. Distillation: a 3000-step schedule stopped after 1200 steps (its
#    checkpoint, the model in F32 and the pooler, is stage 1's folder).
$BIN train embed --model models/moeedb-tiny-lm --out "$W/stage1" \
  --teacher "$W/teacher/texts.txt,$W/teacher/vectors.f32" --teacher-per-step 128 \
  --validation "$D/eval/stsb/stsb-en-dev.csv" --token-pooling weighted --bidirectional \
  --steps 3000 --stop-after 1200 --threads 2 --seed 0 --lr-lm 4e-4 --lr-pooler 5e-4 || [ $? -eq 3 ]
bash scripts/stage_folder.sh "$W/stage1/train_state" models/moeedb-tiny-lm "$W/stage1-1200"

# Stages 2 and 3: contrastive pairs, Banking77 label pairs, CoSENT on STS-B
# train and continued distillation, with a lexical channel in the pooler.
#   train_pairs FROM_DIR OUT_DIR [schedule flags...]
train_pairs() {
  $BIN train embed --model "$1" --out "$2" \
    --pairs "$D/pairs/nli_triplets.tsv,$D/pairs/positive_pairs.tsv" --labeled "$D/eval/banking77/train.csv" \
    --scored "$D/eval/stsb/stsb-en-train.csv" --validation "$D/eval/stsb/stsb-en-dev.csv" \
    --teacher "$W/teacher/texts.txt,$W/teacher/vectors.f32" \
    --token-pooling weighted --bidirectional --lexical-dim 512 --threads 2 --scored-per-step 32 "${@:3}"
}

# 2. Pairs, from stage 1 (its pooler continued, with a new lexical channel;
#    its bidirectional attention kept).
train_pairs "$W/stage1-1200" "$W/stage2" --teacher-per-step 32 --steps 1000 --seed 0 --lr-lm 2e-4 --lr-pooler 3e-4

# 3. Pairs again, from stage 2 (a second warm-up and cosine schedule at
#    lower peak rates, another seed, more teacher-only texts per step).
train_pairs "$W/stage2" "$W/stage3" --teacher-per-step 48 --steps 800 --seed 1 --lr-lm 1.5e-4 --lr-pooler 2e-4

# 4. Side terms, from stage 3: the same contrastive terms also on the
#    training-free HS poolings (last, mean, layers-mean) and on the router
#    logits averaged over tokens (RW, as embedding.json reads it), with
#    stage 3's own vectors (the pooled part of HS) as the distillation
#    teacher that holds its HS in place.
mkdir -p "$W/self"
head -n 108987 "$W/teacher/all.txt" > "$W/self/texts.txt"   # the training sentences
if [ ! -s "$W/self/vectors.f32" ]; then
  $BIN embed --model "$W/stage3" --prompt none --hs-pooling trained < "$W/self/texts.txt" |
    node eval/teacher/self_vectors.js 512 "$W/self/vectors.f32.part"
  mv "$W/self/vectors.f32.part" "$W/self/vectors.f32"
fi
$BIN train embed --model "$W/stage3" --out "$W/stage4" \
  --pairs "$D/pairs/nli_triplets.tsv,$D/pairs/positive_pairs.tsv" --labeled "$D/eval/banking77/train.csv" \
  --scored "$D/eval/stsb/stsb-en-train.csv" --validation "$D/eval/stsb/stsb-en-dev.csv" \
  --teacher "$W/self/texts.txt,$W/self/vectors.f32" \
  --token-pooling weighted --bidirectional --lexical-dim 512 --threads 2 --scored-per-step 32 \
  --steps 400 --seed 2 --lr-lm 1e-4 --lr-pooler 1e-4 --rw-weight 0.3 --rw-pooling mean --hs-pooling-weight 0.2
# 5. Passages, from stage 4: inverse-cloze pairs (scripts/ict_pairs.js; 21,805
#    from the 12 books) as a fourth pair source, texts cut at 128 tokens.
node scripts/ict_pairs.js "$W/ict.tsv" 24000 1 $(ls "$D"/corpus/openstax/*.txt | grep -v SOURCES)
$BIN train embed --model "$W/stage4" --out "$W/stage5" \
  --pairs "$D/pairs/nli_triplets.tsv,$D/pairs/positive_pairs.tsv,$W/ict.tsv" --labeled "$D/eval/banking77/train.csv" \
  --scored "$D/eval/stsb/stsb-en-train.csv" --validation "$D/eval/stsb/stsb-en-dev.csv" \
  --teacher "$W/self/texts.txt,$W/self/vectors.f32" \
  --token-pooling weighted --bidirectional --lexical-dim 512 --threads 2 --scored-per-step 32 \
  --steps 400 --seed 3 --lr-lm 1e-4 --lr-pooler 1e-4 --rw-weight 0.3 --rw-pooling mean --hs-pooling-weight 0.2 \
  --max-tokens 128
# 6. The shipped folder (its embedding.json, in git, reads RW as the mean).
mkdir -p "$OUT"
cp "$W/stage5"/{config.json,model.safetensors,tokenizer.json,pooler.json,pooler.safetensors} "$OUT"/
cp "$W/stage5"/embed_training_log.json "$W/stage5"/embed_*curve.png "$OUT"/
$BIN model calibrate --model "$OUT"
