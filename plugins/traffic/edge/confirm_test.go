package edge_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/plugins/traffic/edge"
)

// fakeAdmin is an edge admin endpoint that applies every table written to
// dir (it reads routes.json on POST /reload) but never rewrites
// status.json, like an edge whose state disk is full. stateID is what it
// reports as the directory it serves.
func fakeAdmin(t *testing.T, dir, stateID string) *httptest.Server {
	t.Helper()
	var applied atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/reload":
			if data, err := os.ReadFile(filepath.Join(dir, "edge", "routes.json")); err == nil {
				var tbl routetable.Table
				if json.Unmarshal(data, &tbl) == nil {
					applied.Store(tbl.Generation)
				}
			}
			w.WriteHeader(http.StatusAccepted)
		case r.URL.Path == "/status":
			_ = json.NewEncoder(w).Encode(routetable.Status{AppliedGeneration: applied.Load(), PID: 4242,
				AdminAddr: r.Host, StateID: stateID})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "edge"), 0o700))
	st, _ := json.Marshal(routetable.Status{AdminAddr: srv.Listener.Addr().String(), PID: 4242})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "edge", "status.json"), st, 0o600))
	return srv
}

// The switch is confirmed by the edge itself (its admin status), not by a
// status.json it may be unable to write: an edge that applied the table
// but cannot write the file does not make Apply fail.
func TestDecision11_ApplyConfirmedByEdgeThatCannotWriteStatus(t *testing.T) {
	dir := t.TempDir()
	fakeAdmin(t, dir, edgestate.StateDirID(dir))
	tr := edge.New(dir, edge.WithApplyTimeout(time.Second))
	gen, err := tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:9"))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), gen)
	var st routetable.Status
	data, err := os.ReadFile(filepath.Join(dir, "edge", "status.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &st))
	assert.Zero(t, st.AppliedGeneration, "the file was never rewritten")
}

// An edge that serves another state directory (a CLI working on a copy) is
// refused at once by Status (before anything is created) and by Apply,
// with ErrConflict, not a 10 s timeout and "is gordon-edge running?".
func TestDecision11_EdgeOfAnotherStateDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	fakeAdmin(t, dir, "1:2")
	tr := edge.New(dir, edge.WithApplyTimeout(5*time.Second))
	_, err := tr.Status(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "serves another state directory")

	start := time.Now()
	_, err = tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:9"))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.NotContains(t, err.Error(), "is gordon-edge running")
	assert.Less(t, time.Since(start), 4*time.Second, "refused without waiting for the apply timeout")
}

// A TCP publish port taken after preflight: the edge applies the table but
// cannot listen; the switch is not confirmed (ErrConflict naming the
// address), instead of a success while the port does not listen.
func TestDecision11_ApplyNotConfirmedWhileAListenerFailed(t *testing.T) {
	dir := t.TempDir()
	runEdge(t, dir)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	tr := edge.New(dir, edge.WithApplyTimeout(3*time.Second))
	g := routetable.Graph{TCP: []routetable.L4Route{{Listen: taken.Addr().String(), App: "blog", Service: "db", Backend: "127.0.0.1:9", Container: "c-db"}}}
	_, err = tr.Apply(context.Background(), g)
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), taken.Addr().String())
}

// Routes reports the last applied table (the engine keeps it for an app
// whose record is unreadable).
func TestDecision11_RoutesReportsTheLastAppliedTable(t *testing.T) {
	dir := t.TempDir()
	runEdge(t, dir)
	tr := edge.New(dir, edge.WithApplyTimeout(3*time.Second))
	_, err := tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:9"))
	require.NoError(t, err)
	g, err := tr.Routes(context.Background())
	require.NoError(t, err)
	require.Len(t, g.HTTP, 1)
	assert.Equal(t, "blog.test", g.HTTP[0].Host)
}
