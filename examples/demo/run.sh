#!/usr/bin/env bash
# `make demo`: builds the demo images locally (FROM scratch, no registry),
# starts gordon-edge in the background if it is not running, deploys
# examples/demo/app.toml with `docker gordon`, and prints the URL to curl.
#
# Env: GORDON_STATE_DIR (default: docker gordon's default), GORDON_DEMO_PORT (8080).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"

port="${GORDON_DEMO_PORT:-8080}"
if [ -z "${GORDON_STATE_DIR:-}" ]; then
  if [ "$(id -u)" = 0 ]; then GORDON_STATE_DIR=/var/lib/docker-gordon
  else GORDON_STATE_DIR="${XDG_STATE_HOME:-$HOME/.local/state}/docker-gordon"; fi
fi
export GORDON_STATE_DIR
mkdir -p "$GORDON_STATE_DIR/edge"
chmod 0700 "$GORDON_STATE_DIR"

if ! docker gordon version >/dev/null 2>&1; then
  echo "demo: 'docker gordon' is not installed or no engine answers: run ./install.sh --engine first" >&2
  exit 1
fi

echo "demo: building images gordon-test/{httpd,tcpecho,kv}:v1 (FROM scratch)" >&2
go run ./test/testimages/cmd/build-images -tag v1 httpd tcpecho kv >/dev/null

edge=bin/gordon-edge
[ -x "$edge" ] || edge="$(command -v gordon-edge)"
pidfile="$GORDON_STATE_DIR/edge/demo-edge.pid"
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "demo: gordon-edge already running (pid $(cat "$pidfile"))" >&2
else
  echo "demo: starting gordon-edge on :$port (log: $GORDON_STATE_DIR/edge/edge.log)" >&2
  nohup "$edge" run --state-dir "$GORDON_STATE_DIR" --http-addr ":$port" >"$GORDON_STATE_DIR/edge/edge.log" 2>&1 &
  echo $! >"$pidfile"
  sleep 0.3
fi

docker gordon deploy -f examples/demo/app.toml

for _ in $(seq 1 50); do
  if out=$(curl -fsS --max-time 2 -H 'Host: demo.localhost' "http://127.0.0.1:$port/" 2>/dev/null); then
    echo
    echo "demo: deployed. The web service answers:"
    echo "  $out"
    echo
    echo "  curl -H 'Host: demo.localhost' http://127.0.0.1:$port/"
    echo "  curl http://demo.localhost:$port/          # *.localhost resolves to loopback"
    echo "  echo hi | nc 127.0.0.1 19000               # the TCP echo service"
    echo "  docker gordon status demo"
    exit 0
  fi
  sleep 0.2
done
echo "demo: the edge did not answer on :$port; see $GORDON_STATE_DIR/edge/edge.log" >&2
exit 1
