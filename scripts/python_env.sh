#!/usr/bin/env bash
# The Python virtual environment of the end-to-end tests and the moeedb
# package (never the system's Python): build/pyenv, with the pinned packages
# of tests/python/requirements.txt. Idempotent: made again only when that
# file changed. Then installs the package in python/ into it (editable: the
# tests see the checkout's code). Prints the environment's python.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/pyenv
REQ=tests/python/requirements.txt

# Debian's python3 makes virtual environments only with python3-venv.
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3-venv >&2
fi

want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  echo "python_env: creating $VENV from $REQ" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  echo "$want" > "$VENV/.requirements.sha256"
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e ./python >&2
echo "$VENV/bin/python"
