package edgeproxy_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// A WebSocket handshake passes through the edge (101 with
// the backend's Sec-WebSocket-Accept) and frames flow both ways.
func TestWebSocketUpgradeThroughEdge(t *testing.T) {
	e := startEdge(t)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "want websocket", http.StatusBadRequest)
			return
		}
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
		_ = brw.Flush()
		// Echo raw frame bytes until the client closes.
		buf := make([]byte, 64)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				_, _ = conn.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(be.Close)
	e.publish(t, httpTable(1, route("ws.test", addrOf(be))))

	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(3*time.Second)))
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	_, err = fmt.Fprintf(c, "GET /chat HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", key)
	require.NoError(t, err)
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	assert.Equal(t, base64.StdEncoding.EncodeToString(sum[:]), resp.Header.Get("Sec-WebSocket-Accept"))
	frame := []byte{0x81, 0x02, 'h', 'i'} // unmasked text frame "hi" (the echo does not parse it)
	_, err = c.Write(frame)
	require.NoError(t, err)
	got := make([]byte, len(frame))
	_, err = io.ReadFull(r, got)
	require.NoError(t, err)
	assert.Equal(t, frame, got)
}

// Server-sent events reach the client as the backend
// flushes them, not when the response ends.
func TestSSEFlushedAsSent(t *testing.T) {
	e := startEdge(t)
	release := make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	}))
	t.Cleanup(be.Close)
	t.Cleanup(func() { close(release) })
	e.publish(t, httpTable(1, route("sse.test", addrOf(be))))

	req, err := http.NewRequest(http.MethodGet, "http://"+e.srv.HTTPAddr()+"/events", nil)
	require.NoError(t, err)
	req.Host = "sse.test"
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		assert.Equal(t, "data: one", l)
	case <-time.After(2 * time.Second):
		t.Fatal("first event not delivered while the backend holds the response open")
	}
}

// A request body is streamed to the backend as the client
// sends it (the backend reads the first part before the client sent the
// rest).
func TestRequestBodyStreamed(t *testing.T) {
	e := startEdge(t)
	firstSeen := make(chan struct{})
	total := make(chan int, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		n, err := io.ReadFull(r.Body, buf)
		if err != nil || string(buf[:n]) != "first" {
			http.Error(w, "bad first part", http.StatusBadRequest)
			return
		}
		close(firstSeen)
		rest, _ := io.ReadAll(r.Body)
		total <- n + len(rest)
		_, _ = io.WriteString(w, "got it")
	}))
	t.Cleanup(be.Close)
	e.publish(t, httpTable(1, route("up.test", addrOf(be))))

	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "http://"+e.srv.HTTPAddr()+"/upload", pr)
	require.NoError(t, err)
	req.Host = "up.test"
	type result struct {
		code int
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := e.client.Do(req)
		if err != nil {
			res <- result{0, err}
			return
		}
		resp.Body.Close()
		res <- result{resp.StatusCode, nil}
	}()
	_, err = io.WriteString(pw, "first")
	require.NoError(t, err)
	select {
	case <-firstSeen:
	case <-time.After(3 * time.Second):
		t.Fatal("backend did not see the first part before the body ended")
	}
	_, err = io.WriteString(pw, strings.Repeat("x", 100000))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, 100005, <-total)
}

// A client that trickles its request headers (slowloris)
// is cut off after ReadHeaderTimeout.
func TestSlowlorisCutOffByReadHeaderTimeout(t *testing.T) {
	e := startEdge(t, func(c *edgeproxy.Config) { c.ReadHeaderTimeout = 300 * time.Millisecond })
	a := nameBackend(t, "a")
	e.publish(t, httpTable(1, route("app.test", addrOf(a))))

	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	closed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		buf := make([]byte, 512)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			if _, err := c.Read(buf); err != nil {
				closed <- time.Since(start)
				return
			}
		}
	}()
	header := "GET / HTTP/1.1\r\nHost: app.test\r\nX-Slow: " + strings.Repeat("a", 40) + "\r\n\r\n"
	sent := 0
	for i := 0; i < len(header); i++ {
		select {
		case d := <-closed:
			assert.Less(t, d, 2*time.Second, "cut off by the read header timeout")
			assert.Less(t, sent, len(header), "the edge must not wait for the whole trickled header")
			return
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := c.Write([]byte{header[i]}); err != nil {
			break
		}
		sent++
	}
	select {
	case d := <-closed:
		assert.Less(t, d, 2*time.Second)
	case <-time.After(3 * time.Second):
		t.Fatal("slow client was never cut off")
	}
}

// zeroReader yields zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// There is no write timeout: a large download (2 GiB of
// zeros streamed by the backend; 256 MiB under the race detector, which
// makes copying ~10x slower) completes through the edge although it takes
// far longer than the read header timeout.
func TestLargeDownloadCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 2 GiB")
	}
	size := int64(2 << 30)
	if raceEnabled {
		size = 256 << 20
	}
	e := startEdge(t, func(c *edgeproxy.Config) { c.ReadHeaderTimeout = 200 * time.Millisecond })
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		_, _ = io.CopyN(w, zeroReader{}, size)
	}))
	t.Cleanup(be.Close)
	e.publish(t, httpTable(1, route("big.test", addrOf(be))))

	req, err := http.NewRequest(http.MethodGet, "http://"+e.srv.HTTPAddr()+"/big", nil)
	require.NoError(t, err)
	req.Host = "big.test"
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	n, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 1<<20))
	require.NoError(t, err)
	assert.Equal(t, size, n)
}

// A route's response header timeout answers 504 on both the
// fast path (GET) and the streaming path (POST with a body), and the page
// says which error it is and which backend.
func TestRouteResponseHeaderTimeoutIs504(t *testing.T) {
	e := startEdge(t)
	release := make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(be.Close)
	t.Cleanup(func() { close(release) })
	rt := route("slow.test", addrOf(be))
	rt.ResponseHeaderTimeoutMS = 200
	e.publish(t, httpTable(1, rt))

	start := time.Now()
	code, body := e.get(t, "slow.test", "/")
	assert.Equal(t, http.StatusGatewayTimeout, code)
	assert.Contains(t, body, "504 Gateway Timeout")
	assert.Contains(t, body, "(app app, service web)")
	assert.NotContains(t, body, addrOf(be))
	assert.Less(t, time.Since(start), 2*time.Second)

	req, err := http.NewRequest(http.MethodPost, "http://"+e.srv.HTTPAddr()+"/", strings.NewReader("body"))
	require.NoError(t, err)
	req.Host = "slow.test"
	start = time.Now()
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	assert.Contains(t, string(b), "504 Gateway Timeout")
	assert.Less(t, time.Since(start), 2*time.Second)
}

// Per-route timeouts are validated (0..1 h).
func TestRouteTimeoutsValidated(t *testing.T) {
	rt := route("app.test", "127.0.0.1:8080")
	rt.DialTimeoutMS = -1
	tbl := httpTable(1, rt)
	_, err := edgeproxy.LoadTable(mustJSON(t, tbl))
	require.ErrorIs(t, err, edgeproxy.ErrInvalidTable)
	assert.Contains(t, err.Error(), "timeouts")

	rt.DialTimeoutMS, rt.ResponseHeaderTimeoutMS = 250, 1500
	got, err := edgeproxy.LoadTable(mustJSON(t, httpTable(1, rt)))
	require.NoError(t, err)
	assert.Equal(t, int64(250), got.HTTP[0].DialTimeoutMS)
	assert.Equal(t, int64(1500), got.HTTP[0].ResponseHeaderTimeoutMS)
}

// After a switch, the edge's idle keep-alive connections to
// the backend it switched away from are closed.
func TestIdleConnsToRemovedBackendClosedAfterSwitch(t *testing.T) {
	e := startEdge(t)
	var open atomic.Int64
	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "old")
	}))
	old.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	old.Start()
	t.Cleanup(old.Close)
	newer := nameBackend(t, "new")
	e.publish(t, httpTable(1, route("app.test", old.Listener.Addr().String())))
	for range 3 {
		_, body := e.get(t, "app.test", "/")
		require.Equal(t, "old", body)
	}
	require.Positive(t, open.Load(), "the edge keeps a connection to the backend alive")

	e.publish(t, httpTable(2, route("app.test", addrOf(newer))))
	require.Eventually(t, func() bool { return open.Load() == 0 }, 3*time.Second, 10*time.Millisecond,
		"idle connections to the removed backend must be closed after the switch")
	_, body := e.get(t, "app.test", "/")
	assert.Equal(t, "new", body)
}
