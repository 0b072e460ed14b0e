#!/usr/bin/env bash
# Ingest tokens/s against --batch-tokens (256, 1024, 4096, 16384) per format
# and routing mode on the OLMoE-shaped random checkpoint (hidden 1024, 8
# layers, 64 experts x 512, top-8), 128 texts x 256 tokens, the way `moeedb
# embed` runs them, with the per-stage ns/token; then the same with every
# kernel capped at AVX2. Medians of interleaved repeats. About 45 minutes on
# 2 cores.
# Usage: bash bench/batch_scaling.sh [REPEATS=3] [extra batch_scaling flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS="${1:-3}"; shift || true
source bench/olmoe_shaped_model.sh
CONFIGS=f32:none:learned,f32:int8:learned,bf16:none:learned,f32:none:top1,f32:int8:top1,bf16:none:top1
./build/bench/batch_scaling --model "$MODEL" --repeats "$REPEATS" --configs "$CONFIGS" "$@"
echo
# Without AVX-512 the bf16 weights are widened to f32: no bf16 rows here.
./build/bench/batch_scaling --model "$MODEL" --repeats "$REPEATS" --kernels avx2 \
  --configs f32:none:learned,f32:int8:learned,f32:none:top1,f32:int8:top1 "$@"
