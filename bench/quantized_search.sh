#!/usr/bin/env bash
# Quantized codes in RAM, full rows on disk, exact re-scoring
# (bench/quantized_search.cpp), on two sets of vectors:
#   1. real text embedded by the embedded default model (HS 1024 + RW 32):
#      the documents the first DOCS texts of build/bench-quantized/texts.txt:
#      eval/teacher/sentences.js --corpus's sentences (training sentences,
#      then the modern-English corpora's: 458,078), then each joined with the
#      next, then with the next two (the overlapping chunks a RAG ingest
#      makes), 1,374,231 texts in all; embedded once with `moeedb embed` into
#      build/bench-quantized/vectors.f32 (kept out of git), which grows to the
#      largest DOCS asked for and resumes where an interrupted run stopped.
#      The queries: the first QUERIES distinct first sentences of STS-B's test
#      pairs (held out: the list never holds an STS-B dev or test sentence, so
#      no document contains a query); alpha 0.15, the model's;
#   2. OLMoE-shaped synthetic vectors (HS 2048 + RW 1024, clustered), alpha 1.
# Each prints its table (stderr) and one JSON object, saved beside the vectors.
#
# Usage: bash bench/quantized_search.sh [DOCS=100000] [QUERIES=200] [OLMOE_DOCS=DOCS (0: none)]
# The indexes and Faiss baselines run are the environment's DEFAULT_CONFIGS,
# OLMOE_CONFIGS, DEFAULT_FAISS and OLMOE_FAISS (quantized_search's --configs
# and --faiss; "none" for no Faiss baseline), defaults below. The OLMoE set
# leaves out HNSW over Faiss's scalar and PQ codes: Debian's generic Faiss
# build takes over ten minutes each at 3,072 dimensions.
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
DOCS="${1:-100000}"; QUERIES="${2:-200}"; OLMOE_DOCS="${3:-$DOCS}"
DEFAULT_CONFIGS="${DEFAULT_CONFIGS:-flat/binary,ivf/binary,hnsw/binary,ivf/pq,hnsw/pq,hnsw/none,hnsw/sq8}"
OLMOE_CONFIGS="${OLMOE_CONFIGS:-flat/binary,ivf/binary,hnsw/binary,ivf/pq,hnsw/none}"
DEFAULT_FAISS="${DEFAULT_FAISS:-binaryflat,hnswsq,ivfpq}"
OLMOE_FAISS="${OLMOE_FAISS:-binaryflat,ivfpq}"
WORK=build/bench-quantized
VECTORS="$WORK/vectors.f32"
mkdir -p "$WORK"
[ -x build/bench/quantized_search ] || ninja -C build quantized_search >&2
N="$DOCS"
if [ ! -s "$WORK/texts.txt" ]; then
  node eval/teacher/sentences.js ../shared/data "$WORK/sentences.txt" --corpus >&2
  awk '{ s[NR] = $0 } END { for (i = 1; i <= NR; i++) print s[i]
                            for (i = 1; i < NR; i++) print s[i] " " s[i + 1]
                            for (i = 1; i + 1 < NR; i++) print s[i] " " s[i + 1] " " s[i + 2] }' \
    "$WORK/sentences.txt" > "$WORK/texts.txt.tmp"
  mv "$WORK/texts.txt.tmp" "$WORK/texts.txt"
fi
[ "$(wc -l < "$WORK/texts.txt")" -ge "$N" ] || { echo "only $(wc -l < "$WORK/texts.txt") texts, $N needed" >&2; exit 1; }
# Vectors embedded so far: the file's first header word (its row count).
HAVE=0
[ "$(stat -c %s "$VECTORS" 2>/dev/null || echo 0)" -ge 24 ] && HAVE=$(od -An -t u8 -N8 "$VECTORS" | tr -d ' ')
if [ "$HAVE" -lt "$N" ]; then
  echo "embedding texts $((HAVE + 1))..$N with the default model (once)..." >&2
  awk -v from="$((HAVE + 1))" -v to="$N" 'NR > to { exit } NR >= from' "$WORK/texts.txt" | "$BIN" embed --stats \
    | build/bench/quantized_search --append "$VECTORS"
fi
if [ ! -s "$WORK/queries-$QUERIES.f32" ]; then
  node -e 'const { parseCsv } = require("./eval/teacher/csv"); const seen = new Set();
    for (const r of parseCsv(require("fs").readFileSync(process.argv[1], "utf8")))
      if (r.length >= 3) seen.add(r[0].replace(/\s+/g, " ").trim());
    const q = [...seen].slice(0, +process.argv[2]);
    if (q.length < +process.argv[2]) { console.error(`only ${q.length} STS-B test sentences`); process.exit(1); }
    console.log(q.join("\n"));' ../shared/data/eval/stsb/stsb-en-test.csv "$QUERIES" > "$WORK/queries-$QUERIES.txt"
  rm -f "$WORK/queries-$QUERIES.f32.tmp"
  "$BIN" embed < "$WORK/queries-$QUERIES.txt" | build/bench/quantized_search --append "$WORK/queries-$QUERIES.f32.tmp"
  mv "$WORK/queries-$QUERIES.f32.tmp" "$WORK/queries-$QUERIES.f32"
fi
echo "== the default model's vectors: $DOCS documents, $QUERIES queries" >&2
build/bench/quantized_search --vectors "$VECTORS" --query-vectors "$WORK/queries-$QUERIES.f32" \
  --docs "$DOCS" --queries "$QUERIES" --alpha 0.15 \
  --configs "$DEFAULT_CONFIGS" --faiss "$DEFAULT_FAISS" | tee "$WORK/default-$DOCS.json"
[ "$OLMOE_DOCS" != 0 ] || exit 0  # OLMOE_DOCS 0: the default model's set only
echo "== OLMoE-shaped vectors (2048 + 1024): $OLMOE_DOCS documents, $QUERIES queries" >&2
build/bench/quantized_search --synthetic 2048,1024 --docs "$OLMOE_DOCS" --queries "$QUERIES" --alpha 1 \
  --configs "$OLMOE_CONFIGS" --faiss "$OLMOE_FAISS" | tee "$WORK/olmoe-$OLMOE_DOCS.json"
