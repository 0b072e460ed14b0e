#!/usr/bin/env bash
# Ingest throughput per weight format and routing mode on an OLMoE-shaped
# random checkpoint (hidden 1024, 8 layers, 16 heads, 64 experts x 512, top-8,
# vocab 50304; 3.8 GB in f32), with the same-run dense-GEMM rate, peak RSS per
# configuration, int8/bf16 fidelity on 100 STS-B sentences, and the streaming
# embedder on mixed lengths. About 10 minutes on 2 cores.
# Usage: bash bench/embed_throughput.sh [THREADS=2] [extra embed_throughput flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${1:-2}"; shift || true
source bench/olmoe_shaped_model.sh
awk -F, '{ gsub(/"/, "", $1) } $1 != "" && k++ < 100 { print $1 }' tests/data/eval/stsb/stsb-en-test.csv \
  > build/bench-embed/texts.txt
./build/bench/embed_throughput --model "$MODEL" --threads "$THREADS" --texts 16 --tokens 256 --batch-tokens 1024 \
  --fidelity-texts build/bench-embed/texts.txt "$@"
