package reconcile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certshare"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// Without the route-push token there is nothing to authorize the edges
// with: the storage is refused, naming the token.
func TestReconcileCertStorageRefusedWithoutToken(t *testing.T) {
	dir := t.TempDir()
	_, _, err := ServeCertStorage(dir, "127.0.0.1:0", io.Discard, hclog.NewNullLogger())
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	assert.Contains(t, err.Error(), "token")

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "edge"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, swarm.TokenFile), []byte("\n"), 0o600))
	_, _, err = ServeCertStorage(dir, "127.0.0.1:0", io.Discard, hclog.NewNullLogger())
	assert.ErrorContains(t, err, "empty")
}

// With the token, <state>/edge/certs is created 0700 and served to the
// token only; stop ends a lock wait under way and closes the server.
func TestReconcileCertStorageServesTheStateCertsWithTheSwarmToken(t *testing.T) {
	dir := t.TempDir()
	tok, err := swarm.EnsureToken(dir)
	require.NoError(t, err)
	addr, stop, err := ServeCertStorage(dir, "127.0.0.1:0", io.Discard, hclog.NewNullLogger())
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	fi, err := os.Stat(certstore.Root(dir))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	ctx := context.Background()
	url := "http://" + addr.String()
	a, err := certshare.NewClient(url, tok, nil)
	require.NoError(t, err)
	require.NoError(t, a.Store(ctx, "certificates/x/app.test/app.test.crt", []byte("CERT")))
	b, err := os.ReadFile(filepath.Join(certstore.Root(dir), certstore.ACMEDir, "certificates/x/app.test/app.test.crt"))
	require.NoError(t, err)
	assert.Equal(t, "CERT", string(b))
	bad, err := certshare.NewClient(url, "wrong", nil)
	require.NoError(t, err)
	assert.ErrorIs(t, bad.Store(ctx, "k", []byte("v")), certshare.ErrUnauthorized)

	require.NoError(t, a.Lock(ctx, "issue_cert_app.test"))
	c, err := certshare.NewClient(url, tok, nil)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { waited <- c.Lock(ctx, "issue_cert_app.test") }()
	// Let the wait reach the server: the server reports no event for a
	// lock wait begun, so this is a settle.
	time.Sleep(50 * time.Millisecond)
	begin := time.Now()
	stop()
	stopped = true
	assert.Less(t, time.Since(begin), certStorageDrain, "lock waits do not hold the shutdown")
	select {
	case err := <-waited:
		assert.Error(t, err, "the wait ends with the server")
	case <-time.After(5 * time.Second):
		t.Fatal("lock wait outlived the server")
	}
	err = a.Store(ctx, "k", []byte("v"))
	assert.Error(t, err)
	assert.False(t, errors.Is(err, certshare.ErrUnauthorized), "closed, not refused")
}
