#!/usr/bin/env bash
# Builds docker-gordon and gordon-edge from source and installs them:
#   docker-gordon -> ${DOCKER_CONFIG:-~/.docker}/cli-plugins/ (so `docker gordon` works)
#   gordon-backends-<build id> -> beside it (the built-in backend plugins)
#   gordon-compose-<build id>  -> beside it (the compose loader)
#   gordon-edge   -> $PREFIX/bin (default /usr/local/bin as root, else ~/.local/bin),
#                    linked beside the plugin: edge start and system start use that one
# Re-running it upgrades in place (the same sources build the same binaries);
# then run `docker gordon system start` (or `edge start`) to move a running
# edge and watcher to the new build.
#
# Usage: ./install.sh [--engine] [--prefix DIR]
#   --engine      install (Debian docker.io) and start a Docker engine if none answers
#   --prefix DIR  gordon-edge goes to DIR/bin (keep it on PATH for gordon-edge run)
set -euo pipefail
cd "$(dirname "$0")"

engine=0
prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine=1 ;;
    --prefix) prefix="$2"; shift ;;
    -h|--help) sed -n '2,/^[^#]/p' "$0" | sed -e '/^[^#]/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
  shift
done

export PATH="$PATH:/usr/local/go/bin"
missing=()
command -v go >/dev/null 2>&1 || missing+=("Go 1.26+ (https://go.dev/dl/; expected at /usr/local/go/bin/go)")
command -v docker >/dev/null 2>&1 || missing+=("the docker CLI (Debian: apt-get install docker.io)")
if [ ${#missing[@]} -gt 0 ]; then
  printf 'install.sh: missing: %s\n' "${missing[@]}" >&2
  exit 1
fi

if ! docker info >/dev/null 2>&1; then
  if [ "$engine" = 1 ]; then
    .ci/ensure-docker
  else
    echo "install.sh: no Docker engine answers 'docker info' (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock})." >&2
    echo "  start one (e.g. 'sudo systemctl start docker' or 'sudo dockerd &'), or re-run: ./install.sh --engine" >&2
    exit 1
  fi
fi

echo "install.sh: building (go $(go env GOVERSION))" >&2
make -s build

plugdir="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
if [ -z "$prefix" ]; then
  if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix="$HOME/.local"; fi
fi
mkdir -p "$plugdir" "$prefix/bin"
# Copy then rename: an upgrade never leaves a half-written binary behind.
# The backends and compose binaries of this build go first: the new
# docker-gordon looks for them by name. Then the other builds' go.
backends=$(cd bin && ls gordon-backends-* | head -n 1)
composer=$(cd bin && ls gordon-compose-* | head -n 1)
for b in "$backends" "$composer"; do
  install -m 0755 "bin/$b" "$plugdir/.$b.new" && mv -f "$plugdir/.$b.new" "$plugdir/$b"
done
install -m 0755 bin/docker-gordon "$plugdir/.docker-gordon.new" && mv -f "$plugdir/.docker-gordon.new" "$plugdir/docker-gordon"
find "$plugdir" -maxdepth 1 -name 'gordon-backends-*' ! -name "$backends" -delete
find "$plugdir" -maxdepth 1 -name 'gordon-compose-*' ! -name "$composer" -delete
install -m 0755 bin/gordon-edge "$prefix/bin/.gordon-edge.new" && mv -f "$prefix/bin/.gordon-edge.new" "$prefix/bin/gordon-edge"
# The edge the plugin runs is the one beside it, whatever PATH holds.
ln -sfn "$(cd "$prefix/bin" && pwd)/gordon-edge" "$plugdir/gordon-edge"

echo "install.sh: installed $plugdir/docker-gordon (with $backends and $composer) and $prefix/bin/gordon-edge" >&2
case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "install.sh: note: $prefix/bin is not on your PATH" >&2 ;; esac
docker gordon version
