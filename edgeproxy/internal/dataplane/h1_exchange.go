package dataplane

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
func (s *Core) routeH1(snap *Snapshot, host []byte) *HTTPRoute {
	h := host
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && h[0] != '[' {
		h = h[:i]
	}
	if len(h) > 0 && h[len(h)-1] != '.' && bytesLower(h) {
		if r, ok := snap.Exact[string(h)]; ok {
			return r
		}
		if len(snap.Wildcards) == 0 {
			return nil
		}
	}
	return s.Route(snap, string(host))
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
func (s *Core) serveH1(hc *H1Conn) (served, keep bool) {
	rt, i, b := s.pickFor(hc)
	if rt == nil {
		return false, false
	}
	return true, s.finishH1(hc, &Exchange{Route: rt, Index: i, Backend: b, Start: time.Now()})
}

// pickH1 picks the backend for a request to host and counts the request
// in flight on it and in its route's metrics (DoneH1 undoes both); rt is
// nil when the host has no route.
func (s *Core) pickH1(host []byte) (rt *HTTPRoute, i int, b *Backend) {
	for {
		snap := s.Snap.Load()
		if snap == nil {
			return nil, 0, nil
		}
		rt = s.routeH1(snap, host)
		if rt == nil || len(rt.Backends) == 0 || rt.SlowPlain.Load() || rt.Guard != nil || rt.Maint != nil {
			return nil, 0, nil // ServeHTTP answers (404, redirect, H2C, access rules, maintenance)
		}
		i = rt.Pick()
		b = rt.Backends[i]
		b.InFlight.Add(1)
		// As in ServeHTTP: counted while snap was still current, so a drain
		// that saw 0 after the next swap can never miss this request.
		if s.Snap.Load() == snap {
			break
		}
		b.InFlight.Add(-1)
	}
	rt.Metrics[i].InFlight.Inc()
	return rt, i, b
}

// finishH1 runs (or finishes) the exchange of hc.req picked as ex, answers
// the client and reports whether the connection can serve another request.
func (s *Core) finishH1(hc *H1Conn, ex *Exchange) bool {
	var code, proxyErr int
	var keep bool
	ex.Acc = ExchangeAccess{hc: hc}
	hc.bodyMark = -1
	if ex.err != nil && s.Failover(ex, ex.err, false) {
		ex.err = nil // an event loop's failure: retried on another instance
	}
	if ex.err != nil {
		code, proxyErr, keep = s.h1ProxyError(hc, ex.Route, ex.Backend, ex.err)
	} else {
		code, proxyErr, keep = s.exchangeH1(hc, ex)
	}
	if hc.bodyMark >= 0 {
		ex.Acc.BytesOut = hc.sent + int64(hc.bw.Buffered()) - hc.bodyMark
	}
	// The backend exchange is over (its connection pooled or closed): the
	// request leaves the drain's count before the answer's last bytes are
	// flushed, so a client that has its whole answer never sees the
	// request still in flight (as with net/http, which counts down before
	// finishing the response).
	DoneH1(ex, code, proxyErr)
	if !keep {
		_ = hc.bw.Flush() // an error page (h1ProxyError) is still buffered
		return false
	}
	return flushIdle(hc)
}

// DoneH1 ends the count pickH1 began and records the request's status.
func DoneH1(ex *Exchange, code, proxyErr int) {
	ex.Backend.InFlight.Add(-1)
	rm := ex.Route.Metrics[ex.Index]
	rm.Observe(code, proxyErr, ex.Start)
	rm.InFlight.Dec()
	if rm.Access != nil {
		rm.Access.logExchange(ex, rm, code)
	}
}

// exchangeH1 sends the request to b and relays the response; it returns
// the status relayed (or of the error page), the error class for the
// metrics and whether the client connection stays open.
func (s *Core) exchangeH1(hc *H1Conn, ex *Exchange) (code, proxyErr int, keep bool) {
	rt, b := ex.Route, ex.Backend
	t := b.Transport
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		var fc *upstream.Conn
		var reused bool
		var err error
		rh := rt.Timeouts.ResponseHeader
		if ex.sent != nil {
			// Written by an event loop, which read what is replayed.
			fc, reused, ex.sent = ex.sent, ex.reused, nil
			if rh > 0 {
				rh = max(ex.rhLeft, time.Millisecond)
			}
		} else {
			if fc, reused, err = t.Get(ctx, rt.Timeouts.Dial, attempt == 0); err != nil {
				if s.Failover(ex, err, true) {
					b, t, attempt = ex.Backend, ex.Backend.Transport, -1
					continue
				}
				return s.h1ProxyError(hc, rt, b, err)
			}
			hc.WriteOutgoing(fc.W)
			err = fc.W.Flush()
		}
		resp := &hc.resp
		resp.Started = false
		if err == nil {
			hc.Arm(fc, rh)
			err = upstream.ReadResponse(fc, resp, hc.Req.Head, hc.rhead, hc.wait)
			hc.rhead = resp.Head[:0]
		}
		if err != nil {
			_ = fc.C.Close()
			if errors.Is(err, upstream.ErrClientGone) {
				// Nobody to answer; the backend sees its request canceled.
				return StatusClientClosed, 0, false
			}
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			if reused && attempt == 0 && !timedOut && !resp.Started {
				continue // a kept-alive connection the backend had closed
			}
			if !resp.Started && s.Failover(ex, err, false) {
				b, t, attempt = ex.Backend, ex.Backend.Transport, -1
				continue
			}
			return s.h1ProxyError(hc, rt, b, err)
		}
		hc.HeadDone()
		keep = !hc.Req.Close && !s.ConnSrv.Shutting.Load()
		hsts := ""
		if hc.isTLS() {
			hsts = rt.HSTS
		}
		ok, upstreamOK := relayResponse(hc, fc, resp, keep, s.Reg.bufferPool, hsts)
		if upstreamOK && !resp.Close {
			t.Put(fc)
		} else {
			_ = fc.C.Close()
		}
		return resp.Code, 0, keep && ok
	}
}

// h1ProxyError writes the 502/503/504 page for a failed exchange.
func (s *Core) h1ProxyError(hc *H1Conn, rt *HTTPRoute, b *Backend, err error) (int, int, bool) {
	code, what := upstream.Classify(context.Background(), err)
	s.Logger.Debug("proxy error", "backend", b.Addr, "host", string(hc.Req.Host), "status", code, "error", err)
	body := ProxyErrorBody(code, what, rt)
	keep := !hc.Req.Close && !s.ConnSrv.Shutting.Load()
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
	if !hc.Req.Head {
		bw.WriteString(body)
	}
	// Left buffered: finishH1 flushes it after the request has left the
	// drain's count, so a client holding its 5xx never sees it in flight.
	return code, code, keep
}

// WriteOutgoing writes the proxied request head: hop-by-hop headers and
// the ones Connection names dropped, Te: trailers kept, the forwarded
// headers replaced (or extended for a trusted peer, policy.ForwardedFor) and an
// X-Request-Id added when absent.
func (hc *H1Conn) WriteOutgoing(bw *bufio.Writer) {
	req := &hc.Req
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
			if !hc.Trusted {
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
	if hc.Trusted {
		f := hc.trustedForwarded()
		if f.XFF != "" {
			WriteHeader(bw, "X-Forwarded-For", f.XFF)
		}
		WriteHeader(bw, "Forwarded", f.Fwd)
		WriteHeader(bw, "X-Forwarded-Proto", f.Proto)
		WriteHeader(bw, "X-Forwarded-Host", f.Host)
	} else {
		WriteHeader(bw, "X-Forwarded-For", hc.Peer)
		if hc.fwd == "" || string(req.Host) != hc.fwdHost {
			hc.fwdHost = string(req.Host)
			hc.fwd = policy.ForwardedElement(hc.PeerIP, hc.Peer, hc.fwdHost, hc.scheme())
		}
		WriteHeader(bw, "Forwarded", hc.fwd)
		bw.WriteString("X-Forwarded-Proto: ")
		bw.WriteString(hc.scheme())
		bw.WriteString("\r\nX-Forwarded-Host: ")
		bw.Write(req.Host)
		bw.WriteString("\r\n")
	}
	if !req.RequestID {
		WriteRequestID(bw, &req.GenID)
	}
	bw.WriteString("\r\n")
}

func WriteHeader(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// trustedForwarded extends the incoming chain of a trusted peer (the rules
// of policy.ForwardedFor).
func (hc *H1Conn) trustedForwarded() policy.Forwarded {
	in := &http.Request{RemoteAddr: net.JoinHostPort(hc.Peer, "0"), Host: string(hc.Req.Host), Header: http.Header{}, TLS: hc.tlsState()}
	for _, h := range hc.Req.Headers {
		if h.Kind == h1wire.HdrForwarded {
			in.Header.Add(string(h.Name), string(h.Value))
		}
	}
	return policy.ForwardedFor(in, []netip.Prefix{netip.PrefixFrom(hc.PeerIP, hc.PeerIP.BitLen())})
}

// WriteRequestID writes an X-Request-Id header of 32 random hex characters
// (policy.AppendRequestID, into the writer) and keeps a copy in id.
func WriteRequestID(bw *bufio.Writer, id *h1wire.RequestIDBuf) {
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

// Failover applies passive health (R21) to ex's failed exchange: the
// backend is ejected when err says it failed (upstream.EjectReason; dial: err is a
// connect failure) and, on the first failure only, ex moves to another
// instance not ejected (its in-flight counts with it) and failover reports
// true: the caller sends the request again. Only requests without a body
// reach here (GET and HEAD on the fast paths), so any may be retried.
func (s *Core) Failover(ex *Exchange, err error, dial bool) bool {
	reason := upstream.EjectReason(err, dial)
	if reason == "" {
		return false
	}
	ex.Route.eject(s.Reg, ex.Index, reason)
	if ex.retried {
		return false
	}
	j := ex.Route.Other(ex.Index, time.Now().UnixNano())
	if j < 0 {
		return false
	}
	ex.retried = true
	if s.Reg.Metrics != nil {
		s.Reg.Metrics.Retried(ex.Backend.Addr)
	}
	s.Logger.Debug("request retried on another instance", "from", ex.Backend.Addr, "to", ex.Route.Backends[j].Addr, "error", err)
	ex.Backend.InFlight.Add(-1)
	ex.Route.Metrics[ex.Index].InFlight.Dec()
	ex.Index, ex.Backend = j, ex.Route.Backends[j]
	ex.Backend.InFlight.Add(1)
	ex.Route.Metrics[j].InFlight.Inc()
	return true
}
