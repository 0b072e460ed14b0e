#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for the tests, on loopback only:
#   pg_cluster.sh start DIR   initdb in DIR/data, start on a free port; writes
#                             the connection URI of its database "postgres"
#                             to DIR/uri (the tests create their own databases)
#   pg_cluster.sh stop DIR    stop it (fast shutdown) and remove DIR
# As root, the server runs as the user postgres (PostgreSQL refuses root).
# fsync is off (the tests need no durability across machine crashes) unless
# PG_FSYNC=on (benchmarks).
set -euo pipefail
CMD="${1:?start|stop}"; DIR="${2:?folder}"
BIN=/usr/lib/postgresql/15/bin
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$CMD" in
  start)
    [ -x "$BIN/initdb" ] || { echo "PostgreSQL 15 is not installed (apt-get install postgresql-15)" >&2; exit 1; }
    if [ -f "$DIR/data/postmaster.pid" ]; then as_owner "$BIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true; fi
    rm -rf "$DIR"; mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$DIR"
    as_owner "$BIN/initdb" -D "$DIR/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 > "$DIR/initdb.log"
    # A free port: a random one, another if the server cannot bind it.
    for _ in 1 2 3 4 5 6 7 8; do
      PORT=$((20000 + RANDOM % 30000))
      if as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
           -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR -c fsync=${PG_FSYNC:-off} -c max_connections=200" \
           start > /dev/null; then
        break
      fi
      PORT=""
    done
    [ -n "$PORT" ] || { cat "$DIR/server.log" >&2; exit 1; }
    echo "postgresql://postgres@127.0.0.1:$PORT/postgres" > "$DIR/uri"
    ;;
  stop)
    if [ -f "$DIR/data/postmaster.pid" ]; then as_owner "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop > /dev/null; fi
    rm -rf "$DIR"
    ;;
  *) echo "usage: pg_cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
