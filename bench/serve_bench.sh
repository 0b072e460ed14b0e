# What the server benchmarks share (sourced after WORK and BIN are set):
# their 128 texts of about 256 tokens, the CPU flags line, and a `moeedb
# serve` started in the background on a free port and stopped again.

# The first 128 texts of >= 1000 characters built from STS-B sample sentences, into $1.
serve_bench_texts() {
  awk -F, '{ gsub(/"/, ""); for (i = 1; i <= 2; i++) if ($i != "") { s = s (s == "" ? "" : " ") $i; if (length(s) >= 1000) { print s; s = ""; if (++n == 128) exit } } }' \
    tests/data/stsb-sample.csv > "$1"
  [ "$(wc -l < "$1")" = 128 ] || { echo "could not build 128 texts" >&2; exit 1; }
}

serve_bench_cpu_flags() {
  echo "CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512.*|avx_vnni)$' | tr '\n' ' ')"
}

# Starts `moeedb serve --db $WORK/db --port 0 ARGS...` (a fresh database)
# and waits until it listens: SERVER is its pid, PORT its port; a trap stops
# it if the script exits first.
serve_bench_start() {
  rm -rf "$WORK/db"
  $BIN serve --db "$WORK/db" --port 0 "$@" > "$WORK/serve.out" 2> "$WORK/serve.err" &
  SERVER=$!
  trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 1 600); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.2; done
  PORT=$(grep -o '127.0.0.1:[0-9]*' "$WORK/serve.out" | cut -d: -f2 || true)
  [ -n "$PORT" ] || { cat "$WORK/serve.err" >&2; exit 1; }
}

serve_bench_stop() {
  kill -TERM "$SERVER"; wait "$SERVER" || true; trap - EXIT
}
