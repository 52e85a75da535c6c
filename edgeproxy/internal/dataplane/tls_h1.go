package dataplane

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h2srv"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
)

// The h1 loop over TLS (tls_accept.go): what differs from a plain
// connection is the scheme the forwarded headers name, the policy that
// decides which requests the loop may serve, and the net/http server a
// connection is handed to.

// isTLS reports whether hc is an HTTPS connection.
func (hc *H1Conn) isTLS() bool {
	_, ok := hc.Conn.(*tls.Conn)
	return ok
}

// scheme is hc's scheme for X-Forwarded-Proto and Forwarded.
func (hc *H1Conn) scheme() string {
	if hc.isTLS() {
		return "https"
	}
	return "http"
}

// tlsState is the TLS state hc's requests have (nil on plain HTTP), for
// the forwarded headers of a trusted peer (policy.ForwardedFor).
func (hc *H1Conn) tlsState() *tls.ConnectionState {
	if tc, ok := hc.Conn.(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}

// handoffFor is the listener of the net/http server that takes hc when the
// loop does not serve its request: the HTTPS server for a TLS connection
// (it knows the request is TLS), the plain one otherwise.
func (h *ConnServer) handoffFor(hc *H1Conn) *handoff.HandoffListener {
	if hc.isTLS() && h.Core.HTTPS != nil {
		return h.Core.HTTPS.HandoffConns()
	}
	return h.Handoff
}

// pickFor picks the backend for hc's request as pickH1 does, under the
// HTTPS policy for a TLS connection (pickTLS).
func (s *Core) pickFor(hc *H1Conn) (rt *HTTPRoute, i int, b *Backend) {
	if hc.isTLS() && s.HTTPS != nil {
		return s.pickTLS(hc.Req.Host, protoH1)
	}
	return s.pickH1(hc.Req.Host)
}

// Protocols of the request counters (tlsEdge.byProto).
const (
	protoH1 = 0
	ProtoH2 = 1
)

// pickTLS picks the backend for an HTTPS request to host and counts it in
// flight (DoneH1 undoes it) and by protocol (protoH1, ProtoH2); rt is nil when ServeHTTP must
// answer: no route, a held route, an H2C backend, or a host whose TLS
// policy answers 503 (no certificate yet, servePolicy).
func (s *Core) pickTLS(host []byte, proto int) (rt *HTTPRoute, i int, b *Backend) {
	for {
		snap := s.Snap.Load()
		if snap == nil {
			return nil, 0, nil
		}
		if rt = s.TLSRoute(snap, host); rt == nil {
			return nil, 0, nil
		}
		if i, b, ok := s.CountTLS(snap, rt, proto); ok {
			return rt, i, b
		}
	}
}

// TLSRoute is the route of an HTTPS request to host on snap that the
// loops serve themselves (nil: ServeHTTP answers, see pickTLS).
func (s *Core) TLSRoute(snap *Snapshot, host []byte) *HTTPRoute {
	rt := s.routeH1(snap, host)
	if rt == nil || len(rt.Backends) == 0 || rt.H2C || rt.Guard != nil || rt.Maint != nil || !s.HTTPS.ServesTLS(rt, host) {
		return nil
	}
	return rt
}

// CountTLS picks a backend of rt and counts the request on it, in flight
// and by protocol; false when snap stopped being current meanwhile (the
// count is undone: route again on the new snapshot, as in pickH1).
func (s *Core) CountTLS(snap *Snapshot, rt *HTTPRoute, proto int) (int, *Backend, bool) {
	i := rt.Pick()
	b := rt.Backends[i]
	b.InFlight.Add(1)
	if s.Snap.Load() != snap {
		b.InFlight.Add(-1)
		return 0, nil, false
	}
	rt.Metrics[i].InFlight.Inc()
	s.HTTPS.CountHTTPS(proto)
	return i, b, true
}

// AdmitTLS counts c in the drain from accept on and registers it as an
// HTTPS connection in its handshake (Shutdown bounds the handshake,
// DrainHandshakeGrace): the returned *tls.Conn is then the caller's to
// handshake and pass to Handshaken. Nil when a drain began: c is closed.
func (h *ConnServer) AdmitTLS(c net.Conn, cfg *tls.Config) *tls.Conn {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	if h.Shutting.Load() {
		_ = c.Close()
		return nil
	}
	h.WG.Add(1)
	tc := tls.Server(c, cfg)
	h.Handshaking[tc] = struct{}{}
	return tc
}

// Handshaken ends tc's handshake in the registry. A connection that is
// not served after it (a failed handshake, an ACME challenge) goes to
// Release.
func (h *ConnServer) Handshaken(tc *tls.Conn) {
	h.Mu.Lock()
	delete(h.Handshaking, tc)
	h.Mu.Unlock()
}

// Release closes an admitted connection nobody serves and takes it out
// of the drain's count.
func (h *ConnServer) Release(c net.Conn) {
	_ = c.Close()
	h.WG.Done()
}

// ServeH2 registers c, an HTTPS connection that negotiated h2, and serves
// it; it stays in the drain's count until its last handler returns
// (h2srv.Config.Done, ForgetH2).
func (h *ConnServer) ServeH2(c *h2srv.Conn) {
	h.Mu.Lock()
	h.H2Conns[c] = struct{}{}
	h.Mu.Unlock()
	c.Serve()
}

// ServeTLS serves tc, handshaken for HTTP/1.1, on the connection loop. A
// connection handshaken during a drain still has a request on its way
// answered (with Connection: close), as an idle one does.
func (h *ConnServer) ServeTLS(tc *tls.Conn) {
	hc := &H1Conn{Conn: tc}
	h.Mu.Lock()
	h.Conns[hc] = struct{}{} // already in WG (AdmitTLS)
	if h.Shutting.Load() {
		_ = tc.SetReadDeadline(time.Now().Add(DrainIdleGrace))
	}
	h.Mu.Unlock()
	h.RunConn(hc, nil)
}
