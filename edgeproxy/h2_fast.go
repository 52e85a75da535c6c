package edgeproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/edgetls"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// The HTTP/2 fast path: a GET or HEAD without a body, for a host the h1
// loop would serve over TLS (pickTLS), from a peer that is not a trusted
// proxy, is written straight onto a pooled backend connection as
// HTTP/1.1 (writeOutgoing's rules: hop-by-hop fields dropped, the
// forwarded headers replaced, an X-Request-Id added) and the response is
// relayed as HEADERS and DATA frames as it comes (parseResponse's
// framing; chunked bodies chunk by chunk, their trailers as trailers), a
// frame queued whenever the backend has nothing more buffered, so
// server-sent events pass as sent. No http.Request, no ReverseProxy.
// Everything else takes Server.ServeHTTP (h2_stream.go).

// h2FastCandidate reports whether f may take the fast path (before the
// route is known); method, path and authority are its pseudo-headers.
func (st *h2Stream) h2FastCandidate(f *http2.MetaHeadersFrame) (method, path, authority string, ok bool) {
	if !f.StreamEnded() || f.Truncated || st.oversized || st.c.trusted {
		return "", "", "", false
	}
	method = f.PseudoValue("method")
	if method != http.MethodGet && method != http.MethodHead {
		return "", "", "", false
	}
	path, authority = f.PseudoValue("path"), f.PseudoValue("authority")
	if f.PseudoValue("scheme") == "" || !validOriginPath(path) || !validAuthority(authority) {
		return "", "", "", false
	}
	for _, hf := range f.RegularFields() {
		switch {
		case h2ConnHeaders[hf.Name], hf.Name == "te" && hf.Value != "trailers",
			hf.Name == "host", hf.Name == "expect", hf.Name == "content-length":
			return "", "", "", false
		}
	}
	return method, path, authority, true
}

// validOriginPath accepts an origin-form request target with no byte a
// request line cannot carry.
func validOriginPath(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// validAuthority accepts a host[:port] of the characters host names and
// IP literals use.
func validAuthority(a string) bool {
	if a == "" {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '-', c == ':', c == '[', c == ']', c == '_':
		default:
			return false
		}
	}
	return true
}

// serveFast serves f on the fast path when it qualifies and its host is
// served there; false leaves it to ServeHTTP.
func (st *h2Stream) serveFast(f *http2.MetaHeadersFrame) bool {
	method, path, authority, ok := st.h2FastCandidate(f)
	if !ok {
		return false
	}
	rt, i, b := st.c.pickFast(authority)
	if rt == nil {
		return false
	}
	st.hsts = rt.hsts
	ex := h1Exchange{rt: rt, i: i, b: b, start: time.Now(),
		acc: exchangeAccess{st: st, method: method, path: path, authority: authority}}
	st.bodyOut = 0
	code, proxyErr := st.exchangeFast(&ex, method, path, authority, f.RegularFields())
	ex.acc.bytesOut = st.bodyOut
	doneH1(&ex, code, proxyErr)
	return true
}

// isReset reports whether the stream was reset (by the client, or with
// its connection).
func (st *h2Stream) isReset() bool {
	st.c.wmu.Lock()
	defer st.c.wmu.Unlock()
	return st.reset
}

// h2Route is a connection's last fast-path routing decision: the route
// (nil: not served on the fast path) of auth on snap with the
// certificates of have.
type h2Route struct {
	auth string
	snap *snapshot
	have *edgetls.Served
	rt   *httpRoute
}

// pickFast is pickTLS for an HTTP/2 request to authority, the routing
// decision cached per connection while the snapshot and the certificates
// served stay the same (a connection's streams nearly always name one
// host).
func (c *h2Conn) pickFast(authority string) (rt *httpRoute, i int, b *backend) {
	s := c.s
	for {
		snap := s.snap.Load()
		if snap == nil {
			return nil, 0, nil
		}
		have := s.tls.certs.Served()
		if rc := c.route.Load(); rc != nil && rc.snap == snap && rc.have == have && rc.auth == authority {
			rt = rc.rt
		} else {
			rt = s.tlsRoute(snap, []byte(authority))
			c.route.Store(&h2Route{auth: authority, snap: snap, have: have, rt: rt})
		}
		if rt == nil {
			return nil, 0, nil
		}
		if i, b, ok := s.countTLS(snap, rt, protoH2); ok {
			return rt, i, b
		}
	}
}

// exchangeFast sends the request to ex.b and relays the answer; it returns
// the status relayed (or of the error page) and the error class for the
// metrics. A kept-alive connection the backend had closed is retried once
// on a new one, as exchangeH1 does.
func (st *h2Stream) exchangeFast(ex *h1Exchange, method, path, authority string, fields []hpack.HeaderField) (code, proxyErr int) {
	rt, b := ex.rt, ex.b
	t := b.transport
	head := method == http.MethodHead
	for attempt := 0; ; attempt++ {
		if st.isReset() {
			return statusClientClosed, 0 // reset before it was sent
		}
		fc, reused, err := t.get(st.c.ctx, rt.timeouts.dial, attempt == 0)
		if err != nil {
			if st.c.s.failover(ex, err, true) {
				b, t, attempt = ex.b, ex.b.transport, -1
				continue
			}
			return st.fastError(rt, b, err, head)
		}
		st.c.writeUpstreamHead(fc.bw, method, path, authority, fields, &ex.acc.genID)
		err = fc.bw.Flush()
		sc := st.scratch
		resp := &sc.resp
		resp.Started = false
		w := upstreamWatch{gone: st.isReset}
		if err == nil {
			w.armUpstream(fc, rt.timeouts.responseHeader)
			err = readResponse(fc, resp, head, sc.head[:0], w.upstreamWait)
			sc.head = resp.Head[:0]
		}
		if err != nil {
			_ = fc.c.Close()
			if errors.Is(err, errClientGone) {
				return statusClientClosed, 0
			}
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			if reused && attempt == 0 && !timedOut && !resp.Started {
				continue
			}
			if !resp.Started && st.c.s.failover(ex, err, false) {
				b, t, attempt = ex.b, ex.b.transport, -1
				continue
			}
			return st.fastError(rt, b, err, head)
		}
		w.headDone()
		if body, ok := st.smallBody(fc, resp); ok {
			// The whole answer is here: the backend connection goes back
			// before the client's window is waited for.
			releaseFast(t, fc, true, resp)
			if !st.writeSmall(resp, body) {
				st.c.wmu.Lock()
				st.resetLocked(http2.ErrCodeInternal, true)
				st.c.wmu.Unlock()
			}
			return resp.Code, 0
		}
		st.c.wmu.Lock()
		st.holdsBackend = true
		st.c.wmu.Unlock()
		clientOK, upstreamOK := st.relayFast(fc, resp, w.upstreamWait)
		if !clientOK {
			st.c.wmu.Lock()
			st.resetLocked(http2.ErrCodeInternal, true)
			st.c.wmu.Unlock()
		}
		releaseFast(t, fc, upstreamOK, resp)
		return resp.Code, 0
	}
}

// releaseFast puts fc back in t's pool, or closes it when it cannot be
// reused (upstreamOK false, or the backend said close).
func releaseFast(t *fastTransport, fc *fastConn, upstreamOK bool, resp *h1wire.Response) {
	if upstreamOK && !resp.Close {
		t.put(fc)
	} else {
		_ = fc.c.Close()
	}
}

// smallBody takes resp's body off fc when it is sized, at most a frame
// and already read whole (into the worker's scratch buffer); ok is false
// otherwise (nothing taken).
func (st *h2Stream) smallBody(fc *fastConn, resp *h1wire.Response) (body []byte, ok bool) {
	if resp.NoBody || resp.Chunked || resp.UntilClose || resp.Length > h2MaxFrameSize || int64(fc.br.Buffered()) < resp.Length {
		return nil, false
	}
	b, _ := fc.br.Peek(int(resp.Length))
	sc := st.scratch
	sc.body = append(sc.body[:0], b...)
	_, _ = fc.br.Discard(len(b))
	return sc.body, true
}

// writeSmall queues resp's head and its whole body: HEADERS and DATA with
// END_STREAM, together.
func (st *h2Stream) writeSmall(resp *h1wire.Response, body []byte) bool {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := st.writeRespHeadLocked(resp, len(body) == 0)
	if err == nil && len(body) > 0 {
		err = st.writeDataLocked(body, true)
	}
	c.kickLocked()
	return err == nil
}

// writeUpstreamHead writes the HTTP/1.1 request head of an HTTP/2 request
// (writeOutgoing's rules for an untrusted peer; cookie fields joined, RFC
// 9113 §8.2.3).
func (c *h2Conn) writeUpstreamHead(bw *bufio.Writer, method, path, authority string, fields []hpack.HeaderField, id *h1wire.RequestIDBuf) {
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(authority)
	bw.WriteString("\r\n")
	requestID, cookies := false, false
	for _, hf := range fields {
		name := []byte(hf.Name)
		kind := h1wire.HeaderKind(name)
		if kind == h1wire.HdrOther && h1wire.UnderscoreAlias(name) {
			continue
		}
		switch kind {
		case h1wire.HdrHop, h1wire.HdrConnection, h1wire.HdrForwarded, h1wire.HdrTrailer, h1wire.HdrClientClaim, h1wire.HdrUpgrade:
			continue
		case h1wire.HdrTE:
			bw.WriteString("Te: trailers\r\n")
			continue
		case h1wire.HdrRequestID:
			requestID = true
			id.Given = hf.Value
		}
		if hf.Name == "cookie" {
			// Every cookie field, adjacent or not, joins the first one's
			// line (RFC 9113 §8.2.3).
			if !cookies {
				cookies = true
				writeCookieLine(bw, fields)
			}
			continue
		}
		writeHeader(bw, hf.Name, hf.Value)
	}
	writeHeader(bw, "X-Forwarded-For", c.peer)
	fwd := c.fwd.Load()
	if fwd == nil || fwd.host != authority {
		fwd = &h2Forwarded{host: authority, elem: forwardedElement(c.peerIP, c.peer, authority, "https")}
		c.fwd.Store(fwd)
	}
	writeHeader(bw, "Forwarded", fwd.elem)
	bw.WriteString("X-Forwarded-Proto: https\r\nX-Forwarded-Host: ")
	bw.WriteString(authority)
	bw.WriteString("\r\n")
	if !requestID {
		writeRequestID(bw, id)
	}
	bw.WriteString("\r\n")
}

// writeCookieLine writes one Cookie line of the values of every cookie
// field of fields, joined with "; ".
func writeCookieLine(bw *bufio.Writer, fields []hpack.HeaderField) {
	bw.WriteString("Cookie: ")
	sep := false
	for _, hf := range fields {
		if hf.Name != "cookie" {
			continue
		}
		if sep {
			bw.WriteString("; ")
		}
		sep = true
		bw.WriteString(hf.Value)
	}
	bw.WriteString("\r\n")
}

// relayFast relays resp and its body from fc as frames. clientOK is false
// when the answer could not be relayed whole (the stream is then reset);
// upstreamOK is false when fc cannot be reused.
func (st *h2Stream) relayFast(fc *fastConn, resp *h1wire.Response, wait func(error) error) (clientOK, upstreamOK bool) {
	c := st.c
	switch {
	case resp.NoBody:
		c.wmu.Lock()
		_ = st.writeRespHeadLocked(resp, true)
		c.kickLocked()
		c.wmu.Unlock()
		return true, true
	}
	c.wmu.Lock()
	err := st.writeRespHeadLocked(resp, false)
	c.kickLocked()
	c.wmu.Unlock()
	if err != nil {
		return false, false
	}
	switch {
	case resp.Chunked:
		return st.relayChunkedFast(fc, wait)
	case resp.UntilClose:
		return st.relayBodyFast(fc, -1, wait), false
	default:
		ok := st.relayBodyFast(fc, resp.Length, wait)
		return ok, ok
	}
}

// relayBodyFast relays n body bytes (n < 0: until the backend closes) as
// DATA frames, the last with END_STREAM.
func (st *h2Stream) relayBodyFast(fc *fastConn, n int64, wait func(error) error) bool {
	c := st.c
	for n != 0 {
		if _, err := fc.br.Peek(1); err != nil {
			if n < 0 && errors.Is(err, io.EOF) {
				return st.endStream(nil)
			}
			if wait(err) != nil {
				return false
			}
			continue
		}
		avail := fc.br.Buffered()
		m := min(avail, h2MaxFrameSize)
		if n > 0 {
			m = int(min(int64(m), n))
		}
		b, _ := fc.br.Peek(m)
		last := n > 0 && int64(m) == n
		c.wmu.Lock()
		err := st.writeDataLocked(b, last)
		if last || avail == m {
			c.kickLocked()
		}
		c.wmu.Unlock()
		_, _ = fc.br.Discard(m)
		if err != nil {
			return false
		}
		if n > 0 {
			n -= int64(m)
		}
	}
	return true
}

// relayChunkedFast relays a chunked body as DATA frames and its trailer
// section, of at most h1MaxResponseHead bytes, as trailers (relayChunked's
// checks).
func (st *h2Stream) relayChunkedFast(fc *fastConn, wait func(error) error) (clientOK, upstreamOK bool) {
	for {
		_, n, ok := readChunkSize(fc, wait)
		if !ok {
			return false, false
		}
		if n == 0 {
			// The trailer section is gathered for one HEADERS block:
			// bounded as a response head is.
			var trailers []hpack.HeaderField
			for size := 0; ; {
				line, err := upstreamLine(fc, wait)
				if size += len(line) + 2; err != nil || size > h1MaxResponseHead || len(line) > 0 && !h1wire.ValidTrailer(line) {
					return false, false
				}
				if len(line) == 0 {
					return st.endStream(trailers), true
				}
				colon := bytes.IndexByte(line, ':')
				lk := string(bytes.ToLower(line[:colon]))
				if !h2ConnHeaders[lk] {
					trailers = append(trailers, hpack.HeaderField{Name: lk, Value: string(bytes.Trim(line[colon+1:], " \t"))})
				}
			}
		}
		if !st.relayBodyChunk(fc, n, wait) {
			return false, false
		}
		crlf, err := upstreamLine(fc, wait)
		if err != nil || len(crlf) != 0 {
			return false, false
		}
	}
}

// relayBodyChunk relays one chunk's n bytes as DATA frames.
func (st *h2Stream) relayBodyChunk(fc *fastConn, n int64, wait func(error) error) bool {
	c := st.c
	for n > 0 {
		if _, err := fc.br.Peek(1); err != nil {
			if wait(err) != nil {
				return false
			}
			continue
		}
		avail := fc.br.Buffered()
		m := int(min(int64(min(avail, h2MaxFrameSize)), n))
		b, _ := fc.br.Peek(m)
		c.wmu.Lock()
		err := st.writeDataLocked(b, false)
		if avail == m {
			c.kickLocked()
		}
		c.wmu.Unlock()
		_, _ = fc.br.Discard(m)
		if err != nil {
			return false
		}
		n -= int64(m)
	}
	return true
}

// endStream ends the answer: trailers with END_STREAM, or an empty DATA
// frame with it.
func (st *h2Stream) endStream(trailers []hpack.HeaderField) bool {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	if len(trailers) > 0 {
		err = st.writeFieldsLocked(0, trailers, true)
	} else {
		err = st.writeDataLocked(nil, true)
	}
	c.kickLocked()
	return err == nil
}

// writeRespHeadLocked queues resp's head as HEADERS (writeResponseHead's
// field rules; Content-Length kept for a sized body).
func (st *h2Stream) writeRespHeadLocked(resp *h1wire.Response, end bool) error {
	c := st.c
	// Room first: the wait lets other streams run, and they use
	// c.fieldBuf too.
	if err := st.waitRoomLocked(); err != nil {
		return err
	}
	fields := c.fieldBuf[:0]
	for _, h := range resp.Headers {
		k := h.Kind
		if k == h1wire.HdrHop || k == h1wire.HdrUpgrade || k == h1wire.HdrTE || k == h1wire.HdrTrailer && !resp.Chunked || resp.NamedByConnection(h.Name) ||
			st.hsts != "" && h1wire.IsHSTS(h.Name) {
			continue
		}
		fields = append(fields, hpack.HeaderField{Name: lowerName(c, h.Name), Value: string(h.Value)})
	}
	if st.hsts != "" {
		fields = append(fields, hpack.HeaderField{Name: "strict-transport-security", Value: st.hsts})
	}
	if resp.Length >= 0 && !resp.UntilClose && resp.Code != http.StatusNoContent {
		fields = append(fields, hpack.HeaderField{Name: "content-length", Value: strconv.FormatInt(resp.Length, 10)})
	}
	c.fieldBuf = fields[:0]
	return st.writeFieldsLocked(resp.Code, fields, end)
}

// writeFieldsLocked queues a HEADERS block of fields (with :status when
// code is not 0) and its CONTINUATIONs.
func (st *h2Stream) writeFieldsLocked(code int, fields []hpack.HeaderField, end bool) error {
	c := st.c
	if err := st.beginBlockLocked(code); err != nil {
		return err
	}
	for _, f := range fields {
		_ = c.henc.WriteField(f)
	}
	st.writeBlockLocked(end)
	return nil
}

// h2Forwarded is a connection's Forwarded element for one authority.
type h2Forwarded struct{ host, elem string }

// lowerName is name lower-cased as a string, interned per connection for
// the names it has seen (at most h2MaxInterned); under c.wmu. Both
// paths use it: the fast path with the backend's bytes, ServeHTTP's
// writer with canonical header keys.
func lowerName[T string | []byte](c *h2Conn, name T) string {
	var buf [64]byte
	if len(name) > len(buf) {
		return strings.ToLower(string(name))
	}
	lb := buf[:len(name)]
	for i := range len(name) {
		ch := name[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lb[i] = ch
	}
	if s, ok := c.names[string(lb)]; ok {
		return s
	}
	s := string(lb)
	if len(c.names) < h2MaxInterned {
		c.names[s] = s
	}
	return s
}

// h2MaxInterned bounds a connection's interned header names.
const h2MaxInterned = 256

// fastError queues the 502/503/504 page of a failed exchange
// (h1ProxyError's page).
func (st *h2Stream) fastError(rt *httpRoute, b *backend, err error, head bool) (int, int) {
	code, what := classifyProxyError(context.Background(), err)
	st.c.s.logger.Debug("proxy error", "backend", b.addr, "status", code, "error", err)
	body := proxyErrorBody(code, what, rt)
	fields := []hpack.HeaderField{
		{Name: "content-type", Value: "text/plain; charset=utf-8"},
		{Name: "x-content-type-options", Value: "nosniff"},
		{Name: "cache-control", Value: "no-store"},
		{Name: "content-length", Value: strconv.Itoa(len(body))},
	}
	c := st.c
	c.wmu.Lock()
	werr := st.writeFieldsLocked(code, fields, head)
	if werr == nil && !head {
		_ = st.writeDataLocked([]byte(body), true)
	}
	c.kickLocked()
	c.wmu.Unlock()
	return code, code
}
