#!/usr/bin/env bash
# moeedb beside llama.cpp at its best settings, on the same weights: the
# OLMoE-shaped model (bench/olmoe_shaped_model.sh) written as GGUF
# (bench/llama_cpp/to_gguf.mjs), in each format: f32, bf16, moeedb's int8
# against llama.cpp's Q8_0 (llama-quantize), and top-1 routing in f32 (the
# GGUF's expert_used_count 1 against `--routing top1`). THREADS threads.
#
# 1. TEXTS texts of about 256 tokens (STS-B sentences joined), all at once:
#    llama.cpp's `llama-embedding` (last-token pooling) swept over its
#    context, batch, ubatch and parallel sequences (SETTINGS below), one run
#    each; its best setting then runs ROUNDS rounds interleaved with
#    `moeedb embed --stats` at default flags. Rates: llama.cpp's from its own
#    log (first batch decoded to its performance print: load and tokenizing
#    excluded), moeedb's from --stats (model load excluded). Peak RSS of
#    every run (llama.cpp's mapped weights count as they are resident).
# 2. One text (the first): `llama-bench -p 256 -n 0 -embd 1` swept over
#    batch/ubatch and flash attention (a warm-up, then its repetitions' mean
#    t/s), the best beside the median of ROUNDS `moeedb embed --stats` runs
#    on that text ONE_REPEATS times, one forward each (--workers 1
#    --batch-tokens 1: a lone text's forward runs on every thread, as at
#    default flags; the first forward of each run is the process's cold one).
# Prints every run, the medians, moeedb / llama.cpp, and the CPU flags.
#
# llama.cpp is not a Debian 12 package: PyPI's llama-cpp-python sdist
# (pinned below by version and sha256) carries llama.cpp's source in
# vendor/llama.cpp, which this script builds (CPU, native) once into
# build/llama.cpp-pypi. Its llama.cpp commit is in its CHANGELOG.
#
# Usage: bash bench/llama_cpp.sh [ROUNDS=3] [FORMATS="f32 bf16 int8 top1"] [TEXTS=32] [THREADS=2]
# LLAMA_SETTINGS="C,UB ..." sweeps only those (e.g. the best of a full run).
source "$(dirname "$0")/../scripts/prologue.sh"  # strict mode, the checkout root, BIN
ROUNDS="${1:-3}"; FORMATS="${2:-f32 bf16 int8 top1}"; TEXTS="${3:-32}"; THREADS="${4:-2}"
source bench/olmoe_shaped_model.sh
LLAMA_CPP_PYTHON=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# llama-embedding's settings swept: context (its batch is the context: it
# fills a batch with whole texts up to it), ubatch, and its defaults (no
# flags: the GGUF's 4096-token context, ubatch 512). One parallel sequence:
# llama-embedding then keeps one KV cache for every text of a batch (more
# sequences split the context between them, and a text is 257-270 tokens).
SETTINGS="${LLAMA_SETTINGS:-default 1024,1024 2048,2048 4096,4096 8192,8192 16384,16384 4096,1024 8192,512}"
ONE_REPEATS=9  # the one text, embedded this many times one forward each (the first one cold)
WORK=build/bench-llama
LLAMA=build/llama.cpp-pypi
BINS="$LLAMA/src/build/bin"
mkdir -p "$WORK" "$LLAMA"

if [ ! -x "$BINS/llama-embedding" ] || [ ! -x "$BINS/llama-quantize" ] || [ ! -x "$BINS/llama-bench" ]; then
  SDIST="$LLAMA/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz"
  [ -f "$SDIST" ] || python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PYTHON" -d "$LLAMA"
  echo "$LLAMA_CPP_PYTHON_SHA256  $SDIST" | sha256sum -c --quiet
  rm -rf "$LLAMA/src" "$LLAMA/sdist" && mkdir -p "$LLAMA/sdist"
  tar -xzf "$SDIST" -C "$LLAMA/sdist"
  mv "$LLAMA/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp" "$LLAMA/src"
  grep -m1 -o 'llama.cpp@[0-9a-f]*' "$LLAMA/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON/CHANGELOG.md" > "$LLAMA/commit"
  rm -rf "$LLAMA/sdist"
  cmake -S "$LLAMA/src" -B "$LLAMA/src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF > /dev/null
  cmake --build "$LLAMA/src/build" --target llama-embedding llama-quantize llama-bench > /dev/null
fi
echo "llama.cpp: $(cat "$LLAMA/commit" 2>/dev/null || echo '(commit unknown)') from llama-cpp-python $LLAMA_CPP_PYTHON's sdist, built with GGML_NATIVE"

awk -F, -v n="$TEXTS" '{ gsub(/"/, ""); for (i = 1; i <= 2; i++) if ($i != "") { s = s (s == "" ? "" : " ") $i; if (length(s) >= 1000) { print s; s = ""; if (++k == n) exit } } }' \
  tests/data/stsb-sample.csv > "$WORK/texts.txt"
[ "$(wc -l < "$WORK/texts.txt")" = "$TEXTS" ] || { echo "could not build $TEXTS texts" >&2; exit 1; }
for _ in $(seq 1 "$ONE_REPEATS"); do head -1 "$WORK/texts.txt"; done > "$WORK/one.txt"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512.*|avx_vnni|amx.*)$' | tr '\n' ' ')"

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ratio() { awk "BEGIN { printf \"%.2f\", $1 / $2 }"; }
# Runs a command (stdin and stdout as given) and writes its peak RSS in MB to $WORK/rss.
peak_rss() {
  python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[2:])
open(sys.argv[1], "w").write("%.0f\n" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
sys.exit(r.returncode)' "$WORK/rss" "$@"
}
gguf() {  # the GGUF file of a format, written once
  local f="$WORK/olmoe-$1.gguf"
  if [ ! -f "$f" ]; then
    case "$1" in
      f32|bf16) node bench/llama_cpp/to_gguf.mjs "$MODEL" "$f" "$1" ;;
      f32-top1) node bench/llama_cpp/to_gguf.mjs "$MODEL" "$f" f32 1 ;;
      q8_0) "$BINS/llama-quantize" "$(gguf f32)" "$f" Q8_0 > "$WORK/quantize.log" 2>&1 ;;
    esac
  fi
  echo "$f"
}
llama_rate() {  # GGUF SETTING: tokens/s of llama-embedding's batches, from its own log's timestamps (M.SS.mmm.uuu)
  local c ub sizes=()
  IFS=, read -r c ub <<< "$2"
  [ "$2" = default ] || sizes=(-c "$c" -b "$c" -ub "$ub")
  peak_rss "$BINS/llama-embedding" -m "$1" -f "$WORK/texts.txt" -t "$THREADS" "${sizes[@]}" \
    --pooling last --no-warmup --perf -lv 4 > /dev/null 2> "$WORK/llama.err" || { tail -5 "$WORK/llama.err" >&2; return 1; }
  awk 'function t(s,  a) { split(s, a, "."); return a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 }
       /batch_decode: n_tokens =/ { if (start == "") start = t($1); for (i = 1; i <= NF; i++) if ($i == "n_tokens") n += $(i + 2) + 0 }
       /llama_perf_context_print/ && end == "" { end = t($1) }
       END { if (n > 0 && end > start) printf "%.1f\n", n / (end - start) }' "$WORK/llama.err"
}
moeedb_rate() {  # TEXTS_FILE FLAGS...: tokens/s of `moeedb embed --stats` (model load excluded)
  local texts="$1"; shift
  peak_rss "$BIN" embed --model "$MODEL" "$@" --stats < "$texts" 2> "$WORK/moeedb.err" > /dev/null
  awk '/tokens\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "tokens/s") print $i }' "$WORK/moeedb.err"
}
llama_one() {  # GGUF: the best mean t/s of llama-bench's one-text sweep, with its setting
  "$BINS/llama-bench" -m "$1" -t "$THREADS" -p 256 -n 0 -embd 1 -b 256,512 -ub 256,512 -fa on,off -r 3 -o csv \
    2> /dev/null > "$WORK/llama-bench.csv"
  python3 -c 'import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["n_prompt"] == "256"]
best = max(rows, key=lambda r: float(r["avg_ts"]))
print("%.1f b=%s,ub=%s,fa=%s" % (float(best["avg_ts"]), best["n_batch"], best["n_ubatch"], best["flash_attn"]))' "$WORK/llama-bench.csv"
}

SUMMARY=""
for FMT in $FORMATS; do
  case "$FMT" in
    f32) FLAGS=""; GG=$(gguf f32) ;;
    bf16) FLAGS="--dtype bf16"; GG=$(gguf bf16) ;;
    int8) FLAGS="--quant int8"; GG=$(gguf q8_0) ;;
    top1) FLAGS="--routing top1"; GG=$(gguf f32-top1) ;;
    *) echo "unknown format $FMT" >&2; exit 2 ;;
  esac
  best=""; best_rate=0; def_rate="(not in the sweep)"; def_rss="-"
  for s in $SETTINGS; do
    l=$(llama_rate "$GG" "$s") || l=""
    echo "$FMT sweep: llama.cpp -c,-ub $s: ${l:-failed} tokens/s, peak RSS $(cat "$WORK/rss") MB"
    [ "$s" != default ] || { def_rate="${l:-failed}"; def_rss=$(cat "$WORK/rss"); }
    if [ -n "$l" ] && awk "BEGIN { exit !($l > $best_rate) }"; then best="$s"; best_rate="$l"; fi
  done
  [ -n "$best" ] || { echo "$FMT: every llama.cpp setting failed" >&2; exit 1; }
  : > "$WORK/m.rates"; : > "$WORK/l.rates"; : > "$WORK/m.rss"; : > "$WORK/l.rss"; : > "$WORK/m1.rates"
  for r in $(seq 1 "$ROUNDS"); do
    # shellcheck disable=SC2086
    m=$(moeedb_rate "$WORK/texts.txt" $FLAGS); echo "$m" >> "$WORK/m.rates"; cat "$WORK/rss" >> "$WORK/m.rss"
    l=$(llama_rate "$GG" "$best"); echo "$l" >> "$WORK/l.rates"; cat "$WORK/rss" >> "$WORK/l.rss"
    # shellcheck disable=SC2086
    m1=$(moeedb_rate "$WORK/one.txt" $FLAGS --workers 1 --batch-tokens 1); echo "$m1" >> "$WORK/m1.rates"
    echo "$FMT round $r: $TEXTS texts: moeedb $m tokens/s ($(tail -1 "$WORK/m.rss") MB); llama.cpp $l tokens/s ($(tail -1 "$WORK/l.rss") MB, $best); one text: moeedb $m1 tokens/s"
  done
  read -r l1 l1set <<< "$(llama_one "$GG")"
  mm=$(median < "$WORK/m.rates"); lm=$(median < "$WORK/l.rates"); m1=$(median < "$WORK/m1.rates")
  mr=$(median < "$WORK/m.rss"); lr=$(median < "$WORK/l.rss")
  line="$FMT ($(basename "$GG")): $TEXTS texts moeedb $mm / llama.cpp $lm tokens/s = $(ratio "$mm" "$lm")x (llama.cpp's best: -c,-ub $best); peak RSS moeedb $mr / llama.cpp $lr MB = $(ratio "$mr" "$lr") (llama.cpp at its defaults: $def_rate tokens/s, $def_rss MB); one text moeedb $m1 / llama.cpp $l1 tokens/s = $(ratio "$m1" "$l1")x (llama-bench's best: $l1set)"
  echo "$line"
  SUMMARY="$SUMMARY$line"$'\n'
done
echo
echo "medians of $ROUNDS rounds, $THREADS threads:"
printf '%s' "$SUMMARY"
