package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// Custom probe plugins, end to end. The example plugins
// (plugins/examples/{grpcprobe,execprobe}) and the misbehaving ones
// (plugins/examples/badprobes/<mode>) are built once into a plugin
// directory passed with --plugin-dir.

var (
	probePluginsOnce sync.Once
	probePluginsDir  string
	probePluginsErr  error
)

// probePlugins builds gordon-probe-{grpc,exec,crash,hang,stall,oldproto,garbage}
// into one directory and returns it.
func probePlugins(t testing.TB) string {
	t.Helper()
	probePluginsOnce.Do(func() {
		dir := filepath.Join(fixture.BinDir(), "probe-plugins")
		build := filepath.Join(fixture.BinDir(), "probe-plugins-build")
		for _, d := range []string{dir, build} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				probePluginsErr = err
				return
			}
		}
		pkgs := map[string]string{
			"grpcprobe": "grpc", "execprobe": "exec",
			"crash": "crash", "hang": "hang", "stall": "stall", "oldproto": "oldproto", "garbage": "garbage",
		}
		args := []string{"build", "-trimpath", "-o", build + string(filepath.Separator),
			"./plugins/examples/grpcprobe", "./plugins/examples/execprobe"}
		for _, m := range []string{"crash", "hang", "stall", "oldproto", "garbage"} {
			args = append(args, "./plugins/examples/badprobes/"+m)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = fixture.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probePluginsErr = fmt.Errorf("build probe plugins: %v\n%s", err, out)
			return
		}
		for bin, name := range pkgs {
			if err := os.Rename(filepath.Join(build, bin), filepath.Join(dir, "gordon-probe-"+name)); err != nil {
				probePluginsErr = err
				return
			}
		}
		probePluginsDir = dir
	})
	require.NoError(t, probePluginsErr)
	return probePluginsDir
}

// pluginProcesses lists the PIDs whose executable lives in dir.
func pluginProcesses(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := fmt.Sscanf(e.Name(), "%d", new(int)); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			out = append(out, e.Name()+" "+exe)
		}
	}
	return out
}

// requireNoPluginProcess waits up to 3 s for every process of dir to end.
func requireNoPluginProcess(t *testing.T, dir string) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return len(pluginProcesses(dir)) == 0 }, 3*time.Second, 100*time.Millisecond) {
		t.Fatalf("plugin processes left after the command ended: %v", pluginProcesses(dir))
	}
}

// pluginManifest is one stateless HTTP service whose readiness is a custom
// plugin; env lines go into [services.web.env].
func pluginManifest(app, image, host, plugin, config, timeout string, env ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\n[services.web]\nimage = %q\nstop_grace = \"5s\"\n", app, image)
	if len(env) > 0 {
		b.WriteString("[services.web.env]\n")
		for _, e := range env {
			k, v, _ := strings.Cut(e, "=")
			fmt.Fprintf(&b, "%s = %q\n", k, v)
		}
	}
	fmt.Fprintf(&b, "[[services.web.http]]\nport = 8080\nhost = %q\n", host)
	fmt.Fprintf(&b, "[services.web.readiness]\ntype = \"plugin\"\nplugin = %q\ntimeout = %q\n", plugin, timeout)
	if config != "" {
		fmt.Fprintf(&b, "[services.web.readiness.config]\n%s\n", config)
	}
	return b.String()
}

// A deploy whose readiness is gordon-probe-grpc waits
// until the grpcd workload reports SERVING (3 s after start), then switches
// with 0 failed requests under load; then the same with gordon-probe-exec
// running `/grpcd -check` inside the candidate.
func TestProbePlugin_GRPCReadinessSwitchesUnderLoad(t *testing.T) {
	v1 := testimages.Require(t, "v1", "grpcd")["grpcd"]
	v2 := testimages.Require(t, "v2", "grpcd")["grpcd"]
	plugins := probePlugins(t)
	a := fixture.NewApp(t, "e2egrpcprobe")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File

	fixture.WriteFile(t, file, pluginManifest(app, v1, "grpc.test", "grpc", `service = ""`, "20s"))
	op, r := fixture.DeployJSON(t, state, file, "--plugin-dir", plugins)
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "success", op.Outcome)
	requireNoPluginProcess(t, plugins)

	l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "grpc.test", 8, instanceOf)
	fixture.WriteFile(t, file, pluginManifest(app, v2, "grpc.test", "grpc", `service = ""`, "20s", "SERVING_AFTER=3s"))
	op, r = fixture.DeployJSON(t, state, file, "--plugin-dir", plugins)
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "success", op.Outcome)
	probe := probePhase(t, r.Stdout, "service.web.replace")
	t.Logf("grpc: deploy took %s, readiness phase %s", r.Elapsed.Round(time.Millisecond), probe.Round(time.Millisecond))
	require.GreaterOrEqual(t, probe, 2*time.Second, "readiness waited for SERVING (3 s after start)")
	_, body, err := edge.Get("grpc.test", "/")
	require.NoError(t, err)
	require.Equal(t, "v2", versionOf(body), "switched to the new generation")

	fixture.WriteFile(t, file, pluginManifest(app, v1, "grpc.test", "exec", `command = ["/grpcd", "-check"]`, "20s", "SERVING_AFTER=2s"))
	op, r = fixture.DeployJSON(t, state, file, "--plugin-dir", plugins)
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "success", op.Outcome)
	probe = probePhase(t, r.Stdout, "service.web.replace")
	t.Logf("exec: deploy took %s, readiness phase %s", r.Elapsed.Round(time.Millisecond), probe.Round(time.Millisecond))
	require.GreaterOrEqual(t, probe, 1500*time.Millisecond, "readiness waited for the exec check (SERVING 2 s after start)")
	st := l.Stop()
	t.Logf("load over two plugin-probed deploys: %s", st)
	require.Greater(t, st.Answered, int64(50))
	require.Zero(t, st.Transport+st.Non2xx, "0 failed requests: %v", st.Errors)
	require.Zero(t, st.Regressions, "%v", st.Errors)
	_, body, err = edge.Get("grpc.test", "/")
	require.NoError(t, err)
	require.Equal(t, "v1", versionOf(body))
	require.Len(t, fixture.Managed(t, app, "web"), 1, "the predecessor was retired")
	requireNoPluginProcess(t, plugins)
}

// Robustness: a readiness plugin that is missing,
// crashes, hangs, speaks the wrong protocol version or writes garbage to
// stdout fails the deploy (exit 1) with an error naming the plugin and what
// happened, bounded by the readiness timeout plus a margin; the old
// generation serves every request through the edge meanwhile; no candidate
// and no plugin process is left behind.
func TestProbePlugin_MisbehavingPluginKeepsOldServing(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	plugins := probePlugins(t)
	a := fixture.NewApp(t, "e2ebadprobe")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	a.MustDeploy(webManifest(app, v1, "bad.test", ""))
	before := fixture.Managed(t, app, "web")
	require.Len(t, before, 1)

	const timeout = 3 * time.Second
	for _, tc := range []struct {
		mode string
		want string // regexp the error must match
		// bound is the limit on the whole deploy; zero = the readiness
		// timeout plus a margin.
		bound time.Duration
	}{
		{"missing", `gordon-probe-missing.*(not found|no built-in)|probe/missing.*not found`, 0},
		{"crash", `probe/crash.*exited`, 0},
		{"hang", `plugin hang readiness timeout after 3s`, 0},
		// A plugin that never handshakes is bounded by the host's 10 s start
		// timeout (sdk.DefaultStartTimeout), not by the readiness budget.
		// Bounded by the readiness timeout (3 s), not the host's 10 s start timeout.
		{"stall", `probe/stall.*did not complete its handshake within`, 3*time.Second + 12*time.Second},
		{"oldproto", `probe/oldproto.*protocol version 99.*version 1`, 0},
		{"garbage", `probe/garbage.*(unexpected output on stdout|broke the handshake)`, 0},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			l := fixture.StartLoad(t, "http://"+edge.HTTPAddr+"/", "bad.test", 8, instanceOf)
			fixture.WriteFile(t, file, pluginManifest(app, v1, "bad.test", tc.mode, "", timeout.String(), "ATTEMPT="+tc.mode))
			r := fixture.Gordon(t, state, "deploy", "--plugin-dir", plugins, "-f", file, "--format", "json")
			st := l.Stop()
			probe := probePhase(t, r.Stdout, "service.web.replace")
			t.Logf("%s: failed deploy took %s, readiness phase %s (timeout %s); load %s\n%s",
				tc.mode, r.Elapsed.Round(time.Millisecond), probe.Round(time.Millisecond), timeout, st, fixture.LastLines(r.Stderr, 8))
			require.Equal(t, 1, r.Code, r.String())
			require.Regexp(t, regexp.MustCompile(`(?s)`+tc.want), r.Stderr, "the error names the plugin and what happened")
			// The margin covers the CLI and plugin starts, the candidate's
			// create/start/log tail/forced removal on a loaded 2-core machine.
			bound := timeout + 10*time.Second
			if tc.bound > 0 {
				bound = tc.bound
			} else {
				require.Less(t, probe, timeout+2*time.Second, "readiness gave up within its timeout + 2 s")
			}
			require.Less(t, r.Elapsed, bound, "bounded by the readiness timeout plus a margin")
			require.Equal(t, before, fixture.Managed(t, app, "web"), "no candidate left; the old generation kept")
			require.Zero(t, st.Transport+st.Non2xx, "old generation served throughout: %s %v", st, st.Errors)
			require.Greater(t, st.Answered, int64(0))
			requireNoPluginProcess(t, plugins)
		})
	}
	code, body, err := edge.Get("bad.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Equal(t, "v1", versionOf(body))
}

// probePhase returns the "probe" phase duration of step id in the op JSON
// that `deploy --format json` printed (0 when the step has none or no op
// was printed, e.g. a failure before readiness started).
func probePhase(t *testing.T, stdout, id string) time.Duration {
	t.Helper()
	var op struct {
		Steps []struct {
			ID       string           `json:"id"`
			PhasesMS map[string]int64 `json:"phases_ms"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &op); err != nil {
		// A deploy refused before its op was journaled prints no op.
		t.Logf("no op JSON on stdout (%v): %.200q", err, stdout)
		return 0
	}
	for _, s := range op.Steps {
		if s.ID == id {
			return time.Duration(s.PhasesMS["probe"]) * time.Millisecond
		}
	}
	return 0
}

var docExampleRE = regexp.MustCompile("(?s)<!-- example:main.go -->\\s*```go\\n(.*?)```")

// A plugin built from docs/plugins.md alone, in a
// temporary module outside the repository (replace → the checkout), is
// found on the plugin path and gates a real deploy.
func TestProbePlugin_PluginFromDocsWorks(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	doc, err := os.ReadFile(filepath.Join(fixture.RepoRoot(), "docs", "plugins.md"))
	require.NoError(t, err)
	m := docExampleRE.FindSubmatch(doc)
	require.NotNil(t, m, "docs/plugins.md has the marked complete example")

	mod := t.TempDir()
	fixture.WriteFile(t, filepath.Join(mod, "main.go"), string(m[1]))
	fixture.WriteFile(t, filepath.Join(mod, "go.mod"), fmt.Sprintf(
		"module example.com/bodymatch\n\ngo 1.26\n\nrequire github.com/gordon-deploy/docker-gordon v0.0.0\n\nreplace github.com/gordon-deploy/docker-gordon => %s\n", fixture.RepoRoot()))
	sum, err := os.ReadFile(filepath.Join(fixture.RepoRoot(), "go.sum"))
	require.NoError(t, err)
	fixture.WriteFile(t, filepath.Join(mod, "go.sum"), string(sum))
	plugins := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(plugins, "gordon-probe-bodymatch"), ".")
	cmd.Dir = mod
	// Everything is in the module cache: no network; -mod=mod lets go
	// record the transitive requirements the fresh go.mod lacks.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build the docs example: %s", out)

	a := fixture.NewApp(t, "e2edocprobe")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	fixture.WriteFile(t, file, pluginManifest(app, v1, "doc.test", "bodymatch", "path = \"/healthz\"\ncontains = \"ok\"", "20s", "READY_AFTER=2s"))
	op, r := fixture.DeployJSON(t, state, file, "--plugin-dir", plugins)
	require.Equal(t, 0, r.Code, r.String())
	require.Equal(t, "success", op.Outcome)
	require.GreaterOrEqual(t, probePhase(t, r.Stdout, "service.web.replace"), 1500*time.Millisecond,
		"readiness waited for /healthz to contain ok (2 s after start)")
	code, body, err := edge.Get("doc.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Equal(t, "v1", versionOf(body))

	// A config the plugin rejects fails the deploy and keeps the old one.
	before := fixture.Managed(t, app, "web")
	fixture.WriteFile(t, file, pluginManifest(app, v1, "doc.test", "bodymatch", "path = \"healthz\"", "5s", "X=1"))
	r = fixture.Gordon(t, state, "deploy", "--plugin-dir", plugins, "-f", file)
	require.Equal(t, 1, r.Code, r.String())
	require.Contains(t, r.Stderr, "must start with /", r.String())
	require.Equal(t, before, fixture.Managed(t, app, "web"))
	requireNoPluginProcess(t, plugins)
}
