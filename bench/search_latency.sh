#!/usr/bin/env bash
# A 12-token query embedded and searched, as a client sees it, per format,
# beside llama.cpp's time to embed the same number of tokens: on the
# OLMoE-shaped model (bench/olmoe_shaped_model.sh), `moeedb serve` at default
# flags with a collection of DOCS STS-B sentences (flat HS and RW: exact
# search), queried by bench/search_latency.mjs one query at a time and from
# 16 concurrent clients (p50/p99 ms, queries/s); llama.cpp (built by
# bench/llama_cpp.sh, which writes the GGUFs) through `llama-bench -p T -n 0
# -embd 1` with T the tokens moeedb's forward saw (the prompt template
# included), its best of batch/ubatch and flash attention, as ms per query.
# Usage: bash bench/search_latency.sh [FORMATS="int8 bf16 f32 top1"] [DOCS=2000] [THREADS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
FORMATS="${1:-int8 bf16 f32 top1}"; DOCS="${2:-2000}"; THREADS="${3:-2}"
BIN=./build/moeedb
source bench/olmoe_shaped_model.sh
WORK=build/bench-search-latency
LLAMA_WORK=build/bench-llama
BINS=build/llama.cpp-pypi/src/build/bin
mkdir -p "$WORK"
[ -x "$BINS/llama-bench" ] && ls "$LLAMA_WORK"/olmoe-*.gguf > /dev/null 2>&1 \
  || { echo "run bench/llama_cpp.sh first (it builds llama.cpp and writes the GGUFs)" >&2; exit 1; }
# The sample's first sentences are the documents, its second ones the queries (CSV: quoted fields hold commas).
node -e 'const { parseCsv } = require("./eval/teacher/csv"); const fs = require("fs");
  const rows = parseCsv(fs.readFileSync("tests/data/stsb-sample.csv", "utf8")).filter((r) => r.length >= 3);
  const one = (s) => s.replace(/\s+/g, " ").trim();
  fs.writeFileSync(process.argv[1], rows.slice(0, +process.argv[3]).map((r) => one(r[0])).join("\n") + "\n");
  fs.writeFileSync(process.argv[2], rows.map((r) => one(r[1])).join("\n") + "\n");' \
  "$WORK/docs.txt" "$WORK/queries.txt" "$DOCS"
source bench/serve_bench.sh
serve_bench_cpu_flags
for FMT in $FORMATS; do
  case "$FMT" in
    int8) FLAGS="--quant int8"; GG=olmoe-q8_0.gguf ;;
    bf16) FLAGS="--dtype bf16"; GG=olmoe-bf16.gguf ;;
    f32) FLAGS=""; GG=olmoe-f32.gguf ;;
    top1) FLAGS="--routing top1"; GG=olmoe-f32-top1.gguf ;;
    *) echo "unknown format $FMT" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  serve_bench_start --model "$MODEL" $FLAGS --threads "$THREADS" --served-model-name bench
  node bench/search_latency.mjs "http://127.0.0.1:$PORT" "$WORK/docs.txt" "$WORK/queries.txt" 12 "${QUERIES:-100}" 16 > "$WORK/$FMT.json"
  serve_bench_stop
  T=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).model_tokens)' "$WORK/$FMT.json")
  "$BINS/llama-bench" -m "$LLAMA_WORK/$GG" -t "$THREADS" -p "$T" -n 0 -embd 1 -b 512 -ub 256,512 -fa on,off -r 10 -o csv \
    2> "$WORK/llama.err" > "$WORK/llama-$FMT.csv" || { tail -5 "$WORK/llama.err" >&2; exit 1; }
  node -e 'const fs = require("fs"); const { parseCsv } = require("./eval/teacher/csv");
    const r = JSON.parse(fs.readFileSync(process.argv[1]));
    const [head, ...rows] = parseCsv(fs.readFileSync(process.argv[2], "utf8")).filter((x) => x.length > 1);
    const ts = Math.max(...rows.map((x) => Number(x[head.indexOf("avg_ts")])));
    const f = (x) => x.toFixed(2);
    console.log(`${process.argv[3]}: ${r.documents} documents, a ${r.query_tokens}-token query (${r.model_tokens} tokens with the prompt): ` +
      `one at a time p50 ${f(r.one.p50_ms)} / p99 ${f(r.one.p99_ms)} ms (${r.one.qps.toFixed(0)} queries/s); ` +
      `${r.many.clients} concurrent p50 ${f(r.many.p50_ms)} / p99 ${f(r.many.p99_ms)} ms (${r.many.qps.toFixed(0)} queries/s); ` +
      `llama.cpp embeds ${r.model_tokens} tokens in ${f(1000 * r.model_tokens / ts)} ms (llama-bench best ${ts.toFixed(1)} t/s)`);' \
    "$WORK/$FMT.json" "$WORK/llama-$FMT.csv" "$FMT"
done
