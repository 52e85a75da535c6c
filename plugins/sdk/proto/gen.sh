#!/bin/sh
# Regenerates the committed Go code of the plugin protocol (called by
# `make proto`). Needs protoc on PATH; installs pinned generators into a
# temporary GOBIN. CI never runs this: the generated files are committed.
set -eu
cd "$(dirname "$0")"
GOBIN_DIR="$(mktemp -d)"
trap 'rm -rf "$GOBIN_DIR"' EXIT
GOBIN="$GOBIN_DIR" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN="$GOBIN_DIR" go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PATH="$GOBIN_DIR:$PATH" protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	common.proto runtime.proto probe.proto traffic.proto
