package edgeproxy

import "crypto/tls"

// The h1 loop over TLS (tls_accept.go): what differs from a plain
// connection is the scheme the forwarded headers name, the policy that
// decides which requests the loop may serve, and the net/http server a
// connection is handed to.

// isTLS reports whether hc is an HTTPS connection.
func (hc *h1Conn) isTLS() bool {
	_, ok := hc.c.(*tls.Conn)
	return ok
}

// scheme is hc's scheme for X-Forwarded-Proto and Forwarded.
func (hc *h1Conn) scheme() string {
	if hc.isTLS() {
		return "https"
	}
	return "http"
}

// tlsState is the TLS state hc's requests have (nil on plain HTTP), for
// the forwarded headers of a trusted peer (policy.ForwardedFor).
func (hc *h1Conn) tlsState() *tls.ConnectionState {
	if tc, ok := hc.c.(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}

// handoffFor is the listener of the net/http server that takes hc when the
// loop does not serve its request: the HTTPS server for a TLS connection
// (it knows the request is TLS), the plain one otherwise.
func (h *connServer) handoffFor(hc *h1Conn) *handoffListener {
	if hc.isTLS() && h.s.tlsp != nil {
		return h.s.tlsp.handoffConns()
	}
	return h.handoff
}

// pickFor picks the backend for hc's request as pickH1 does, under the
// HTTPS policy for a TLS connection (pickTLS).
func (s *proxyCore) pickFor(hc *h1Conn) (rt *httpRoute, i int, b *backend) {
	if hc.isTLS() && s.tlsp != nil {
		return s.pickTLS(hc.req.Host, protoH1)
	}
	return s.pickH1(hc.req.Host)
}

// Protocols of the request counters (tlsEdge.byProto).
const (
	protoH1 = 0
	protoH2 = 1
)

// pickTLS picks the backend for an HTTPS request to host and counts it in
// flight (doneH1 undoes it) and by protocol (protoH1, protoH2); rt is nil when ServeHTTP must
// answer: no route, a held route, an h2c backend, or a host whose TLS
// policy answers 503 (no certificate yet, servePolicy).
func (s *proxyCore) pickTLS(host []byte, proto int) (rt *httpRoute, i int, b *backend) {
	for {
		snap := s.snap.Load()
		if snap == nil {
			return nil, 0, nil
		}
		if rt = s.tlsRoute(snap, host); rt == nil {
			return nil, 0, nil
		}
		if i, b, ok := s.countTLS(snap, rt, proto); ok {
			return rt, i, b
		}
	}
}

// tlsRoute is the route of an HTTPS request to host on snap that the
// loops serve themselves (nil: ServeHTTP answers, see pickTLS).
func (s *proxyCore) tlsRoute(snap *snapshot, host []byte) *httpRoute {
	rt := s.routeH1(snap, host)
	if rt == nil || len(rt.backends) == 0 || rt.h2c || rt.guard != nil || rt.maint != nil || !s.tlsp.servesTLS(rt, host) {
		return nil
	}
	return rt
}

// countTLS picks a backend of rt and counts the request on it, in flight
// and by protocol; false when snap stopped being current meanwhile (the
// count is undone: route again on the new snapshot, as in pickH1).
func (s *proxyCore) countTLS(snap *snapshot, rt *httpRoute, proto int) (int, *backend, bool) {
	i := rt.pick()
	b := rt.backends[i]
	b.inFlight.Add(1)
	if s.snap.Load() != snap {
		b.inFlight.Add(-1)
		return 0, nil, false
	}
	rt.metrics[i].inFlight.Inc()
	s.tlsp.countHTTPS(proto)
	return i, b, true
}
