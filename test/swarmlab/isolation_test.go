package swarmlab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildDialer builds the lab's stand-in for a compromised app container
// (test/swarmlab/dialer) into dir and pushes it to the lab registry.
func (g *gordonLab) pushDialer(ctx context.Context, t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), "dialer")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./dialer")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	ref, err := g.PushImage(ctx, "dialer:gordon", out)
	require.NoError(t, err)
	return ref
}

// appManifest is one HTTP service "web" of app name at host, on port 8080.
func appManifest(name, image, host string) string {
	return fmt.Sprintf(`name = %q

[services.web]
image = %q
stop_grace = "2s"

[[services.web.http]]
port = 8080
host = %q

[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "60s"
`, name, image, host)
}

// taskAddrs returns, for every running task of the services matching
// filter (a docker service ls filter), its address on each network:
// network name → addresses.
func (g *gordonLab) taskAddrs(ctx context.Context, t *testing.T, filter string) map[string][]string {
	t.Helper()
	ids, err := g.Docker(ctx, 1, "service", "ls", "-q", "--filter", filter)
	require.NoError(t, err)
	require.NotEmpty(t, ids, "services %s", filter)
	tasks, err := g.Docker(ctx, 1, append([]string{"service", "ps", "-q", "--filter", "desired-state=running"}, strings.Fields(ids)...)...)
	require.NoError(t, err)
	out := map[string][]string{}
	for _, task := range strings.Fields(tasks) {
		line, err := g.Docker(ctx, 1, "inspect", "--format", `{{range .NetworksAttachments}}{{.Network.Spec.Name}}={{index .Addresses 0}} {{end}}`, task)
		require.NoError(t, err)
		for _, kv := range strings.Fields(line) {
			name, addr, _ := strings.Cut(kv, "=")
			ip, _, _ := strings.Cut(addr, "/")
			out[name] = append(out[name], ip)
		}
	}
	return out
}

// dialFrom asks the dialer (app "attacker", through the edge of node 1)
// to open a TCP connection to addr from inside its container.
func (g *gordonLab) dialFrom(ctx context.Context, t *testing.T, addr string) string {
	t.Helper()
	out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "5", "-H", "Host: attacker.lab", "http://"+g.Nodes[0].IP+"/dial?addr="+addr)
	require.NoError(t, err, "the dialer answers through the edge")
	return strings.TrimSpace(out)
}

// On a 3-node swarm: each app's tasks join only their app's overlay, the
// edge joins each app's overlay, and the edge's admin and the route push
// are on the control overlay no app joins. A container of app "attacker"
// (the dialer) reaches its own app's instance, but neither app
// "victim"'s instance at its task address (bypassing the edge), nor any
// edge task's admin port, at the edge's control address or at its
// address on the attacker's own network; both apps still answer through
// every edge.
func TestSwarmIsolation_AnAppReachesNeitherAnotherAppNorTheEdgeAdmin(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g := upGordonLab(ctx, t, "gsi", "10.73.0", false)
	t.Cleanup(func() { g.dumpOnFailure(t) })
	dialer := g.pushDialer(ctx, t)
	r := g.must(ctx, t, "system", "start", "--registry", g.Registry, "--http-addr", ":80")
	t.Logf("system start:\n%s", r.out)
	g.must(ctx, t, "deploy", "-f", writeManifest(t, appManifest("victim", g.httpd, "victim.lab")))
	// Measured, not asserted: the edge service joins a new app's network
	// by replacing each node's edge task in turn (docs/swarm.md), and a
	// client of that node's published port sees the gap.
	load := startLabLoad(t, g.Lab, "http://"+g.Nodes[0].IP+"/", "victim.lab", 8, 3*time.Minute)
	load.awaitOK(t, 100, 30*time.Second)
	d0 := time.Now()
	g.must(ctx, t, "deploy", "-f", writeManifest(t, appManifest("attacker", dialer, "attacker.lab")))
	took := time.Since(d0)
	st := load.Stop()
	first, last := load.failWindow()
	t.Logf("another app's first deploy (the edge joins its network) in %v: load on victim through node 1: %d OK, %d failed (%d transport, %d non-2xx), longest gap %v, failures from +%v to +%v, errors %v",
		took.Round(time.Millisecond), st.OK, st.Failed(), st.Transport, st.Non2xx, st.LongestGap,
		sinceOrZero(d0, first), sinceOrZero(d0, last), st.Errors)
	g.edgeTimeline(ctx, t, 1, d0)
	g.answersEverywhere(ctx, t, "victim.lab", "version")
	g.answersEverywhere(ctx, t, "attacker.lab", "")

	victim := g.taskAddrs(ctx, t, "label=dev.gordon.app=victim")
	attacker := g.taskAddrs(ctx, t, "label=dev.gordon.app=attacker")
	edge := g.taskAddrs(ctx, t, "name=gordon-edge")
	t.Logf("victim %v\nattacker %v\nedge %v", victim, attacker, edge)
	assert.Equal(t, []string{"gordon-victim"}, keys(victim), "the victim's task is on its app's network only")
	assert.Equal(t, []string{"gordon-attacker"}, keys(attacker), "the attacker's task is on its app's network only")
	assert.ElementsMatch(t, []string{"gordon-edge", "gordon-victim", "gordon-attacker"}, keys(edge), "the edge is on the control network and on every app's")

	require.Equal(t, "connected", g.dialFrom(ctx, t, attacker["gordon-attacker"][0]+":8080"), "the dialer reaches its own app (the probe works)")
	for _, ip := range victim["gordon-victim"] {
		got := g.dialFrom(ctx, t, ip+":8080")
		t.Logf("attacker → victim %s:8080: %s", ip, got)
		assert.True(t, strings.HasPrefix(got, "failed"), "app attacker must not reach app victim at %s:8080: %s", ip, got)
	}
	for _, net := range []string{"gordon-edge", "gordon-attacker"} {
		for _, ip := range edge[net] {
			got := g.dialFrom(ctx, t, ip+":9180")
			t.Logf("attacker → edge admin %s:9180 (%s): %s", ip, net, got)
			assert.True(t, strings.HasPrefix(got, "failed"), "app attacker must not reach the edge admin at %s:9180 (%s): %s", ip, net, got)
		}
	}
	t.Run("no container on any node shows a control token in docker inspect", func(t *testing.T) {
		g.noTokenInInspect(ctx, t)
	})
	t.Run("rotate-token under load drops no request, and the new push token deploys", func(t *testing.T) {
		old, err := os.ReadFile(filepath.Join(g.state, "edge", "control.json"))
		require.NoError(t, err)
		load := startLabLoad(t, g.Lab, "http://"+g.Nodes[0].IP+"/", "victim.lab", 8, 3*time.Minute)
		load.awaitOK(t, 200, 30*time.Second)
		r0 := time.Now()
		r := g.must(ctx, t, "system", "rotate-token")
		t.Logf("rotate-token under load in %v:\n%s", time.Since(r0).Round(time.Millisecond), r.out)
		load.awaitOK(t, 200, 30*time.Second)
		g.must(ctx, t, "deploy", "-f", writeManifest(t, strings.Replace(appManifest("victim", g.httpd, "victim.lab"), `stop_grace = "2s"`, "stop_grace = \"2s\"\n\n[services.web.env]\nVERSION = \"rotated\"", 1)))
		load.awaitOK(t, 200, 30*time.Second)
		st := load.Stop()
		t.Logf("load during the rotation and the deploy after it: %d OK, %d failed, p99 %v, longest gap %v, errors %v", st.OK, st.Failed(), st.P99, st.LongestGap, st.Errors)
		assert.Zero(t, st.Failed(), "no request fails during a rotation: %v", st.Errors)
		assert.Contains(t, r.out, "control tokens rotated")
		now, err := os.ReadFile(filepath.Join(g.state, "edge", "control.json"))
		require.NoError(t, err)
		var a, b struct{ Push, Edge string }
		require.NoError(t, json.Unmarshal(old, &a))
		require.NoError(t, json.Unmarshal(now, &b))
		assert.NotEqual(t, a.Push, b.Push, "a new push token")
		assert.NotEqual(t, a.Edge, b.Edge, "a new edge token")
		g.answersEverywhere(ctx, t, "victim.lab", "version=rotated")
		g.noTokenInInspect(ctx, t)
	})
	t.Logf("whole test in %v", time.Since(began).Round(time.Millisecond))
}

// noTokenInInspect reads the push and edge tokens from the state
// directory and checks that `docker inspect` of every container on every
// node (the edge tasks, the apps, the reconcile container) shows neither.
func (g *gordonLab) noTokenInInspect(ctx context.Context, t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(g.state, "edge", "control.json"))
	require.NoError(t, err)
	var ctl struct{ Push, Edge string }
	require.NoError(t, json.Unmarshal(raw, &ctl))
	require.NotEmpty(t, ctl.Push)
	require.NotEmpty(t, ctl.Edge)
	inspected := 0
	for i := range g.Nodes {
		ids, err := g.Docker(ctx, i+1, "ps", "-aq")
		require.NoError(t, err)
		if strings.TrimSpace(ids) == "" {
			continue
		}
		var out strings.Builder
		for _, id := range strings.Fields(ids) {
			one, err := g.Docker(ctx, i+1, "inspect", id)
			if err != nil && strings.Contains(one, "No such") {
				continue // removed since ps (a retired generation's task)
			}
			require.NoError(t, err)
			out.WriteString(one)
			inspected++
		}
		assert.NotContains(t, out.String(), ctl.Push, "the push token in docker inspect on %s", g.Nodes[i].Name)
		assert.NotContains(t, out.String(), ctl.Edge, "the edge token in docker inspect on %s", g.Nodes[i].Name)
		svc, err := g.Docker(ctx, 1, "service", "inspect", "gordon-edge")
		require.NoError(t, err)
		assert.NotContains(t, svc, ctl.Push)
		assert.NotContains(t, svc, ctl.Edge)
	}
	t.Logf("%d containers inspected on %d nodes: no token", inspected, len(g.Nodes))
}

// sinceOrZero is at-d0 rounded to 100 ms (0 for a zero at).
func sinceOrZero(d0, at time.Time) time.Duration {
	if at.IsZero() {
		return 0
	}
	return at.Sub(d0).Round(100 * time.Millisecond)
}

// edgeTimeline logs, for every edge container node i has run (old and
// new), when it started and finished relative to d0, and its last log
// lines: where a node's port went unserved while Swarm replaced its task.
func (g *gordonLab) edgeTimeline(ctx context.Context, t *testing.T, i int, d0 time.Time) {
	t.Helper()
	ids, err := g.Docker(ctx, i, "ps", "-aq", "--filter", "label=com.docker.swarm.service.name=gordon-edge")
	if err != nil {
		t.Logf("edge containers on node %d: %v", i, err)
		return
	}
	for _, id := range strings.Fields(ids) {
		out, err := g.Docker(ctx, i, "inspect", "--format", "{{.State.StartedAt}} {{.State.FinishedAt}} {{.State.Status}}", id)
		if err != nil {
			continue
		}
		f := strings.Fields(out)
		rel := func(s string) string {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || at.Year() < 2000 {
				return "-"
			}
			return "+" + at.Sub(d0).Round(time.Millisecond).String()
		}
		if len(f) == 3 {
			logs, _ := g.Docker(ctx, i, "logs", id)
			var lines []string
			for _, line := range strings.Split(logs, "\n") {
				if !strings.Contains(line, `"method":`) { // not an access log line
					lines = append(lines, line)
				}
			}
			t.Logf("edge container %.12s on node %d: started %s, finished %s, %s; its log but the access log:\n%s", id, i, rel(f[0]), rel(f[1]), f[2], strings.Join(lines, "\n"))
		}
	}
}

func keys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dumpOnFailure logs the edge service's spec and logs and the services
// when t failed (the lab is removed right after).
func (g *gordonLab) dumpOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"service", "ls"},
		{"service", "inspect", "--format", "{{json .Spec.TaskTemplate.ContainerSpec.Args}} {{json .Spec.TaskTemplate.Networks}}", "gordon-edge"},
		{"service", "ps", "gordon-edge"},
		{"service", "logs", "--tail", "40", "gordon-edge"},
		{"logs", "--tail", "40", "gordon-reconcile"},
	} {
		out, err := g.Docker(ctx, 1, args...)
		t.Logf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
