#!/usr/bin/env bash
# Makes a model folder from a distillation stage's checkpoint (the trained
# weights and pooler in STATE_DIR, `train embed`'s train_state/), with the
# language model's config (marked bidirectional, as the stage trained it) and
# tokenizer: what the next stage starts from.
#   scripts/stage_folder.sh STATE_DIR LM_DIR OUT_DIR
set -euo pipefail
STATE="$1" LM="$2" OUT="$3"
mkdir -p "$OUT"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["is_causal"]=False; json.dump(c,open(sys.argv[2],"w"),indent=2)' \
  "$LM/config.json" "$OUT/config.json"
cp "$LM/tokenizer.json" "$OUT/"
cp "$STATE"/pooler.{json,safetensors} "$OUT/"
cp "$STATE/params.safetensors" "$OUT/model.safetensors"
