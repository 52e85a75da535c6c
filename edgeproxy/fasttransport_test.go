package edgeproxy_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBackend answers body and counts the TCP connections it accepted.
func countingBackend(t *testing.T, h http.HandlerFunc, tune func(*http.Server)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	if tune != nil {
		tune(s.Config)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &conns
}

// Sequential GETs reuse one kept-alive backend
// connection; HEAD and chunked responses keep it reusable too.
func TestFastPathReusesBackendConnection(t *testing.T) {
	e := startEdge(t)
	be, conns := countingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			_, _ = io.WriteString(w, "part1,")
			http.NewResponseController(w).Flush()
			_, _ = io.WriteString(w, "part2")
			return
		}
		_, _ = io.WriteString(w, "hello")
	}, nil)
	e.publish(t, httpTable(1, route("app.test", addrOf(be))))
	for range 5 {
		code, body := e.get(t, "app.test", "/")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "hello", body)
	}
	code, body := e.get(t, "app.test", "/chunked")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "part1,part2", body)
	req, err := http.NewRequest(http.MethodHead, "http://"+e.srv.HTTPAddr()+"/", nil)
	require.NoError(t, err)
	req.Host = "app.test"
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	code, body = e.get(t, "app.test", "/")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hello", body)
	assert.Equal(t, int64(1), conns.Load(), "one backend connection for all sequential requests")
}

// A pooled connection the backend closed while idle is
// not an error for the client: the GET is retried on a fresh connection.
func TestFastPathRetriesConnectionClosedWhileIdle(t *testing.T) {
	e := startEdge(t)
	var closed atomic.Int64
	be, conns := countingBackend(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	}, func(s *http.Server) {
		s.IdleTimeout = 50 * time.Millisecond
		counted := s.ConnState
		s.ConnState = func(c net.Conn, st http.ConnState) {
			counted(c, st)
			if st == http.StateClosed {
				closed.Add(1)
			}
		}
	})
	e.publish(t, httpTable(1, route("app.test", addrOf(be))))
	for i := range 3 {
		code, body := e.get(t, "app.test", "/")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "hi", body)
		require.Eventually(t, func() bool { return closed.Load() > int64(i) }, 10*time.Second, 5*time.Millisecond, "the backend closes the idle connection")
	}
	assert.GreaterOrEqual(t, conns.Load(), int64(2), "closed idle connections were replaced")
}

// A client that goes away mid-response does not leave
// the backend connection in the pool half-read: the next request still gets
// a complete, correct answer.
func TestFastPathClientAbortDoesNotPoisonPool(t *testing.T) {
	e := startEdge(t)
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = 'z'
	}
	be, _ := countingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write(big)
			return
		}
		_, _ = io.WriteString(w, "small")
	}, nil)
	e.publish(t, httpTable(1, route("app.test", addrOf(be))))

	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	_, err = io.WriteString(c, "GET /big HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.NoError(t, err)
	buf := make([]byte, 1024)
	_, err = c.Read(buf)
	require.NoError(t, err)
	require.NoError(t, c.Close()) // abort after the first bytes

	for range 3 {
		code, body := e.get(t, "app.test", "/small")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "small", body)
	}
}
