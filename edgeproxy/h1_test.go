package edgeproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
)

// rawBackend serves every request it reads with respond, which writes the
// raw response bytes; it counts the requests.
func rawBackend(t testing.TB, respond func(w io.Writer, req *http.Request)) (string, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	addr := serveConns(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			hits.Add(1)
			bw := bufio.NewWriter(c)
			respond(bw, req)
			if bw.Flush() != nil || req.Close {
				return
			}
		}
	})
	return addr, &hits
}

// serveConns listens on loopback and runs serve for every connection (then
// closes it) until the test ends; it returns the address.
func serveConns(t testing.TB, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String()
}

// rawExchange writes raw on a new connection to the edge and reads n
// responses (HEAD requests: pass methods so bodies are framed right).
func rawExchange(t *testing.T, e *edge, raw string, methods ...string) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.WriteString(c, raw)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	var out []*http.Response
	for _, m := range methods {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		out = append(out, resp)
	}
	return out
}

func bodyOf(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

// Pipelined requests are answered in order on one
// connection.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	e := startEdge(t)
	be, _ := rawBackend(t, func(w io.Writer, req *http.Request) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(req.URL.Path))+"\r\n\r\n"+req.URL.Path)
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	raw := ""
	for _, p := range []string{"/one", "/two", "/three"} {
		raw += "GET " + p + " HTTP/1.1\r\nHost: app.test\r\n\r\n"
	}
	rs := rawExchange(t, e, raw, "GET", "GET", "GET")
	assert.Equal(t, "/one", bodyOf(t, rs[0]))
	assert.Equal(t, "/two", bodyOf(t, rs[1]))
	assert.Equal(t, "/three", bodyOf(t, rs[2]))
}

// A connection that starts with bodiless GETs and then
// sends a request with a body keeps working: the body reaches the backend
// whole, and later requests on the same connection are still proxied.
func TestBodyRequestAfterGETsOnOneConnection(t *testing.T) {
	e := startEdge(t)
	echo := nameBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(b))
	})
	e.publish(t, httpTable(1, route("app.test", echo)))
	raw := "GET /a HTTP/1.1\r\nHost: app.test\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /c HTTP/1.1\r\nHost: app.test\r\n\r\n"
	rs := rawExchange(t, e, raw, "GET", "POST", "GET")
	assert.Equal(t, "GET /a ", bodyOf(t, rs[0]))
	assert.Equal(t, "POST /b hello", bodyOf(t, rs[1]))
	assert.Equal(t, "GET /c ", bodyOf(t, rs[2]))
}

func nameBackendFunc(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// Malformed requests get 400 without reaching a
// backend.
func TestMalformedRequestIs400WithoutReachingBackend(t *testing.T) {
	e := startEdge(t)
	be, hits := rawBackend(t, func(w io.Writer, _ *http.Request) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	for name, raw := range map[string]string{
		"space in header name": "GET / HTTP/1.1\r\nHost: app.test\r\nBad Header: x\r\n\r\n",
		"no host":              "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",
		"two hosts":            "GET / HTTP/1.1\r\nHost: app.test\r\nHost: other.test\r\n\r\n",
		"control in value":     "GET / HTTP/1.1\r\nHost: app.test\r\nX-A: a\x01b\r\n\r\n",
		"bad escape":           "GET /%zz HTTP/1.1\r\nHost: app.test\r\n\r\n",
		"bad content-length":   "GET / HTTP/1.1\r\nHost: app.test\r\nContent-Length: x\r\n\r\n",
		"bad request line":     "GET/ HTTP/1.1\r\nHost: app.test\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			rs := rawExchange(t, e, raw, "GET")
			assert.Equal(t, http.StatusBadRequest, rs[0].StatusCode)
		})
	}
	assert.Zero(t, hits.Load(), "no malformed request reached the backend")
	// A well-formed one still does.
	code, body := e.get(t, "app.test", "/")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
}

// Chunked responses pass with their trailers, bodies the
// backend ends by closing are re-chunked, 1xx informational responses are
// skipped, HEAD and 204 carry no body; the client connection stays usable
// after each.
func TestResponseFramingRelayed(t *testing.T) {
	e := startEdge(t)
	be, _ := rawBackend(t, func(w io.Writer, req *http.Request) {
		switch req.URL.Path {
		case "/chunked":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n")
		case "/close":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close")
			w.(*bufio.Writer).Flush()
			req.Close = true
		case "/hints":
			io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
		case "/head":
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
		case "/nocontent":
			io.WriteString(w, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	req := func(m, p string) string { return m + " " + p + " HTTP/1.1\r\nHost: app.test\r\nTE: trailers\r\n\r\n" }
	rs := rawExchange(t, e,
		req("GET", "/chunked")+req("GET", "/close")+req("GET", "/hints")+req("HEAD", "/head")+req("GET", "/nocontent")+req("GET", "/chunked"),
		"GET", "GET", "GET", "HEAD", "GET", "GET")
	assert.Equal(t, "hello world", bodyOf(t, rs[0]))
	assert.Equal(t, []string{"chunked"}, rs[0].TransferEncoding)
	assert.Equal(t, "42", rs[0].Trailer.Get("X-Sum"))
	assert.Equal(t, "until close", bodyOf(t, rs[1]))
	assert.False(t, rs[1].Close, "the client connection outlives the backend's")
	assert.Equal(t, http.StatusOK, rs[2].StatusCode)
	assert.Equal(t, "final", bodyOf(t, rs[2]))
	assert.Equal(t, int64(1000), rs[3].ContentLength)
	assert.Equal(t, "", bodyOf(t, rs[3]))
	assert.Equal(t, http.StatusNoContent, rs[4].StatusCode)
	assert.Equal(t, "hello world", bodyOf(t, rs[5]))
}

// Hop-by-hop headers and the headers Connection names do
// not reach the backend, an X-Request-ID is added when absent and kept when
// present, and Connection: close from the client is honoured.
func TestHopHeadersDroppedRequestIDAddedConnectionClose(t *testing.T) {
	e := startEdge(t)
	seen := make(chan http.Header, 4)
	be, _ := rawBackend(t, func(w io.Writer, req *http.Request) {
		seen <- req.Header.Clone()
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=5\r\nConnection: X-Internal\r\nX-Internal: secret\r\n\r\nok")
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	rs := rawExchange(t, e,
		"GET / HTTP/1.1\r\nHost: app.test\r\nConnection: X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nProxy-Authorization: x\r\nX-Keep: yes\r\n\r\n"+
			"GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-ID: hop\r\nConnection: X-Request-ID\r\n\r\n"+
			"GET / HTTP/1.1\r\nHost: app.test\r\nX-Request-ID: given-id\r\nConnection: close\r\n\r\n",
		"GET", "GET", "GET")
	h1 := <-seen
	assert.Empty(t, h1.Get("X-Secret"))
	assert.Empty(t, h1.Get("Keep-Alive"))
	assert.Empty(t, h1.Get("Proxy-Authorization"))
	assert.Equal(t, "yes", h1.Get("X-Keep"))
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), h1.Get("X-Request-Id"))
	assert.Empty(t, rs[0].Header.Get("X-Internal"), "response headers named by Connection are dropped")
	assert.Empty(t, rs[0].Header.Get("Keep-Alive"))
	hop := <-seen
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{32}$`), hop.Get("X-Request-Id"), "an id named in Connection is replaced, not dropped")
	h2 := <-seen
	assert.Equal(t, "given-id", h2.Get("X-Request-Id"))
	assert.True(t, rs[2].Close, "Connection: close answered with Connection: close")
}

// On shutdown a request in flight completes (told
// Connection: close) while idle keep-alive connections are closed at once.
func TestShutdownFinishesInFlightClosesIdle(t *testing.T) {
	e := startEdge(t)
	release := make(chan struct{})
	be := nameBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "done")
	})
	e.publish(t, httpTable(1, route("app.test", be)))

	idle, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	defer idle.Close()
	_, _ = io.WriteString(idle, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	ibr := bufio.NewReader(idle)
	r0, err := http.ReadResponse(ibr, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, r0.Body)

	busy, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	defer busy.Close()
	_, _ = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.Eventually(t, func() bool {
		for _, b := range e.srv.Status().Backends {
			if b.InFlight == 1 {
				return true
			}
		}
		return false
	}, 3*time.Second, 10*time.Millisecond)

	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	_ = idle.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = ibr.ReadByte()
	assert.True(t, errors.Is(err, io.EOF) || isReset(err), "idle connection closed on shutdown, got %v", err)
	select {
	case <-stopped:
		t.Fatal("shutdown did not wait for the request in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	_ = busy.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "done", bodyOf(t, resp))
	assert.True(t, resp.Close)
	<-stopped
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "reset")
}

// A request head of tens of KiB is still served; over
// 32 KiB (MaxRequestHead) it gets 431 on both paths, however large.
func TestLargeHeadsServedOrRejected(t *testing.T) {
	e := startEdge(t)
	be := nameBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strconv.Itoa(len(r.Header.Get("X-Big"))/10000))
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	big := strings.Repeat("b", 30_000)
	rs := rawExchange(t, e, "GET / HTTP/1.1\r\nHost: app.test\r\nX-Big: "+big+"\r\n\r\n", "GET")
	assert.Equal(t, http.StatusOK, rs[0].StatusCode)
	assert.Equal(t, "3", bodyOf(t, rs[0]))
	for _, n := range []int{34_000, 1_100_000} {
		rs = rawExchange(t, e, "GET / HTTP/1.1\r\nHost: app.test\r\nX-Big: "+strings.Repeat("b", n)+"\r\n\r\n", "GET")
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, rs[0].StatusCode, "head of %d bytes", n)
	}
}

// BenchmarkH1Proxy measures one keep-alive request through a running edge
// to a raw backend, from a raw client, served by the event loop and by the
// goroutine path (event_loops=-1); the client and backend allocate nothing
// per request, so allocs/op are the edge's. ns/op is one sequential round
// trip with client, edge and backend in this one process: the event loop
// keeps a P while it waits briefly (evRawWait), which here takes it from
// the client and the backend; `make bench-edge` measures the separate
// processes. Each runs with the access log off and on (a file in a temp
// directory), side by side: the ratio is the access log's cost.
func BenchmarkH1Proxy(b *testing.B) {
	for _, loops := range []int{1, -1} {
		for _, access := range []string{"off", "file"} {
			b.Run(fmt.Sprintf("event_loops=%d/access_log=%s", loops, access), func(b *testing.B) { benchmarkH1Proxy(b, loops, access == "file") })
		}
	}
}

func benchmarkH1Proxy(b *testing.B, loops int, access bool) {
	backend := helloBackend(b)
	dir := b.TempDir()
	cfg := edgeproxy.Config{StateDir: dir, HTTPAddr: "127.0.0.1:0", EventLoops: loops}
	if access {
		w, err := edgeproxy.OpenAccessLog(filepath.Join(dir, "access.log"), 0, 0)
		require.NoError(b, err)
		defer w.Close()
		cfg.AccessLog = w
	}
	srv := edgeproxy.New(cfg)
	tbl := httpTable(1, route("app.test", backend))
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = srv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-srv.Ready()
	require.NoError(b, srv.Apply(tbl))
	c, err := net.Dial("tcp", srv.HTTPAddr())
	require.NoError(b, err)
	defer c.Close()
	req := []byte("GET / HTTP/1.1\r\nHost: app.test\r\nUser-Agent: bench\r\n\r\n")
	br := bufio.NewReader(c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if err := skipResponse(br); err != nil {
			b.Fatal(err)
		}
	}
}

// skipHead reads through the empty line ending a head.
func skipHead(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			return nil
		}
	}
}

// skipResponse reads a response with a 13-byte body.
func skipResponse(br *bufio.Reader) error {
	if err := skipHead(br); err != nil {
		return err
	}
	_, err := br.Discard(13)
	return err
}

// A client that goes away while its backend
// is still working has the backend request canceled (checked every second
// while waiting), so abandoned slow requests do not pile up on backends
// and do not hold a drain.
func TestClientGoneCancelsBackendRequest(t *testing.T) {
	e := startEdge(t)
	canceled := make(chan time.Duration, 1)
	arrived := make(chan struct{}, 1)
	be := nameBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			canceled <- time.Since(start)
		case <-time.After(10 * time.Second):
			_, _ = io.WriteString(w, "late")
		}
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	_, err = io.WriteString(c, "GET /poll HTTP/1.1\r\nHost: app.test\r\n\r\n")
	require.NoError(t, err)
	awaitSignal(t, arrived, "the request reaches the backend")
	require.NoError(t, c.Close())
	select {
	case d := <-canceled:
		assert.Less(t, d, 3*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("backend request not canceled after the client left")
	}
	require.Eventually(t, func() bool {
		for _, b := range e.srv.Status().Backends {
			if b.InFlight != 0 {
				return false
			}
		}
		return true
	}, 3*time.Second, 20*time.Millisecond, "no request left in flight")
}

// A backend that is slow to answer, or pauses mid-body for
// longer than the loop's client check interval, is waited for: the
// response arrives whole.
func TestSlowAndPausingBackendsRelayedWhole(t *testing.T) {
	e := startEdge(t)
	// The behaviour under test is the passage of time itself: a backend
	// silent for longer than the loop's client check interval (1 s).
	pause := func() { time.Sleep(1500 * time.Millisecond) }
	be := nameBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slowhead":
			pause()
			_, _ = io.WriteString(w, "slow")
		case "/pause-length":
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "hello")
			w.(http.Flusher).Flush()
			pause()
			_, _ = io.WriteString(w, "world")
		case "/pause-chunked":
			_, _ = io.WriteString(w, "hel")
			w.(http.Flusher).Flush()
			pause()
			_, _ = io.WriteString(w, "lo")
		}
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	for path, want := range map[string]string{"/slowhead": "slow", "/pause-length": "helloworld", "/pause-chunked": "hello"} {
		code, body := e.get(t, "app.test", path)
		assert.Equal(t, http.StatusOK, code, path)
		assert.Equal(t, want, body, path)
	}
}

// A backend that writes bytes after its
// response ended (here a whole unsolicited response 100 ms later) must not
// have them read as the next client's answer: the pooled connection is
// checked before reuse and dropped.
func TestUnsolicitedBackendBytesNeverReachAnotherClient(t *testing.T) {
	e := startEdge(t)
	answered, injected := make(chan struct{}), make(chan struct{})
	be := serveConns(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/late-extra" {
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
				<-answered // the edge relayed the response and pooled the connection
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Injected: yes\r\nContent-Length: 5\r\n\r\nPWNED")
				close(injected)
				continue
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\necho")
		}
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	rs := rawExchange(t, e, "GET /late-extra HTTP/1.1\r\nHost: app.test\r\n\r\n", "GET")
	assert.Equal(t, "hello", bodyOf(t, rs[0]))
	close(answered)
	awaitSignal(t, injected, "the backend wrote its unsolicited response")
	for i := range 3 {
		rs = rawExchange(t, e, "GET /echo HTTP/1.1\r\nHost: app.test\r\n\r\n", "GET")
		assert.Equal(t, "echo", bodyOf(t, rs[0]), "request %d", i)
		assert.Empty(t, rs[0].Header.Get("X-Injected"), "request %d", i)
	}
}

// Empty lines before a request do not let a
// trickling client escape the read header timeout, and a client that
// leaves with unread bytes behind its request is still noticed.
func TestSlowlorisBehindEmptyLinesAndAbandonBehindExtraBytes(t *testing.T) {
	e := startEdge(t, func(c *edgeproxy.Config) { c.ReadHeaderTimeout = 300 * time.Millisecond })
	canceled := make(chan struct{}, 1)
	arrived := make(chan struct{}, 1)
	be := nameBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			canceled <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	})
	e.publish(t, httpTable(1, route("app.test", be)))

	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "\r\n\r\nGET / HT")
	require.NoError(t, err)
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; ; i++ {
		if _, err := c.Write([]byte{'T'}); err != nil {
			break
		}
		if _, err := c.Read(make([]byte, 1)); err == nil || !isTimeoutErr(err) {
			break // closed by the edge
		}
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if i > 40 {
			t.Fatal("trickling client behind empty lines was never cut off")
		}
	}
	assert.Less(t, time.Since(start), 2*time.Second)

	a, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	_, err = io.WriteString(a, "GET /poll HTTP/1.1\r\nHost: app.test\r\n\r\nG")
	require.NoError(t, err)
	awaitSignal(t, arrived, "the request reaches the backend")
	require.NoError(t, a.Close())
	select {
	case <-canceled:
	case <-time.After(4 * time.Second):
		t.Fatal("backend request not canceled after the client left with a byte unread")
	}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Chunk sizes are hex digits only, and chunk
// lines and trailers with control characters are not relayed: the client
// gets a visibly incomplete body instead.
func TestMalformedChunkingNotRelayed(t *testing.T) {
	e := startEdge(t)
	be, _ := rawBackend(t, func(w io.Writer, req *http.Request) {
		head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
		switch req.URL.Path {
		case "/neg0":
			io.WriteString(w, head+"5\r\nhello\r\n-0\r\n\r\n")
		case "/plus":
			io.WriteString(w, head+"+5\r\nhello\r\n0\r\n\r\n")
		case "/ext-cr":
			io.WriteString(w, head+"5;a=\rb\r\nhello\r\n0\r\n\r\n")
		case "/trailer-nul":
			io.WriteString(w, head+"5\r\nhello\r\n0\r\nX-T: a\x00b\r\n\r\n")
		}
		req.Close = true
	})
	e.publish(t, httpTable(1, route("app.test", be)))
	for _, p := range []string{"/neg0", "/plus", "/ext-cr", "/trailer-nul"} {
		_, _, err := e.tryGet("app.test", p)
		assert.Error(t, err, p)
	}
}

// helloBackend is a keep-alive backend that answers every request with a
// fixed 13-byte 200 (the proxy benchmarks' upstream).
func helloBackend(b *testing.B) string {
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world\n")
	return serveConns(b, func(c net.Conn, br *bufio.Reader) {
		for skipHead(br) == nil {
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	})
}
