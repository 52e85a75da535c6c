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
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/edgetls"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h2srv"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// The HTTP/2 fast path, the edge's side (h2srv.Handler.ServeFast): a GET
// or HEAD without a body, for a host the h1 loop would serve over TLS
// (pickTLS), from a peer that is not a trusted proxy, is written straight
// onto a pooled backend connection as HTTP/1.1 (WriteOutgoing's rules:
// hop-by-hop fields dropped, the forwarded headers replaced, an
// X-Request-Id added) and the response is relayed as HEADERS and DATA
// frames as it comes (parseResponse's framing; chunked bodies chunk by
// chunk, their trailers as trailers), a frame queued whenever the backend
// has nothing more buffered, so server-sent events pass as sent. No
// http.Request, no ReverseProxy. h2srv writes the frames.

// ServeFast serves a fast-path candidate when its host is served there;
// false leaves it to ServeHTTP.
func (e *h2Edge) ServeFast(st *h2srv.Stream, method, path, authority string, fields []hpack.HeaderField) bool {
	rt, i, b := e.pickFast(authority)
	if rt == nil {
		return false
	}
	st.SetHSTS(rt.HSTS)
	ex := dataplane.Exchange{Route: rt, Index: i, Backend: b, Start: time.Now(),
		Acc: dataplane.ExchangeAccess{H2: true, H2Peer: e.peer, Method: method, Path: path, Authority: authority}}
	code, proxyErr := e.exchangeFast(st, &ex, method, path, authority, fields)
	ex.Acc.BytesOut = st.BodyOut()
	dataplane.DoneH1(&ex, code, proxyErr)
	return true
}

// h2Route is a connection's last fast-path routing decision: the route
// (nil: not served on the fast path) of auth on snap with the
// certificates of have.
type h2Route struct {
	auth string
	snap *dataplane.Snapshot
	have *edgetls.Served
	rt   *dataplane.HTTPRoute
}

// pickFast is pickTLS for an HTTP/2 request to authority, the routing
// decision cached per connection while the snapshot and the certificates
// served stay the same (a connection's streams nearly always name one
// host).
func (e *h2Edge) pickFast(authority string) (rt *dataplane.HTTPRoute, i int, b *dataplane.Backend) {
	s := e.s
	for {
		snap := s.Snap.Load()
		if snap == nil {
			return nil, 0, nil
		}
		have := s.tls.certs.Served()
		if rc := e.route.Load(); rc != nil && rc.snap == snap && rc.have == have && rc.auth == authority {
			rt = rc.rt
		} else {
			rt = s.TLSRoute(snap, []byte(authority))
			e.route.Store(&h2Route{auth: authority, snap: snap, have: have, rt: rt})
		}
		if rt == nil {
			return nil, 0, nil
		}
		if i, b, ok := s.CountTLS(snap, rt, dataplane.ProtoH2); ok {
			return rt, i, b
		}
	}
}

// exchangeFast sends the request to ex.b and relays the answer; it returns
// the status relayed (or of the error page) and the error class for the
// metrics. A kept-alive connection the backend had closed is retried once
// on a new one, as exchangeH1 does.
func (e *h2Edge) exchangeFast(st *h2srv.Stream, ex *dataplane.Exchange, method, path, authority string, fields []hpack.HeaderField) (code, proxyErr int) {
	rt, b := ex.Route, ex.Backend
	t := b.Transport
	head := method == http.MethodHead
	for attempt := 0; ; attempt++ {
		if st.IsReset() {
			return dataplane.StatusClientClosed, 0 // reset before it was sent
		}
		fc, reused, err := t.Get(st.Context(), rt.Timeouts.Dial, attempt == 0)
		if err != nil {
			if e.s.Failover(ex, err, true) {
				b, t, attempt = ex.Backend, ex.Backend.Transport, -1
				continue
			}
			return e.fastError(st, rt, b, err, head)
		}
		e.writeUpstreamHead(fc.W, method, path, authority, fields, &ex.Acc.GenID)
		err = fc.W.Flush()
		sc := st.Scratch()
		resp := &sc.Resp
		resp.Started = false
		w := upstream.Watch{Gone: st.IsReset}
		if err == nil {
			w.Arm(fc, rt.Timeouts.ResponseHeader)
			err = upstream.ReadResponse(fc, resp, head, sc.Head[:0], w.Wait)
			sc.Head = resp.Head[:0]
		}
		if err != nil {
			_ = fc.C.Close()
			if errors.Is(err, upstream.ErrClientGone) {
				return dataplane.StatusClientClosed, 0
			}
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			if reused && attempt == 0 && !timedOut && !resp.Started {
				continue
			}
			if !resp.Started && e.s.Failover(ex, err, false) {
				b, t, attempt = ex.Backend, ex.Backend.Transport, -1
				continue
			}
			return e.fastError(st, rt, b, err, head)
		}
		w.HeadDone()
		if body, ok := smallBody(st, fc, resp); ok {
			// The whole answer is here: the backend connection goes back
			// before the client's window is waited for.
			releaseFast(t, fc, true, resp)
			if !st.WriteSmall(resp, body) {
				st.Reset()
			}
			return resp.Code, 0
		}
		st.HoldBackend()
		clientOK, upstreamOK := relayFast(st, fc, resp, w.Wait)
		if !clientOK {
			st.Reset()
		}
		releaseFast(t, fc, upstreamOK, resp)
		return resp.Code, 0
	}
}

// releaseFast puts fc back in t's pool, or closes it when it cannot be
// reused (upstreamOK false, or the backend said close).
func releaseFast(t *upstream.Transport, fc *upstream.Conn, upstreamOK bool, resp *h1wire.Response) {
	if upstreamOK && !resp.Close {
		t.Put(fc)
	} else {
		_ = fc.C.Close()
	}
}

// smallBody takes resp's body off fc when it is sized, at most a frame
// and already read whole (into the worker's scratch buffer); ok is false
// otherwise (nothing taken).
func smallBody(st *h2srv.Stream, fc *upstream.Conn, resp *h1wire.Response) (body []byte, ok bool) {
	if resp.NoBody || resp.Chunked || resp.UntilClose || resp.Length > h2srv.MaxFrameSize || int64(fc.R.Buffered()) < resp.Length {
		return nil, false
	}
	b, _ := fc.R.Peek(int(resp.Length))
	sc := st.Scratch()
	sc.Body = append(sc.Body[:0], b...)
	_, _ = fc.R.Discard(len(b))
	return sc.Body, true
}

// writeUpstreamHead writes the HTTP/1.1 request head of an HTTP/2 request
// (WriteOutgoing's rules for an untrusted peer; cookie fields joined, RFC
// 9113 §8.2.3).
func (e *h2Edge) writeUpstreamHead(bw *bufio.Writer, method, path, authority string, fields []hpack.HeaderField, id *h1wire.RequestIDBuf) {
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
		dataplane.WriteHeader(bw, hf.Name, hf.Value)
	}
	dataplane.WriteHeader(bw, "X-Forwarded-For", e.peer)
	fwd := e.fwd.Load()
	if fwd == nil || fwd.host != authority {
		fwd = &h2Forwarded{host: authority, elem: policy.ForwardedElement(e.peerIP, e.peer, authority, "https")}
		e.fwd.Store(fwd)
	}
	dataplane.WriteHeader(bw, "Forwarded", fwd.elem)
	bw.WriteString("X-Forwarded-Proto: https\r\nX-Forwarded-Host: ")
	bw.WriteString(authority)
	bw.WriteString("\r\n")
	if !requestID {
		dataplane.WriteRequestID(bw, id)
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
func relayFast(st *h2srv.Stream, fc *upstream.Conn, resp *h1wire.Response, wait func(error) error) (clientOK, upstreamOK bool) {
	switch {
	case resp.NoBody:
		_ = st.WriteHead(resp, true)
		return true, true
	}
	if err := st.WriteHead(resp, false); err != nil {
		return false, false
	}
	switch {
	case resp.Chunked:
		return relayChunkedFast(st, fc, wait)
	case resp.UntilClose:
		return relayBodyFast(st, fc, -1, wait), false
	default:
		ok := relayBodyFast(st, fc, resp.Length, wait)
		return ok, ok
	}
}

// relayBodyFast relays n body bytes (n < 0: until the backend closes) as
// DATA frames, the last with END_STREAM.
func relayBodyFast(st *h2srv.Stream, fc *upstream.Conn, n int64, wait func(error) error) bool {
	for n != 0 {
		if _, err := fc.R.Peek(1); err != nil {
			if n < 0 && errors.Is(err, io.EOF) {
				return st.End(nil)
			}
			if wait(err) != nil {
				return false
			}
			continue
		}
		avail := fc.R.Buffered()
		m := min(avail, h2srv.MaxFrameSize)
		if n > 0 {
			m = int(min(int64(m), n))
		}
		b, _ := fc.R.Peek(m)
		last := n > 0 && int64(m) == n
		err := st.WriteData(b, last, last || avail == m)
		_, _ = fc.R.Discard(m)
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
// section, of at most H1MaxResponseHead bytes, as trailers (relayChunked's
// checks).
func relayChunkedFast(st *h2srv.Stream, fc *upstream.Conn, wait func(error) error) (clientOK, upstreamOK bool) {
	for {
		_, n, ok := upstream.ReadChunkSize(fc, wait)
		if !ok {
			return false, false
		}
		if n == 0 {
			// The trailer section is gathered for one HEADERS block:
			// bounded as a response head is.
			var trailers []hpack.HeaderField
			for size := 0; ; {
				line, err := upstream.ReadLine(fc, wait)
				if size += len(line) + 2; err != nil || size > dataplane.H1MaxResponseHead || len(line) > 0 && !h1wire.ValidTrailer(line) {
					return false, false
				}
				if len(line) == 0 {
					return st.End(trailers), true
				}
				colon := bytes.IndexByte(line, ':')
				lk := string(bytes.ToLower(line[:colon]))
				if !h2srv.ConnectionSpecific(lk) {
					trailers = append(trailers, hpack.HeaderField{Name: lk, Value: string(bytes.Trim(line[colon+1:], " \t"))})
				}
			}
		}
		if !relayBodyChunk(st, fc, n, wait) {
			return false, false
		}
		crlf, err := upstream.ReadLine(fc, wait)
		if err != nil || len(crlf) != 0 {
			return false, false
		}
	}
}

// relayBodyChunk relays one chunk's n bytes as DATA frames.
func relayBodyChunk(st *h2srv.Stream, fc *upstream.Conn, n int64, wait func(error) error) bool {
	for n > 0 {
		if _, err := fc.R.Peek(1); err != nil {
			if wait(err) != nil {
				return false
			}
			continue
		}
		avail := fc.R.Buffered()
		m := int(min(int64(min(avail, h2srv.MaxFrameSize)), n))
		b, _ := fc.R.Peek(m)
		err := st.WriteData(b, false, avail == m)
		_, _ = fc.R.Discard(m)
		if err != nil {
			return false
		}
		n -= int64(m)
	}
	return true
}

// h2Forwarded is a connection's Forwarded element for one authority.
type h2Forwarded struct{ host, elem string }

// fastError queues the 502/503/504 page of a failed exchange
// (h1ProxyError's page).
func (e *h2Edge) fastError(st *h2srv.Stream, rt *dataplane.HTTPRoute, b *dataplane.Backend, err error, head bool) (int, int) {
	code, what := upstream.Classify(context.Background(), err)
	e.s.Logger.Debug("proxy error", "backend", b.Addr, "status", code, "error", err)
	body := dataplane.ProxyErrorBody(code, what, rt)
	fields := []hpack.HeaderField{
		{Name: "content-type", Value: "text/plain; charset=utf-8"},
		{Name: "x-content-type-options", Value: "nosniff"},
		{Name: "cache-control", Value: "no-store"},
		{Name: "content-length", Value: strconv.Itoa(len(body))},
	}
	st.WritePage(code, fields, []byte(body), head)
	return code, code
}
