#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang-14, AddressSanitizer +
# UndefinedBehaviorSanitizer) into build-fuzz/ and runs each for SECONDS
# (default 30) from its seed corpus, tests/fuzz/corpus/NAME (copied: the
# inputs a run finds stay out of the repo). Any crash, leak, hang (10 s) or
# sanitizer report fails the run; its reproducer is left as
# build-fuzz/NAME-crash-* (keep it in the seed corpus once fixed).
#
# The api harness (the HTTP routes over a random-weight model) compiles the
# server layer with clang, instrumented, and links the rest (engine, database,
# storage, index: libtorch code) from the regular build in build/, which must
# exist; coverage guidance and sanitizers then watch the request handling.
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
  [metadata_filter]="index/metadata_filter.cpp base/status.cpp"
  [document_line]="database/document_line.cpp base/status.cpp base/utf8.cpp"
  [safetensors]="engine/io/safetensors.cpp base/status.cpp"
  [model_config]="engine/model/model_config.cpp engine/model/model_family.cpp base/status.cpp"
  [tokenizer]="engine/tokenizer/bpe_tokenizer.cpp engine/tokenizer/byte_level.cpp engine/tokenizer/wordpiece_tokenizer.cpp base/utf8.cpp base/status.cpp"
)
EXTRA_tokenizer=(-DMOEEDB_TEST_DATA_DIR="\"$PWD/tests/data\"" $(pkg-config --libs icu-uc icu-i18n))

# The api harness: the server library's sources (every .cpp of plugin/server
# and its protocols) instrumented; the libraries after `-o moeedb` in build/'s link line,
# less the server library itself.
build_api() {
  [ -f build/build.ninja ] || { echo "fuzz api: needs the regular build (scripts/setup.sh)"; return 1; }
  ninja -C build moeedb > /dev/null
  local server_src=(plugin/server/*.cpp plugin/server/protocols/*.cpp build/plugin/server/console_assets.cpp)
  local libs
  libs=$(ninja -C build -t commands moeedb | tail -1 | sed 's/.* -o moeedb //' | tr ' ' '\n' |
         grep -v -e '^$' -e '^&&$' -e '^:$' -e 'libmoeedb_server.a' | sed 's/"//g' | sed 's|^\([a-z].*\.a\)$|build/\1|' | tr '\n' ' ')
  mkdir -p "$OUT/api-obj"
  local objs=() pids=() f o
  for f in "${server_src[@]}"; do
    o="$OUT/api-obj/$(basename "$f" .cpp).o"
    objs+=("$o")
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$0" -nt "$o" ]; then
      "$CXX" "${FLAGS[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" -DBOOST_ALL_NO_LIB -c "$f" -o "$o" &
      pids+=($!)
    fi
    if [ "${#pids[@]}" -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  # shellcheck disable=SC2086
  "$CXX" "${FLAGS[@]}" -DMOEEDB_TEST_DATA_DIR="\"$PWD/tests/data\"" tests/fuzz/fuzz_api.cpp "${objs[@]}" \
    -Wl,--start-group $libs -Wl,--end-group -o "$OUT/fuzz_api"
}

failed=0
for name in metadata_filter document_line safetensors model_config tokenizer api; do
  [ -n "$ONLY" ] && [ "$ONLY" != "$name" ] && continue
  extra=()
  [ "$name" = tokenizer ] && extra=("${EXTRA_tokenizer[@]}")
  if [ "$name" = api ]; then
    build_api || { failed=1; continue; }
  else
    # shellcheck disable=SC2086
    "$CXX" "${FLAGS[@]}" "tests/fuzz/fuzz_$name.cpp" ${SOURCES[$name]} "${extra[@]}" -o "$OUT/fuzz_$name"
  fi
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
