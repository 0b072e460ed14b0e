#!/usr/bin/env bash
# An embedding server's memory before, during and after a large ingest, per
# format, on the OLMoE-shaped model (bench/olmoe_shaped_model.sh): `moeedb
# serve` at default flags, its RSS once listening (the weights), then
# PASSES passes of 128 texts of about 256 tokens sent by 16 concurrent
# keep-alive clients (build/bench/load_bench, 8 texts a request), its peak
# RSS while they ran (VmHWM, reset once listening), and its RSS again
# IDLE_S seconds after the last request.
# Beside it, in the same script, the same server with the idle release off
# (MOEEDB_ACTIVATION_IDLE_MS=0: the activation cache and glibc keep what the
# forwards freed), the baseline the release is measured against.
# Usage: bash bench/server_idle_rss.sh [FORMATS="int8 bf16 f32"] [PASSES=3] [IDLE_S=3]
set -euo pipefail
cd "$(dirname "$0")/.."
FORMATS="${1:-int8 bf16 f32}"; PASSES="${2:-3}"; IDLE_S="${3:-3}"
BIN=./build/moeedb
source bench/olmoe_shaped_model.sh
WORK=build/bench-server-rss
mkdir -p "$WORK"
[ -x build/bench/load_bench ] || ninja -C build load_bench >&2
source bench/serve_bench.sh
serve_bench_texts "$WORK/texts.txt"
serve_bench_cpu_flags
mb() { awk -v k="$2:" '$1 == k { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
for FMT in $FORMATS; do
  case "$FMT" in
    int8) FLAGS="--quant int8" ;;
    bf16) FLAGS="--dtype bf16" ;;
    f32) FLAGS="" ;;
    *) echo "unknown format $FMT" >&2; exit 2 ;;
  esac
  for IDLE_MS in 1000 0; do
    export MOEEDB_ACTIVATION_IDLE_MS=$IDLE_MS
    # shellcheck disable=SC2086
    serve_bench_start --model "$MODEL" $FLAGS --served-model-name bench
    start=$(mb $SERVER VmRSS)
    echo 5 > "/proc/$SERVER/clear_refs"  # VmHWM from here: the ingest's peak, not the model load's
    for _ in $(seq 1 "$PASSES"); do
      ./build/bench/load_bench "$PORT" 16 all "$WORK/texts.txt" 8 bench > "$WORK/load.out"
    done
    peak=$(mb $SERVER VmHWM); busy=$(mb $SERVER VmRSS)
    sleep "$IDLE_S"
    idle=$(mb $SERVER VmRSS)
    serve_bench_stop
    what=$([ "$IDLE_MS" = 0 ] && echo "idle release off" || echo "idle release after ${IDLE_MS} ms")
    echo "$FMT ($what): RSS at start $start MB, peak $peak MB, after the last request $busy MB, ${IDLE_S} s idle $idle MB ($(awk "BEGIN { printf \"%.2f\", $idle / $start }")x start)"
  done
done
