package edgeproxy_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// HTTP/1.1 over TLS is served by the edge's own loop after the handshake
// (tls_accept.go); these tests speak raw HTTP/1.1 on a TLS connection.

// tlsH1Backend answers "<method> <X-Forwarded-Proto> <Forwarded>" and a
// header spelled in lowercase ("x-raw"): the loop relays header names as
// the backend wrote them, net/http's ReverseProxy canonicalizes them
// ("X-Raw"), which tells the two paths apart. An Upgrade: echo request is
// switched and echoes one line.
func tlsH1Backend(t *testing.T) *httptest.Server {
	t.Helper()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "echo" {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "echo")
			w.WriteHeader(http.StatusSwitchingProtocols)
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			line, _ := brw.ReadString('\n')
			_, _ = io.WriteString(conn, "echo "+r.Header.Get("X-Forwarded-Proto")+" "+line)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["x-raw"] = []string{"1"}
		_, _ = io.WriteString(w, r.Method+" "+r.Header.Get("X-Forwarded-Proto")+" "+r.Header.Get("Forwarded"))
	}))
	t.Cleanup(b.Close)
	return b
}

// tlsH1Edge runs an edge with a static certificate for host routed to b.
func tlsH1Edge(t *testing.T, host string, b *httptest.Server) (*edge, *testCA) {
	t.Helper()
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	c, k := ca.valid(t, host)
	_, err := certstore.AddStatic(e.stateDir, host, c, k, time.Now())
	require.NoError(t, err)
	e.publish(t, httpTable(1, tlsRoute(host, "", addrOf(b))))
	waitServed(t, e, host, ca.pool)
	return e, ca
}

// rawTLS is one client TLS connection speaking raw HTTP/1.1; raw holds
// the bytes of the last response read.
type rawTLS struct {
	t   *testing.T
	c   *tls.Conn
	br  *bufio.Reader
	raw bytes.Buffer
}

func dialRawTLS(t *testing.T, e *edge, ca *testCA, host string, protos ...string) *rawTLS {
	t.Helper()
	c, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: host, RootCAs: ca.pool, NextProtos: protos})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	r := &rawTLS{t: t, c: c}
	r.br = bufio.NewReader(io.TeeReader(c, &r.raw))
	return r
}

// do writes req and reads one response (body read whole).
func (r *rawTLS) do(req string) (*http.Response, string) {
	r.t.Helper()
	r.raw.Reset()
	_, err := io.WriteString(r.c, req)
	require.NoError(r.t, err)
	resp, err := http.ReadResponse(r.br, nil)
	require.NoError(r.t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(r.t, err)
	return resp, string(b)
}

// R62: keep-alive HTTP/1.1 over TLS is served by the loop (ALPN
// http/1.1 or none), with X-Forwarded-Proto https and proto=https in
// Forwarded; a request with a body on the same connection goes through
// net/http, which still sees HTTPS; the connection stays open throughout.
func TestHTTPSHTTP11KeepAliveServedByTheLoopWithSchemeHTTPS(t *testing.T) {
	b := tlsH1Backend(t)
	e, ca := tlsH1Edge(t, "loop.test", b)
	for _, protos := range [][]string{{"http/1.1"}, nil} {
		c := dialRawTLS(t, e, ca, "loop.test", protos...)
		for i := range 3 {
			resp, got := c.do("GET /k HTTP/1.1\r\nHost: loop.test\r\n\r\n")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.False(t, resp.Close, "keep-alive")
			assert.Equal(t, "GET https for=127.0.0.1;host=\"loop.test\";proto=https", got, "request %d (ALPN %v)", i, protos)
			assert.Contains(t, c.raw.String(), "\r\nx-raw: 1\r\n", "relayed by the loop (header name as the backend wrote it)")
		}
		resp, got := c.do("POST /p HTTP/1.1\r\nHost: loop.test\r\nContent-Length: 2\r\n\r\nhi")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "POST https for=127.0.0.1;host=\"loop.test\";proto=https", got, "net/http path sees HTTPS")
		assert.Contains(t, c.raw.String(), "\r\nX-Raw: 1\r\n", "relayed by net/http")
		resp, got = c.do("GET /after HTTP/1.1\r\nHost: loop.test\r\n\r\n")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.True(t, strings.HasPrefix(got, "GET https "), got)
	}
	metrics := adminGet(t, e, "/metrics")
	assert.Regexp(t, `gordon_edge_http_requests_by_protocol_total\{proto="HTTP/1.1",scheme="https"\} (\d{2,}|[4-9])`, metrics, "loop requests counted by protocol")
}

// RFC 9112 §6.1 over TLS: a request with both Content-Length and
// Transfer-Encoding gets 400 and its connection closes, first on the
// connection or after a request the loop served; the smuggled request
// never reaches the backend.
func TestHTTPSSmugglingOverTLSIs400AndCloses(t *testing.T) {
	var reached []string
	got := make(chan string, 16)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(b.Close)
	e, ca := tlsH1Edge(t, "smuggle.test", b)
	smuggle := "POST / HTTP/1.1\r\nHost: smuggle.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: smuggle.test\r\n\r\n"
	for _, first := range []bool{true, false} {
		c := dialRawTLS(t, e, ca, "smuggle.test", "http/1.1")
		if !first {
			resp, body := c.do("GET /first HTTP/1.1\r\nHost: smuggle.test\r\n\r\n")
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			assert.Equal(t, "GET /first", <-got)
		}
		resp, body := c.do(smuggle)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		assert.True(t, resp.Close, "Connection: close")
		_, err := c.br.ReadByte()
		assert.ErrorIs(t, err, io.EOF, "the connection is closed after the 400")
	}
	select {
	case r := <-got:
		reached = append(reached, r)
	case <-time.After(200 * time.Millisecond):
	}
	assert.Empty(t, reached, "nothing of the refused requests reached the backend")
}

// An HTTP/1.1 upgrade (WebSocket's shape) over TLS after a request the
// loop served on the same connection: the upgrade is handed to net/http,
// which tunnels it and sends X-Forwarded-Proto https.
func TestHTTPSUpgradeAfterLoopRequestOnOneConnection(t *testing.T) {
	b := tlsH1Backend(t)
	e, ca := tlsH1Edge(t, "ws.test", b)
	c := dialRawTLS(t, e, ca, "ws.test", "http/1.1")
	resp, got := c.do("GET / HTTP/1.1\r\nHost: ws.test\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(got, "GET https "), got)

	_, err := io.WriteString(c.c, "GET /ws HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(c.br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	_, err = io.WriteString(c.c, "hello\n")
	require.NoError(t, err)
	line, err := c.br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "echo https hello\n", line)
}

// R62 over HTTP/1.1: an always host without a certificate answers HTTPS
// with the 503 page (the loop hands the request to the policy); once a
// certificate is added the loop serves it.
func TestHTTPSAlwaysWithoutCertificateIs503OverHTTP11(t *testing.T) {
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	b := tlsH1Backend(t)
	e.publish(t, httpTable(1, tlsRoute("wait.test", "always", addrOf(b))))
	c, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "wait.test", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: wait.test\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "30", resp.Header.Get("Retry-After"))
	assert.Contains(t, string(page), "no certificate for wait.test yet")

	cert, key := ca.valid(t, "wait.test")
	_, err = certstore.AddStatic(e.stateDir, "wait.test", cert, key, time.Now())
	require.NoError(t, err)
	waitServed(t, e, "wait.test", ca.pool)
	require.Eventually(t, func() bool {
		rc := dialRawTLS(t, e, ca, "wait.test", "http/1.1")
		resp, got := rc.do("GET / HTTP/1.1\r\nHost: wait.test\r\n\r\n")
		return resp.StatusCode == http.StatusOK && strings.HasPrefix(got, "GET https ") && strings.Contains(rc.raw.String(), "\r\nx-raw: 1\r\n")
	}, 5*time.Second, 50*time.Millisecond, "served by the loop once the certificate is served")
}

// Plain HTTP sent to the HTTPS port gets a 400 that says so (as net/http
// answers), and the handshake counts as failed.
func TestHTTPSPortAnswersPlainHTTPWith400(t *testing.T) {
	e := startTLSEdge(t, "")
	e.publish(t, httpTable(1, route("x.test", "127.0.0.1:1")))
	c, err := net.Dial("tcp", e.srv.HTTPSAddr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n")
	require.NoError(t, err)
	got, _ := io.ReadAll(c)
	assert.Contains(t, string(got), "400 Bad Request")
	assert.Contains(t, string(got), "Client sent an HTTP request to an HTTPS server")
	assert.Regexp(t, `gordon_edge_tls_handshakes_total\{result="error"\} [1-9]`, adminGet(t, e, "/metrics"))
}

// adminGet fetches path from the edge's admin address.
func adminGet(t *testing.T, e *edge, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + e.srv.AdminAddr() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Drain over TLS (R62, decision 16): a request the loop serves over TLS
// counts in flight on its backend, and an edge that stops while it runs
// answers it (with Connection: close) before it exits.
func TestHTTPSHTTP11InFlightCountedAndAnsweredThroughADrain(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		started <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "slow")
	}))
	t.Cleanup(b.Close)
	e, ca := tlsH1Edge(t, "drain.test", b)
	c := dialRawTLS(t, e, ca, "drain.test", "http/1.1")
	type answer struct {
		resp *http.Response
		body string
	}
	done := make(chan answer, 1)
	go func() {
		_, err := io.WriteString(c.c, "GET /slow HTTP/1.1\r\nHost: drain.test\r\n\r\n")
		if err != nil {
			done <- answer{}
			return
		}
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			done <- answer{}
			return
		}
		got, _ := io.ReadAll(resp.Body)
		done <- answer{resp, string(got)}
	}()
	<-started
	var inFlight int64
	for _, bs := range e.srv.Status().Backends {
		if bs.Addr == addrOf(b) {
			inFlight = bs.InFlight
		}
	}
	assert.Equal(t, int64(1), inFlight, "an HTTP/1.1 request over TLS counts in flight on its backend")
	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	require.Never(t, func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}, 200*time.Millisecond, 10*time.Millisecond, "the edge stopped with a request in flight")
	close(release)
	a := <-done
	require.NotNil(t, a.resp, "the in-flight request was answered")
	assert.Equal(t, http.StatusOK, a.resp.StatusCode)
	assert.Equal(t, "slow", a.body)
	assert.True(t, a.resp.Close, "Connection: close during the drain")
	<-stopped
}

// HTTP/2 with many streams on one connection (their frames share TLS
// writes, h2srv.Conn.flushLoop): every stream gets its own answer whole, small and large.
func TestHTTPSH2ConcurrentStreamsEachGetTheirOwnAnswer(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, big)
			return
		}
		_, _ = io.WriteString(w, "answer to "+r.URL.Path)
	}))
	t.Cleanup(b.Close)
	e, ca := tlsH1Edge(t, "many.test", b)
	cl := httpsClient(e, ca.pool, true)
	errs := make(chan error, 64)
	for i := range 64 {
		go func() {
			path := fmt.Sprintf("/s%d", i)
			if i%16 == 0 {
				path = "/big"
			}
			resp, err := cl.Get("https://many.test" + path)
			if err != nil {
				errs <- err
				return
			}
			got, err := readAll(resp)
			switch {
			case err != nil:
			case resp.ProtoMajor != 2:
				err = fmt.Errorf("%s: %s", path, resp.Proto)
			case path == "/big" && got != big:
				err = fmt.Errorf("/big: %d bytes", len(got))
			case path != "/big" && got != "answer to "+path:
				err = fmt.Errorf("%s: got %q", path, got)
			}
			errs <- err
		}()
	}
	for range 64 {
		assert.NoError(t, <-errs)
	}
}

// A connection accepted before a drain whose handshake comes after the
// drain began is handshaken and its request answered (with Connection:
// close), as a plain connection's request on its way is; one that never
// sends a ClientHello frees the drain after drainHandshakeGrace, well
// within the shutdown timeout.
func TestHTTPSHandshakeUnderWayAtDrainIsServed(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	started := make(chan struct{}, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(b.Close)
	t.Cleanup(unblock) // before b.Close on a failure
	e, ca := tlsH1Edge(t, "hsdrain.test", b)
	slow := dialRawTLS(t, e, ca, "hsdrain.test", "http/1.1")
	go func() { _, _ = slow.c.Write([]byte("GET /slow HTTP/1.1\r\nHost: hsdrain.test\r\n\r\n")) }()
	<-started // the drain lasts while /slow is in flight
	raw, err := net.Dial("tcp", e.srv.HTTPSAddr())
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	silent, err := net.Dial("tcp", e.srv.HTTPSAddr())
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	// Settles, not waits for events: the edge reports neither the two
	// connections accepted nor the drain begun.
	time.Sleep(50 * time.Millisecond) // both accepted
	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	time.Sleep(20 * time.Millisecond) // the drain began
	tc := tls.Client(raw, &tls.Config{ServerName: "hsdrain.test", RootCAs: ca.pool, NextProtos: []string{"http/1.1"}})
	require.NoError(t, tc.SetDeadline(time.Now().Add(3*time.Second)))
	require.NoError(t, tc.Handshake(), "the handshake under way at the drain completes")
	_, err = io.WriteString(tc, "GET /b HTTP/1.1\r\nHost: hsdrain.test\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	require.NoError(t, err, "its request is answered")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, resp.Close, "Connection: close during the drain")
	unblock()
	select {
	case <-stopped:
	case <-time.After(1500 * time.Millisecond):
		t.Fatal("a client that never sent a ClientHello held the drain")
	}
}
