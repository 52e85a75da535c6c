package edgeproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
	"github.com/hashicorp/go-hclog"
)

// The HTTPS listener (SPEC R62): the edge accepts and handshakes itself
// (edgetls.Certs.TLSConfig: certificates, ALPN, TLS policy), then
//   - a connection that negotiated H2 is served by the edge's own HTTP/2
//     server (internal/h2srv);
//   - acme-tls/1 (a TLS-ALPN-01 validation) is closed once the handshake,
//     which answered the challenge, is done;
//   - anything else (http/1.1, or no ALPN) is served by the edge's own
//     HTTP/1.1 loop (internal/dataplane) over the *tls.Conn, with scheme https;
//     what the loop does not serve itself (bodies, upgrades, the 503 page
//     of a host without a certificate, H2C backends, unknown hosts) it
//     hands, at a request boundary, to the net/http server through
//     t.conns, which sees the request as TLS (tlsHandler).
//
// The loops never touch a TLS connection's descriptor (no event loop
// adoption, no splice: rawControl needs a syscall.Conn, which *tls.Conn is
// not); PeerClosed reads the TCP state of the socket underneath, which
// consumes nothing.

// tlsStateKey carries a handed-off TLS connection's state to tlsHandler.
type tlsStateKey struct{}

// serveAccept accepts on ln until it is closed (nil) or fails for good;
// each connection is handshaken and dispatched on its own goroutine.
func (t *tlsEdge) serveAccept(ln net.Listener) error {
	h := t.s.ConnSrv
	cfg := t.certs.TLSConfig()
	for {
		c, err := h.Accept(ln)
		if c == nil {
			return err
		}
		// Counted in the drain from accept on: a connection mid-handshake
		// when a drain begins is served, not dropped.
		tc := h.AdmitTLS(c, cfg)
		if tc == nil {
			continue
		}
		go t.handshakeAndServe(tc)
	}
}

// handshakeAndServe handshakes tc (bounded by the read header timeout, as
// net/http does, and by drainHandshakeGrace once a drain began; not by the
// TLS edge's context, which ends before the h1 drain does) and hands it to
// the HTTP/2 server or the h1 loop.
func (t *tlsEdge) handshakeAndServe(tc *tls.Conn) {
	h := t.s.ConnSrv
	if to := t.s.cfg.ReadHeaderTimeout; to > 0 {
		dl := time.Now().Add(to)
		_ = tc.SetReadDeadline(dl)
		_ = tc.SetWriteDeadline(dl)
	}
	err := tc.HandshakeContext(context.Background())
	h.Handshaken(tc)
	if err != nil {
		t.certs.HandshakeFailed(tc, err)
		h.Release(tc)
		return
	}
	_ = tc.SetReadDeadline(time.Time{})
	_ = tc.SetWriteDeadline(time.Time{})
	switch tc.ConnectionState().NegotiatedProtocol {
	case "h2":
		// Served by the edge's HTTP/2 server (internal/h2srv), in the drain's
		// count (wg) until its last handler returns.
		h.ServeH2(t.s.newH2Conn(tc))
		return
	case "acme-tls/1":
		h.Release(tc) // the handshake answered the challenge
		return
	}
	h.ServeTLS(tc)
}

// serveHTTPS runs the HTTPS listener: the accept loop on ln (which gives
// H2 connections to the edge's HTTP/2 server and the others to the h1
// loop) and the net/http server of the HTTP/1.1 connections the loop hands
// off, on t.conns. It returns when ln is closed (nil) or fails for good.
func (t *tlsEdge) serveHTTPS(srv *http.Server, ln net.Listener) error {
	go func() {
		if err := srv.Serve(t.conns); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.logger.Error("https server stopped", "error", err)
		}
	}()
	return t.serveAccept(ln)
}

// tlsConnContext marks a handed-off TLS connection for ServeHTTP: its
// framing tracker (internal/handoff) and its TLS state (tlsHandler).
func tlsConnContext(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*handoff.TrackedConn)
	if !ok {
		return ctx // not handed off by the loop (never, today)
	}
	ctx = context.WithValue(ctx, handoff.TrackedConnKey{}, tc)
	if tlc, ok := tc.ReplayConn.Conn.(*tls.Conn); ok {
		st := tlc.ConnectionState()
		ctx = context.WithValue(ctx, tlsStateKey{}, &st)
	}
	return ctx
}

// tlsHandler serves the HTTPS net/http server: requests of connections
// the h1 loop handed off carry their TLS state (net/http sets r.TLS only
// on a *tls.Conn it accepted itself), so the policy, the redirect logic
// and the forwarded headers see HTTPS.
type tlsHandler struct{ s *Server }

func (h tlsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
			r.TLS = st
		}
	}
	h.s.ServeHTTP(w, r)
}

// listen binds the HTTPS address and returns its net/http server (served
// on t.conns by serveHTTPS).
func (t *tlsEdge) listen(lc net.ListenConfig, addr string) (net.Listener, *http.Server, error) {
	ln := t.s.cfg.HTTPSListener
	if ln == nil {
		// Named "https" for the listener hand-over (SPEC R60): an upgraded
		// edge takes this socket over like the plain HTTP one.
		var err error
		if ln, err = t.s.listenStream("https", addr, lc); err != nil {
			return nil, nil, fmt.Errorf("gordon-edge: listen https %s: %w", addr, err)
		}
	}
	t.ln = ln
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		t.port = ta.Port
		t.certs.SetTLSPort(ta.Port)
	}
	t.conns = handoff.NewHandoffListener(ln.Addr())
	srv := &http.Server{
		Handler:     tlsHandler{t.s},
		ConnContext: tlsConnContext,
		// Serve is only given connections the h1 loop handed off (a
		// TrackedConn, never a *tls.Conn), so it serves HTTP/1.1 only:
		// HTTP/2 is the edge's own server (internal/h2srv).
		TLSConfig:         t.certs.TLSConfig(),
		ReadHeaderTimeout: t.s.cfg.ReadHeaderTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    dataplane.MaxRequestHead - 4096, // net/http allows 4 KiB over it
		ErrorLog:          t.logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	return ln, srv, nil
}

// serve runs the HTTPS listener ln (serveHTTPS).
func (t *tlsEdge) serve(srv *http.Server, ln net.Listener) error {
	return t.serveHTTPS(srv, ln)
}
