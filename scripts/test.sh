#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
# The tree itself: cited paths exist, each default and limit is written once.
node scripts/check_tree.mjs
# The npm clients and playwright-core: the end-to-end tests below, and the
# cluster test's look at the web console in ctest.
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
# The cluster under faults, a short run (docs/tests.md): etcd x3, PostgreSQL
# x3 under Patroni, 3 nodes; the primary's machine and a standby's lost for
# good, the primary's Patroni killed, 2 node kills and 2 node stops under
# writers and searchers, checked against their record.
node tests/soak/cluster_soak.mjs --pg-kills 1 --standby-losses 1 --patroni-kills 1 --node-kills 2 --node-stops 2 --gap-ms 2000
# The same cluster on separate hosts (network namespaces the soak creates and
# deletes; root, hence sudo elsewhere): a node cut from PostgreSQL, one from
# etcd, the primary from its standbys, an etcd minority, an etcd member
# killed, the primary cut from etcd, a node cut from the other nodes, the
# primary's machine lost for good, and a point-in-time restore of
# PostgreSQL under the running nodes.
SOAK_NETNS=(node tests/soak/cluster_soak.mjs --netns 1 --partitions 7 --partition-ms 8000 --pg-kills 1 --restores 1
  --node-kills 0 --node-stops 0 --add-node 0 --gap-ms 2000)
if [ "$(id -u)" -eq 0 ]; then
  "${SOAK_NETNS[@]}"
else
  sudo -n true 2>/dev/null || { echo "test: the soak on separate hosts needs root: run as root or with passwordless sudo" >&2; exit 1; }
  sudo -n env "PATH=$PATH:/usr/sbin:/sbin" "${SOAK_NETNS[@]}"
fi
# docs/cli.md lists every flag as the commands' --help prints it.
node scripts/cli_flags.mjs --check
# Python: the real clients from PyPI (qdrant-client, LangChain's, LlamaIndex's
# and Haystack's stores, chromadb), pinned in tests/python/requirements.txt,
# in the virtual environment build/pyenv; and the moeedb package in python/:
# its wheel built, its tests and LangChain's standard suites run.
PY="$(bash scripts/python_env.sh)"
"$PY" -m build --wheel --no-isolation --outdir build/python-dist python >/dev/null
"$PY" -m pytest tests/python -q -p no:cacheprovider
# The offline teacher and quality anchor (eval/teacher/minilm.py, in its own
# pinned venv build/teacher-env): the ONNX graph onnxruntime runs against a
# numpy forward of the same all-MiniLM-L6-v2 weights.
TEACHER_PY="$(bash scripts/python_env.sh teacher)"
"$TEACHER_PY" eval/teacher/minilm.py check
# The same weights as moeedb's bert_moe family (eval/teacher/moefy.py): moeedb
# embed's vectors of the folder against moefy's numpy forward, with every
# expert chosen (then the dense model exactly) and with 2 of 8.
MOEFY=build/moefy-check
mkdir -p "$MOEFY"
head -n 400 tests/data/stsb-sample.csv | cut -d, -f1 > "$MOEFY/texts.txt"
head -n 60 "$MOEFY/texts.txt" > "$MOEFY/embed.txt"
for TOP_K in 8 2; do
  "$TEACHER_PY" eval/teacher/moefy.py build "$MOEFY/8x$TOP_K" "$MOEFY/texts.txt" --top-k "$TOP_K" --calibration-texts 400 2>/dev/null
  ./build/moeedb embed --model "$MOEFY/8x$TOP_K" --threads 2 < "$MOEFY/embed.txt" > "$MOEFY/8x$TOP_K.jsonl"
  "$TEACHER_PY" eval/teacher/moefy.py check "$MOEFY/8x$TOP_K" "$MOEFY/8x$TOP_K.jsonl" "$MOEFY/embed.txt"
done
# End-to-end: moeedb serve with the real npm clients (openai, @langchain/openai)
# and the web console in Debian's Chromium (playwright-core).
(cd tests/e2e && MOEEDB_BIN="$PWD/../../build/moeedb" npm test)
# The same suite over the PostgreSQL store: each server's database in a
# throwaway PostgreSQL 15 on loopback (tests/e2e/moeedb.mjs, MOEEDB_E2E_PG).
PG_E2E="$PWD/build/e2e-pg"
bash tests/pg/pg_cluster.sh start "$PG_E2E"
trap 'bash tests/pg/pg_cluster.sh stop "$PG_E2E"' EXIT
PG_URI="$(cat "$PG_E2E/uri")"
(cd tests/e2e && MOEEDB_E2E_PG="${PG_URI%postgres}" MOEEDB_BIN="$PWD/../../build/moeedb" npm test)
bash tests/pg/pg_cluster.sh stop "$PG_E2E"
trap - EXIT
# Fuzzing: each libFuzzer harness (ASan + UBSan) for 30 s from its seed corpus.
bash tests/fuzz/run.sh 30
