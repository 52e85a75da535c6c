package edgeproxy_test

import (
	"bufio"
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
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// Hostile clients and backends against the edge's HTTP/2 server.

// h2EdgeTo runs an edge with a static certificate for host routed to the
// backend at addr (tlsH1Edge for a raw backend).
func h2EdgeTo(t *testing.T, host, addr string, tune ...func(*edgeproxy.Config)) *edge {
	t.Helper()
	ca := newTestCA(t)
	tune = append([]func(*edgeproxy.Config){func(c *edgeproxy.Config) { c.HTTPSAddr, c.ACME.Disabled = "127.0.0.1:0", true }}, tune...)
	e := startEdge(t, tune...)
	c, k := ca.valid(t, host)
	_, err := certstore.AddStatic(e.stateDir, host, c, k, time.Now())
	require.NoError(t, err)
	e.publish(t, httpTable(1, tlsRoute(host, "", addr)))
	waitServed(t, e, host, ca.pool)
	return e
}

// R62 (HTTP/2, hostile backend): a chunked answer the backend cuts short
// (it closes before the last chunk), or a sized one shorter than its
// Content-Length, reaches the client as a reset stream, never as a whole
// answer ending with END_STREAM, on the fast path (GET) and through
// ServeHTTP (POST) alike (ServeHTTP's ReverseProxy ended such a stream
// normally: it aborts only under a server context).
func TestR62_H2TruncatedChunkedAnswerIsReset(t *testing.T) {
	addr := serveConns(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Path == "/sized" {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nhello")
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	})
	e := h2EdgeTo(t, "trunc2.test", addr)
	for i, method := range []string{"GET", "POST", "GET", "POST"} {
		path := "/"
		if i >= 2 {
			path = "/sized"
		}
		r := dialRawH2(t, e, "trunc2.test")
		id := uint32(1)
		r.request(id, method == "GET", method, path, "trunc2.test")
		if method == "POST" {
			require.NoError(t, r.fr.WriteData(id, true, []byte("x")))
		}
		a := r.readAnswer(id)
		assert.True(t, a.wasReset, "%s (%d): a cut answer is reset, got status %q body %q ended %v", method, i, a.status, a.body.String(), a.ended)
		assert.False(t, a.ended, "%s: END_STREAM on a cut answer", method)
	}
}

// R62 (HTTP/2 → HTTP/1.1, RFC 9113 §8.3.1 and §8.2.1): a :path with a
// space or a control byte or not an absolute path (absolute-form, "*"
// other than for OPTIONS), a :method that is not a token, and an
// :authority that is no valid Host never reach the backend (before, a
// :path "/a?x HTTP/1.1" went out as the request line "POST /a?x
// HTTP/1.1 HTTP/1.1", and an :authority "host:443 x" was routed to host
// and relayed as an empty Host with X-Forwarded-Host "host:443 x").
func TestR62_H2RequestLineAndAuthorityValidated(t *testing.T) {
	addr, hits := rawBackend(t, func(w io.Writer, req *http.Request) {
		_, _ = io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	e := h2EdgeTo(t, "line2.test", addr)
	cases := []struct {
		method, path, auth string
		status             string // "" : the stream is reset (malformed)
	}{
		{"GET", "/a?x HTTP/1.1", "line2.test", ""},
		{"POST", "/a?x HTTP/1.1", "line2.test", ""},
		{"POST", "/a\tb", "line2.test", ""},
		{"GET /x", "/", "line2.test", ""},
		{"PO(ST", "/", "line2.test", ""},
		{"POST", "*", "line2.test", ""},
		{"POST", "http://evil.test/x", "line2.test", ""},
		{"POST", "x", "line2.test", ""},
		{"POST", "/", "line2.test:443 x", "400"},
		{"GET", "/", "line2.test:443 x", "400"},
		{"POST", "/", "line2.test/x", "400"},
	}
	for _, tc := range cases {
		r := dialRawH2(t, e, "line2.test")
		r.request(1, true, tc.method, tc.path, tc.auth)
		a := r.readAnswer(1)
		if tc.status == "" {
			assert.True(t, a.wasReset, "%q %q %q: reset, got %s %q", tc.method, tc.path, tc.auth, a.status, a.body.String())
			assert.Equal(t, http2.ErrCodeProtocol, a.reset, "%q %q", tc.method, tc.path)
		} else {
			assert.Equal(t, tc.status, a.status, "%q %q %q: %s", tc.method, tc.path, tc.auth, a.body.String())
		}
	}
	assert.Zero(t, hits.Load(), "a malformed request reached the backend")
	r := dialRawH2(t, e, "line2.test")
	r.request(1, true, "POST", "/ok?a=b", "line2.test:443")
	assert.Equal(t, "200", r.readAnswer(1).status, "a valid request still passes")
	r.request(3, true, "OPTIONS", "*", "line2.test")
	assert.Equal(t, "200", r.readAnswer(3).status, "OPTIONS * passes")
}

// R62 (HTTP/2 request trailers): a client's trailers arrive on the read
// loop while the stream's handler (ReverseProxy cloning the request)
// reads the request's Trailer map; the read loop must not write that map
// (-race saw onTrailers' write against Header.Clone; without the race
// detector such a pair is the unrecoverable "concurrent map read and map
// write", which ends the edge).
func TestR62_H2RequestTrailersDoNotRaceTheHandler(t *testing.T) {
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "body="+string(body))
	}))
	t.Cleanup(b.Close)
	e, _ := tlsH1Edge(t, "trail2.test", b)
	r := dialRawH2(t, e, "trail2.test")
	for i := range 30 {
		id := uint32(2*i + 1)
		r.request(id, false, "POST", "/", "trail2.test", "trailer", "x-t")
		require.NoError(t, r.fr.WriteData(id, false, []byte("abc")))
		r.hbuf.Reset()
		require.NoError(t, r.enc.WriteField(hpack.HeaderField{Name: "x-t", Value: "v"}))
		require.NoError(t, r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndStream: true, EndHeaders: true}))
		a := r.readAnswer(id)
		require.Equal(t, "200", a.status)
		assert.Equal(t, "body=abc", a.body.String())
	}
}

// R62 (HTTP/2 flow control abuse): a client that opens streams with a
// window of 0 and never widens it held each stream's handler, and its
// backend connection, until the connection ended (the idle timeout does
// not run while streams are open); past the stall bound (H1SendTimeout in
// production) such a stream is reset with CANCEL, on the fast path and
// through ServeHTTP, and the connection goes on serving.
func TestR62_H2StreamStalledOnAZeroWindowIsReset(t *testing.T) {
	t.Cleanup(edgeproxy.SetH2StallTimeout(300 * time.Millisecond))
	big := strings.Repeat("w", 100_000)
	var open atomic.Int64
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open.Add(1)
		defer open.Add(-1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, big)
	}))
	t.Cleanup(b.Close)
	e, _ := tlsH1Edge(t, "stall2.test", b)
	r := dialRawH2(t, e, "stall2.test", http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	r.request(1, true, "GET", "/", "stall2.test")
	r.request(3, false, "POST", "/", "stall2.test")
	require.NoError(t, r.fr.WriteData(3, true, []byte("x")))
	start := time.Now()
	resets := map[uint32]http2.ErrCode{}
	for len(resets) < 2 {
		f, err := r.fr.ReadFrame()
		require.NoError(t, err, "reading the resets (got %v)", resets)
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			resets[f.StreamID] = f.ErrCode
		case *http2.DataFrame:
			assert.Empty(t, f.Data(), "DATA beyond a window of 0")
		}
	}
	assert.Equal(t, map[uint32]http2.ErrCode{1: http2.ErrCodeCancel, 3: http2.ErrCodeCancel}, resets, "both streams reset once stalled")
	assert.Less(t, time.Since(start), 5*time.Second)
	require.Eventually(t, func() bool { return open.Load() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the backend requests of the stalled streams end")
	require.NoError(t, r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	r.request(5, true, "GET", "/", "stall2.test")
	a := r.readAnswer(5)
	assert.Equal(t, "200", a.status)
	assert.Equal(t, len(big), a.body.Len(), "a stream the client lets through is not cut by the stall bound")
}

// R62 (HTTP/2 fast path, hostile backend): the trailer section of a
// chunked answer is relayed as one HEADERS block, so it is gathered
// first; a backend that sends trailer lines without end made the edge
// gather them all (memory without bound, then one giant header block).
// Past H1MaxResponseHead the stream is reset and the backend connection
// dropped.
func TestR62_H2EndlessChunkedTrailersAreCut(t *testing.T) {
	addr := serveConns(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		bw := bufio.NewWriterSize(c, 64<<10)
		_, _ = io.WriteString(bw, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\n")
		for i := 0; i < 200_000; i++ {
			if _, err := fmt.Fprintf(bw, "X-T%d: %0100d\r\n", i, i); err != nil {
				return
			}
		}
		_, _ = io.WriteString(bw, "\r\n")
		_ = bw.Flush()
	})
	e := h2EdgeTo(t, "trl2.test", addr)
	r := dialRawH2(t, e, "trl2.test")
	r.request(1, true, "GET", "/", "trl2.test")
	a := r.readAnswer(1)
	assert.Equal(t, "200", a.status)
	assert.True(t, a.wasReset, "endless trailers end in a reset (got %d trailer fields)", len(a.trailer))
	assert.Empty(t, a.trailer)
}

// R62 (HTTP/2 request framing): a content-length is 1*DIGIT (RFC 9110
// §8.6), as on the HTTP/1.1 paths: "+5" made a request malformed for
// neither (ParseInt takes a sign) and reached the backend; several, a
// list or a negative one are malformed too; the backend sees none of
// them.
func TestR62_H2RequestContentLengthChecked(t *testing.T) {
	addr, hits := rawBackend(t, func(w io.Writer, req *http.Request) {
		_, _ = io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	e := h2EdgeTo(t, "cl2.test", addr)
	cases := []struct {
		cl   []string
		data string
	}{
		{[]string{"+5"}, "01234"},
		{[]string{"5, 5"}, "01234"},
		{[]string{"5", "5"}, "01234"},
		{[]string{"-5"}, "01234"},
	}
	for _, tc := range cases {
		var kv []string
		for _, v := range tc.cl {
			kv = append(kv, "content-length", v)
		}
		r := dialRawH2(t, e, "cl2.test")
		r.request(1, false, "POST", "/", "cl2.test", kv...)
		require.NoError(t, r.fr.WriteData(1, true, []byte(tc.data)))
		a := r.readAnswer(1)
		assert.True(t, a.wasReset, "content-length %q with %d bytes: reset, got %q", tc.cl, len(tc.data), a.status)
		assert.Equal(t, http2.ErrCodeProtocol, a.reset, "content-length %q", tc.cl)
	}
	assert.Zero(t, hits.Load(), "a request with a bad content-length reached the backend")
}

// R62 (HTTP/2 abuse, CPU): a SETTINGS frame may carry some 2700
// SETTINGS_INITIAL_WINDOW_SIZE entries; each made a pass over every open
// stream (then 250), some 2.5 ms of the read loop per 16 KiB frame, so a few
// MB/s from one client kept a core busy. The windows now move once per
// frame: 600 such frames, then a PING, are answered well within the
// bound.
func TestR62_H2SettingsFloodCostsOnePassPerFrame(t *testing.T) {
	if raceEnabled {
		t.Skip("a timing bound")
	}
	release := make(chan struct{})
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(b.Close)
	t.Cleanup(func() { close(release) })
	e, _ := tlsH1Edge(t, "sflood2.test", b)
	r := dialRawH2(t, e, "sflood2.test")
	for i := range 128 {
		r.request(uint32(2*i+1), true, "GET", "/", "sflood2.test")
	}
	require.Eventually(t, func() bool {
		for _, bs := range e.srv.Status().Backends {
			if bs.Addr == addrOf(b) && bs.InFlight == 128 {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "128 streams open")
	var ss []http2.Setting
	for i := range 2700 {
		ss = append(ss, http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(i % 2 * 1000)})
	}
	acked := make(chan time.Time, 1)
	go func() {
		for {
			f, err := r.fr.ReadFrame()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				acked <- time.Now()
				return
			}
		}
	}()
	start := time.Now()
	for range 600 {
		require.NoError(t, r.fr.WriteSettings(ss...))
	}
	require.NoError(t, r.fr.WritePing(false, [8]byte{7}))
	select {
	case at := <-acked:
		assert.Less(t, at.Sub(start), 500*time.Millisecond, "600 SETTINGS frames of 2700 entries over 128 streams")
	case <-time.After(15 * time.Second):
		t.Fatal("no PING ack")
	}
}
