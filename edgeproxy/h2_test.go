package edgeproxy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The edge's own HTTP/2 server (internal/h2srv): these tests speak HTTP/2
// with Go's client where its behaviour is the point, and frame by frame
// (rawH2) where the protocol is.

// rawH2 is one client HTTP/2 connection driven frame by frame.
type rawH2 struct {
	t    *testing.T
	c    *tls.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

// dialRawH2 connects (ALPN H2), sends the preface and settings and reads
// the edge's SETTINGS.
func dialRawH2(t *testing.T, e *edge, host string, settings ...http2.Setting) *rawH2 {
	t.Helper()
	return dialRawH2Buf(t, e, host, 0, settings...)
}

// dialRawH2Buf is dialRawH2 with the client socket's receive buffer set to
// rcvbuf bytes before the connect (0 = the kernel's default), so a client
// that does not read fills the edge's side after a known amount instead of
// whatever the loopback's autotuning allows (megabytes).
func dialRawH2Buf(t *testing.T, e *edge, host string, rcvbuf int, settings ...http2.Setting) *rawH2 {
	t.Helper()
	d := &net.Dialer{}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
			return errors.Join(err, serr)
		}
	}
	c, err := tls.DialWithDialer(d, "tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: host, InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.Equal(t, "h2", c.ConnectionState().NegotiatedProtocol)
	require.NoError(t, c.SetDeadline(time.Now().Add(15*time.Second)))
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	r := &rawH2{t: t, c: c, fr: http2.NewFramer(c, c)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	require.NoError(t, r.fr.WriteSettings(settings...))
	f, err := r.fr.ReadFrame()
	require.NoError(t, err)
	sf, ok := f.(*http2.SettingsFrame)
	require.True(t, ok, "the edge's first frame is SETTINGS, got %v", f)
	v, ok := sf.Value(http2.SettingMaxConcurrentStreams)
	require.True(t, ok)
	assert.Equal(t, uint32(128), v)
	require.NoError(t, r.fr.WriteSettingsAck())
	return r
}

// request sends HEADERS for stream id: method, path, host, then name,
// value pairs as given (not lower-cased: tests send bad ones on purpose).
func (r *rawH2) request(id uint32, end bool, method, path, host string, kv ...string) {
	r.t.Helper()
	r.hbuf.Reset()
	fields := []string{":method", method, ":scheme", "https", ":path", path, ":authority", host}
	fields = append(fields, kv...)
	for i := 0; i < len(fields); i += 2 {
		require.NoError(r.t, r.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}))
	}
	// In fragments of the default maximum frame size (CONTINUATION).
	block := r.hbuf.Bytes()
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), 16<<10)
		frag := block[:n]
		block = block[n:]
		if first {
			require.NoError(r.t, r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0}))
		} else {
			require.NoError(r.t, r.fr.WriteContinuation(id, len(block) == 0, frag))
		}
	}
}

// h2Answer is what one stream received.
type h2Answer struct {
	status   string
	header   map[string][]string
	body     bytes.Buffer
	trailer  map[string]string
	reset    http2.ErrCode
	wasReset bool
	ended    bool
}

// readAnswer reads frames until stream id ends (END_STREAM or
// RST_STREAM), acknowledging PINGs and SETTINGS; frames of other streams
// are dropped. A GOAWAY or a read error fails the test.
func (r *rawH2) readAnswer(id uint32) *h2Answer {
	r.t.Helper()
	a := &h2Answer{header: map[string][]string{}}
	for {
		f, err := r.fr.ReadFrame()
		require.NoError(r.t, err, "reading stream %d", id)
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			r.t.Fatalf("GOAWAY %v while reading stream %d", ga.ErrCode, id)
		}
		if f.Header().StreamID != id {
			continue
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if a.status == "" {
				a.status = f.PseudoValue("status")
				for _, hf := range f.RegularFields() {
					a.header[hf.Name] = append(a.header[hf.Name], hf.Value)
				}
			} else {
				a.trailer = map[string]string{}
				for _, hf := range f.RegularFields() {
					a.trailer[hf.Name] = hf.Value
				}
			}
			if f.StreamEnded() {
				a.ended = true
				return a
			}
		case *http2.DataFrame:
			a.body.Write(f.Data())
			if n := len(f.Data()); n > 0 {
				require.NoError(r.t, r.fr.WriteWindowUpdate(0, uint32(n)))
				require.NoError(r.t, r.fr.WriteWindowUpdate(id, uint32(n)))
			}
			if f.StreamEnded() {
				a.ended = true
				return a
			}
		case *http2.RSTStreamFrame:
			a.wasReset, a.reset = true, f.ErrCode
			return a
		}
	}
}

// readConnEnd reads frames until a GOAWAY (returned) or the connection
// ends (nil).
func (r *rawH2) readConnEnd() *http2.GoAwayFrame {
	r.t.Helper()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			return ga
		}
	}
}

// headerEcho answers with the request headers it saw, one "Name: value"
// line each, sorted; it sets a lowercase response header, hop-by-hop
// ones that must not reach an HTTP/2 client, and a cookie.
func headerEcho(t *testing.T) *httptest.Server {
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lines []string
		for k, vs := range r.Header {
			lines = append(lines, k+": "+strings.Join(vs, ","))
		}
		lines = append(lines, "Host: "+r.Host, "Method: "+r.Method, "URI: "+r.RequestURI)
		sort.Strings(lines)
		w.Header()["x-raw"] = []string{"1"}
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "drop me")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Add("Set-Cookie", "s=1")
		_, _ = io.WriteString(w, strings.Join(lines, "\n"))
	}))
	t.Cleanup(b.Close)
	return b
}

// R62 (HTTP/2): a GET (the fast path) and a POST (ServeHTTP) reach the
// backend as HTTP/1.1 with the same forwarded headers: X-Forwarded-For
// the client (a spoofed one replaced), X-Forwarded-Proto https,
// Forwarded proto=https, an X-Request-Id, cookie fields joined with "; ",
// client-claimed address headers dropped; the answer reaches the client
// without its hop-by-hop fields.
func TestR62_H2ForwardedHeadersSameOnBothPaths(t *testing.T) {
	e, _ := tlsH1Edge(t, "fwd2.test", headerEcho(t))
	seen := map[string]string{}
	for i, method := range []string{"GET", "POST"} {
		r := dialRawH2(t, e, "fwd2.test")
		id := uint32(1)
		kv := []string{"cookie", "a=1", "cookie", "b=2", "x-forwarded-for", "6.6.6.6", "x-real-ip", "6.6.6.6", "user-agent", "raw", "te", "trailers"}
		r.request(id, method == "GET", method, "/p?q="+strconv.Itoa(i), "fwd2.test", kv...)
		if method == "POST" {
			require.NoError(t, r.fr.WriteData(id, true, []byte("x")))
		}
		a := r.readAnswer(id)
		require.Equal(t, "200", a.status, a.body.String())
		assert.Equal(t, []string{"1"}, a.header["x-raw"])
		assert.Equal(t, []string{"s=1"}, a.header["set-cookie"])
		for _, hop := range []string{"connection", "x-hop", "keep-alive"} {
			assert.NotContains(t, a.header, hop, "%s: hop-by-hop field relayed", method)
		}
		got := a.body.String()
		assert.Contains(t, got, "Cookie: a=1; b=2", method)
		assert.Contains(t, got, "X-Forwarded-For: 127.0.0.1\n", method)
		assert.Contains(t, got, "X-Forwarded-Proto: https", method)
		assert.Contains(t, got, `Forwarded: for=127.0.0.1;host="fwd2.test";proto=https`, method)
		assert.Contains(t, got, "X-Request-Id: ", method)
		assert.Contains(t, got, "Host: fwd2.test", method)
		assert.Contains(t, got, "URI: /p?q="+strconv.Itoa(i), method)
		assert.Contains(t, got, "User-Agent: raw", method)
		assert.NotContains(t, got, "X-Real-Ip", method)
		assert.NotContains(t, got, "6.6.6.6", method)
		seen[method] = got
	}
	// Apart from the method, the URI, the body's length and the request
	// id, both paths sent the same header set.
	norm := func(s string) []string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			switch {
			case strings.HasPrefix(l, "Method:"), strings.HasPrefix(l, "URI:"), strings.HasPrefix(l, "Content-Length:"),
				strings.HasPrefix(l, "X-Request-Id:"), strings.HasPrefix(l, "Accept-Encoding:"):
				continue
			}
			keep = append(keep, l)
		}
		return keep
	}
	assert.Equal(t, norm(seen["GET"]), norm(seen["POST"]))
	metrics := adminGet(t, e, "/metrics")
	assert.Regexp(t, `gordon_edge_http_requests_by_protocol_total\{proto="HTTP/2.0",scheme="https"\} ([2-9]|\d{2,})`, metrics, "both paths count HTTP/2 requests")
}

// R62 (HTTP/2): a chunked answer streams (an event reaches the client
// before the backend writes the next) and its trailers arrive as HTTP/2
// trailers; a HEAD keeps its Content-Length and has no body; a 204 has
// neither; a body delimited by the backend closing arrives whole.
func TestR62_H2BodyFramingsRelayed(t *testing.T) {
	next := make(chan struct{}, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sse":
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Trailer", "X-Sum")
			_, _ = io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(5 * time.Second):
			}
			_, _ = io.WriteString(w, "data: two\n\n")
			w.Header().Set("X-Sum", "2")
		case "/sized":
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "sized")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + strings.Repeat("c", 70000))
			_ = brw.Flush()
			conn.Close()
		}
	}))
	t.Cleanup(b.Close)
	e, ca := tlsH1Edge(t, "frame2.test", b)
	cl := httpsClient(e, ca.pool, true)

	// GET takes the fast path, POST ServeHTTP: both stream and relay the
	// trailer.
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, "https://frame2.test/sse", strings.NewReader("x"))
		if method == "GET" {
			req.Body = nil
		}
		resp, err := cl.Do(req)
		require.NoError(t, err)
		require.Equal(t, 2, resp.ProtoMajor)
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "data: one\n", line, "%s: the first event arrives before the backend writes the second", method)
		next <- struct{}{}
		rest, err := io.ReadAll(br)
		require.NoError(t, err)
		assert.Equal(t, "\ndata: two\n\n", string(rest))
		assert.Equal(t, "2", resp.Trailer.Get("X-Sum"), "%s: the chunked trailer arrives as an HTTP/2 trailer", method)
		resp.Body.Close()
	}

	req, _ := http.NewRequest(http.MethodHead, "https://frame2.test/sized", nil)
	resp, err := cl.Do(req)
	require.NoError(t, err)
	assert.Equal(t, int64(5), resp.ContentLength)
	got, _ := readAll(resp)
	assert.Empty(t, got)

	resp, err = cl.Get("https://frame2.test/204")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	got, _ = readAll(resp)
	assert.Empty(t, got)

	resp, err = cl.Get("https://frame2.test/close")
	require.NoError(t, err)
	got, err = readAll(resp)
	require.NoError(t, err)
	assert.Equal(t, 70000, len(got), "a close-delimited body arrives whole")
}

// R62 (HTTP/2 flow control): the edge never sends a stream more DATA
// than the client's window allows, and sends the rest once the client
// widens it.
func TestR62_H2ResponseStaysWithinTheClientWindow(t *testing.T) {
	big := strings.Repeat("w", 100_000)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, big)
	}))
	t.Cleanup(b.Close)
	e, _ := tlsH1Edge(t, "win2.test", b)
	r := dialRawH2(t, e, "win2.test", http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	r.request(1, true, "GET", "/", "win2.test")
	got := 0
	deadline := time.Now().Add(500 * time.Millisecond)
	require.NoError(t, r.c.SetReadDeadline(deadline))
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			break // the window is used up: nothing more comes
		}
		if d, ok := f.(*http2.DataFrame); ok {
			got += len(d.Data())
			require.False(t, d.StreamEnded(), "the whole body came within a 1000-byte window")
		}
	}
	assert.Equal(t, 1000, got, "exactly the stream window was sent")
	require.NoError(t, r.c.SetDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, r.fr.WriteWindowUpdate(0, 1<<20))
	require.NoError(t, r.fr.WriteWindowUpdate(1, 1<<20))
	a := r.readAnswer(1)
	assert.True(t, a.ended)
	assert.Equal(t, len(big), got+a.body.Len(), "the rest came once the window was widened")
}

// R62 (HTTP/2): a request body larger than the edge's windows (1 MiB per
// stream and per connection) reaches the backend whole: the edge widens
// them as the backend reads.
func TestR62_H2LargeRequestBodyReachesTheBackendWhole(t *testing.T) {
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		fmt.Fprintf(w, "%d %s", n, hex.EncodeToString(h.Sum(nil)))
	}))
	t.Cleanup(b.Close)
	e, ca := tlsH1Edge(t, "body2.test", b)
	payload := bytes.Repeat([]byte("0123456789"), 350_000) // 3.5 MB
	sum := sha256.Sum256(payload)
	cl := httpsClient(e, ca.pool, true)
	resp, err := cl.Post("https://body2.test/up", "application/octet-stream", bytes.NewReader(payload))
	require.NoError(t, err)
	require.Equal(t, 2, resp.ProtoMajor)
	got, err := readAll(resp)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d %s", len(payload), hex.EncodeToString(sum[:])), got)
}

// R62 (HTTP/2 errors, RFC 9113 §8.2): a malformed request resets its own
// stream with PROTOCOL_ERROR and the connection serves the next one; a
// head over the bound is 431; DATA on a stream never opened and a
// connection window overflow are connection errors (GOAWAY).
func TestR62_H2MalformedRequestsResetTheirStreamOnly(t *testing.T) {
	e, _ := tlsH1Edge(t, "bad2.test", headerEcho(t))
	r := dialRawH2(t, e, "bad2.test")
	r.request(1, true, "GET", "/", "bad2.test", "connection", "keep-alive")
	a := r.readAnswer(1)
	assert.True(t, a.wasReset, "a connection-specific field resets the stream")
	assert.Equal(t, http2.ErrCodeProtocol, a.reset)
	r.request(3, true, "GET", "/", "bad2.test", "Upper-Case", "1")
	a = r.readAnswer(3)
	assert.True(t, a.wasReset, "an upper-case field name resets the stream")
	r.request(5, true, "GET", "/", "bad2.test", "te", "gzip")
	a = r.readAnswer(5)
	assert.True(t, a.wasReset, "te other than trailers resets the stream")
	var big []string
	for i := range 10 {
		big = append(big, fmt.Sprintf("x-big-%d", i), strings.Repeat("b", 7<<10))
	}
	r.request(7, true, "GET", "/", "bad2.test", big...)
	a = r.readAnswer(7)
	assert.Equal(t, "431", a.status, "a head over the bound")
	r.request(9, true, "GET", "/ok", "bad2.test")
	a = r.readAnswer(9)
	assert.Equal(t, "200", a.status, "the connection still serves")

	require.NoError(t, r.fr.WriteData(99, true, []byte("x")))
	ga := r.readConnEnd()
	require.NotNil(t, ga, "DATA on an idle stream ends the connection with GOAWAY")
	assert.Equal(t, http2.ErrCodeProtocol, ga.ErrCode)
	assert.Equal(t, uint32(9), ga.LastStreamID)

	r2 := dialRawH2(t, e, "bad2.test")
	require.NoError(t, r2.fr.WriteWindowUpdate(0, 1<<31-1))
	ga = r2.readConnEnd()
	require.NotNil(t, ga)
	assert.Equal(t, http2.ErrCodeFlowControl, ga.ErrCode, "a send window over 2^31-1")
}

// R62 (HTTP/2 limits): streams beyond SETTINGS_MAX_CONCURRENT_STREAMS are
// refused; streams the client resets end on the backend too (their
// requests leave the in-flight count), and the connection goes on serving.
func TestR62_H2StreamLimitAndClientResets(t *testing.T) {
	var started, canceled atomic.Int64
	release := make(chan struct{})
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		started.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			canceled.Add(1)
		}
	}))
	t.Cleanup(b.Close)
	t.Cleanup(func() { close(release) })
	e, _ := tlsH1Edge(t, "lim2.test", b)
	r := dialRawH2(t, e, "lim2.test")
	for i := range 140 {
		r.request(uint32(2*i+1), true, "GET", "/slow", "lim2.test")
	}
	refused := 0
	require.NoError(t, r.c.SetReadDeadline(time.Now().Add(5*time.Second)))
	for refused < 10 {
		f, err := r.fr.ReadFrame()
		require.NoError(t, err)
		if rs, ok := f.(*http2.RSTStreamFrame); ok {
			assert.Equal(t, http2.ErrCodeRefusedStream, rs.ErrCode)
			assert.Greater(t, rs.StreamID, uint32(2*128-1), "a stream within the limit was refused")
			refused++
		}
	}
	require.Eventually(t, func() bool { return started.Load() == 128 }, 10*time.Second, 10*time.Millisecond)
	for i := range 128 {
		require.NoError(t, r.fr.WriteRSTStream(uint32(2*i+1), http2.ErrCodeCancel))
	}
	require.Eventually(t, func() bool { return canceled.Load() == 128 }, 10*time.Second, 10*time.Millisecond,
		"reset streams end on the backend (%d of 128)", canceled.Load())
	require.Eventually(t, func() bool {
		for _, bs := range e.srv.Status().Backends {
			if bs.Addr == addrOf(b) && bs.InFlight != 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "reset streams leave the in-flight count")
	require.NoError(t, r.c.SetDeadline(time.Now().Add(10*time.Second)))
	r.request(301, true, "GET", "/ok", "lim2.test")
	a := r.readAnswer(301)
	assert.Equal(t, "200", a.status)
	assert.Equal(t, "ok", a.body.String())
}

// R62 + R60 (HTTP/2 drain): an edge that stops sends GOAWAY (first with
// the last stream id 2^31-1, then with the last stream it took), answers
// the streams it took, and only then closes the connection and exits.
func TestR62_H2DrainAnswersTakenStreamsThenCloses(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		started <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "slow")
	}))
	t.Cleanup(b.Close)
	e, _ := tlsH1Edge(t, "drain2.test", b)
	r := dialRawH2(t, e, "drain2.test")
	r.request(1, true, "GET", "/slow", "drain2.test")
	<-started
	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	var goaways []*http2.GoAwayFrame
	for len(goaways) < 2 {
		f, err := r.fr.ReadFrame()
		require.NoError(t, err)
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			assert.Equal(t, http2.ErrCodeNo, ga.ErrCode)
			goaways = append(goaways, ga)
		}
	}
	assert.Equal(t, uint32(1<<31-1), goaways[0].LastStreamID)
	assert.Equal(t, uint32(1), goaways[1].LastStreamID)
	select {
	case <-stopped:
		t.Fatal("the edge stopped with a stream in flight")
	default:
	}
	close(release)
	a := r.readAnswer(1)
	assert.Equal(t, "200", a.status)
	assert.Equal(t, "slow", a.body.String())
	_, err := r.fr.ReadFrame()
	assert.Error(t, err, "the connection closes once its streams are done")
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the edge did not stop after its last stream")
	}
}

// R62 (HTTP/2): PING is answered with its payload.
func TestR62_H2PingIsAnswered(t *testing.T) {
	e, _ := tlsH1Edge(t, "idle2.test", headerEcho(t))
	r := dialRawH2(t, e, "idle2.test")
	require.NoError(t, r.fr.WritePing(false, [8]byte{1, 2, 3}))
	for {
		f, err := r.fr.ReadFrame()
		require.NoError(t, err)
		if p, ok := f.(*http2.PingFrame); ok {
			assert.True(t, p.IsAck())
			assert.Equal(t, [8]byte{1, 2, 3}, p.Data)
			return
		}
	}
}

// R62 (HTTP/2 abuse): control answers piling up unread past 1 MiB end
// the connection. The client floods PINGs and reads nothing until the
// flood is written or the edge has ended the connection: the answers it
// leaves unread pile up however fast or slow the edge reads the flood,
// so the edge must end the connection (GOAWAY ENHANCE_YOUR_CALM, then a
// close) rather than stop reading or take the whole flood.
func TestR62_H2PingFloodWithoutReadingEndsTheConnection(t *testing.T) {
	e, _ := tlsH1Edge(t, "flood2.test", headerEcho(t))
	// A small receive window: the acks the client leaves unread fill the
	// edge's socket after a few hundred KB, whatever the loopback's
	// autotuning would have allowed.
	r := dialRawH2Buf(t, e, "flood2.test", 16<<10)
	// Only a bound on a hung test, far above what a slow edge needs.
	require.NoError(t, r.c.SetDeadline(time.Now().Add(90*time.Second)))
	// Far more acks (34 MB) than the socket buffers and the output bound
	// hold together.
	const pings = 2_000_000
	bw := bufio.NewWriterSize(r.c, 64<<10)
	wfr := http2.NewFramer(bw, nil)
	sent, werr := 0, error(nil)
	for ; sent < pings && werr == nil; sent++ {
		werr = wfr.WritePing(false, [8]byte{byte(sent)})
	}
	if werr == nil {
		werr = bw.Flush()
	}
	var ne net.Error
	require.False(t, errors.As(werr, &ne) && ne.Timeout(), "the edge stopped taking the flood without ending the connection (%d pings sent): %v", sent, werr)
	acks, calm := 0, false
	var end error
	for end == nil {
		var f http2.Frame
		f, end = r.fr.ReadFrame()
		switch f := f.(type) {
		case *http2.PingFrame:
			acks++
		case *http2.GoAwayFrame:
			calm = f.ErrCode == http2.ErrCodeEnhanceYourCalm
		}
	}
	// The edge ends the connection: GOAWAY ENHANCE_YOUR_CALM when the
	// client gets to read it, else a reset (the edge closes with the
	// flood unread in its socket, which discards what the client had not
	// read yet). Never the test's own deadline, never every ping acked.
	assert.False(t, errors.As(end, &ne) && ne.Timeout(), "the edge ended the connection (read ended by %v, after %d acks)", end, acks)
	assert.Less(t, acks, pings, "the flood was cut short (GOAWAY ENHANCE_YOUR_CALM seen: %v)", calm)
}
