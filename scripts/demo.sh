#!/usr/bin/env bash
# The main job: set up, ingest a small document set into a collection with the
# embedded default model (models/moeedb-tiny, trained by moeedb itself) and run
# a few fused searches (cos_HS + alpha * cos_RW), printing readable results.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

MODEL="models/moeedb-tiny"
./build/moeedb model info --model "$MODEL"

DB="build/demo-db"
rm -rf "$DB"
# No prompt: this small model embeds better without PromptEOL (README, evaluation).
./build/moeedb ingest --db "$DB" --collection demo --model "$MODEL" --prompt none --index-hs hnsw --index-rw hnsw \
  examples/docs.jsonl

for q in "A man plays the flute." "Someone is cutting an onion." "A polar bear slides on the snow." \
         "Someone plays a guitar." "The plane is taking off."; do
  echo
  echo "query: $q"
  ./build/moeedb search --db "$DB" --collection demo --k 3 --format text "$q"
done
echo
echo "query (RW only, filter row < 100): A man plays the flute."
./build/moeedb search --db "$DB" --collection demo --k 3 --mode rw --filter '{"row": {"$lt": 100}}' --format text \
  "A man plays the flute."
