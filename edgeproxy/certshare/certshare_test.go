package certshare_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certshare"
)

const token = "s3cret-token"

// storage is the Client as certmagic.Storage (as the edge wraps it).
type storage struct{ *certshare.Client }

func (s storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	ki, err := s.Client.Stat(ctx, key)
	return certmagic.KeyInfo{Key: ki.Key, Modified: ki.Modified, Size: ki.Size, IsTerminal: ki.IsTerminal}, err
}

var _ certmagic.LockLeaseRenewer = storage{}

// serve starts a Server over a fresh certs root; tune adjusts it before
// it serves.
func serve(t *testing.T, tune func(*certshare.Server)) (root string, srv *httptest.Server) {
	t.Helper()
	root = t.TempDir()
	s, err := certshare.NewServer(root, token)
	require.NoError(t, err)
	if tune != nil {
		tune(s)
	}
	srv = httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return root, srv
}

func client(t *testing.T, srv *httptest.Server, tok string) *certshare.Client {
	t.Helper()
	c, err := certshare.NewClient(srv.URL, tok, srv.Client())
	require.NoError(t, err)
	return c
}

func TestNewServerAndClientRefuseAnEmptyToken(t *testing.T) {
	_, err := certshare.NewServer(t.TempDir(), "  ")
	assert.ErrorIs(t, err, certshare.ErrNoToken)
	_, err = certshare.NewClient("http://gordon-reconcile:9190", "", nil)
	assert.ErrorIs(t, err, certshare.ErrNoToken)
	_, err = certshare.NewClient("gordon-reconcile:9190", token, nil)
	assert.Error(t, err, "a URL without a scheme is refused")
}

// Two clients (two edges) never hold one lock at once; a waiter gets it
// as soon as the holder unlocks.
func TestLock_TwoClientsExclude(t *testing.T) {
	_, srv := serve(t, nil)
	a, b := client(t, srv, token), client(t, srv, token)
	ctx := context.Background()

	require.NoError(t, a.Lock(ctx, "issue_cert_app.test"))
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, b.Lock(short, "issue_cert_app.test"), context.DeadlineExceeded, "b waits while a holds it")
	require.NoError(t, b.Lock(ctx, "other_name"), "another name is independent")
	require.NoError(t, b.Unlock(ctx, "other_name"))

	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx, "issue_cert_app.test") }()
	select {
	case err := <-got:
		t.Fatalf("b took the lock while a holds it: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, a.Unlock(ctx, "issue_cert_app.test"))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("b did not get the lock after a unlocked")
	}
	require.NoError(t, b.Unlock(ctx, "issue_cert_app.test"))

	// Contended: at most one holder inside at any time.
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for _, c := range []*certshare.Client{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if !assert.NoError(t, c.Lock(ctx, "hot")) {
					return
				}
				n := inside.Add(1)
				if n > maxInside.Load() {
					maxInside.Store(n)
				}
				// Held a moment so that an overlap would show: the
				// span of time inside the lock is the test's input.
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				assert.NoError(t, c.Unlock(ctx, "hot"))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), maxInside.Load())
	assert.Error(t, a.Unlock(ctx, "hot"), "unlocking a lock not held is an error")
}

// A waiter whose context ends leaves nothing behind: the next client gets
// the lock at once after the holder unlocks.
func TestLock_CancelledWaitLeavesNoLease(t *testing.T) {
	_, srv := serve(t, nil)
	a, b, c := client(t, srv, token), client(t, srv, token), client(t, srv, token)
	ctx := context.Background()
	require.NoError(t, a.Lock(ctx, "n"))
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	require.Error(t, b.Lock(short, "n"))
	require.NoError(t, a.Unlock(ctx, "n"))
	quick, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	require.NoError(t, c.Lock(quick, "n"))
}

// A client that took a lock and died (no renewal) loses it after the
// lease TTL; a live client keeps its lock past the TTL by renewing.
func TestLock_LeaseLapsesWhenHolderStopsRenewing(t *testing.T) {
	const ttl = 300 * time.Millisecond
	_, srv := serve(t, func(s *certshare.Server) { s.LeaseTTL = ttl })
	ctx := context.Background()

	// The dead client: one raw lock request, never renewed.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/lock?name=n", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	sent := time.Now() // the lease starts when the server takes the request: not before this
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	b := client(t, srv, token)
	short, cancel := context.WithTimeout(ctx, ttl/3)
	defer cancel()
	require.ErrorIs(t, b.Lock(short, "n"), context.DeadlineExceeded, "held until the lease lapses")
	within, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	require.NoError(t, b.Lock(within, "n"), "released once the dead client's lease lapsed")
	assert.GreaterOrEqual(t, time.Since(sent), ttl)

	// b renews: c cannot take it over during three TTLs.
	c := client(t, srv, token)
	long, cancel3 := context.WithTimeout(ctx, 3*ttl)
	defer cancel3()
	assert.ErrorIs(t, c.Lock(long, "n"), context.DeadlineExceeded, "a renewing holder keeps its lock")
	require.NoError(t, b.RenewLockLease(ctx, "n", time.Minute))
	require.NoError(t, b.Unlock(ctx, "n"))
}

// A wrong or missing token is 401 and changes nothing.
func TestServer_BadTokenIs401AndChangesNothing(t *testing.T) {
	root, srv := serve(t, nil)
	ctx := context.Background()
	good, bad := client(t, srv, token), client(t, srv, "wrong")
	require.NoError(t, good.Store(ctx, "keep/me", []byte("v1")))

	assert.ErrorIs(t, bad.Store(ctx, "keep/me", []byte("evil")), certshare.ErrUnauthorized)
	assert.ErrorIs(t, bad.Store(ctx, "new", []byte("evil")), certshare.ErrUnauthorized)
	assert.ErrorIs(t, bad.Delete(ctx, "keep/me"), certshare.ErrUnauthorized)
	_, err := bad.Load(ctx, "keep/me")
	assert.ErrorIs(t, err, certshare.ErrUnauthorized)
	assert.ErrorIs(t, bad.Lock(ctx, "n"), certshare.ErrUnauthorized)
	_, err = bad.SyncStatic(ctx, t.TempDir())
	assert.ErrorIs(t, err, certshare.ErrUnauthorized)
	for _, hdr := range []string{"", "Bearer", "Basic " + token, "Bearer " + token + "x"} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/acme?key=new", strings.NewReader("evil"))
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, hdr)
	}

	b, err := good.Load(ctx, "keep/me")
	require.NoError(t, err)
	assert.Equal(t, "v1", string(b))
	assert.False(t, good.Exists(ctx, "new"))
	assert.NoError(t, good.Lock(ctx, "n"), "no lock was taken by the refused request")
	_, err = os.Stat(filepath.Join(root, certshare.ACMEDir, "new"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// Keys stay under the root: "..", absolute paths, backslashes are 400
// for every operation, and nothing is written outside.
func TestServer_RefusesPathTraversal(t *testing.T) {
	root, srv := serve(t, nil)
	outside := filepath.Join(filepath.Dir(root), "outside-"+filepath.Base(root))
	keys := []string{"../x", "a/../../x", "/etc/passwd", "..", "a//b", "./a", `a\..\..\x`, "../static/a/key.pem"}
	for _, key := range keys {
		for _, m := range []struct{ method, path string }{
			{http.MethodPut, "/v1/acme"}, {http.MethodGet, "/v1/acme"}, {http.MethodDelete, "/v1/acme"},
			{http.MethodGet, "/v1/stat"}, {http.MethodGet, "/v1/list"},
		} {
			req, _ := http.NewRequest(m.method, srv.URL+m.path+"?key="+url.QueryEscape(key), strings.NewReader("x"))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s %q", m.method, m.path, key)
		}
	}
	for _, q := range []string{"name=..&file=key.pem", "name=a/b&file=key.pem", "name=a&file=../../acme/x", "name=.hidden&file=cert.pem"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/static/file?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
	}
	_, err := os.Stat(outside)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(filepath.Join(filepath.Dir(root), "x"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// A body over MaxValueBytes is 413 and stores nothing.
func TestServer_BoundsTheBody(t *testing.T) {
	_, srv := serve(t, nil)
	c := client(t, srv, token)
	ctx := context.Background()
	err := c.Store(ctx, "big", make([]byte, certshare.MaxValueBytes+1))
	assert.ErrorContains(t, err, "413")
	assert.False(t, c.Exists(ctx, "big"))
	require.NoError(t, c.Store(ctx, "fits", make([]byte, certshare.MaxValueBytes)))
}

// The Client answers Load, Store, Delete, Exists, List and Stat as
// certmagic.FileStorage does on a local directory, including
// fs.ErrNotExist for what is missing.
func TestClient_MatchesFileStorage(t *testing.T) {
	_, srv := serve(t, nil)
	ctx := context.Background()
	stores := map[string]certmagic.Storage{
		"client": storage{client(t, srv, token)},
		"file":   &certmagic.FileStorage{Path: t.TempDir()},
	}
	type view struct {
		load                            string
		flat, deep                      []string
		statFile, statDir               certmagic.KeyInfo
		existsFile, existsDir, existsNo bool
		afterDelete                     bool
		missing                         [4]bool // Load, Stat, List of a missing key: ErrNotExist; Delete of one: nil
	}
	views := map[string]view{}
	for name, s := range stores {
		var v view
		require.NoError(t, s.Store(ctx, "certificates/ca/app.test/app.test.crt", []byte("CERT")))
		require.NoError(t, s.Store(ctx, "certificates/ca/app.test/app.test.key", []byte("KEY")))
		require.NoError(t, s.Store(ctx, "certificates/ca/b.test/b.test.crt", []byte("B")))
		b, err := s.Load(ctx, "certificates/ca/app.test/app.test.crt")
		require.NoError(t, err)
		v.load = string(b)
		v.flat, err = s.List(ctx, "certificates/ca", false)
		require.NoError(t, err)
		v.deep, err = s.List(ctx, "certificates", true)
		require.NoError(t, err)
		sort.Strings(v.flat)
		sort.Strings(v.deep)
		v.statFile, err = s.Stat(ctx, "certificates/ca/app.test/app.test.key")
		require.NoError(t, err)
		v.statDir, err = s.Stat(ctx, "certificates/ca")
		require.NoError(t, err)
		v.statFile.Modified, v.statDir.Modified, v.statDir.Size = time.Time{}, time.Time{}, 0
		v.existsFile = s.Exists(ctx, "certificates/ca/b.test/b.test.crt")
		v.existsDir = s.Exists(ctx, "certificates/ca/b.test")
		v.existsNo = s.Exists(ctx, "certificates/ca/nope")
		_, err = s.Load(ctx, "nope/x")
		v.missing[0] = errors.Is(err, fs.ErrNotExist)
		_, err = s.Stat(ctx, "nope/x")
		v.missing[1] = errors.Is(err, fs.ErrNotExist)
		_, err = s.List(ctx, "nope", true)
		v.missing[2] = errors.Is(err, fs.ErrNotExist)
		v.missing[3] = s.Delete(ctx, "nope/x") == nil
		require.NoError(t, s.Delete(ctx, "certificates/ca/app.test"))
		v.afterDelete = s.Exists(ctx, "certificates/ca/app.test/app.test.crt")
		views[name] = v
	}
	assert.Equal(t, views["file"], views["client"])
	assert.Equal(t, [4]bool{true, true, true, true}, views["client"].missing)
	assert.Equal(t, []string{"certificates/ca/app.test", "certificates/ca/b.test"}, views["client"].flat)
	assert.True(t, views["client"].statFile.IsTerminal)
	assert.Equal(t, int64(3), views["client"].statFile.Size)
	assert.False(t, views["client"].statDir.IsTerminal)
}
