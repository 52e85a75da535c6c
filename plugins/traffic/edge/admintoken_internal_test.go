package edge

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// On one engine the publisher reads the edge's admin token from
// <state>/edge/admin.token and sends it with POST /reload and GET /status;
// without the file the edge answers 401, taken as no answer.
func TestAdminCallsCarryTheStateDirectoryToken(t *testing.T) {
	dir := t.TempDir()
	edgeDir := filepath.Join(dir, "edge")
	require.NoError(t, os.MkdirAll(edgeDir, 0o700))
	tok, err := edgestate.EnsureAdminToken(edgeDir)
	require.NoError(t, err)
	srv := edgeproxy.New(edgeproxy.Config{StateDir: dir, HTTPAddr: "127.0.0.1:0", AdminToken: tok,
		PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("edge exited: %v", err)
	}
	tr := New(dir)

	_, ok := tr.reload(context.Background(), srv.AdminAddr())
	assert.True(t, ok, "POST /reload with the token")
	_, err = tr.fetchLive(context.Background(), srv.AdminAddr())
	assert.NoError(t, err, "GET /status with the token")

	require.NoError(t, os.Remove(filepath.Join(edgeDir, edgestate.AdminTokenFile)))
	_, ok = tr.reload(context.Background(), srv.AdminAddr())
	assert.False(t, ok)
	_, err = tr.fetchLive(context.Background(), srv.AdminAddr())
	assert.ErrorContains(t, err, "HTTP 401")
}
