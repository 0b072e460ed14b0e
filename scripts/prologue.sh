# Sourced first by the scripts that run the moeedb CLI:
#   source "$(dirname "$0")/../scripts/prologue.sh"
# Stops on any error (set -euo pipefail), works from the checkout's root, and
# sets BIN to the CLI: $MOEEDB_BIN (another build) or ./build/moeedb, set up
# first (scripts/setup.sh) when it is not built yet.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN="${MOEEDB_BIN:-./build/moeedb}"
[ -x "$BIN" ] || bash scripts/setup.sh >&2
