#!/usr/bin/env bash
# Builds the project with AddressSanitizer and UndefinedBehaviorSanitizer
# (MOEEDB_SANITIZE, recovery off) into build-san/ and runs the whole CTest
# suite there. Any sanitizer report fails the test that triggered it. Slow (a
# second full build; tests run 2-4x slower), so not part of scripts/test.sh.
#
#   scripts/sanitize.sh [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests > /dev/null
cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-g1" \
  -DMOEEDB_SANITIZE=address,undefined > /dev/null
ninja -C build-san -j "$(nproc)"
# Leaks are checked in moeedb's own code; libtorch's and OpenMP's process-lifetime
# allocations (registries, thread pools) are suppressed by name.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-san --output-on-failure -j "$(nproc)" "$@"
