package edgeproxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// Kept-alive backend connections idle for Config.BackendIdleTimeout are
// closed even when no request comes to look for one: after a burst over
// HTTP/2 (the fast path's pool) and plain HTTP (the event loops' or the
// goroutine path's pool) the backend sees every connection closed. Before,
// the HTTP/2 pool's connections stayed open for good.
func TestIdleBackendConnectionsAreSwept(t *testing.T) {
	var open atomic.Int64
	release := make(chan struct{})
	addr := serveConns(t, func(c net.Conn, br *bufio.Reader) {
		open.Add(1)
		defer open.Add(-1)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			<-release // every request of the burst holds its connection
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
	e := h2EdgeTo(t, "sweep.test", addr, func(c *edgeproxy.Config) { c.BackendIdleTimeout = 300 * time.Millisecond })
	e.publish(t, httpTable(2, tlsRoute("sweep.test", "", addr), route("plain.test", addr)))
	nc := normalClient(t, e, "sweep.test")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp *http.Response
			var err error
			if i%2 == 0 {
				resp, err = nc.Get("https://sweep.test/")
			} else {
				req, _ := http.NewRequest("GET", "http://"+e.srv.HTTPAddr()+"/", nil)
				req.Host = "plain.test"
				resp, err = e.client.Do(req)
			}
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	require.Eventually(t, func() bool { return open.Load() >= 16 }, 10*time.Second, 5*time.Millisecond, "burst reached the backend: %d", open.Load())
	close(release)
	wg.Wait()
	require.Eventually(t, func() bool { return open.Load() == 0 }, 10*time.Second, 10*time.Millisecond,
		"idle backend connections still open: %d", open.Load())
}
