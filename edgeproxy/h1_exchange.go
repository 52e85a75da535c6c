package edgeproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/upstream"
)

// routeH1 resolves a Host header on snap without allocating for the common
// case (an exact, lowercase host).
func (s *proxyCore) routeH1(snap *snapshot, host []byte) *httpRoute {
	h := host
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && h[0] != '[' {
		h = h[:i]
	}
	if len(h) > 0 && h[len(h)-1] != '.' && bytesLower(h) {
		if r, ok := snap.exact[string(h)]; ok {
			return r
		}
		if len(snap.wildcards) == 0 {
			return nil
		}
	}
	return s.route(snap, string(host))
}

func bytesLower(b []byte) bool {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// serveH1 proxies hc.req. served is false when the host has no route (the
// request then goes to net/http, which answers 404); keep reports whether
// the connection can serve another request.
func (s *proxyCore) serveH1(hc *h1Conn) (served, keep bool) {
	rt, i, b := s.pickFor(hc)
	if rt == nil {
		return false, false
	}
	return true, s.finishH1(hc, &h1Exchange{rt: rt, i: i, b: b, start: time.Now()})
}

// pickH1 picks the backend for a request to host and counts the request
// in flight on it and in its route's metrics (doneH1 undoes both); rt is
// nil when the host has no route.
func (s *proxyCore) pickH1(host []byte) (rt *httpRoute, i int, b *backend) {
	for {
		snap := s.snap.Load()
		if snap == nil {
			return nil, 0, nil
		}
		rt = s.routeH1(snap, host)
		if rt == nil || len(rt.backends) == 0 || rt.slowPlain.Load() || rt.guard != nil || rt.maint != nil {
			return nil, 0, nil // ServeHTTP answers (404, redirect, h2c, access rules, maintenance)
		}
		i = rt.pick()
		b = rt.backends[i]
		b.inFlight.Add(1)
		// As in ServeHTTP: counted while snap was still current, so a drain
		// that saw 0 after the next swap can never miss this request.
		if s.snap.Load() == snap {
			break
		}
		b.inFlight.Add(-1)
	}
	rt.metrics[i].inFlight.Inc()
	return rt, i, b
}

// finishH1 runs (or finishes) the exchange of hc.req picked as ex, answers
// the client and reports whether the connection can serve another request.
func (s *proxyCore) finishH1(hc *h1Conn, ex *h1Exchange) bool {
	var code, proxyErr int
	var keep bool
	ex.acc = exchangeAccess{hc: hc}
	hc.bodyMark = -1
	if ex.err != nil && s.failover(ex, ex.err, false) {
		ex.err = nil // an event loop's failure: retried on another instance
	}
	if ex.err != nil {
		code, proxyErr, keep = s.h1ProxyError(hc, ex.rt, ex.b, ex.err)
	} else {
		code, proxyErr, keep = s.exchangeH1(hc, ex)
	}
	if hc.bodyMark >= 0 {
		ex.acc.bytesOut = hc.sent + int64(hc.bw.Buffered()) - hc.bodyMark
	}
	// The backend exchange is over (its connection pooled or closed): the
	// request leaves the drain's count before the answer's last bytes are
	// flushed, so a client that has its whole answer never sees the
	// request still in flight (as with net/http, which counts down before
	// finishing the response).
	doneH1(ex, code, proxyErr)
	if !keep {
		_ = hc.bw.Flush() // an error page (h1ProxyError) is still buffered
		return false
	}
	return flushIdle(hc)
}

// doneH1 ends the count pickH1 began and records the request's status.
func doneH1(ex *h1Exchange, code, proxyErr int) {
	ex.b.inFlight.Add(-1)
	rm := ex.rt.metrics[ex.i]
	rm.observe(code, proxyErr, ex.start)
	rm.inFlight.Dec()
	if rm.access != nil {
		rm.access.logExchange(ex, rm, code)
	}
}

// exchangeH1 sends the request to b and relays the response; it returns
// the status relayed (or of the error page), the error class for the
// metrics and whether the client connection stays open.
func (s *proxyCore) exchangeH1(hc *h1Conn, ex *h1Exchange) (code, proxyErr int, keep bool) {
	rt, b := ex.rt, ex.b
	t := b.transport
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		var fc *upstream.Conn
		var reused bool
		var err error
		rh := rt.timeouts.ResponseHeader
		if ex.sent != nil {
			// Written by an event loop, which read what is replayed.
			fc, reused, ex.sent = ex.sent, ex.reused, nil
			if rh > 0 {
				rh = max(ex.rhLeft, time.Millisecond)
			}
		} else {
			if fc, reused, err = t.Get(ctx, rt.timeouts.Dial, attempt == 0); err != nil {
				if s.failover(ex, err, true) {
					b, t, attempt = ex.b, ex.b.transport, -1
					continue
				}
				return s.h1ProxyError(hc, rt, b, err)
			}
			hc.writeOutgoing(fc.W)
			err = fc.W.Flush()
		}
		resp := &hc.resp
		resp.Started = false
		if err == nil {
			hc.Arm(fc, rh)
			err = upstream.ReadResponse(fc, resp, hc.req.Head, hc.rhead, hc.wait)
			hc.rhead = resp.Head[:0]
		}
		if err != nil {
			_ = fc.C.Close()
			if errors.Is(err, upstream.ErrClientGone) {
				// Nobody to answer; the backend sees its request canceled.
				return statusClientClosed, 0, false
			}
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			if reused && attempt == 0 && !timedOut && !resp.Started {
				continue // a kept-alive connection the backend had closed
			}
			if !resp.Started && s.failover(ex, err, false) {
				b, t, attempt = ex.b, ex.b.transport, -1
				continue
			}
			return s.h1ProxyError(hc, rt, b, err)
		}
		hc.HeadDone()
		keep = !hc.req.Close && !s.cs.shutting.Load()
		hsts := ""
		if hc.isTLS() {
			hsts = rt.hsts
		}
		ok, upstreamOK := relayResponse(hc, fc, resp, keep, s.reg.bufferPool, hsts)
		if upstreamOK && !resp.Close {
			t.Put(fc)
		} else {
			_ = fc.C.Close()
		}
		return resp.Code, 0, keep && ok
	}
}

// h1ProxyError writes the 502/503/504 page for a failed exchange.
func (s *proxyCore) h1ProxyError(hc *h1Conn, rt *httpRoute, b *backend, err error) (int, int, bool) {
	code, what := upstream.Classify(context.Background(), err)
	s.logger.Debug("proxy error", "backend", b.addr, "host", string(hc.req.Host), "status", code, "error", err)
	body := proxyErrorBody(code, what, rt)
	keep := !hc.req.Close && !s.cs.shutting.Load()
	bw := hc.bw
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(code))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(code))
	bw.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nContent-Length: ")
	bw.WriteString(strconv.Itoa(len(body)))
	if !keep {
		bw.WriteString("\r\nConnection: close")
	}
	bw.WriteString("\r\n\r\n")
	hc.markBody()
	if !hc.req.Head {
		bw.WriteString(body)
	}
	// Left buffered: finishH1 flushes it after the request has left the
	// drain's count, so a client holding its 5xx never sees it in flight.
	return code, code, keep
}

// writeOutgoing writes the proxied request head: hop-by-hop headers and
// the ones Connection names dropped, Te: trailers kept, the forwarded
// headers replaced (or extended for a trusted peer, policy.ForwardedFor) and an
// X-Request-Id added when absent.
func (hc *h1Conn) writeOutgoing(bw *bufio.Writer) {
	req := &hc.req
	bw.Write(req.Method)
	bw.WriteByte(' ')
	bw.Write(req.URI)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.Write(req.Host)
	bw.WriteString("\r\n")
	for _, h := range req.Headers {
		switch h.Kind {
		case h1wire.HdrHop, h1wire.HdrConnection, h1wire.HdrForwarded, h1wire.HdrTrailer, h1wire.HdrUnderscore:
			continue
		case h1wire.HdrClientClaim:
			if !hc.trusted {
				continue
			}
		case h1wire.HdrTE:
			if req.TETrailer {
				bw.WriteString("Te: trailers\r\n")
			}
			continue
		}
		if req.NamedByConnection(h.Name) {
			continue
		}
		bw.Write(h.Name)
		bw.WriteString(": ")
		bw.Write(h.Value)
		bw.WriteString("\r\n")
	}
	if hc.trusted {
		f := hc.trustedForwarded()
		if f.XFF != "" {
			writeHeader(bw, "X-Forwarded-For", f.XFF)
		}
		writeHeader(bw, "Forwarded", f.Fwd)
		writeHeader(bw, "X-Forwarded-Proto", f.Proto)
		writeHeader(bw, "X-Forwarded-Host", f.Host)
	} else {
		writeHeader(bw, "X-Forwarded-For", hc.peer)
		if hc.fwd == "" || string(req.Host) != hc.fwdHost {
			hc.fwdHost = string(req.Host)
			hc.fwd = policy.ForwardedElement(hc.peerIP, hc.peer, hc.fwdHost, hc.scheme())
		}
		writeHeader(bw, "Forwarded", hc.fwd)
		bw.WriteString("X-Forwarded-Proto: ")
		bw.WriteString(hc.scheme())
		bw.WriteString("\r\nX-Forwarded-Host: ")
		bw.Write(req.Host)
		bw.WriteString("\r\n")
	}
	if !req.RequestID {
		writeRequestID(bw, &req.GenID)
	}
	bw.WriteString("\r\n")
}

func writeHeader(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// trustedForwarded extends the incoming chain of a trusted peer (the rules
// of policy.ForwardedFor).
func (hc *h1Conn) trustedForwarded() policy.Forwarded {
	in := &http.Request{RemoteAddr: net.JoinHostPort(hc.peer, "0"), Host: string(hc.req.Host), Header: http.Header{}, TLS: hc.tlsState()}
	for _, h := range hc.req.Headers {
		if h.Kind == h1wire.HdrForwarded {
			in.Header.Add(string(h.Name), string(h.Value))
		}
	}
	return policy.ForwardedFor(in, []netip.Prefix{netip.PrefixFrom(hc.peerIP, hc.peerIP.BitLen())})
}

// writeRequestID writes an X-Request-Id header of 32 random hex characters
// (policy.AppendRequestID, into the writer) and keeps a copy in id.
func writeRequestID(bw *bufio.Writer, id *h1wire.RequestIDBuf) {
	if bw.Available() < 64 {
		_ = bw.Flush()
	}
	// Appended into the writer's own buffer: no allocation.
	buf := append(bw.AvailableBuffer(), "X-Request-Id: "...)
	buf = policy.AppendRequestID(buf)
	id.N = uint8(copy(id.B[:], buf[len("X-Request-Id: "):]))
	buf = append(buf, "\r\n"...)
	_, _ = bw.Write(buf)
}

// failover applies passive health (R21) to ex's failed exchange: the
// backend is ejected when err says it failed (upstream.EjectReason; dial: err is a
// connect failure) and, on the first failure only, ex moves to another
// instance not ejected (its in-flight counts with it) and failover reports
// true: the caller sends the request again. Only requests without a body
// reach here (GET and HEAD on the fast paths), so any may be retried.
func (s *proxyCore) failover(ex *h1Exchange, err error, dial bool) bool {
	reason := upstream.EjectReason(err, dial)
	if reason == "" {
		return false
	}
	ex.rt.eject(s.reg, ex.i, reason)
	if ex.retried {
		return false
	}
	j := ex.rt.other(ex.i, time.Now().UnixNano())
	if j < 0 {
		return false
	}
	ex.retried = true
	if s.reg.metrics != nil {
		s.reg.metrics.retried(ex.b.addr)
	}
	s.logger.Debug("request retried on another instance", "from", ex.b.addr, "to", ex.rt.backends[j].addr, "error", err)
	ex.b.inFlight.Add(-1)
	ex.rt.metrics[ex.i].inFlight.Dec()
	ex.i, ex.b = j, ex.rt.backends[j]
	ex.b.inFlight.Add(1)
	ex.rt.metrics[j].inFlight.Inc()
	return true
}
