package edge

import (
	"context"
	"encoding/json"
	"math"
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
)

// wedgedEdge runs an edge that already serves a table of generation
// 2^64-1 (written to its own state directory, as root on its node or an
// edge from before generations were bounded could hold).
func wedgedEdge(t *testing.T, token string, adminPort int, ip string) *edgeproxy.Server {
	t.Helper()
	state := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(state, "edge"), 0o700))
	data, err := json.Marshal(routetable.Table{Schema: routetable.Schema, Generation: math.MaxUint64, Graph: webGraph("10.6.6.6:80")})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "edge", edgeproxy.RoutesFile), data, 0o600))
	srv := edgeproxy.New(edgeproxy.Config{
		StateDir: state, HTTPAddr: "127.0.0.1:0", AdminAddr: net.JoinHostPort(ip, strconv.Itoa(adminPort)),
		RoutesToken: token, PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("edge exited: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("edge not ready")
	}
	require.Eventually(t, func() bool { return srv.Status().AppliedGeneration == math.MaxUint64 }, 5*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { cancel(); <-done })
	return srv
}

// R79 (generations): an edge that reports generation 2^64-1 neither makes
// the next generation wrap nor passes for having applied the new table
// (its 409 is never success): Apply fails naming that edge, the other
// edges apply the next generation in sequence, and once that edge's task
// restarts the next Apply reaches every edge.
func TestSwarmApply_AnEdgeAtTheMaximumGenerationNeverPassesForApplied(t *testing.T) {
	port := freePort(t)
	dir, tok := swarmState(t, port)
	healthy := swarmEdge(t, tok, port, "127.0.0.1")
	wedged := wedgedEdge(t, tok, port, "127.0.0.2")
	tasks := fakeEdges{
		{ID: "t1", NodeName: "n1", NodeReady: true, State: "running", IP: "127.0.0.1"},
		{ID: "t2", NodeName: "n2", NodeReady: true, State: "running", IP: "127.0.0.2"},
	}
	tr := New(dir, WithApplyTimeout(2*time.Second))
	tr.swarm = tasks

	_, err := tr.Apply(context.Background(), webGraph("10.0.1.5:8080"))
	require.Error(t, err, "a deploy never reports success while an edge keeps another table")
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "the edge on node n2")
	assert.Contains(t, err.Error(), "docker service update --force")
	assert.Equal(t, uint64(1), healthy.Status().AppliedGeneration, "the next generation in sequence, not a wrapped 0")
	assert.Equal(t, uint64(math.MaxUint64), wedged.Status().AppliedGeneration)

	// The wedged task restarts (a swarm edge's state is a tmpfs): the
	// next Apply reaches every edge.
	restarted := swarmEdge(t, tok, port, "127.0.0.3")
	tr.swarm = fakeEdges{tasks[0], {ID: "t3", NodeName: "n2", NodeReady: true, State: "running", IP: "127.0.0.3"}}
	gen, err := tr.Apply(context.Background(), webGraph("10.0.2.7:8080"))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), gen)
	assert.Equal(t, gen, healthy.Status().AppliedGeneration)
	assert.Equal(t, gen, restarted.Status().AppliedGeneration)
}
