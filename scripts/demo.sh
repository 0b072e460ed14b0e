#!/usr/bin/env bash
# The main job: set up, ingest a small document set into a collection and run
# a few fused searches (cos_HS + alpha * cos_RW), printing readable results.
# Until the trained default model ships, the model is an OLMoE-shaped model
# with the real OLMoE tokenizer and random weights: the ranking shows the
# mechanics (exact and near-exact matches first), not learned semantics.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

MODEL="build/demo-model"
if [ ! -f "$MODEL/model.safetensors" ]; then
  ./build/moeedb model init --config bench/configs/olmoe-small.json \
    --tokenizer tests/data/tokenizers/olmoe/tokenizer.json --seed 0 --out "$MODEL"
fi
./build/moeedb model info --model "$MODEL"

DB="build/demo-db"
rm -rf "$DB"
./build/moeedb ingest --db "$DB" --collection demo --model "$MODEL" --index-hs hnsw --index-rw hnsw examples/docs.jsonl

for q in "A man is playing a flute." "A woman is slicing an onion." "Two dogs are running in the snow."; do
  echo
  echo "query: $q"
  ./build/moeedb search --db "$DB" --collection demo --k 3 --format text "$q"
done
echo
echo "query (RW only, filter row < 100): A man is playing a flute."
./build/moeedb search --db "$DB" --collection demo --k 3 --mode rw --filter '{"row": {"$lt": 100}}' --format text \
  "A man is playing a flute."
