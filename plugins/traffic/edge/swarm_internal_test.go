package edge

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// fakeEdges is the swarm's edge task list.
type fakeEdges []swarm.EdgeTask

func (f fakeEdges) edges(context.Context, swarm.Config) ([]swarm.EdgeTask, error) {
	return f, nil
}

// swarmEdge runs an in-process gordon-edge with a routes token on its own
// state directory and a loopback admin address of the given port.
func swarmEdge(t *testing.T, token string, adminPort int, ip string) *edgeproxy.Server {
	t.Helper()
	srv := edgeproxy.New(edgeproxy.Config{
		StateDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", AdminAddr: net.JoinHostPort(ip, strconv.Itoa(adminPort)),
		RoutesToken: token, PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("edge exited: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("edge not ready")
	}
	return srv
}

// swarmState is a state directory with a swarm configuration and token.
func swarmState(t *testing.T, adminPort int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, swarm.Save(dir, swarm.Config{AdminPort: adminPort, HTTPPort: 80}))
	tok, err := swarm.EnsureToken(dir)
	require.NoError(t, err)
	return dir, tok
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func webGraph(backend string) routetable.Graph {
	return routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "web.lab", App: "web", Service: "web",
		Backends: []routetable.Backend{{Addr: backend, Container: "c1"}}}}}
}

// On a swarm, Apply returns only when every running edge task on a ready
// node has applied the generation (pushed over its admin endpoint); the
// table of record is still written to the state directory; tasks on a
// down node or not yet running are skipped (they catch up from peers).
func TestSwarmApply_EveryRunningEdgeConfirmsTheGenerationBeforeApplyReturns(t *testing.T) {
	port := freePort(t)
	dir, tok := swarmState(t, port)
	e1 := swarmEdge(t, tok, port, "127.0.0.1")
	e2 := swarmEdge(t, tok, port, "127.0.0.2")
	tr := New(dir, WithApplyTimeout(5*time.Second))
	tr.swarm = fakeEdges{
		{ID: "t1", NodeName: "n1", NodeReady: true, State: "running", IP: "127.0.0.1"},
		{ID: "t2", NodeName: "n2", NodeReady: true, State: "running", IP: "127.0.0.2"},
		{ID: "t3", NodeName: "n3", NodeReady: false, State: "running", IP: "127.0.0.3"},
		{ID: "t4", NodeName: "n4", NodeReady: true, State: "starting", IP: "127.0.0.4"},
	}
	gen, err := tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
	require.NoError(t, err)
	assert.Equal(t, gen, e1.Status().AppliedGeneration, "edge on n1 applied it before Apply returned")
	assert.Equal(t, gen, e2.Status().AppliedGeneration, "edge on n2 applied it before Apply returned")
	_, err = os.Stat(filepath.Join(dir, "edge", "routes.json"))
	assert.NoError(t, err, "the table of record is in the state directory")

	gen2, err := tr.Apply(context.Background(), webGraph("10.0.2.7:8080"))
	require.NoError(t, err)
	assert.Equal(t, gen+1, gen2)
	st, err := tr.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, gen2, st.AppliedGeneration, "status is the generation every edge applied")
	assert.Empty(t, st.Error)
}

// A running edge that does not answer fails the Apply (core.ErrUnavailable,
// naming its node) instead of switching with one edge left on the old
// generation; a wrong token is core.ErrConflict at once.
func TestSwarmApply_AnEdgeThatDoesNotConfirmFailsTheSwitch(t *testing.T) {
	port := freePort(t)
	dir, tok := swarmState(t, port)
	swarmEdge(t, tok, port, "127.0.0.1")
	tr := New(dir, WithApplyTimeout(700*time.Millisecond))
	tr.swarm = fakeEdges{
		{ID: "t1", NodeName: "n1", NodeReady: true, State: "running", IP: "127.0.0.1"},
		{ID: "t2", NodeName: "n2", NodeReady: true, State: "running", IP: "127.0.0.9"},
	}
	_, err := tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "the edge on node n2")

	other := swarmEdge(t, "another-token", freePort(t), "127.0.0.1")
	cfg, _, _ := swarm.Load(dir)
	cfg.AdminPort = portOf(t, other.AdminAddr())
	require.NoError(t, swarm.Save(dir, cfg))
	tr.swarm = fakeEdges{{ID: "t1", NodeName: "n1", NodeReady: true, State: "running", IP: "127.0.0.1"}}
	_, err = tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict, "a refused token is not retried: %v", err)
}

// No edge task running is core.ErrUnavailable with what to do.
func TestSwarmApply_NoRunningEdgeIsUnavailable(t *testing.T) {
	dir, _ := swarmState(t, freePort(t))
	tr := New(dir, WithApplyTimeout(time.Second))
	tr.swarm = fakeEdges{}
	_, err := tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "docker gordon system start")
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// On a swarm, Routes is the table of record only while every running edge
// has applied it: an edge that (re)started with no table makes it an error
// (so the reconcile pass applies the table again), and the next Apply
// brings that edge up to date.
func TestSwarmRoutes_AnEdgeThatLagsTheTableOfRecordIsNotServedYet(t *testing.T) {
	port := freePort(t)
	dir, tok := swarmState(t, port)
	swarmEdge(t, tok, port, "127.0.0.1")
	tr := New(dir, WithApplyTimeout(5*time.Second))
	one := fakeEdges{{ID: "t1", NodeName: "n1", NodeReady: true, State: "running", IP: "127.0.0.1"}}
	tr.swarm = one
	_, err := tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
	require.NoError(t, err)
	g, err := tr.Routes(context.Background())
	require.NoError(t, err)
	require.Len(t, g.HTTP, 1)

	restarted := swarmEdge(t, tok, port, "127.0.0.2")
	tr.swarm = append(one, swarm.EdgeTask{ID: "t2", NodeName: "n2", NodeReady: true, State: "running", IP: "127.0.0.2"})
	_, err = tr.Routes(context.Background())
	require.ErrorIs(t, err, core.ErrUnavailable, "an edge without the table: not served")
	assert.Contains(t, err.Error(), "applied generation 0 of 1")

	_, err = tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), restarted.Status().AppliedGeneration)
	_, err = tr.Routes(context.Background())
	require.NoError(t, err)
}

// A table of record that starts over (another manager adopted the state
// from the swarm, a state directory restored from a backup: no
// routes.json) still outranks what the edges applied, so they take its
// graph instead of answering with the generation they hold.
func TestSwarmApply_ATableOfRecordThatStartsOverOutranksTheEdges(t *testing.T) {
	port := freePort(t)
	dir, tok := swarmState(t, port)
	e1 := swarmEdge(t, tok, port, "127.0.0.1")
	tasks := fakeEdges{{ID: "t1", NodeName: "n1", NodeReady: true, State: "running", IP: "127.0.0.1"}}
	tr := New(dir, WithApplyTimeout(5*time.Second))
	tr.swarm = tasks
	var gen uint64
	for range 3 {
		g, err := tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
		require.NoError(t, err)
		gen = g
	}

	adopted, _ := swarmState(t, port)
	require.NoError(t, os.WriteFile(filepath.Join(adopted, swarm.TokenFile), []byte(tok+"\n"), 0o600))
	tr2 := New(adopted, WithApplyTimeout(5*time.Second))
	tr2.swarm = tasks
	gen2, err := tr2.Apply(context.Background(), webGraph("10.0.9.9:8080"))
	require.NoError(t, err)
	assert.Greater(t, gen2, gen, "the new table of record outranks the edge's generation")
	assert.Equal(t, gen2, e1.Status().AppliedGeneration)
	var addrs []string
	for _, b := range e1.Status().Backends {
		addrs = append(addrs, b.Addr)
	}
	assert.Contains(t, addrs, "10.0.9.9:8080", "the edge serves the adopted table's backend")
}
