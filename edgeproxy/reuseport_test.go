//go:build linux

package edgeproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// Graceful restart with SO_REUSEPORT: a second edge binds
// the same public address while the first still serves; the first is then
// stopped and finishes its in-flight request with 200 while every new
// connection is served by the second.
func TestGracefulRestartWithReusePort(t *testing.T) {
	addr := freePort(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(slow.Close)

	old := startEdge(t, func(c *edgeproxy.Config) { c.HTTPAddr = addr; c.ReusePort = true })
	old.publish(t, httpTable(1, route("app.test", addrOf(slow))))

	type result struct {
		code int
		body string
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		code, body, err := old.tryGet("app.test", "/slow")
		inflight <- result{code, body, err}
	}()
	require.Eventually(t, func() bool { return inFlight(old.srv.Status(), addrOf(slow)) == 1 }, 3*time.Second, 5*time.Millisecond)

	// The new edge binds the same address and serves the same table.
	next := startEdge(t, func(c *edgeproxy.Config) { c.HTTPAddr = addr; c.ReusePort = true; c.StateDir = old.stateDir })
	require.Equal(t, addr, next.srv.HTTPAddr())

	stopped := make(chan struct{})
	go func() { old.stop(); close(stopped) }()
	// A settle: the old edge closes its listener and drains; it reports
	// no event for the listener closed that this test could await.
	time.Sleep(100 * time.Millisecond)

	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 3 * time.Second}
	for range 10 {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		require.NoError(t, err)
		req.Host = "app.test"
		resp, err := fresh.Do(req)
		require.NoError(t, err, "new connections are served while the old edge drains")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "done", string(b))
	}
	select {
	case <-stopped:
		t.Fatal("the old edge stopped before its in-flight request finished")
	default:
	}
	close(release)
	r := <-inflight
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, "done", r.body)
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		t.Fatal("old edge did not stop after its last request")
	}
}

// Without ReusePort a second edge cannot bind the address.
func TestWithoutReusePortSecondBindFails(t *testing.T) {
	addr := freePort(t)
	startEdge(t, func(c *edgeproxy.Config) { c.HTTPAddr = addr })
	srv := edgeproxy.New(edgeproxy.Config{StateDir: t.TempDir(), HTTPAddr: addr, ReusePort: true})
	err := srv.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen http")
}
