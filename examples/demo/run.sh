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

# The edge runs as a Docker-managed container (FROM scratch, built from the
# installed gordon-edge, host network, restart unless-stopped): idempotent.
echo "demo: starting the edge on 127.0.0.1:$port (docker gordon edge start)" >&2
docker gordon edge start --http-addr "127.0.0.1:$port"

docker gordon deploy -f examples/demo/app.toml

for _ in $(seq 1 50); do
  if out=$(curl -fsS --max-time 2 -H 'Host: demo.localhost' "http://127.0.0.1:$port/" 2>/dev/null); then
    echo
    echo "demo: deployed. The web service answers:"
    echo "  $out"
    echo
    echo "  curl -H 'Host: demo.localhost' http://127.0.0.1:$port/"
    echo "  curl http://demo.localhost:$port/                    # *.localhost resolves to loopback"
    echo "  curl -X PUT -d hello http://kv.demo.localhost:$port/k/greeting; curl http://kv.demo.localhost:$port/k/greeting"
    echo "  the TCP echo service: 127.0.0.1:19000 (e.g. nc 127.0.0.1 19000, or: exec 3<>/dev/tcp/127.0.0.1/19000; echo hi >&3; head -1 <&3)"
    echo "  docker gordon status demo"
    echo
    echo "  stop it:  docker gordon remove demo && docker gordon edge stop"
    exit 0
  fi
  sleep 0.2
done
echo "demo: the edge did not answer on 127.0.0.1:$port; see: docker gordon edge logs" >&2
exit 1
