package certshare_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certshare"
)

// rawLock takes lock name with one request and never renews it (a client
// that died), returning the status.
func rawLock(t *testing.T, srv *httptest.Server, name string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/lock?name="+name, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestLock_LapsedLeasesAreSwept: leases of dead clients whose names are
// never asked again leave memory; the leases held at once are capped.
func TestLock_LapsedLeasesAreSwept(t *testing.T) {
	var s *certshare.Server
	_, srv := serve(t, func(srv *certshare.Server) { srv.LeaseTTL, srv.MaxLocks, s = 20*time.Millisecond, 3, srv })
	for _, name := range []string{"a", "b", "c"} {
		require.Equal(t, http.StatusOK, rawLock(t, srv, name))
	}
	require.Equal(t, 3, s.HeldLocks())
	// Once they lapsed, the next lock of another name sweeps them all.
	require.Eventually(t, func() bool {
		return rawLock(t, srv, "fresh") == http.StatusOK && s.HeldLocks() == 1
	}, 5*time.Second, 5*time.Millisecond, "the lapsed leases were swept")

	_, capped := serve(t, func(srv *certshare.Server) { srv.MaxLocks = 2 })
	require.Equal(t, http.StatusOK, rawLock(t, capped, "x"))
	require.Equal(t, http.StatusOK, rawLock(t, capped, "y"))
	assert.Equal(t, http.StatusServiceUnavailable, rawLock(t, capped, "z"), "past MaxLocks")
}

// TestServer_StorageQuota: stores past MaxKeys files or MaxBytes bytes
// are refused with 507 and store nothing; a replacement counts its new
// size only, and a delete gives the room back.
func TestServer_StorageQuota(t *testing.T) {
	_, srv := serve(t, func(s *certshare.Server) { s.MaxKeys, s.MaxBytes = 3, 100 })
	c := client(t, srv, token)
	ctx := context.Background()
	require.NoError(t, c.Store(ctx, "a/1", make([]byte, 40)))
	require.NoError(t, c.Store(ctx, "a/2", make([]byte, 40)))
	err := c.Store(ctx, "b/3", make([]byte, 40))
	assert.ErrorContains(t, err, "507", "past MaxBytes")
	assert.False(t, c.Exists(ctx, "b/3"))
	require.NoError(t, c.Store(ctx, "a/2", make([]byte, 50)), "a replacement counts its new size")
	require.NoError(t, c.Store(ctx, "b/3", make([]byte, 5)))
	err = c.Store(ctx, "b/4", make([]byte, 1))
	assert.ErrorContains(t, err, "507", "past MaxKeys")
	assert.ErrorContains(t, err, "quota")
	require.NoError(t, c.Delete(ctx, "a"))
	require.NoError(t, c.Store(ctx, "b/4", make([]byte, 60)), "the deleted directory's room is back")
	assert.Equal(t, certshare.DefaultMaxKeys, func() int { s, _ := certshare.NewServer(t.TempDir(), token); return s.MaxKeys }())
}
