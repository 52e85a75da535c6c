package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/plugins/traffic/edge"
)

// runEdge starts an in-process gordon-edge on stateDir until the test ends.
func runEdge(t *testing.T, stateDir string) *edgeproxy.Server {
	t.Helper()
	return runEdgePolling(t, stateDir, 20*time.Millisecond)
}

// runEdgePolling is runEdge with the edge's route table poll interval.
func runEdgePolling(t *testing.T, stateDir string, poll time.Duration) *edgeproxy.Server {
	t.Helper()
	srv := edgeproxy.New(edgeproxy.Config{
		StateDir:        stateDir,
		HTTPAddr:        "127.0.0.1:0",
		PollInterval:    poll,
		ShutdownTimeout: 2 * time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Error("edge did not stop")
		}
	})
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("edge exited: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("edge not ready")
	}
	return srv
}

func graphFor(host, addr string) routetable.Graph {
	return routetable.Graph{HTTP: []routetable.HTTPRoute{{
		Host: host, App: "blog", Service: "web",
		Backends: []routetable.Backend{{Addr: addr, Container: "c-new"}},
	}}}
}

func getVia(t *testing.T, srv *edgeproxy.Server, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+srv.HTTPAddr()+"/", nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Decision 11: Apply writes the next generation and returns once the running
// edge confirmed it; the edge then routes the graph.
func TestDecision11_ApplyReturnsAppliedGeneration(t *testing.T) {
	dir := t.TempDir()
	srv := runEdge(t, dir)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "web") }))
	t.Cleanup(be.Close)
	tr := edge.New(dir, edge.WithApplyTimeout(3*time.Second))

	gen, err := tr.Apply(context.Background(), graphFor("blog.test", be.Listener.Addr().String()))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), gen)
	code, body := getVia(t, srv, "blog.test")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "web", body)

	gen, err = tr.Apply(context.Background(), routetable.Graph{})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), gen)
	code, _ = getVia(t, srv, "blog.test")
	assert.Equal(t, http.StatusNotFound, code, "an empty graph withdraws every route")

	st, err := tr.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(2), st.AppliedGeneration)
	assert.Empty(t, st.Error)

	// The table on disk is schema 1, sorted, with the confirmed generation.
	data, err := os.ReadFile(filepath.Join(dir, "edge", "routes.json"))
	require.NoError(t, err)
	tbl, err := edgeproxy.LoadTable(data)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), tbl.Generation)
}

// Switch cost: Apply pokes the edge (POST /reload) right after
// writing the table, so the switch does not wait for the edge's next poll.
func TestDecision11_ApplyDoesNotWaitForEdgePoll(t *testing.T) {
	dir := t.TempDir()
	runEdgePolling(t, dir, time.Hour) // only the start-up read and pokes
	tr := edge.New(dir, edge.WithApplyTimeout(5*time.Second))
	for i := range 5 {
		start := time.Now()
		gen, err := tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:9"))
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), gen)
		assert.Less(t, time.Since(start), time.Second, "applied on the poke, not on a poll")
	}
}

// Decision 11: the table is written sorted (HTTP by host, TCP/UDP by listen).
func TestDecision11_ApplyWritesSortedTable(t *testing.T) {
	dir := t.TempDir()
	runEdge(t, dir)
	tr := edge.New(dir, edge.WithApplyTimeout(3*time.Second))
	g := routetable.Graph{
		HTTP: []routetable.HTTPRoute{
			{Host: "b.test", Backends: []routetable.Backend{{Addr: "127.0.0.1:2"}}},
			{Host: "a.test", Backends: []routetable.Backend{{Addr: "127.0.0.1:1"}}},
		},
		UDP: []routetable.L4Route{
			{Listen: "127.0.0.1:40002", Backend: "127.0.0.1:3"},
			{Listen: "127.0.0.1:40001", Backend: "127.0.0.1:4"},
		},
	}
	_, err := tr.Apply(context.Background(), g)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, "edge", "routes.json"))
	require.NoError(t, err)
	var tbl routetable.Table
	require.NoError(t, json.Unmarshal(data, &tbl))
	assert.Equal(t, routetable.Schema, tbl.Schema)
	assert.Equal(t, []string{"a.test", "b.test"}, []string{tbl.HTTP[0].Host, tbl.HTTP[1].Host})
	assert.Equal(t, "127.0.0.1:40001", tbl.UDP[0].Listen)
	assert.NotNil(t, tbl.TCP)
	assert.Equal(t, "b.test", g.HTTP[0].Host, "the caller's graph is not reordered")
}

// Decision 11: with no edge running, Apply times out with a clear error
// (a rejected rebuild, core.ErrUnavailable).
func TestDecision11_ApplyWithoutEdgeTimesOut(t *testing.T) {
	dir := t.TempDir()
	tr := edge.New(dir, edge.WithApplyTimeout(150*time.Millisecond))
	start := time.Now()
	_, err := tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:1"))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "edge did not apply generation 1 within 150ms")
	assert.Contains(t, err.Error(), "is gordon-edge running? docker gordon edge start")
	assert.Less(t, time.Since(start), 2*time.Second)

	_, err = tr.Status(context.Background())
	assert.ErrorIs(t, err, core.ErrUnavailable, "no status.json: the edge never ran")
}

// Decision 11: a graph the edge rejects is an error naming the edge's reason
// (core.ErrInvalid), and the previous table keeps serving.
func TestDecision11_ApplyRejectedByEdgeIsError(t *testing.T) {
	dir := t.TempDir()
	srv := runEdge(t, dir)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "web") }))
	t.Cleanup(be.Close)
	tr := edge.New(dir, edge.WithApplyTimeout(3*time.Second))
	_, err := tr.Apply(context.Background(), graphFor("blog.test", be.Listener.Addr().String()))
	require.NoError(t, err)

	_, err = tr.Apply(context.Background(), graphFor("bad host", "127.0.0.1:1"))
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "edge rejected generation 2")
	assert.Contains(t, err.Error(), `host "bad host"`)
	_, body := getVia(t, srv, "blog.test")
	assert.Equal(t, "web", body)

	// The next publisher outranks the rejected generation.
	gen, err := tr.Apply(context.Background(), graphFor("blog.test", be.Listener.Addr().String()))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), gen)
	st, err := tr.Status(context.Background())
	require.NoError(t, err)
	assert.Empty(t, st.Error)
}

// Decision 2 / 11: concurrent publishers are serialized by the edge lock and
// each gets its own generation.
func TestDecision11_ConcurrentAppliesGetDistinctGenerations(t *testing.T) {
	dir := t.TempDir()
	runEdge(t, dir)
	var wg sync.WaitGroup
	gens := make(chan uint64, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := edge.New(dir, edge.WithApplyTimeout(5*time.Second))
			g, err := tr.Apply(context.Background(), routetable.Graph{})
			assert.NoError(t, err)
			gens <- g
		}()
	}
	wg.Wait()
	close(gens)
	seen := map[uint64]bool{}
	for g := range gens {
		assert.False(t, seen[g], "generation %d handed out twice", g)
		seen[g] = true
	}
	assert.Len(t, seen, 6)
	for g := uint64(1); g <= 6; g++ {
		assert.True(t, seen[g], "generation %d", g)
	}
}

// Decision 16: Status reports live in-flight counts from the edge admin
// endpoint while a request is running, and falls back to status.json when
// the admin endpoint is unreachable.
func TestDecision16_StatusReportsLiveInFlight(t *testing.T) {
	dir := t.TempDir()
	srv := runEdge(t, dir)
	release := make(chan struct{})
	started := make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "slow")
	}))
	t.Cleanup(be.Close)
	addr := be.Listener.Addr().String()
	tr := edge.New(dir, edge.WithApplyTimeout(3*time.Second))
	_, err := tr.Apply(context.Background(), graphFor("blog.test", addr))
	require.NoError(t, err)

	done := make(chan struct{})
	go func() {
		defer close(done)
		code, body := getVia(t, srv, "blog.test")
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "slow", body)
	}()
	<-started
	st, err := tr.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.InFlight(addr), "live count from the admin endpoint")
	close(release)
	<-done
	st, err = tr.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(0), st.InFlight(addr))

	// Fallback: status.json names an unreachable admin address.
	path := filepath.Join(dir, "edge", "status.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var fileSt routetable.Status
	require.NoError(t, json.Unmarshal(data, &fileSt))
	fileSt.AdminAddr = "127.0.0.1:1"
	fileSt.AppliedGeneration = 41
	fileSt.Backends = []routetable.BackendStatus{{Addr: addr, InFlight: 3}}
	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(other, "edge"), 0o700))
	b, err := json.Marshal(fileSt)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(other, "edge", "status.json"), b, 0o600))
	st, err = edge.New(other, edge.WithAdminTimeout(200*time.Millisecond)).Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(41), st.AppliedGeneration)
	assert.Equal(t, int64(3), st.InFlight(addr))
}
