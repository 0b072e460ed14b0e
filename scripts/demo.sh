#!/usr/bin/env bash
# The main job: set up, ingest the example documents into a collection with
# the embedded default model (models/moeedb-tiny) and default settings, then
# search them with queries phrased in other words than the documents,
# printing one readable line per hit (fused score = cos_HS + alpha * cos_RW),
# and one hybrid query (BM25 fused beside HS and RW).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

./build/moeedb model info

DB="build/demo-db"
rm -rf "$DB"
./build/moeedb ingest --db "$DB" --collection demo examples/docs.jsonl

# The showcase queries, each with the document it means (the test
# ParaphraseSearch.DemoShowcaseQueriesFindTheirDocuments holds 5 of 6 first,
# as the shipped model finds them).
tail -n +2 examples/showcase_queries.tsv | while IFS=$'\t' read -r q expected; do
  echo
  echo "query: $q  (means: $expected)"
  ./build/moeedb search --db "$DB" --collection demo --k 3 --format text "$q"
done
echo
echo "query (filter topic = banking): My card has not come yet."
./build/moeedb search --db "$DB" --collection demo --k 3 --filter '{"topic": "banking"}' --format text \
  "My card has not come yet."
echo
echo "query (hybrid: BM25 beside HS and RW): card payment declined"
./build/moeedb search --db "$DB" --collection demo --k 3 --mode hybrid --format text "card payment declined"
