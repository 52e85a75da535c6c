package edgeproxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/edgetls"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
)

// HTTPS at the edge (SPEC R62, R63). The edge handshakes HTTPS
// connections itself (tls_accept.go): HTTP/1.1 is served by the edge's own
// loop (internal/dataplane) like plain HTTP, HTTP/2 by the edge's own HTTP/2 server
// (internal/h2srv: x/net's framer and HPACK; a GET or HEAD without a body goes
// straight to a pooled backend connection, h2_fast.go, everything else
// through the same ServeHTTP as the plain listener's slow path): same
// routing, drain accounting, upgrades, streaming. The certificates, the
// tls.Config and ACME are internal/edgetls's; this file wires them
// (startTLS), answers what the HTTPS policy answers before routing (the
// ACME HTTP-01 challenge, the redirect to HTTPS, the 503 page of a host
// without a certificate yet: servePolicy) and validates routes' tls
// policies.

// ACMEConfig configures certificate issuance (edgetls.ACMEConfig).
type ACMEConfig = edgetls.ACMEConfig

// tlsEdge is the HTTPS state of a Server (nil without an HTTPS address):
// the listener and its net/http server, the certificates (edgetls) and the
// request counters by protocol.
type tlsEdge struct {
	s      *Server
	logger hclog.Logger
	port   int // bound HTTPS port, for redirects

	// ln is the HTTPS listener (serveAccept); conns feeds the net/http
	// server the HTTP/1.1 connections the h1 loop hands off (HTTP/2 never
	// reaches net/http: the edge's own server, internal/h2srv, serves it).
	ln    net.Listener
	conns *handoff.HandoffListener

	certs *edgetls.Certs

	// lastTick is when Run's loop last refreshed (its goroutine only).
	lastTick time.Time

	protoReqs *prometheus.CounterVec
	// byProto are protoReqs' children: [https][H2].
	byProto [2][2]prometheus.Counter
}

func newTLSEdge(s *Server) (*tlsEdge, error) {
	t := &tlsEdge{s: s, logger: s.Logger.Named("tls")}
	certs, err := edgetls.New(edgetls.Options{
		StateDir: s.cfg.StateDir, ACME: s.cfg.ACME, DefaultCertHost: s.cfg.DefaultCertHost,
		Logger: t.logger, Registerer: s.Metrics.Reg,
		Routes: s.certRoutes,
		// Each refresh re-annotates the routes it saw with the names now
		// served (redirects).
		Refreshed: func(tab edgetls.Table) { t.annotate(tab.(*dataplane.Snapshot)) },
		Storage:   s.certStorage(),
	})
	if err != nil {
		return nil, err
	}
	t.certs = certs
	t.protoReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "http_requests_by_protocol_total",
		Help: "Requests by protocol (HTTP/1.1, HTTP/2.0) and scheme: every HTTPS request, and the plain HTTP requests handled by net/http.",
	}, []string{"proto", "scheme"})
	s.Metrics.Reg.MustRegister(t.protoReqs)
	for i, scheme := range []string{"http", "https"} {
		for j, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
			t.byProto[i][j] = t.protoReqs.WithLabelValues(proto, scheme)
		}
	}
	return t, nil
}

// certRoutes is the serving snapshot as the certificates see it (nil
// before the first).
func (s *Server) certRoutes() edgetls.Table {
	if snap := s.Snap.Load(); snap != nil {
		return snap
	}
	return nil
}

// refresh refreshes the certificates (edgetls.Certs.Refresh), which then
// re-annotates the serving snapshot's routes.
func (t *tlsEdge) refresh(writeState bool) { t.certs.Refresh(writeState) }

// routeFor resolves name on the serving snapshot.
func (t *tlsEdge) routeFor(name string) *dataplane.HTTPRoute {
	snap := t.s.Snap.Load()
	if snap == nil {
		return nil
	}
	if r, ok := snap.Exact[name]; ok {
		return r
	}
	return snap.MatchWildcard(name)
}

// hasCert reports whether a certificate for name is being served.
func (t *tlsEdge) hasCert(name string) bool { return t.certs.Served().Has(name) }

// plainSlow reports whether a plain HTTP request for rt must go through
// ServeHTTP (redirect, or an H2C backend) instead of the event loop.
func (t *tlsEdge) plainSlow(rt *dataplane.HTTPRoute, name string) bool {
	switch rt.TLS {
	case dataplane.TLSNever:
		return false
	case dataplane.TLSAlways:
		return true
	}
	if rt.Suffix != "" {
		return true // decided per name in ServeHTTP
	}
	return t.hasCert(name)
}

// annotate sets every route's redirect flag on snap (before it serves, and
// again at each refresh).
func (t *tlsEdge) annotate(snap *dataplane.Snapshot) {
	for name, r := range snap.Exact {
		r.SlowPlain.Store(r.H2C || t.plainSlow(r, name))
	}
	for _, r := range snap.Wildcards {
		r.SlowPlain.Store(r.H2C || t.plainSlow(r, ""))
	}
}

// servePolicy answers what the HTTPS policy answers before routing: the
// ACME HTTP-01 challenge, the 308 redirect to HTTPS, the 503 page of an
// HTTPS host without a certificate yet. It reports whether it answered.
func (t *tlsEdge) servePolicy(w http.ResponseWriter, r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	t.countProto(r.ProtoMajor, scheme)
	if r.TLS == nil && strings.HasPrefix(r.URL.Path, h1wire.ACMEChallengePrefix) {
		if t.certs.HandleHTTPChallenge(w, r) {
			return true
		}
		http.Error(w, "gordon-edge: no pending ACME challenge for this token", http.StatusNotFound)
		return true
	}
	name := dataplane.NormalizeHost(r.Host)
	rt := t.routeFor(name)
	if rt == nil || rt.TLS == dataplane.TLSNever {
		return false
	}
	if r.TLS == nil {
		if rt.TLS == dataplane.TLSAlways || t.hasCert(name) {
			t.redirect(w, r, name)
			return true
		}
		return false
	}
	if !t.hasCert(name) && !t.certs.Holds(name) {
		w.Header().Set("Retry-After", "30")
		dataplane.WriteEdgeError(w, http.StatusServiceUnavailable, "gordon-edge: no certificate for "+name+" yet: it is being obtained (see `docker gordon certs ls`); retry shortly\n")
		return true
	}
	return false
}

// countProto counts a request by scheme and protocol (label children
// resolved at start: no hashing per request).
func (t *tlsEdge) countProto(major int, scheme string) {
	i, j := 0, 0
	if scheme == "https" {
		i = 1
	}
	if major == 2 {
		j = 1
	}
	t.byProto[i][j].Inc()
}

func (t *tlsEdge) redirect(w http.ResponseWriter, r *http.Request, name string) {
	host := name
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if t.port != 443 && t.port != 0 {
		host += ":" + strconv.Itoa(t.port)
	}
	w.Header().Set("Location", "https://"+host+r.URL.RequestURI())
	w.WriteHeader(http.StatusPermanentRedirect)
}

// startTLS binds the HTTPS listener when Config.HTTPSAddr is set (nil
// listener and server otherwise) and loads the certificate stores, so the
// first handshake is served from what is on disk.
func (s *Server) startTLS(lc net.ListenConfig, httpAddr net.Addr) (net.Listener, *http.Server, error) {
	if s.cfg.HTTPSAddr == "" {
		return nil, nil, nil
	}
	t, err := newTLSEdge(s)
	if err != nil {
		return nil, nil, err
	}
	if ta, ok := httpAddr.(*net.TCPAddr); ok {
		t.certs.SetHTTPPort(ta.Port)
	}
	ln, srv, err := t.listen(lc, s.cfg.HTTPSAddr)
	if err != nil {
		t.certs.Close()
		return nil, nil, err
	}
	a := ln.Addr().String()
	s.httpsAddr.Store(&a)
	s.tls = t
	s.HTTPS = t
	if s.certShare != nil {
		s.syncStatic(context.Background()) // served from the first handshake
	}
	t.refresh(true)
	s.Logger.Info("gordon-edge serving https", "https", a, "acme", !s.cfg.ACME.Disabled)
	return ln, srv, nil
}

// HTTPSAddr returns the bound public HTTPS address ("" before Ready or
// without HTTPS).
func (s *Server) HTTPSAddr() string { return loadString(&s.httpsAddr) }

// tlsTick refreshes the certificate state every fullRereadEvery.
func (s *Server) tlsTick() {
	if s.tls == nil {
		return
	}
	if now := time.Now(); now.Sub(s.tls.lastTick) >= fullRereadEvery {
		s.tls.lastTick = now
		go s.tls.refresh(true)
	}
}

// closeTLSListener closes the HTTPS listener (none: nothing): the accept
// loop ends; its connections drain with the h1 loop's.
func (s *Server) closeTLSListener() {
	if s.tls != nil && s.tls.ln != nil {
		_ = s.tls.ln.Close()
	}
}

// shutdownTLS drains the net/http HTTPS server, which serves the HTTP/1.1
// connections the h1 loop handed it (in the background, sharing ctx with the plain server's
// drain); the returned channel closes when done.
func (s *Server) shutdownTLS(ctx context.Context, srv *http.Server) <-chan struct{} {
	done := make(chan struct{})
	if srv == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		if err := srv.Shutdown(ctx); err != nil {
			s.Logger.Warn("https shutdown incomplete", "error", err)
			_ = srv.Close()
		}
		s.tls.certs.Close()
	}()
	return done
}

// validateRouteTLS checks a route's tls policy and backend protocol.
func validateRouteTLS(r *routetable.HTTPRoute) error {
	switch r.TLS {
	case "", dataplane.TLSAuto, dataplane.TLSAlways, dataplane.TLSNever:
	default:
		return fmt.Errorf("route table: http host %q: tls %q: want auto, always or never: %w", r.Host, r.TLS, ErrInvalidTable)
	}
	switch r.Protocol {
	case "", "http1", "h2c":
	default:
		return fmt.Errorf("route table: http host %q: protocol %q: want http1 or h2c: %w", r.Host, r.Protocol, ErrInvalidTable)
	}
	if r.HSTS != "" && (!routetable.ValidHSTS(r.HSTS) || r.TLS == dataplane.TLSNever) {
		return fmt.Errorf("route table: http host %q: hsts %q: want a Strict-Transport-Security value (max-age=SECONDS[; includeSubDomains][; preload]) on a host served over HTTPS: %w", r.Host, r.HSTS, ErrInvalidTable)
	}
	return nil
}

// ServesTLS reports whether an HTTPS request for host on rt is proxied
// (servePolicy would not answer it with the 503 page): a never route, or
// a host with a certificate being served. A name refresh has not seen yet
// (on demand) goes to ServeHTTP, which also looks in certmagic's cache.
func (t *tlsEdge) ServesTLS(rt *dataplane.HTTPRoute, host []byte) bool {
	if rt.TLS == dataplane.TLSNever {
		return true
	}
	return t.certs.Served().HasHost(host)
}

// CountHTTPS counts an HTTPS request served by the loops by protocol
// (protoH1, ProtoH2).
func (t *tlsEdge) CountHTTPS(proto int) { t.byProto[1][proto].Inc() }

// HandoffConns is the HTTPS net/http server's listener, which takes a TLS
// connection the loops do not serve.
func (t *tlsEdge) HandoffConns() *handoff.HandoffListener { return t.conns }
