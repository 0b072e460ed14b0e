#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang-14, AddressSanitizer +
# UndefinedBehaviorSanitizer) into build-fuzz/ and runs each for SECONDS
# (default 30) from its seed corpus, tests/fuzz/corpus/NAME (copied: the
# inputs a run finds stay out of the repo). Any crash, leak, hang (10 s) or
# sanitizer report fails the run; its reproducer is left as
# build-fuzz/NAME-crash-* (keep it in the seed corpus once fixed).
#
#   tests/fuzz/run.sh [SECONDS] [NAME]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-30}"
ONLY="${2:-}"
CXX="${CXX_FUZZ:-clang++-14}"
OUT=build-fuzz
mkdir -p "$OUT"
FLAGS=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)
declare -A SOURCES=(
  [metadata_filter]="index/metadata_filter.cpp engine/status.cpp"
  [document_line]="plugin/service/document_line.cpp engine/status.cpp engine/utf8.cpp"
  [safetensors]="engine/safetensors.cpp engine/status.cpp"
  [model_config]="engine/model_config.cpp engine/model_family.cpp engine/status.cpp"
  [tokenizer]="engine/tokenizer/bpe_tokenizer.cpp engine/tokenizer/byte_level.cpp engine/utf8.cpp engine/status.cpp"
)
EXTRA_tokenizer=(-DMOEEDB_TEST_DATA_DIR="\"$PWD/tests/data\"" $(pkg-config --libs icu-uc icu-i18n))
failed=0
for name in metadata_filter document_line safetensors model_config tokenizer; do
  [ -n "$ONLY" ] && [ "$ONLY" != "$name" ] && continue
  extra=()
  [ "$name" = tokenizer ] && extra=("${EXTRA_tokenizer[@]}")
  # shellcheck disable=SC2086
  "$CXX" "${FLAGS[@]}" "tests/fuzz/fuzz_$name.cpp" ${SOURCES[$name]} "${extra[@]}" -o "$OUT/fuzz_$name"
  work="$OUT/work/$name"
  rm -rf "$work" && mkdir -p "$work"
  cp -r "tests/fuzz/corpus/$name/." "$work/"
  log="$OUT/$name.log"
  if "$OUT/fuzz_$name" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$OUT/$name-" -print_final_stats=1 "$work" > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz $name: ${SECONDS_EACH}s, $runs runs, no finding"
  else
    echo "fuzz $name: FAILED (see $log)"
    tail -n 30 "$log"
    failed=1
  fi
done
exit $failed
