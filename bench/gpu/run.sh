#!/usr/bin/env bash
# The engine on a CUDA GPU, one command, under 8 minutes: builds engine/ alone
# (MOEEDB_ENGINE_ONLY, MOEEDB_CUDA) against the machine's CUDA libtorch (the
# one inside the installed PyTorch wheel, or $LIBTORCH), writes an OLMoE-shaped
# random checkpoint, and prints bench/embed_throughput's figures with
# --device cuda (tokens/s per format and routing mode, fidelity vs f32).
# Usage: bash bench/gpu/run.sh [OUT_DIR=${OUT:-build/gpu}]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR="${1:-${OUT:-build/gpu}}"
DEVICE="${DEVICE:-cuda}"   # DEVICE=cpu LIBTORCH=... : a dry run of the same steps on a CPU machine
CUDA_FLAG=ON; [ "$DEVICE" = cpu ] && CUDA_FLAG=OFF
mkdir -p "$OUT_DIR"
exec > >(tee "$OUT_DIR/gpu_bench.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
PREFIX="${LIBTORCH:-}"
if [ -z "$PREFIX" ]; then
  PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
fi
JSON_ARGS=()
if [ ! -f /usr/include/nlohmann/json.hpp ]; then
  # No nlohmann-json3-dev there: use build/gpu-deps/nlohmann/json.hpp, copied
  # on the build machine (cp -r /usr/include/nlohmann build/gpu-deps/) and
  # carried along with the working tree.
  [ -f build/gpu-deps/nlohmann/json.hpp ] || { echo "no nlohmann/json.hpp: install nlohmann-json3-dev or carry build/gpu-deps" >&2; exit 1; }
  JSON_ARGS=(-DMOEEDB_NLOHMANN_INCLUDE_DIR="$PWD/build/gpu-deps")
fi
# The wheel's libtorch uses the pre-C++11 ABI or not; TorchConfig.cmake says which.
cmake -S . -B build/gpu-engine -DCMAKE_BUILD_TYPE=Release -DMOEEDB_ENGINE_ONLY=ON -DMOEEDB_CUDA=$CUDA_FLAG \
  -DCMAKE_PREFIX_PATH="$PREFIX" "${JSON_ARGS[@]}" > "$OUT_DIR/cmake.log"
time cmake --build build/gpu-engine --target embed_throughput -j "$(nproc)" > "$OUT_DIR/build.log"
MODEL=build/gpu-engine/olmoe-shaped-8l
time ./build/gpu-engine/bench/embed_throughput --model "$MODEL" --init-config bench/configs/olmoe-shaped-8l.json \
  --device "$DEVICE" --threads "$(nproc)" --texts 64 --tokens 256 --batch-tokens 16384 --stream-texts 256 \
  --stream-dtype bf16 ${GPU_BENCH_FLAGS:-}
