#!/usr/bin/env bash
# Runs the congruence suite of qdrant-client (qdrant-client/tests/congruence_tests, a
# checkout of qdrant/qdrant-client at the tag of the pinned client version)
# against moeedb's Qdrant port, unmodified, and prints the pass counts per
# file (docs/ecosystem.md records them). The suite is not moeedb's: it is not
# in this repository, and this script does not download it.
#
#   bash scripts/qdrant_congruence.sh QDRANT_CLIENT_CHECKOUT [pytest args...]
#
# The suite's fixtures expect the server on localhost:6333 (REST; gRPC is
# made REST by scripts/qdrant_congruence/no_grpc.py). moeedb serves a
# throwaway database there (one test deletes every collection on the
# server). Sparse vectors and multivectors are out of scope (docs/ecosystem.md):
# pass -k to narrow, e.g. -k "not sparse and not multi".
set -euo pipefail
cd "$(dirname "$0")/.."
SUITE="${1:?the path of a qdrant-client checkout (tests/congruence_tests inside)}"
shift
SUITE="$(cd "$SUITE" && pwd)"
[ -d "$SUITE/tests/congruence_tests" ] || { echo "qdrant_congruence: no tests/congruence_tests in $SUITE" >&2; exit 2; }
PY="$(bash scripts/python_env.sh)"
pinned="$(grep -i '^qdrant-client==' tests/python/requirements.txt | cut -d= -f3)"
echo "qdrant_congruence: qdrant-client $pinned (installed: $("$PY" -c 'import importlib.metadata as m; print(m.version("qdrant-client"))'))" >&2
if (exec 3<>/dev/tcp/127.0.0.1/6333) 2>/dev/null; then
  echo "qdrant_congruence: something already listens on localhost:6333" >&2; exit 2
fi
WORK="$(mktemp -d)"
SERVER=""
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
./build/moeedb serve --db "$WORK/db" --port 0 --qdrant-port 6333 > "$WORK/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 300); do
  if curl -sf http://127.0.0.1:6333/ > /dev/null 2>&1; then break; fi
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.2
done
HERE="$(pwd)"
set +e
(cd "$SUITE" && PYTHONPATH="$SUITE:$HERE/scripts/qdrant_congruence" "$HERE/$PY" -m pytest -p no_grpc -p no:cacheprovider \
  -q -o junit_family=xunit1 --junitxml="$WORK/report.xml" tests/congruence_tests "$@" > "$WORK/pytest.log" 2>&1)
status=$?
set -e
tail -n 5 "$WORK/pytest.log" >&2
cp "$WORK/pytest.log" "${MOEEDB_CONGRUENCE_LOG:-/tmp/qdrant_congruence.log}"
"$PY" scripts/qdrant_congruence/counts.py "$WORK/report.xml"
echo "qdrant_congruence: pytest exit $status; full log in ${MOEEDB_CONGRUENCE_LOG:-/tmp/qdrant_congruence.log}" >&2
