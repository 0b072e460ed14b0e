#!/usr/bin/env bash
# A throwaway single-member etcd for the tests, on loopback only:
#   etcd_server.sh start DIR   data in DIR/data, client port free; writes
#                              "127.0.0.1:PORT" to DIR/endpoint
#   etcd_server.sh stop DIR    stop it and remove DIR
set -euo pipefail
CMD="${1:?start|stop}"; DIR="${2:?folder}"
case "$CMD" in
  start)
    command -v etcd > /dev/null || { echo "etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
    [ -f "$DIR/pid" ] && kill "$(cat "$DIR/pid")" 2>/dev/null || true
    rm -rf "$DIR"; mkdir -p "$DIR"
    for _ in 1 2 3 4 5 6 7 8; do
      PORT=$((20000 + RANDOM % 30000)); PEER=$((PORT + 1))
      etcd --name test --data-dir "$DIR/data" --listen-client-urls "http://127.0.0.1:$PORT" \
        --advertise-client-urls "http://127.0.0.1:$PORT" --listen-peer-urls "http://127.0.0.1:$PEER" \
        --initial-advertise-peer-urls "http://127.0.0.1:$PEER" --initial-cluster "test=http://127.0.0.1:$PEER" > "$DIR/etcd.log" 2>&1 &
      echo $! > "$DIR/pid"
      for _ in $(seq 50); do
        if curl -sf -X POST -d '{"key":"AA=="}' "http://127.0.0.1:$PORT/v3/kv/range" > /dev/null 2>&1; then
          echo "127.0.0.1:$PORT" > "$DIR/endpoint"; exit 0
        fi
        kill -0 "$(cat "$DIR/pid")" 2>/dev/null || break
        sleep 0.2
      done
      kill "$(cat "$DIR/pid")" 2>/dev/null || true; wait 2>/dev/null || true
      rm -rf "$DIR/data"
    done
    cat "$DIR/etcd.log" >&2; exit 1
    ;;
  stop)
    if [ -f "$DIR/pid" ]; then kill "$(cat "$DIR/pid")" 2>/dev/null || true; fi
    rm -rf "$DIR"
    ;;
  *) echo "usage: etcd_server.sh start|stop DIR" >&2; exit 2 ;;
esac
