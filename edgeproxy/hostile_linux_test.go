//go:build linux

package edgeproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// Hostile inputs, each on both HTTP paths: the event loop (1) and the
// goroutine per connection (-1).

func bothPaths(t *testing.T, f func(t *testing.T, loops int)) {
	for _, loops := range []int{1, -1} {
		t.Run(fmt.Sprintf("event_loops=%d", loops), func(t *testing.T) { f(t, loops) })
	}
}

// rawAnswer is what a client read back for one raw request.
type rawAnswer struct {
	resp    *http.Response
	body    string
	bodyErr error
	// closed: the edge closed the connection after the answer.
	closed bool
}

// rawRoundTrip writes req on a new connection to addr and reads one answer
// (within d), then, for a 200 or an answer that says Connection: close,
// whether the connection was closed after it.
func rawRoundTrip(t *testing.T, addr, req string, d time.Duration) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(d)))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no answer within %s", d)
	b, berr := io.ReadAll(resp.Body)
	a := rawAnswer{resp: resp, body: string(b), bodyErr: berr}
	if berr == nil && (resp.Close || resp.StatusCode == http.StatusOK) {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := br.ReadByte()
		a.closed = errors.Is(err, io.EOF) || err != nil && !isTimeout(err)
	} else {
		a.closed = true
	}
	return a
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

const getApp = "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n"

// A backend that writes part of an answer and closes at once (a crash after
// writing): every client gets a 502 or a truncated body and a close, none
// hangs (the event loop did not look at the close that came in the same
// wake-up as the data).
func TestBackendDyingMidAnswerNeverHangsTheClient(t *testing.T) {
	answers := map[string]string{
		"partial head":         "HTTP/1.1 200 OK\r\nContent-Le",
		"head and short body":  "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
		"non-HTTP bytes":       "SSH-2.0-OpenSSH_9.2\r\n",
		"chunked, cut":         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
		"head only, no length": "HTTP/1.1 200 OK\r\n",
	}
	bothPaths(t, func(t *testing.T, loops int) {
		for name, answer := range answers {
			t.Run(name, func(t *testing.T) {
				backend := rawBackend(t, func(c net.Conn) {
					br := bufio.NewReader(c)
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					_, _ = io.WriteString(c, answer) // then closed at once
				})
				s := runEdge(t, loops, backend)
				for i := range 10 {
					a := rawRoundTrip(t, s.HTTPAddr(), getApp, 5*time.Second)
					if a.resp.StatusCode == http.StatusOK {
						assert.Error(t, a.bodyErr, "request %d: a truncated body must not look whole", i)
					} else {
						assert.Equal(t, http.StatusBadGateway, a.resp.StatusCode, "request %d", i)
					}
					assert.True(t, a.closed || a.resp.StatusCode == http.StatusBadGateway, "request %d: connection closed after a cut answer", i)
				}
			})
		}
	})
}

// hostileEdge runs an edge on the given path with cfg's timeouts, routing
// app.test to backend.
func hostileEdge(t *testing.T, loops int, cfg Config, backend string, tune ...func(*routetable.HTTPRoute)) *Server {
	t.Helper()
	cfg.EventLoops = loops
	cfg.DialTimeout, cfg.ShutdownTimeout, cfg.ReadHeaderTimeout = time.Second, 2*time.Second, time.Second
	e := startLoopEdgeCfg(t, cfg, route(backend, tune...))
	t.Cleanup(func() { assert.NoError(t, e.stop()) })
	return e.s
}

// recordingBackend answers 200 "ok" after reading each request whole and
// sends every request it read (method, path, headers, body or the body's
// read error) on the returned channel.
type seenRequest struct {
	method, path string
	header       http.Header
	body         string
	bodyErr      error
}

func recordingBackend(t *testing.T) (string, chan seenRequest) {
	t.Helper()
	seen := make(chan seenRequest, 64)
	addr := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		seen <- seenRequest{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: string(b), bodyErr: err}
		if err != nil {
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	return addr, seen
}

// RFC 9112 §6.1: a request with both Content-Length and Transfer-Encoding
// is answered 400 and its connection closed, whether it is the
// connection's first request or follows one net/http already served; the
// bytes after it (a smuggled request) never reach a backend.
func TestSmugglingContentLengthWithChunkedIs400AndCloses(t *testing.T) {
	smuggle := "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: app.test\r\n\r\n"
	bothPaths(t, func(t *testing.T, loops int) {
		backend, seen := recordingBackend(t)
		s := hostileEdge(t, loops, Config{}, backend)
		for name, prefix := range map[string]string{
			"first request":           "",
			"after a served POST":     "POST /first HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\n\r\nhi",
			"after a served GET":      "GET /first HTTP/1.1\r\nHost: app.test\r\n\r\n",
			"Transfer-Encoding first": "",
		} {
			t.Run(name, func(t *testing.T) {
				req := smuggle
				if name == "Transfer-Encoding first" {
					req = strings.Replace(smuggle, "Content-Length: 5\r\nTransfer-Encoding: chunked", "Transfer-Encoding: chunked\r\nContent-Length: 5", 1)
				}
				c, err := net.Dial("tcp", s.HTTPAddr())
				require.NoError(t, err)
				defer c.Close()
				require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
				_, err = io.WriteString(c, prefix+req)
				require.NoError(t, err)
				br := bufio.NewReader(c)
				if prefix != "" {
					resp, err := http.ReadResponse(br, nil)
					require.NoError(t, err)
					_, _ = io.ReadAll(resp.Body)
					require.Equal(t, http.StatusOK, resp.StatusCode)
					assert.Equal(t, "/first", (<-seen).path)
				}
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
				assert.True(t, resp.Close, "Connection: close")
				_, err = br.ReadByte()
				assert.ErrorIs(t, err, io.EOF, "the connection is closed after the 400")
				select {
				case r := <-seen:
					t.Fatalf("a backend got %s %s", r.method, r.path)
				case <-time.After(100 * time.Millisecond):
				}
			})
		}
	})
}

// Header names spelled with underscores that a backend may read as
// framing, forwarding or client headers are dropped on both paths (GET on
// the loop, POST through net/http); other underscore names pass.
func TestUnderscoreAliasesOfFramingAndForwardingHeadersAreDropped(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend, seen := recordingBackend(t)
		s := hostileEdge(t, loops, Config{}, backend)
		hdrs := "Transfer_Encoding: chunked\r\nContent_Length: 5\r\nX_Forwarded_For: 6.6.6.6\r\nX_Real_IP: 6.6.6.6\r\nX_Forwarded_Proto: https\r\nX_App_Token: kept\r\n"
		for _, req := range []string{
			"GET / HTTP/1.1\r\nHost: app.test\r\n" + hdrs + "\r\n",
			"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\n" + hdrs + "\r\nhi",
		} {
			a := rawRoundTrip(t, s.HTTPAddr(), req, 5*time.Second)
			require.Equal(t, http.StatusOK, a.resp.StatusCode)
			r := <-seen
			for k := range r.header {
				if strings.Contains(k, "_") {
					assert.Equal(t, "X_app_token", k, "%s %s: only the harmless underscore name passes", r.method, k)
				}
			}
			assert.Equal(t, "kept", r.header.Get("X_App_Token"), r.method)
			assert.Equal(t, "127.0.0.1", r.header.Get("X-Forwarded-For"), r.method)
		}
	})
}

// A backend that accepts and never answers gets the edge's default
// response timeout (504 with a page saying so); a route's own
// response_header_timeout_ms overrides it; a response whose headers came
// is not cut by it however long its body streams.
func TestResponseTimeoutByDefaultIs504AndSparesStreams(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		silent := rawBackend(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
		s := hostileEdge(t, loops, Config{ResponseTimeout: 300 * time.Millisecond}, silent)
		for _, req := range []string{getApp, "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\n\r\nhi"} {
			start := time.Now()
			a := rawRoundTrip(t, s.HTTPAddr(), req, 5*time.Second)
			assert.Equal(t, http.StatusGatewayTimeout, a.resp.StatusCode)
			assert.Contains(t, a.body, "no response headers within the response timeout")
			assert.Less(t, time.Since(start), 3*time.Second)
		}

		// The behaviour under test is the passage of time itself: a
		// backend silent for longer than the response timeout.
		pastTheTimeout := func() { time.Sleep(500 * time.Millisecond) }
		stream := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				pastTheTimeout()
			}
		})
		s2 := hostileEdge(t, loops, Config{ResponseTimeout: 300 * time.Millisecond}, stream)
		a := rawRoundTrip(t, s2.HTTPAddr(), getApp, 5*time.Second)
		require.NoError(t, a.bodyErr)
		assert.Equal(t, "data: 0\n\ndata: 1\n\ndata: 2\n\n", a.body)

		slow := goBackend(t, func(w http.ResponseWriter, r *http.Request) {
			pastTheTimeout()
			_, _ = io.WriteString(w, "late")
		})
		s3 := hostileEdge(t, loops, Config{ResponseTimeout: 200 * time.Millisecond}, slow, func(r *routetable.HTTPRoute) { r.ResponseHeaderTimeoutMS = 3000 })
		a = rawRoundTrip(t, s3.HTTPAddr(), getApp, 5*time.Second)
		assert.Equal(t, http.StatusOK, a.resp.StatusCode)
		assert.Equal(t, "late", a.body)
	})
}

// A client that sends a POST head and stops sending its body gets 408 and
// a close within the body timeout; the backend connection is closed too
// (the backend's body read fails), on both paths.
func TestStalledRequestBodyIs408AndClosesBothConnections(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend, seen := recordingBackend(t)
		s := hostileEdge(t, loops, Config{BodyTimeout: 300 * time.Millisecond}, backend)
		for _, sent := range []string{"", "0123456789"} {
			start := time.Now()
			a := rawRoundTrip(t, s.HTTPAddr(), "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 100000\r\n\r\n"+sent, 5*time.Second)
			assert.Equal(t, http.StatusRequestTimeout, a.resp.StatusCode, a.body)
			assert.True(t, a.closed, "the client connection is closed")
			assert.Less(t, time.Since(start), 3*time.Second)
			select {
			case r := <-seen:
				assert.Error(t, r.bodyErr, "the backend never takes the cut body as whole")
			case <-time.After(3 * time.Second):
				t.Fatal("the backend's request did not end")
			}
		}
		// A body that keeps coming, slower than the timeout in total but
		// never idle that long, goes through.
		c, err := net.Dial("tcp", s.HTTPAddr())
		require.NoError(t, err)
		defer c.Close()
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 6\r\n\r\n")
		trickle(c, 100*time.Millisecond, "x", "x", "x", "x", "x", "x")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "xxxxxx", (<-seen).body)
	})
}

// A malformed chunked body is the client's fault: 400 and a close, not
// 502; the backend never takes it as whole.
func TestMalformedChunkedBodyIs400(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend, seen := recordingBackend(t)
		s := hostileEdge(t, loops, Config{}, backend)
		for _, body := range []string{"5\r\nhello\r\nZZ\r\n\r\n", "5\r\nhelloXX0\r\n\r\n", "-1\r\n"} {
			a := rawRoundTrip(t, s.HTTPAddr(), "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n"+body, 5*time.Second)
			assert.Equal(t, http.StatusBadRequest, a.resp.StatusCode, "%q: %s", body, a.body)
			assert.True(t, a.closed, "%q: connection closed", body)
			select {
			case r := <-seen:
				assert.Error(t, r.bodyErr, "%q: the backend must not take the body as whole", body)
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// Error pages say which app and service did not answer, not the backend's
// loopback address (both paths, the loop's and net/http's pages).
func TestErrorPagesNameAppAndServiceNotTheBackendAddress(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		refused := refusingAddr(t)
		s := hostileEdge(t, loops, Config{}, refused)
		for _, req := range []string{getApp, "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\n\r\nhi"} {
			a := rawRoundTrip(t, s.HTTPAddr(), req, 5*time.Second)
			assert.Equal(t, http.StatusServiceUnavailable, a.resp.StatusCode)
			assert.Contains(t, a.body, "(app app, service web)")
			assert.NotContains(t, a.body, "127.0.0.1")
		}
	})
}

// Request heads over 32 KiB (MaxRequestHead) get 431 on both paths, and the edge closes.
func TestRequestHeadOver32KiBIs431(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend, _ := recordingBackend(t)
		s := hostileEdge(t, loops, Config{}, backend)
		ok := rawRoundTrip(t, s.HTTPAddr(), "GET / HTTP/1.1\r\nHost: app.test\r\nX-Big: "+strings.Repeat("b", 30<<10)+"\r\n\r\n", 5*time.Second)
		assert.Equal(t, http.StatusOK, ok.resp.StatusCode)
		for _, n := range []int{33 << 10, 1 << 20} {
			a := rawRoundTrip(t, s.HTTPAddr(), "GET / HTTP/1.1\r\nHost: app.test\r\nX-Big: "+strings.Repeat("b", n)+"\r\n\r\n", 5*time.Second)
			assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, a.resp.StatusCode, "%d bytes", n)
		}
	})
}

// A head naming thousands of headers in Connection (the quadratic case)
// is handled right: each named header is dropped, the others pass.
func TestManyConnectionNamedHeadersAreDroppedAndOthersKept(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend, seen := recordingBackend(t)
		s := hostileEdge(t, loops, Config{}, backend)
		var conn, hdrs strings.Builder
		for i := range 1400 { // a 28 KB head: under MaxRequestHead
			if i > 0 {
				conn.WriteString(",")
			}
			fmt.Fprintf(&conn, "x-h%d", i)
			fmt.Fprintf(&hdrs, "X-H%d: v\r\n", i)
		}
		hdrs.WriteString("X-Keep: yes\r\n")
		a := rawRoundTrip(t, s.HTTPAddr(), "GET / HTTP/1.1\r\nHost: app.test\r\nConnection: "+conn.String()+"\r\n"+hdrs.String()+"\r\n", 5*time.Second)
		require.Equal(t, http.StatusOK, a.resp.StatusCode, a.body)
		r := <-seen
		assert.Equal(t, "yes", r.header.Get("X-Keep"))
		for k := range r.header {
			assert.False(t, strings.HasPrefix(k, "X-H"), "%s was named by Connection", k)
		}
	})
}

// refusingAddr is a loopback address that refuses every connect for the
// whole test: a socket bound to it that never listens holds the port, so
// no listener of the test can be given it.
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// A head that comes in pieces is served once whole (both paths); on the
// event loop it waits in the loop (no hand-over to a goroutine); one that
// stalls is closed after the read header timeout.
func TestPartialHeadsAreServedWhenWholeAndCutAtTheHeaderTimeout(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend, _ := recordingBackend(t)
		s := hostileEdge(t, loops, Config{}, backend) // ReadHeaderTimeout 1 s
		c, err := net.Dial("tcp", s.HTTPAddr())
		require.NoError(t, err)
		defer c.Close()
		_, handoffs0 := loopCounts(s)
		trickle(c, 50*time.Millisecond, "GET / HT", "TP/1.1\r\nHo", "st: app.test\r\n", "\r\n")
		require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		if loops > 0 {
			_, handoffs := loopCounts(s)
			assert.Equal(t, handoffs0, handoffs, "the loop kept the connection")
		}

		stalled, err := net.Dial("tcp", s.HTTPAddr())
		require.NoError(t, err)
		defer stalled.Close()
		_, _ = io.WriteString(stalled, "GET / HTTP/1.1\r\nHost: app")
		start := time.Now()
		require.NoError(t, stalled.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err = stalled.Read(make([]byte, 1))
		assert.False(t, isTimeout(err), "closed by the edge, not by the test's deadline: %v", err)
		assert.Less(t, time.Since(start), 3*time.Second)
	})
}

// A connection holding a partial head costs little memory: a few KiB on
// the event loop (its 4 KiB buffer), more on the goroutine path (logged).
func TestPartialHeadConnectionsAreSmall(t *testing.T) {
	if raceEnabledInternal {
		t.Skip("memory figures differ under the race detector")
	}
	bothPaths(t, func(t *testing.T, loops int) {
		backend, _ := recordingBackend(t)
		s := hostileEdge(t, loops, Config{ReadHeaderTimeout: time.Minute}, backend)
		s.ConnSrv.ReadHeaderTimeout = time.Minute
		const n = 300
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		conns := make([]net.Conn, 0, n)
		for range n {
			c, err := net.Dial("tcp", s.HTTPAddr())
			require.NoError(t, err)
			conns = append(conns, c)
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: app.test\r\nX-Partial: "+strings.Repeat("p", 500))
		}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		// A settle for the edge to read the 300 heads: it counts no
		// connections that hold a partial head, so there is nothing to await.
		time.Sleep(300 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&after)
		// The test's own client sockets are counted too (a few hundred
		// bytes each).
		per := (int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)) / n
		t.Logf("event_loops=%d: %d bytes per partial-head connection", loops, per)
		if loops > 0 {
			assert.Less(t, per, int64(8<<10))
		}
	})
}

// The raw-socket suite of hostile requests the edge already handled
// safely (and the ones above): each is answered without reaching a
// backend, or reaches it exactly once as one well-framed request, and a
// request that cannot be framed safely closes its connection, so nothing
// after it can be read as another request. Both paths.
func TestHostileRequestsStaySafe(t *testing.T) {
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: app.test\r\n\r\n"
	cases := []struct {
		name, raw string
		// status 0: any 4xx/5xx answer; backend: requests the backend
		// may see (the smuggled one never).
		status  int
		backend int
		closes  bool
	}{
		{"CL and TE chunked", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 400, 0, true},
		{"TE chunked then CL", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 48\r\n\r\n0\r\n\r\n" + smuggled, 400, 0, true},
		{"two different Content-Lengths", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabc" + smuggled, 400, 0, true},
		{"Content-Length with a sign", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: +3\r\n\r\nabc" + smuggled, 400, 0, true},
		{"Content-Length list", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 3, 3\r\n\r\nabc" + smuggled, 400, 0, true},
		{"TE not ending in chunked", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + smuggled, 0, 0, true},
		{"TE gzip", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: gzip\r\n\r\nxx" + smuggled, 0, 0, true},
		{"TE xchunked", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + smuggled, 0, 0, true},
		{"space before colon", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled, 400, 0, true},
		{"folded TE", "POST / HTTP/1.1\r\nHost: app.test\r\nX: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled, 400, 0, true},
		{"bare CR in a header", "GET / HTTP/1.1\r\nHost: app.test\r\nX: a\rTransfer-Encoding: chunked\r\n\r\n" + smuggled, 400, 0, true},
		{"NUL in a header", "GET / HTTP/1.1\r\nHost: app.test\r\nX: a\x00b\r\n\r\n" + smuggled, 400, 0, true},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: app.test\r\nHost: other.test\r\n\r\n" + smuggled, 400, 0, true},
		{"no Host", "GET / HTTP/1.1\r\n\r\n" + smuggled, 400, 0, true},
		{"bad chunk size", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + smuggled, 400, 1, true},
		{"chunk longer than said", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcdef\r\n0\r\n\r\n" + smuggled, 400, 1, true},
		{"head over 32 KiB", "GET / HTTP/1.1\r\nHost: app.test\r\nX: " + strings.Repeat("a", 70<<10) + "\r\n\r\n" + smuggled, 431, 0, true},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + smuggled, 0, 0, true},
		{"request line with a space in the target", "GET /a b HTTP/1.1\r\nHost: app.test\r\n\r\n" + smuggled, 400, 0, true},
		{"TE leading space and case", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding:  ChUnKeD\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled, 400, 0, true},
		{"TE tab", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding:\tchunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled, 400, 0, true},
		{"TE vertical tab", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding:\vchunked\r\n\r\n0\r\n\r\n" + smuggled, 0, 0, true},
		{"two TE headers", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n" + smuggled, 0, 0, true},
		{"two TE chunked headers", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 0, 0, true},
		{"TE chunked chunked", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n" + smuggled, 0, 0, true},
		{"TE in HTTP/1.0", "POST / HTTP/1.0\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled, 400, 0, true},
		{"TE only in HTTP/1.0", "POST / HTTP/1.0\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 0, 0, true},
		{"CL leading zeros", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 003\r\n\r\nabc", 200, 1, false},
		{"CL negative", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: -1\r\n\r\n" + smuggled, 400, 0, true},
		{"CL hex", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 0x3\r\n\r\nabc" + smuggled, 400, 0, true},
		{"CL overflow", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 18446744073709551619\r\n\r\nabc" + smuggled, 400, 0, true},
		{"CL empty", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length:\r\n\r\n" + smuggled, 400, 0, true},
		{"CL on a GET carrying a request", "GET / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 42\r\n\r\n" + smuggled, 200, 1, false},
		{"CL underscore and CL", "POST / HTTP/1.1\r\nHost: app.test\r\nContent_Length: 44\r\nContent-Length: 3\r\n\r\nabc", 200, 1, false},
		{"chunk size overflow", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000003\r\nabc\r\n0\r\n\r\n" + smuggled, 400, 1, true},
		{"chunk size with leading space", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n 3\r\nabc\r\n0\r\n\r\n" + smuggled, 400, 1, true},
		{"chunk size 0x", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n" + smuggled, 400, 1, true},
		{"chunk bare-CR line end", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3\rabc\r\n0\r\n\r\n" + smuggled, 400, 1, true},
		{"trailer with Content-Length", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nContent-Length: 44\r\n\r\n", 200, 1, false},
		{"trailer with Transfer-Encoding", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n", 200, 1, false},
		{"after a 400, pipelined", "GET / HTTP/1.1\r\n\r\n" + smuggled + smuggled, 400, 0, true},
		{"after a 431, pipelined", "GET / HTTP/1.1\r\nHost: app.test\r\nX: " + strings.Repeat("a", 65<<10) + "\r\n\r\n" + smuggled, 431, 0, true},
		{"TE in HTTP/1.0 keep-alive", "POST / HTTP/1.0\r\nHost: app.test\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggled, 0, 0, true},
		{"HTTP/1.0 keep-alive CL then smuggled", "POST / HTTP/1.0\r\nHost: app.test\r\nContent-Length: 3\r\n\r\nabc" + smuggled, 200, 1, true},
		{"huge chunk extension", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3;x=" + strings.Repeat("e", 64<<10) + "\r\nabc\r\n0\r\n\r\n" + smuggled, 400, 1, true},
		{"chunk extension with a quoted CRLF", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3;x=\"a\r\n0\r\n\r\n" + smuggled + "\"\r\nabc\r\n0\r\n\r\n", 0, 1, true},
		{"LF-only chunk lines", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n", 0, 1, false},
		// Safe ones, served as one request each.
		{"chunked with extension and trailer", "POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", 200, 1, false},
		{"Content-Length body", "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 3\r\n\r\nabc", 200, 1, false},
		{"leading empty lines", "\r\n\r\nGET / HTTP/1.1\r\nHost: app.test\r\n\r\n", 200, 1, false},
		{"bare LF head", "GET / HTTP/1.1\nHost: app.test\n\n", 200, 1, false},
	}
	bothPaths(t, func(t *testing.T, loops int) {
		backend, seen := recordingBackend(t)
		s := hostileEdge(t, loops, Config{BodyTimeout: time.Second}, backend)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c, err := net.Dial("tcp", s.HTTPAddr())
				require.NoError(t, err)
				defer c.Close()
				require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
				_, _ = io.WriteString(c, tc.raw)
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				if tc.status == 0 {
					assert.GreaterOrEqual(t, resp.StatusCode, 400, string(body))
				} else {
					assert.Equal(t, tc.status, resp.StatusCode, string(body))
				}
				if tc.closes {
					_, err = br.ReadByte()
					assert.Error(t, err, "the connection closes after the answer")
					assert.False(t, isTimeout(err), "closed, not left open")
				}
				got := 0
				for done := false; !done; {
					select {
					case r := <-seen:
						assert.NotEqual(t, "/smuggled", r.path, "a smuggled request reached the backend")
						got++
					case <-time.After(150 * time.Millisecond):
						done = true
					}
				}
				assert.LessOrEqual(t, got, tc.backend, "requests the backend saw")
				if !tc.closes {
					assert.Equal(t, tc.backend, got)
				}
			})
		}
	})
}

// The response timeout runs from the request sent whole: an upload that
// takes longer than it (but never stalls for the body timeout) is not cut.
func TestResponseTimeoutStartsAfterTheUploadIsSent(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		backend, seen := recordingBackend(t)
		s := hostileEdge(t, loops, Config{ResponseTimeout: 300 * time.Millisecond, BodyTimeout: 2 * time.Second}, backend)
		c, err := net.Dial("tcp", s.HTTPAddr())
		require.NoError(t, err)
		defer c.Close()
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 8\r\n\r\n")
		trickle(c, 100*time.Millisecond, strings.Split("uuuuuuuu", "")...) // 800 ms in all
		require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "uuuuuuuu", (<-seen).body)
	})
}

// A response timeout over 2 s (checked at the client checks on the
// goroutine path, at the sweep on the event loop) still answers 504, at
// most about a second late.
func TestLongResponseTimeoutIs504(t *testing.T) {
	bothPaths(t, func(t *testing.T, loops int) {
		silent := rawBackend(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
		s := hostileEdge(t, loops, Config{ResponseTimeout: 2500 * time.Millisecond}, silent)
		start := time.Now()
		a := rawRoundTrip(t, s.HTTPAddr(), getApp, 6*time.Second)
		took := time.Since(start)
		assert.Equal(t, http.StatusGatewayTimeout, a.resp.StatusCode)
		assert.GreaterOrEqual(t, took, 2400*time.Millisecond)
		assert.Less(t, took, 4500*time.Millisecond)
	})
}

// trickle writes parts to w with gap before each: a request spread over
// time is the input under test (a slow upload, a head in pieces), so the
// pauses are the test's data, not a wait for a condition.
func trickle(w io.Writer, gap time.Duration, parts ...string) {
	for _, p := range parts {
		time.Sleep(gap)
		_, _ = io.WriteString(w, p)
	}
}
