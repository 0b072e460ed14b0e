#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for the tests, on loopback only:
#   pg_cluster.sh start DIR   initdb, start on a free port; writes the
#                             connection URI of its database "postgres" to
#                             DIR/uri (the tests create their own databases)
#   pg_cluster.sh stop DIR    stop it (fast shutdown) and remove its folders
# As root, the server runs as the user postgres (PostgreSQL refuses root);
# when that user cannot reach DIR (a checkout under a private folder, as
# mktemp -d makes), the server's files go to a folder of its own under the
# temporary directory, named in DIR/home. fsync is off (the tests need no
# durability across machine crashes) unless PG_FSYNC=on (benchmarks).
# PG_STANDBY=1 adds a synchronous standby (streaming replication from a base
# backup, on its own loopback port): every commit returns once the standby has
# applied it (synchronous_commit = remote_apply, as the cluster's Patroni sets
# it); its port goes to DIR/standby_port.
set -euo pipefail
CMD="${1:?start|stop}"; DIR="${2:?folder}"
BIN=/usr/lib/postgresql/15/bin
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# The folder holding the server's data, socket and log.
home_of() { if [ -f "$1/home" ]; then cat "$1/home"; else echo "$1"; fi; }
stop_server() {  # $1: home, $2: pg_ctl's shutdown mode
  if [ -f "$1/standby/postmaster.pid" ]; then as_owner "$BIN/pg_ctl" -D "$1/standby" -m "$2" -w stop > /dev/null; fi
  if [ -f "$1/data/postmaster.pid" ]; then as_owner "$BIN/pg_ctl" -D "$1/data" -m "$2" -w stop > /dev/null; fi
}
start_server() {  # $1: data folder, $2: log; starts it on a free port (a random one, another if it cannot bind), prints it
  local port
  for _ in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 30000))
    if as_owner "$BIN/pg_ctl" -D "$1" -l "$2" -w -t 60 \
         -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$HOME_DIR -c fsync=${PG_FSYNC:-off} -c max_connections=200 ${PG_OPTIONS:-}" \
         start > /dev/null; then
      echo "$port"
      return 0
    fi
  done
  cat "$2" >&2
  return 1
}
remove() {  # the server's folders: DIR and, if apart, its home
  local home; home="$(home_of "$1")"
  [ "$home" != "$1" ] && rm -rf "$home"
  rm -rf "$1"
}
case "$CMD" in
  start)
    [ -x "$BIN/initdb" ] || { echo "PostgreSQL 15 is not installed (apt-get install postgresql-15)" >&2; exit 1; }
    if [ -d "$DIR" ]; then stop_server "$(home_of "$DIR")" immediate 2>/dev/null || true; remove "$DIR"; fi
    mkdir -p "$DIR"
    HOME_DIR="$DIR"
    if [ "$(id -u)" = 0 ]; then
      chown postgres "$DIR"
      if ! runuser -u postgres -- test -w "$DIR"; then
        HOME_DIR="$(mktemp -d "${TMPDIR:-/tmp}/moeedb-pg.XXXXXX")"
        chown postgres "$HOME_DIR"
        echo "$HOME_DIR" > "$DIR/home"
      fi
    fi
    as_owner "$BIN/initdb" -D "$HOME_DIR/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 > "$DIR/initdb.log"
    PORT=$(start_server "$HOME_DIR/data" "$HOME_DIR/server.log")
    if [ "${PG_STANDBY:-0}" = 1 ]; then
      as_owner "$BIN/pg_basebackup" -h 127.0.0.1 -p "$PORT" -U postgres -D "$HOME_DIR/standby" -X stream -c fast \
        -R -d "application_name=standby1 host=127.0.0.1 port=$PORT user=postgres" > "$DIR/basebackup.log" 2>&1 \
        || { cat "$DIR/basebackup.log" >&2; exit 1; }
      SPORT=$(start_server "$HOME_DIR/standby" "$HOME_DIR/standby.log")
      echo "$SPORT" > "$DIR/standby_port"
      # Synchronous from here on: a commit waits for the standby to apply it.
      as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qAt -c \
        "ALTER SYSTEM SET synchronous_standby_names = 'standby1'" -c "ALTER SYSTEM SET synchronous_commit = 'remote_apply'" \
        -c "SELECT pg_reload_conf()" > /dev/null
      for _ in $(seq 1 100); do
        state=$(as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qAt -c \
          "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming'")
        [ "$state" = sync ] && break
        sleep 0.1
      done
      [ "$state" = sync ] || { echo "the standby did not become synchronous" >&2; cat "$HOME_DIR/standby.log" >&2; exit 1; }
    fi
    echo "postgresql://postgres@127.0.0.1:$PORT/postgres" > "$DIR/uri"
    ;;
  stop)
    if [ -d "$DIR" ]; then stop_server "$(home_of "$DIR")" fast; remove "$DIR"; fi
    ;;
  *) echo "usage: pg_cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
