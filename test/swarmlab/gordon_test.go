package swarmlab

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// gordonLab is a 3-node lab with docker-gordon and gordon-edge built for
// it, a state directory, and the manager as the CLI's engine.
type gordonLab struct {
	*Lab
	bin   string // directory with docker-gordon and gordon-edge
	state string
	home  string // DOCKER_CONFIG
	httpd string // the httpd test image in the lab registry
	kv    string // the kv test image (a volume-backed key-value store)
}

// buildGordon builds docker-gordon and gordon-edge (static) into dir.
func buildGordon(ctx context.Context, dir string) error {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	for _, b := range []struct{ pkg, out string }{
		{"./cmd/docker-gordon", "docker-gordon"},
		{"./cmd/gordon-edge", "gordon-edge"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.version=swarmlab", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", b.pkg, err, out)
		}
	}
	return nil
}

// upGordonLab brings the lab up, builds the binaries and pushes httpd.
func upGordonLab(ctx context.Context, t *testing.T, prefix, subnet string, managers bool) *gordonLab {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, buildGordon(ctx, bin))
	require.NoError(t, testimages.Compile(ctx, bin, "httpd", "kv"))
	// Two runs of this test at once (a CI clone and a working tree) need
	// their own labs: GORDON_SWARMLAB_PREFIX and _SUBNET move this one.
	prefix, subnet = cmp.Or(os.Getenv("GORDON_SWARMLAB_PREFIX"), prefix), cmp.Or(os.Getenv("GORDON_SWARMLAB_SUBNET"), subnet)
	lab, err := Up(ctx, Options{Nodes: 3, Prefix: prefix, Subnet: subnet, Registry: true, Managers: managers, Log: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lab.Down() })
	ref, err := lab.PushImage(ctx, "httpd:gordon", filepath.Join(bin, "httpd"))
	require.NoError(t, err)
	kv, err := lab.PushImage(ctx, "kv:gordon", filepath.Join(bin, "kv"))
	require.NoError(t, err)
	g := &gordonLab{Lab: lab, bin: bin, state: filepath.Join(dir, "state"), home: filepath.Join(dir, "docker"), httpd: ref, kv: kv}
	require.NoError(t, os.MkdirAll(g.home, 0o700))
	return g
}

// cliResult is one CLI run.
type cliResult struct {
	out, err string
	code     int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
}

// gordon runs `docker-gordon gordon ARGS` against the manager.
func (g *gordonLab) gordon(ctx context.Context, args ...string) cliResult {
	return g.gordonOn(ctx, 1, g.state, args...)
}

// gordonOn runs `docker-gordon gordon ARGS` against node i (1-based)
// with the state directory state.
func (g *gordonLab) gordonOn(ctx context.Context, i int, state string, args ...string) cliResult {
	cmd := exec.CommandContext(ctx, filepath.Join(g.bin, "docker-gordon"), append([]string{"gordon"}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+g.Nodes[i-1].Host, "GORDON_STATE_DIR="+state, "DOCKER_CONFIG="+g.home,
		"PATH="+g.bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliResult{out: so.String(), err: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		r.code, r.err = -1, r.err+err.Error()
	}
	return r
}

// must runs the CLI and fails the test unless it exits 0.
func (g *gordonLab) must(ctx context.Context, t *testing.T, args ...string) cliResult {
	t.Helper()
	r := g.gordon(ctx, args...)
	require.Equal(t, 0, r.code, "docker gordon %s:\n%s", strings.Join(args, " "), r)
	return r
}

// tasksOf lists "node state" of the running tasks of the services whose
// labels include app and service.
func (g *gordonLab) tasksOf(ctx context.Context, app, service string) ([]string, error) {
	ids, err := g.Docker(ctx, 1, "service", "ls", "-q", "--filter", "label=dev.gordon.app="+app, "--filter", "label=dev.gordon.service="+service)
	if err != nil || ids == "" {
		return nil, err
	}
	out, err := g.Docker(ctx, 1, append([]string{"service", "ps", "--filter", "desired-state=running", "--format", "{{.Node}} {{.CurrentState}}"}, strings.Fields(ids)...)...)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Running") {
			lines = append(lines, strings.Fields(l)[0])
		}
	}
	return lines, nil
}

func webManifest(image, version string) string {
	return fmt.Sprintf(`name = "web"

[services.web]
image = %q
replicas = 3
stop_grace = "5s"

[services.web.env]
VERSION = %q
DRAIN_DELAY = "1s"

[[services.web.http]]
port = 8080
host = "web.lab"

[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "60s"
`, image, version)
}

func tcpManifest(image, publish string) string {
	return fmt.Sprintf(`name = "tcp"

[services.tcp]
image = %q
stop_grace = "5s"

[services.tcp.env]
VERSION = "tcp"

[[services.tcp.tcp]]
port = 8080
publish = %q

[services.tcp.readiness]
type = "tcp"
port = 8080
timeout = "60s"
`, image, publish)
}

func kvManifest(image, version string) string {
	return fmt.Sprintf(`name = "kv"

[services.kv]
image = %q
stop_grace = "5s"

[services.kv.env]
VERSION = %q

[[services.kv.http]]
port = 8080
host = "kv.lab"

[[services.kv.volume]]
name = "data"
path = "/data"

[services.kv.readiness]
type = "log"
pattern = "ready"
timeout = "60s"
`, image, version)
}

// Docker Swarm end to end on the project's 3-node lab, one lab
// for every case in order: system start puts the edge on every node; a
// 3-replica service spreads over the nodes and answers through the edge of
// every node; a deploy under load fails no request; status names the
// runtime and the nodes; a deploy through a remote manager (docker
// --context) works; a TCP bind on a port the edge does not publish is
// refused before anything changes, and once system start publishes it
// (replacing each node's edge task) it answers through every node's edge;
// a volume-backed service stays on its node and never
// runs twice; its volume is snapshotted on a worker before a deploy and
// restored by rollback --with-data; a node killed under load fails no request and its replicas
// come back on the other nodes within 60 s.
func TestSwarm_GordonOnAThreeNodeSwarm(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	g := upGordonLab(ctx, t, "gse", "10.77.0", false)
	t.Logf("lab up and binaries built in %v", time.Since(began).Round(time.Millisecond))

	r := g.must(ctx, t, "system", "start", "--registry", g.Registry, "--http-addr", ":80")
	t.Logf("system start:\n%s", r)
	require.Contains(t, r.out, "running on 3 node(s)")

	ok := t.Run("the edge answers on every node", func(t *testing.T) {
		for _, n := range g.Nodes {
			out, err := g.InLab(ctx, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", "-H", "Host: none.lab", "http://"+n.IP+"/")
			require.NoError(t, err)
			assert.Equal(t, "404", out, "the edge on %s answers an unrouted host", n.Name)
		}
	})
	ok = ok && t.Run("3 replicas spread over the nodes and answer through every edge", func(t *testing.T) {
		d0 := time.Now()
		r := g.must(ctx, t, "deploy", "-f", writeManifest(t, webManifest(g.httpd, "v1")))
		t.Logf("first deploy in %v:\n%s", time.Since(d0).Round(time.Millisecond), r.err)
		nodes, err := g.tasksOf(ctx, "web", "web")
		require.NoError(t, err)
		require.Len(t, nodes, 3, "3 running replicas: %v", nodes)
		assert.GreaterOrEqual(t, distinct(nodes), 2, "the replicas spread over at least 2 nodes: %v", nodes)
		g.answersEverywhere(ctx, t, "web.lab", "version=v1")
	})
	ok = ok && t.Run("a deploy under load fails no request", func(t *testing.T) {
		load := startLabLoad(t, g.Lab, "http://"+g.Nodes[0].IP+"/", "web.lab", 8, 5*time.Minute)
		load.awaitOK(t, 200, 30*time.Second)
		d1 := time.Now()
		r := g.must(ctx, t, "deploy", "-f", writeManifest(t, webManifest(g.httpd, "v2")))
		t.Logf("deploy under load in %v:\n%s", time.Since(d1).Round(time.Millisecond), r.err)
		load.awaitOK(t, 200, 30*time.Second)
		st := load.Stop()
		t.Logf("load during the deploy: %d OK, %d failed, p99 %v, longest gap %v, errors %v", st.OK, st.Failed(), st.P99, st.LongestGap, st.Errors)
		assert.Zero(t, st.Failed(), "no request fails during a deploy: %v", st.Errors)
		g.answersEverywhere(ctx, t, "web.lab", "version=v2")
	})
	ok = ok && t.Run("status names the runtime and the nodes", func(t *testing.T) {
		r := g.must(ctx, t, "status")
		assert.Contains(t, r.out, "runtime: swarm, 3 nodes (3 ready)")
		assert.Regexp(t, `running on `+g.Nodes[0].Name[:len(g.Nodes[0].Name)-1]+`[123]`, r.out, "each instance's node")
		r = g.must(ctx, t, "system", "status")
		t.Logf("system status:\n%s", r.out)
		for _, n := range g.Nodes {
			assert.Regexp(t, n.Name+` +ready +\S+ +running`, r.out, "the edge task of %s runs", n.Name)
		}
	})
	ok = ok && t.Run("system start again changes nothing (in the runner, registry remembered)", func(t *testing.T) {
		r := g.must(ctx, t, "system", "start")
		assert.Contains(t, r.out, "global service already running (HTTP :80 on every edge node")
		assert.Contains(t, r.out, "running on 3 node(s)")
	})
	ok = ok && t.Run("a TCP bind needs a published port, then answers on every edge node", func(t *testing.T) {
		g.tcpBind(ctx, t)
	})
	ok = ok && t.Run("a deploy through a remote manager (docker --context)", func(t *testing.T) {
		g.remoteDeploy(ctx, t)
	})
	ok = ok && t.Run("a volume-backed service stays on its node and never runs twice", func(t *testing.T) {
		g.volumeService(ctx, t)
	})
	ok = ok && t.Run("a volume snapshot on a worker: deploy, rollback --with-data, export", func(t *testing.T) {
		g.swarmSnapshots(ctx, t)
	})
	ok = ok && t.Run("every edge task restarted at once gets the routes back", func(t *testing.T) {
		g.killEdges(ctx, t)
		t0 := time.Now()
		for _, n := range g.Nodes {
			require.Eventually(t, func() bool {
				out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "2", "-H", "Host: web.lab", "http://"+n.IP+"/")
				return err == nil && strings.Contains(out, "version=v3")
			}, 60*time.Second, 250*time.Millisecond, "the edge on %s serves web again", n.Name)
		}
		t.Logf("every edge serves web again %v after all were killed", time.Since(t0).Round(time.Millisecond))
	})
	ok = ok && t.Run("remove takes the app's services and network away", func(t *testing.T) {
		r := g.must(ctx, t, "remove", "kv")
		t.Logf("remove:\n%s%s", r.out, r.err)
		out, err := g.Docker(ctx, 1, "service", "ls", "-q", "--filter", "label=dev.gordon.app=kv")
		require.NoError(t, err)
		assert.Empty(t, out, "no service of kv is left")
		out, err = g.Docker(ctx, 1, "network", "ls", "-q", "--filter", "name=^gordon-kv$")
		require.NoError(t, err)
		assert.Empty(t, out, "the app's overlay is removed")
	})
	_ = ok && t.Run("a node killed under load fails no request and its replicas come back", func(t *testing.T) {
		g.nodeLoss(ctx, t)
	})
	t.Logf("whole test in %v", time.Since(began).Round(time.Millisecond))
}

// answersEverywhere checks that every node's edge serves host with want
// in the body.
func (g *gordonLab) answersEverywhere(ctx context.Context, t *testing.T, host, want string) {
	t.Helper()
	for _, n := range g.Nodes {
		out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "3", "-H", "Host: "+host, "http://"+n.IP+"/")
		require.NoError(t, err, "the app answers through the edge on %s", n.Name)
		assert.Contains(t, out, want, "the edge on %s", n.Name)
	}
}

func distinct(xs []string) int {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return len(m)
}

// writeManifest writes a manifest to a temporary file.
func writeManifest(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.toml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}
