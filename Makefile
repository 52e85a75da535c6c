# docker gordon — build, install, test.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# BUILD_ID ties docker-gordon to the gordon-backends and gordon-compose
# binaries of the same build: it looks for gordon-backends-$(BUILD_ID) and
# gordon-compose-$(BUILD_ID) beside itself. It is a hash of the sources
# (every Go file, go.mod, go.sum, committed or not), so the same sources
# build byte-identical binaries (-trimpath, no timestamps): reinstalling
# the same commit leaves a running edge "unchanged".
BUILD_ID := $(shell git ls-files -co --exclude-standard -z -- '*.go' go.mod go.sum 2>/dev/null | xargs -0 sha256sum 2>/dev/null | sha256sum | cut -c1-10)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.backendsName=gordon-backends-$(BUILD_ID) -X main.composeName=gordon-compose-$(BUILD_ID)
# CLI_TAGS: docker-gordon without the compose loader, which it runs in
# gordon-compose-$(BUILD_ID) (core/composeapi: the loader's package init
# would cost every docker-gordon process start some 10 ms).
CLI_TAGS := gordoncomposehelper
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)"
FUZZTIME ?= 5s

.PHONY: all build install check docs test test-unit test-race test-e2e fuzz-smoke stress vet staticcheck fmt proto demo bench bench-go bench-edge bench-abuse bench-nginx bench-tls-tools clean

all: build

## build: static binaries in bin/
build:
	@mkdir -p bin
	rm -f bin/gordon-backends-* bin/gordon-compose-*
	$(GOBUILD) -o bin/gordon-backends-$(BUILD_ID) ./cmd/gordon-backends
	$(GOBUILD) -o bin/gordon-compose-$(BUILD_ID) ./cmd/gordon-compose
	$(GOBUILD) -tags $(CLI_TAGS) -o bin/docker-gordon ./cmd/docker-gordon
	$(GOBUILD) -o bin/gordon-edge ./cmd/gordon-edge
	$(GOBUILD) -o bin/gordon-probe-grpc ./plugins/examples/grpcprobe
	$(GOBUILD) -o bin/gordon-probe-exec ./plugins/examples/execprobe

## install: build and install the CLI plugin and gordon-edge (see install.sh)
install:
	./install.sh

## test: everything CI runs (README's test command)
test: vet staticcheck test-race test-unit fuzz-smoke test-e2e

## check: the fast gate before every commit, no Docker engine needed (about
## 2 minutes): gofmt, go vet, staticcheck, unit and race tests of core,
## journal and edgeproxy, the Swarm runtime's pure mappings and the log stream
check: vet staticcheck
	$(GO) test -race -short -count=1 ./core/... ./journal/... ./edgeproxy/... ./plugins/runtime/swarm/... ./plugins/runtime/internal/... ./system/swarm/...

## staticcheck: the version pinned in go.mod's tool block (staticcheck.conf
## says which checks run)
staticcheck:
	$(GO) tool staticcheck ./...

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags $(CLI_TAGS) ./cmd/docker-gordon

test-race:
	$(GO) test -race -count=1 ./core/... ./edgeproxy/... ./journal/...
	# the edge's goroutine-per-connection path, which event loops hand over to
	GORDON_EDGE_EVENT_LOOPS=-1 $(GO) test -race -count=1 ./edgeproxy/

test-unit:
	$(GO) test -count=1 ./cmd/... ./plugins/... ./system/... ./internal/... ./test/testimages/... ./test/loadgen/... ./test/stress/... ./test/arch/...

test-e2e:
	$(GO) test -count=1 -timeout 45m ./test/e2e/... ./test/swarmlab/...

## fuzz-smoke: each fuzz target briefly, on its committed seed corpus and new inputs
fuzz-smoke:
	@set -e; for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	  dir=$$(dirname $$spec); \
	  for f in $$(grep -h '^func Fuzz' $$spec | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "fuzz $$dir $$f ($(FUZZTIME))"; \
	    log=$$(mktemp); \
	    if ! $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$dir >$$log 2>&1; then \
	      cat $$log; \
	      if grep -q 'Failing input written to' $$log; then rm -f $$log; exit 1; fi; \
	      echo "RETRY: fuzz $$dir $$f: the fuzzing engine failed without a failing input (a worker killed or hung under load, not a failing test); running it once more. This is the only retry in make test."; \
	      $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$dir || { rm -f $$log; exit 1; }; \
	    fi; \
	    rm -f $$log; \
	  done; \
	done

## stress: each timing-sensitive test (test/stress/tests.txt: hand-over,
## drain, ping flood, UDP budget, hold, passive health, and every test that
## waits with Eventually for under 5 s) STRESS_COUNT times under -race with
## a CPU hog on one core; a table of runs and failures; fails on any failure.
## Not part of make test. STRESS_RUN=regexp narrows it.
STRESS_COUNT ?= 20
STRESS_RUN ?=
stress:
	$(GO) run ./test/stress -count $(STRESS_COUNT) -run '$(STRESS_RUN)'

## proto: regenerate plugins/sdk/proto (needs protoc; CI never does)
proto:
	plugins/sdk/proto/gen.sh

## demo: build the demo images, start the edge, deploy examples/demo, print the URL
demo: build
	./examples/demo/run.sh

## docs: regenerate docs/cli.md from the command tree (a test fails when it
## is stale: TestCLIReferenceIsCurrent)
docs:
	$(GO) test ./cmd/docker-gordon -run '^TestCLIReferenceIsCurrent$$' -count=1 -args -update-docs

## bench: the performance suite: every measurement side by side with
## a baseline from the same run -> bench/report.md and bench/report.json
## (needs a Docker engine; about 5-10 minutes; see bench/README.md)
bench: build bench-nginx bench-tls-tools
	$(GO) build -o bin/edgebench ./bench/edge
	$(GO) build -o bin/gordon-bench ./bench/suite
	PATH="$$PATH:/usr/sbin" bin/gordon-bench -repo . -bin bin -out bench $(BENCH_FLAGS)

## bench-go: Go benchmarks of the hot paths
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./edgeproxy/... ./plugins/sdk/... ./journal/...

## bench-edge: direct vs nginx vs gordon-edge under the same closed-loop load
## (installs Debian's nginx when missing; BENCH_DURATION per target)
BENCH_DURATION ?= 10s
bench-edge: bench-nginx bench-tls-tools
	@mkdir -p bin
	$(GOBUILD) -o bin/gordon-edge ./cmd/gordon-edge
	$(GO) build -o bin/edgebench ./bench/edge
	PATH="$$PATH:/usr/sbin" bin/edgebench run -edge bin/gordon-edge -d $(BENCH_DURATION) -c 16

## bench-abuse: HTTP/2 attacks (concurrent/stalled streams, header flood, rapid
## reset, HPACK bomb) on gordon-edge and nginx, a normal client alongside,
## then the edge's resource attacks (1,500 idle TCP clients at 1,024 fds, an
## SNI flood under a wildcard, a login flood) on gordon-edge
## (BENCH_ABUSE_DURATION bounds each attack, at most 10s)
BENCH_ABUSE_DURATION ?= 5s
bench-abuse: bench-nginx bench-tls-tools
	@mkdir -p bin
	$(GOBUILD) -o bin/gordon-edge ./cmd/gordon-edge
	$(GO) build -o bin/edgebench ./bench/edge
	PATH="$$PATH:/usr/sbin" bin/edgebench attack -edge bin/gordon-edge -d $(BENCH_ABUSE_DURATION) -json bin/bench-abuse.json

# bench-nginx: Debian's nginx for the edge comparison, when missing (a failed
# install is not fatal: edgebench then skips nginx)
bench-nginx:
	@command -v nginx >/dev/null || command -v /usr/sbin/nginx >/dev/null || \
	  { echo "installing nginx (apt-get)"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null 2>&1 || \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null 2>&1 || \
	    echo "nginx could not be installed; the edge comparison runs without it"; }

# bench-tls-tools: Debian's caddy and h2load (nghttp2-client) for the HTTPS
# comparison, when missing (not fatal: edgebench then skips them)
bench-tls-tools:
	@command -v caddy >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq caddy >/dev/null 2>&1 || echo "caddy could not be installed; the HTTPS comparison runs without it"
	@command -v h2load >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client >/dev/null 2>&1 || echo "h2load could not be installed; the HTTP/2 comparison is skipped"

clean:
	rm -rf bin
