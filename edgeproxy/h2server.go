package edgeproxy

import (
	"crypto/tls"
	"net/http"
	"net/netip"
	"sync/atomic"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h2srv"
)

// The edge's HTTP/2 server is internal/h2srv; this is its side of the
// seam: the connection's configuration, and the h2srv.Handler that serves
// its streams (ServeFast, h2_fast.go; ServeHTTP, the Server's).

// h2StallTimeout bounds how long an HTTP/2 stream waits for the client to
// widen a window it exhausted (h2srv.Config.StallTimeout): H1SendTimeout,
// the bound of an HTTP/1.1 write the client does not read.
var h2StallTimeout = dataplane.H1SendTimeout

// A header list the edge's HTTP/2 server accepts is bounded as an HTTP/1.1
// request head (this fails to compile when they differ).
const _ = uint(h2srv.MaxHeaderList-dataplane.MaxRequestHead) + uint(dataplane.MaxRequestHead-h2srv.MaxHeaderList)

// h2Edge is the edge as one HTTP/2 connection's handler: its peer, and
// the fast path's per-connection caches.
type h2Edge struct {
	s *Server
	// peer and PeerIP are the client's address (H1Conn.peerInfo); fwd
	// caches the Forwarded element of the last authority (fast path).
	peer   string
	peerIP netip.Addr
	fwd    atomic.Pointer[h2Forwarded]
	route  atomic.Pointer[h2Route] // pickFast's cache
}

// ServeHTTP serves a stream the fast path did not take, as every request
// net/http hands the edge.
func (e *h2Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.s.ServeHTTP(w, r) }

// newH2Conn prepares tc (handshaken, ALPN H2) for its Serve; it is in the
// drain's count (ConnServer.wg) until its last handler returns.
func (s *Server) newH2Conn(tc *tls.Conn) *h2srv.Conn {
	var pi dataplane.H1Conn
	pi.PeerInfo(tc.RemoteAddr(), s.Reg.Trusted)
	e := &h2Edge{s: s, peer: pi.Peer, peerIP: pi.PeerIP}
	cfg := h2srv.Config{
		Handler:           e,
		Logger:            s.Logger,
		Trusted:           pi.Trusted,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		WriteTimeout:      dataplane.H1SendTimeout,
		StallTimeout:      h2StallTimeout,
		Stalled:           &s.h2Stalled,
		ErrorPage:         dataplane.WriteEdgeError,
	}
	if cs := s.ConnSrv; cs != nil {
		cfg.IdleTimeout = cs.IdleTimeout
		cfg.Closed = cs.ForgetH2
		cfg.Done = cs.WG.Done
	}
	return h2srv.NewConn(tc, cfg)
}
