#!/usr/bin/env bash
# A moeedb cluster on this machine, on loopback (docs/cluster.md):
#   bash scripts/cluster.sh up [--nodes N] [--dir D] [--model M]
#       three etcd members, three PostgreSQL 15 servers under Patroni (a
#       primary, two standbys: one synchronous), N moeedb nodes (default 3)
#       over them, connecting as a role of their own with a password
#   bash scripts/cluster.sh status [--json] [--dir D]
#   bash scripts/cluster.sh down [--dir D]    stops exactly what `up` started
# Installs what it needs from Debian 12 (etcd-server, patroni, postgresql-15)
# and builds moeedb first when it is not built. Debian's own PostgreSQL
# service (port 5432) is neither used nor touched.
source "$(dirname "$0")/prologue.sh"
need=()
for p in etcd-server patroni postgresql-15; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  # Their own services (etcd on 2379, a PostgreSQL on 5432), if started, are left alone: the cluster uses ports of its own.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need[@]}" >&2
fi
exec node scripts/cluster/cluster.mjs "$@"
