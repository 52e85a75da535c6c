// Command suite is `make bench`: every performance claim of
// docker gordon measured side by side with a baseline from the same run on
// this machine, written to bench/report.md and bench/report.json.
//
//	go build -o bin/gordon-bench ./bench/suite
//	bin/gordon-bench -repo . -bin bin -out bench
//
// It needs a Docker engine (API 1.41+), the `make build` binaries and
// bin/edgebench in -bin, and builds the FROM-scratch test images itself
// (test/testimages). Everything it creates is named or labelled gbench-
// (apps, containers, networks) or dev.gordon.bench=1, lives in a temporary
// directory, and is removed at the end and on Ctrl-C. Progress goes to
// stderr. See bench/README.md for what each measurement is.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

type bench struct {
	// only selects steps by key (-only); empty: all.
	only           map[string]bool
	repo, bin, tmp string
	dockerConfig   string // DOCKER_CONFIG whose cli-plugins holds bin/docker-gordon
	cli            *client.Client
	proxy          *apiProxy
	subnets        *subnetPool
	v1, v2         string // gordon-test/httpd images

	deploys, clients, apps int
	edgeDur                time.Duration

	rep *report

	// shared between measurements
	edgeIdleKiB, edgeLoadKiB int64
	probePluginStart         time.Duration
	deploySwitch             []time.Duration
	// edgebench's VmRSS (KiB): gordon-edge and the direct backend
	ebEdgeIdle, ebEdgeLoad, ebDirectIdle, ebDirectLoad int64
	watch                                              []watchRSS
	dash                                               []dashRun
	loadWalls, naiveWalls                              []time.Duration
}

func main() {
	b := &bench{}
	out := flag.String("out", "bench", "directory for report.md and report.json")
	flag.StringVar(&b.repo, "repo", ".", "repository root (for the commit and test images)")
	flag.StringVar(&b.bin, "bin", "bin", "directory with docker-gordon, gordon-edge and edgebench")
	flag.IntVar(&b.deploys, "deploys", 10, "deploys under load (measurement 1)")
	flag.IntVar(&b.clients, "clients", 16, "keep-alive load clients")
	flag.IntVar(&b.apps, "apps", 100, "largest number of apps for status and reconcile")
	flag.DurationVar(&b.edgeDur, "edge-duration", 10*time.Second, "edgebench load duration per target")
	only := flag.String("only", "", "run only these steps, comma-separated: edge, switch, instances, cli, plugins, load, replicas, apps, memory, wake, data (default: all)")
	flag.Parse()
	b.only = map[string]bool{}
	for _, k := range strings.Split(*only, ",") {
		if k = strings.TrimSpace(k); k != "" {
			b.only[k] = true
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := b.main(ctx, *out)
	if err != nil {
		logf("FAILED: %v", err)
		os.Exit(1)
	}
}

func (b *bench) main(ctx context.Context, out string) (err error) {
	start := time.Now()
	if out, err = b.checkPaths(out); err != nil {
		return err
	}
	if b.cli, err = client.New(client.FromEnv); err != nil {
		return err
	}
	defer b.cli.Close()
	if err := b.makeTmp(ctx); err != nil {
		return err
	}
	// Cleanup runs on every exit path, Ctrl-C included (ctx is cancelled
	// first, which kills running commands).
	defer b.cleanup()
	if err := b.prepareEngine(ctx); err != nil {
		return err
	}
	if err := b.runSteps(ctx); err != nil {
		return err
	}
	return b.writeReport(out, start)
}

// checkPaths makes the repository, binary and output paths absolute and
// checks that the binaries are built; it returns the absolute out.
func (b *bench) checkPaths(out string) (_ string, err error) {
	for _, p := range []*string{&b.repo, &b.bin, &out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return "", err
		}
	}
	for _, f := range []string{"docker-gordon", "gordon-edge", "edgebench"} {
		if _, err := os.Stat(filepath.Join(b.bin, f)); err != nil {
			return "", fmt.Errorf("%s missing in %s (run `make build` and build bench/edge; `make bench` does both): %w", f, b.bin, err)
		}
	}
	return out, nil
}

// makeTmp checks that an engine answers and makes the run's temporary
// directory with a DOCKER_CONFIG holding the plugin.
func (b *bench) makeTmp(ctx context.Context) (err error) {
	if err := testimages.Available(ctx); err != nil {
		return fmt.Errorf("no Docker engine answers (%v); start one (`bash .ci/ensure-docker`)", err)
	}
	if b.tmp, err = os.MkdirTemp("", "gordon-bench-"); err != nil {
		return err
	}
	b.dockerConfig = filepath.Join(b.tmp, "docker-config")
	if err := os.MkdirAll(filepath.Join(b.dockerConfig, "cli-plugins"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(b.bin, "docker-gordon"), filepath.Join(b.dockerConfig, "cli-plugins", "docker-gordon")); err != nil {
		return err
	}
	return nil
}

// cleanup stops every process, closes the API proxy, removes what the run
// created on the engine and its temporary directory (3 minutes bound).
func (b *bench) cleanup() {
	logf("cleaning up")
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stopAllProcs()
	if b.proxy != nil {
		b.proxy.Close()
	}
	b.cleanupEngine(cctx)
	_ = os.RemoveAll(b.tmp)
	logf("cleanup done")
}

// prepareEngine starts the report (commit, machine), builds the test
// images, starts the API proxy and the subnet pool, and removes leftovers
// of an interrupted earlier run.
func (b *bench) prepareEngine(ctx context.Context) (err error) {
	b.rep = &report{Title: "docker gordon — performance report (`make bench`)", Date: nowDate(), Commit: commitOf(b.repo), Machine: describeMachine()}
	logf("commit %s; %d CPUs; Docker %s (API %s)", b.rep.Commit, b.rep.Machine.CPUs, b.rep.Machine.DockerServer, b.rep.Machine.DockerAPI)

	logf("building FROM-scratch test images (httpd v1, v2)")
	if b.v1, err = b.image(ctx, "v1"); err != nil {
		return err
	}
	if b.v2, err = b.image(ctx, "v2"); err != nil {
		return err
	}
	if b.proxy, err = startAPIProxy(filepath.Join(b.tmp, "engine.sock")); err != nil {
		return err
	}
	if b.subnets, err = newSubnetPool(ctx, b.cli); err != nil {
		return err
	}
	b.cleanupEngine(ctx) // leftovers of an interrupted earlier run
	return nil
}

// runSteps runs the selected measurements, the quiet ones first (no
// containers running), then the ones that fill the engine with apps; a
// failed step records its error in its section and the next runs. Only
// a cancelled ctx stops it (its error).
func (b *bench) runSteps(ctx context.Context) error {
	secCLI := &section{ID: "cli", Title: "3. CLI and plugins"}
	secEdge := &section{ID: "edge", Title: "4. Edge: throughput, latency, route switch"}
	secMem := &section{ID: "memory", Title: "6. Memory (VmRSS)"}
	secLoad := &section{ID: "deploy-under-load", Title: "1. Failed requests during deploys under load"}
	secLat := &section{ID: "deploy-latency", Title: "2. Deploy latency"}
	secRec := &section{ID: "reconcile", Title: "5. Reconcile pass cost"}
	b.rep.Sections = []*section{secLoad, secLat, secCLI, secEdge, secRec, secMem}

	steps := []struct {
		key  string
		name string
		sec  *section
		fn   func(context.Context, *section) error
	}{
		{"edge", "edge throughput (edgebench)", secEdge, b.measureEdge},
		{"switch", "edge route switch", secEdge, b.measureRouteSwitch},
		{"instances", "edge throughput, 3 instances vs 1", secEdge, b.measureInstances},
		{"cli", "CLI cold start", secCLI, b.measureCLI},
		{"plugins", "plugin start+handshake", secCLI, b.measurePlugins},
		{"load", "deploy under load", secLoad, b.measureDeployUnderLoad},
		{"replicas", "deploy of 10 replicas vs 1", secLat, b.measureReplicas},
		{"apps", "deploy latency, status, reconcile, watch memory", secLat, func(ctx context.Context, s *section) error {
			return b.measureApps(ctx, s, secCLI, secRec, secMem)
		}},
		{"memory", "memory baseline and edge memory", secMem, b.measureMemory},
		{"wake", "scale to zero: wake latency", secLat, b.measureWake},
		{"data", "volume snapshot and restore vs docker cp", secLat, b.measureData},
	}
	for _, st := range steps {
		if len(b.only) > 0 && !b.only[st.key] {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logf("== %s", st.name)
		t0 := time.Now()
		if err := st.fn(ctx, st.sec); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logf("%s: %v", st.name, err)
			msg := fmt.Sprintf("%s: %v", st.name, err)
			if st.sec.Error != "" {
				msg = st.sec.Error + "; " + msg
			}
			st.sec.Error = msg
		}
		logf("   %s took %s", st.name, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// writeReport writes report.md and report.json into out and fails when a
// measurement failed.
func (b *bench) writeReport(out string, start time.Time) error {
	b.rep.Elapsed = time.Since(start).Round(time.Second).String()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := b.rep.write(out); err != nil {
		return err
	}
	logf("wrote %s and %s (%s)", filepath.Join(out, "report.md"), filepath.Join(out, "report.json"), b.rep.Elapsed)
	var failed []string
	for _, s := range b.rep.Sections {
		if s.Error != "" {
			failed = append(failed, s.Title)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("some measurements failed (see the report): %v", failed)
	}
	return nil
}

// image builds gordon-test/httpd:<version> through test/testimages.
func (b *bench) image(ctx context.Context, version string) (string, error) {
	refs, err := testimages.BuildVersion(ctx, version, "httpd")
	if err != nil {
		return "", err
	}
	return refs["httpd"], nil
}

// gordon runs `docker gordon ARGS` against state; through the counting
// proxy when viaProxy.
func (b *bench) gordon(ctx context.Context, state string, viaProxy bool, args ...string) runResult {
	env := []string{"DOCKER_CONFIG=" + b.dockerConfig, "GORDON_STATE_DIR=" + state}
	if viaProxy {
		env = append(env, "DOCKER_HOST="+b.proxy.Host())
	}
	return run(ctx, env, append([]string{"docker", "gordon"}, args...)...)
}

// startEdge runs gordon-edge in the foreground for state.
func (b *bench) startEdge(ctx context.Context, state, name string) (*proc, string, error) {
	if err := os.MkdirAll(filepath.Join(state, "edge"), 0o700); err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	p, _, err := startProc(name, nil, filepath.Join(b.tmp, name+".log"), false,
		filepath.Join(b.bin, "gordon-edge"), "run", "--state-dir", state, "--http-addr", addr, "--admin-addr", "127.0.0.1:0", "--log-level", "warn")
	if err != nil {
		return nil, "", err
	}
	if err := waitListen(ctx, addr, 10*time.Second); err != nil {
		p.Stop()
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return p, addr, nil
}

// manifest is a one-service stateless HTTP app (the e2e webManifest).
func manifest(app, image, host string) string {
	return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "10s"
[[services.web.http]]
port = 8080
host = %q
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "20s"
`, app, image, host)
}

// deployApp writes app's manifest with image and deploys it.
func (b *bench) deployApp(ctx context.Context, state, app, image string, viaProxy bool) (runResult, error) {
	file := filepath.Join(b.tmp, app+".toml")
	if err := os.WriteFile(file, []byte(manifest(app, image, app+".test")), 0o644); err != nil {
		return runResult{}, err
	}
	r := b.gordon(ctx, state, viaProxy, "deploy", "-f", file, "--format", "json")
	return r, r.err("deploy " + app)
}

func noKeepAliveClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
}
