package edge_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/plugins/traffic/edge"
)

// Decision 11: the switch is confirmed by the edge's answer to POST
// /reload: with the edge's own poll and the backend's fallback poll both an
// hour away, Apply still returns the applied generation at once.
func TestDecision11_ApplyConfirmedByTheReloadAnswer(t *testing.T) {
	dir := t.TempDir()
	runEdgePolling(t, dir, time.Hour)
	tr := edge.New(dir, edge.WithApplyTimeout(5*time.Second), edge.WithPollInterval(time.Hour))
	for i := range 3 {
		start := time.Now()
		gen, err := tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:9"))
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), gen)
		assert.Less(t, time.Since(start), 2*time.Second, "confirmed by the reload answer, not by a poll")
	}
}

// A rejection comes back in the reload answer too: ErrInvalid with the
// edge's reason, without waiting for the apply timeout.
func TestDecision11_RejectionComesBackInTheReloadAnswer(t *testing.T) {
	dir := t.TempDir()
	runEdgePolling(t, dir, time.Hour)
	tr := edge.New(dir, edge.WithApplyTimeout(5*time.Second), edge.WithPollInterval(time.Hour))
	start := time.Now()
	_, err := tr.Apply(context.Background(), routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "", App: "blog", Service: "web"}}})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "edge rejected generation 1")
	assert.Less(t, time.Since(start), 2*time.Second)
}

// Status says what the edge serves: live, when it wrote its status, its
// listeners, and which backends no route leads to any more; once the edge
// is gone the figures are its last written ones, marked Stale.
func TestStatusReportsLivenessListenersAndRetiredBackends(t *testing.T) {
	dir := t.TempDir()
	srv := runEdge(t, dir)
	tr := edge.New(dir, edge.WithApplyTimeout(3*time.Second), edge.WithAdminTimeout(300*time.Millisecond))
	_, err := tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:9"))
	require.NoError(t, err)
	// The edge counts a backend once it was dialled: route one request.
	code, _ := getVia(t, srv, "blog.test")
	assert.GreaterOrEqual(t, code, 500, "nothing listens there")
	_, err = tr.Apply(context.Background(), graphFor("blog.test", "127.0.0.1:10"))
	require.NoError(t, err)

	st, err := tr.Status(context.Background())
	require.NoError(t, err)
	assert.False(t, st.Stale, "the edge answered")
	assert.Equal(t, uint64(2), st.AppliedGeneration)
	assert.False(t, st.UpdatedAt.IsZero())
	assert.Contains(t, st.Listeners, routetable.ListenerStatus{Addr: srv.HTTPAddr(), Proto: "http"})
	assert.Contains(t, st.RetiredBackends, "127.0.0.1:9", "switched away from")
	assert.NotContains(t, st.RetiredBackends, "127.0.0.1:10")

	// The edge stops answering (its admin address is now nobody's).
	path := filepath.Join(dir, "edge", "status.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var file routetable.Status
	require.NoError(t, json.Unmarshal(data, &file))
	file.AdminAddr = "127.0.0.1:1"
	b, err := json.Marshal(file)
	require.NoError(t, err)
	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(other, "edge"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(other, "edge", "status.json"), b, 0o600))
	st, err = edge.New(other, edge.WithAdminTimeout(200*time.Millisecond)).Status(context.Background())
	require.NoError(t, err)
	assert.True(t, st.Stale, "no answer: the last written status")
	assert.True(t, st.UpdatedAt.Equal(file.UpdatedAt))
	assert.Equal(t, uint64(2), st.AppliedGeneration)

	// Never ran here: ErrUnavailable.
	_, err = edge.New(t.TempDir()).Status(context.Background())
	assert.ErrorIs(t, err, core.ErrUnavailable)
}
