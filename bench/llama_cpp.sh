#!/usr/bin/env bash
# moeedb beside llama.cpp on the same weights: the OLMoE-shaped model
# (bench/olmoe_shaped_model.sh) written as GGUF (bench/llama_cpp/to_gguf.mjs)
# and run by llama.cpp's `llama-embedding` (all texts in one batch, last-token
# pooling, THREADS threads), against `moeedb embed --stats` with its default
# flags, in each format: f32, bf16, and moeedb's int8 against llama.cpp's
# Q8_0 (llama-quantize). TEXTS texts of about 256 tokens (STS-B sentences
# joined), ROUNDS interleaved rounds; prints tokens/s of each round, the
# medians and moeedb / llama.cpp, with the CPU flags.
#
# llama.cpp is not a Debian 12 package: the npm package node-llama-cpp
# (pinned in bench/llama_cpp/package.json) carries llama.cpp's source
# release as a git bundle, which this script builds (CPU, native) once into
# build/llama.cpp-src.
#
# Usage: bash bench/llama_cpp.sh [ROUNDS=3] [FORMATS="f32 bf16 int8"] [TEXTS=32] [THREADS=2]
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
ROUNDS="${1:-3}"; FORMATS="${2:-f32 bf16 int8}"; TEXTS="${3:-32}"; THREADS="${4:-2}"
source bench/olmoe_shaped_model.sh
WORK=build/bench-llama
SRC=build/llama.cpp-src
mkdir -p "$WORK"

if [ ! -x "$SRC/build/bin/llama-embedding" ] || [ ! -x "$SRC/build/bin/llama-quantize" ]; then
  (cd bench/llama_cpp && npm ci --ignore-scripts --no-audit --no-fund --omit=optional > /dev/null)
  rm -rf "$SRC"
  git clone -q bench/llama_cpp/node_modules/node-llama-cpp/llama/gitRelease.bundle "$SRC"
  cmake -S "$SRC" -B "$SRC/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF > /dev/null
  cmake --build "$SRC/build" --target llama-embedding llama-quantize > /dev/null
fi
echo "llama.cpp: commit $(git -C "$SRC" rev-parse --short HEAD), release $(node -p "require('./bench/llama_cpp/node_modules/node-llama-cpp/llama/llama.cpp.info.json').tag") (node-llama-cpp's bundle)"

awk -F, -v n="$TEXTS" '{ gsub(/"/, ""); for (i = 1; i <= 2; i++) if ($i != "") { s = s (s == "" ? "" : " ") $i; if (length(s) >= 1000) { print s; s = ""; if (++k == n) exit } } }' \
  tests/data/stsb-sample.csv > "$WORK/texts.txt"
[ "$(wc -l < "$WORK/texts.txt")" = "$TEXTS" ] || { echo "could not build $TEXTS texts" >&2; exit 1; }
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512.*|avx_vnni)$' | tr '\n' ' ')"

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
gguf() {  # the GGUF file of a format, written once
  local f="$WORK/olmoe-$1.gguf"
  if [ ! -f "$f" ]; then
    case "$1" in
      f32|bf16) node bench/llama_cpp/to_gguf.mjs "$MODEL" "$f" "$1" ;;
      q8_0) "$SRC/build/bin/llama-quantize" "$(gguf f32)" "$f" Q8_0 > "$WORK/quantize.log" 2>&1 ;;
    esac
  fi
  echo "$f"
}
llama_rate() {  # tokens/s of llama-embedding's batches (model load and tokenizing excluded)
  # from its own log's timestamps (M.SS.mmm.uuu): the first batch_decode line
  # (the batch starts) to the performance print (the last batch is done).
  "$SRC/build/bin/llama-embedding" -m "$1" -f "$WORK/texts.txt" -t "$THREADS" -c 16384 -b 16384 -ub 16384 \
    --pooling last --no-warmup --perf -lv 4 > /dev/null 2> "$WORK/llama.err"
  awk 'function t(s,  a) { split(s, a, "."); return a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 }
       /batch_decode: n_tokens =/ { if (start == "") start = t($1); for (i = 1; i <= NF; i++) if ($i == "n_tokens") n += $(i + 2) + 0 }
       /llama_perf_context_print/ && end == "" { end = t($1) }
       END { if (n > 0 && end > start) printf "%.1f\n", n / (end - start) }' "$WORK/llama.err"
}
moeedb_rate() {  # tokens/s of `moeedb embed --stats` (model load excluded)
  "$BIN" embed --model "$MODEL" "$@" --stats < "$WORK/texts.txt" 2> "$WORK/moeedb.err" > /dev/null
  awk '/tokens\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "tokens/s") print $i }' "$WORK/moeedb.err"
}
for FMT in $FORMATS; do
  case "$FMT" in
    f32) FLAGS=""; GG=$(gguf f32) ;;
    bf16) FLAGS="--dtype bf16"; GG=$(gguf bf16) ;;
    int8) FLAGS="--quant int8"; GG=$(gguf q8_0) ;;
    *) echo "unknown format $FMT" >&2; exit 2 ;;
  esac
  : > "$WORK/moeedb.rates"; : > "$WORK/llama.rates"
  for r in $(seq 1 "$ROUNDS"); do
    # shellcheck disable=SC2086
    m=$(moeedb_rate $FLAGS)
    l=$(llama_rate "$GG")
    [ -n "$l" ] || { cat "$WORK/llama.err" >&2; exit 1; }
    echo "$FMT round $r: moeedb $m tokens/s; llama.cpp $l tokens/s ($(basename "$GG"))"
    echo "$m" >> "$WORK/moeedb.rates"; echo "$l" >> "$WORK/llama.rates"
  done
  mm=$(median < "$WORK/moeedb.rates"); lm=$(median < "$WORK/llama.rates")
  echo "$FMT: moeedb / llama.cpp tokens/s (medians) = $mm / $lm = $(awk "BEGIN { printf \"%.2f\", $mm / $lm }")"
done
