//go:build linux

package edgeproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// loopEdge runs a Server with one event loop, routing app.test to
// backend; it stops when the test ends.
func loopEdge(t *testing.T, backend string, tune ...func(*routetable.HTTPRoute)) *Server {
	t.Helper()
	return runEdge(t, 1, backend, tune...)
}

// runEdge is loopEdge with loops event loops (-1: none, the goroutine
// path only).
func runEdge(t *testing.T, loops int, backend string, tune ...func(*routetable.HTTPRoute)) *Server {
	t.Helper()
	e := startLoopEdgeCfg(t, Config{
		EventLoops: loops, DialTimeout: time.Second, ShutdownTimeout: 2 * time.Second, ReadHeaderTimeout: time.Second,
	}, route(backend, tune...))
	t.Cleanup(func() { assert.NoError(t, e.stop()) })
	require.Len(t, e.s.ConnSrv.Loops, max(loops, 0), "event loops")
	return e.s
}

// goBackend serves h on loopback.
func goBackend(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func loopCounts(s *Server) (served, handoffs float64) {
	return testutil.ToFloat64(s.Metrics.LoopRequests), testutil.ToFloat64(s.Metrics.LoopHandoffs)
}

// get sends a GET for path on a kept-alive connection and reads the answer.
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) (*http.Response, string) {
	t.Helper()
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: app.test\r\n\r\n", path)
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// The common case never leaves the loop: small Content-Length answers on
// kept-alive connections, forwarded headers as the goroutine path writes
// them, one backend connection reused.
func TestEventLoopServesSimpleRequestsWhole(t *testing.T) {
	var lastFwd, lastID atomic.Value
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
		lastFwd.Store(r.Header.Get("X-Forwarded-For") + "|" + r.Header.Get("X-Forwarded-Host") + "|" + r.Header.Get("Forwarded"))
		lastID.Store(r.Header.Get("X-Request-Id"))
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	})
	s := loopEdge(t, backend)
	c, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 50 {
		resp, body := get(t, c, br, fmt.Sprintf("/r%d", i))
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, fmt.Sprintf("hello /r%d", i), body)
	}
	assert.Equal(t, `127.0.0.1|app.test|for=127.0.0.1;host="app.test";proto=http`, lastFwd.Load())
	assert.Len(t, lastID.Load(), 32, "X-Request-Id added")
	served, handoffs := loopCounts(s)
	assert.Equal(t, 50.0, served, "served by the loop")
	assert.Equal(t, 0.0, handoffs)
	assert.Equal(t, 0.0, testutil.ToFloat64(s.Metrics.InFlight.WithLabelValues("app", "web", backend)), "in flight after")
	assert.Equal(t, 50.0, testutil.ToFloat64(s.Metrics.Requests.WithLabelValues("app", "web", backend, "2xx")))
}

// Answers the loop does not buffer (chunked, large, close-delimited) and
// requests it does not parse (a body, a head in pieces) leave it with
// every byte read so far; the client gets each answer whole and the
// connection keeps working.
func TestEventLoopHandsOverWhatItDoesNotServe(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("part1 "))
			w.(http.Flusher).Flush()
			w.Write([]byte("part2"))
		case "/big":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			io.WriteString(w, big)
		case "/post":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %s", b)
		default:
			io.WriteString(w, "small")
		}
	})
	s := loopEdge(t, backend)
	for _, tc := range []struct{ path, want string }{
		{"/chunked", "part1 part2"}, {"/big", big}, {"/", "small"},
	} {
		c, err := net.Dial("tcp", s.HTTPAddr())
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, body := get(t, c, br, tc.path)
		assert.Equal(t, 200, resp.StatusCode, tc.path)
		assert.Equal(t, tc.want, body, tc.path)
		resp, body = get(t, c, br, "/") // the same connection goes on
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "small", body)
		c.Close()
	}
	served, handoffs := loopCounts(s)
	assert.Equal(t, 2.0, handoffs, "chunked and big left the loop")
	assert.Equal(t, 2.0, served, "the two requests of the last connection")

	// A head in two pieces and a request with a body.
	c, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	br := bufio.NewReader(c)
	trickle(c, 50*time.Millisecond, "GET / HTTP/1.1\r\nHo", "st: app.test\r\n\r\nPOST /post HTTP/1.1\r\nHost: app.test\r\nContent-Length: 3\r\n\r\nabc")
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "small", string(b))
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	assert.Equal(t, "got abc", string(b))
	assert.Equal(t, 0.0, testutil.ToFloat64(s.Metrics.InFlight.WithLabelValues("app", "web", backend)), "in flight after")
}

// Pipelined requests are answered in order, from the loop.
func TestEventLoopAnswersPipelinedRequestsInOrder(t *testing.T) {
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
	s := loopEdge(t, backend)
	c, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	var req strings.Builder
	for i := range 5 {
		fmt.Fprintf(&req, "GET /p%d HTTP/1.1\r\nHost: app.test\r\n\r\n", i)
	}
	_, err = io.WriteString(c, req.String())
	require.NoError(t, err)
	br := bufio.NewReader(c)
	for i := range 5 {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, fmt.Sprintf("/p%d", i), string(b))
	}
}

// A route's response header timeout answers 504 from the loop's sweep; a
// refused dial 503; a backend that closes kept-alive connections between
// requests costs no error (retried once on a new connection).
func TestEventLoopBackendFailuresAnsweredOrRetried(t *testing.T) {
	t.Run("response header timeout", func(t *testing.T) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) { <-release })
		s := loopEdge(t, backend, func(rt *routetable.HTTPRoute) { rt.ResponseHeaderTimeoutMS = 300 })
		req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/", nil)
		req.Host = "app.test"
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
		assert.Less(t, time.Since(start), 450*time.Millisecond, "the sweep wakes at the deadline")
		assert.GreaterOrEqual(t, time.Since(start), 290*time.Millisecond)
	})
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		s := loopEdge(t, addr)
		req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/", nil)
		req.Host = "app.test"
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Contains(t, string(b), "backend unavailable")
	})
	t.Run("backend closes idle connections", func(t *testing.T) {
		// A raw backend that answers one request per connection, then,
		// once the client has the answer, closes it without saying so.
		relayed, closed := make(chan struct{}), make(chan struct{})
		backend := rawBackend(t, func(c net.Conn) {
			if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			<-relayed
			c.Close()
			closed <- struct{}{}
		})
		s := loopEdge(t, backend)
		c, err := net.Dial("tcp", s.HTTPAddr())
		require.NoError(t, err)
		defer c.Close()
		br := bufio.NewReader(c)
		for range 5 {
			resp, body := get(t, c, br, "/")
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "ok", body)
			relayed <- struct{}{}
			awaitSignal(t, closed, "the backend closed its connection")
		}
	})
}

// A client that leaves while its backend works is seen at once: the
// backend's request is canceled (its connection closed) and the request
// recorded as 499, not left in flight.
func TestEventLoopClientGoneClosesBackend(t *testing.T) {
	gone := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(5 * time.Second):
		}
	})
	s := loopEdge(t, backend)
	c, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.NoError(t, err)
	awaitSignal(t, arrived, "the request reaches the backend")
	start := time.Now()
	c.Close()
	select {
	case <-gone:
		assert.Less(t, time.Since(start), 500*time.Millisecond)
	case <-time.After(3 * time.Second):
		t.Fatal("backend request not canceled after the client left")
	}
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(s.Metrics.InFlight.WithLabelValues("app", "web", backend)) == 0
	}, time.Second, 10*time.Millisecond)
	assert.Equal(t, 1.0, testutil.ToFloat64(s.Metrics.Requests.WithLabelValues("app", "web", backend, "4xx")), "499")
}

// An answer the client does not take in one write (its receive buffer is
// full) is finished by a goroutine; the client gets every byte.
func TestEventLoopSlowClientGetsWholeAnswer(t *testing.T) {
	body := strings.Repeat("y", 15<<10)
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	s := loopEdge(t, backend)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
	}}
	c, err := d.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	var req strings.Builder
	for range 4 {
		req.WriteString("GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	}
	_, err = io.WriteString(c, req.String())
	require.NoError(t, err)
	// Not reading: the edge's writes fill up and it hands the answer over.
	require.Eventually(t, func() bool { _, h := loopCounts(s); return h >= 1 }, 10*time.Second, 10*time.Millisecond)
	br := bufio.NewReader(c)
	for range 4 {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, body, string(b))
	}
	_, handoffs := loopCounts(s)
	assert.Equal(t, 1.0, handoffs, "the slow client left the loop once")
}

// Shutdown: idle connections are closed, a request in progress is
// answered (with Connection: close) before the edge stops.
func TestEventLoopShutdownClosesIdleAnswersInProgress(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	backend := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release // answers once the shutdown has begun
		io.WriteString(w, "late")
	})
	s := New(Config{StateDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", EventLoops: 1, PollInterval: time.Hour, ShutdownTimeout: 3 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Ready()
	require.NoError(t, s.Apply(routetable.Table{Schema: routetable.Schema, Generation: 1, Graph: routetable.Graph{HTTP: []routetable.HTTPRoute{
		{Host: "app.test", App: "app", Service: "web", Backends: []routetable.Backend{{Addr: backend, Container: "c1"}}},
	}}}))
	idle, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer idle.Close()
	busy, err := net.Dial("tcp", s.HTTPAddr())
	require.NoError(t, err)
	defer busy.Close()
	_, err = io.WriteString(busy, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.NoError(t, err)
	<-started
	cancel()
	_ = idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = idle.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "idle connection closed")
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "late", string(b))
	assert.True(t, resp.Close, "Connection: close during shutdown")
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("edge did not stop")
	}
}
