#!/usr/bin/env bash
# Quantized codes in RAM, full rows on disk, exact re-scoring
# (bench/quantized_search.cpp), on two sets of vectors:
#   1. real text embedded by the embedded default model (HS 1024 + RW 32):
#      the first DOCS + QUERIES sentences of eval/teacher/sentences.js's list
#      (--corpus: training sentences, then the modern-English corpora's),
#      embedded once with `moeedb embed` into build/bench-quantized/ (kept
#      out of git; reused when there), the last QUERIES of them the queries;
#      alpha 0.15, the model's;
#   2. OLMoE-shaped synthetic vectors (HS 2048 + RW 1024, clustered), alpha 1,
#      without the HNSW builds over Faiss's scalar and PQ codes (Debian's
#      generic Faiss build takes over ten minutes each at 3,072 dimensions).
# Each prints its table (stderr) and one JSON object, saved beside the vectors.
#
# Usage: bash bench/quantized_search.sh [DOCS=100000] [QUERIES=200] [OLMOE_DOCS=DOCS]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
DOCS="${1:-100000}"; QUERIES="${2:-200}"; OLMOE_DOCS="${3:-$DOCS}"
WORK=build/bench-quantized
mkdir -p "$WORK"
[ -x build/bench/quantized_search ] || ninja -C build quantized_search >&2
N=$((DOCS + QUERIES))
if [ ! -s "$WORK/texts-$N.txt" ]; then
  node eval/teacher/sentences.js ../shared/data "$WORK/sentences.txt" --corpus >&2
  head -n "$N" "$WORK/sentences.txt" > "$WORK/texts-$N.txt"
  [ "$(wc -l < "$WORK/texts-$N.txt")" -eq "$N" ] || { echo "only $(wc -l < "$WORK/texts-$N.txt") sentences" >&2; exit 1; }
fi
if [ ! -s "$WORK/vectors-$N.jsonl" ]; then
  echo "embedding $N texts with the default model (once)..." >&2
  "$BIN" embed --stats < "$WORK/texts-$N.txt" > "$WORK/vectors-$N.jsonl.tmp"
  mv "$WORK/vectors-$N.jsonl.tmp" "$WORK/vectors-$N.jsonl"
fi
echo "== the default model's vectors: $DOCS documents, $QUERIES queries" >&2
build/bench/quantized_search --vectors "$WORK/vectors-$N.jsonl" --docs "$DOCS" --queries "$QUERIES" --alpha 0.15 \
  | tee "$WORK/default-$DOCS.json"
echo "== OLMoE-shaped vectors (2048 + 1024): $OLMOE_DOCS documents, $QUERIES queries" >&2
build/bench/quantized_search --synthetic 2048,1024 --docs "$OLMOE_DOCS" --queries "$QUERIES" --alpha 1 \
  --configs flat/binary,ivf/binary,hnsw/binary,ivf/pq,hnsw/none --faiss binaryflat,ivfpq \
  | tee "$WORK/olmoe-$OLMOE_DOCS.json"
