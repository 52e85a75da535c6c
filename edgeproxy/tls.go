package edgeproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// HTTPS at the edge (SPEC R62, R63). The edge handshakes HTTPS
// connections itself (tls_accept.go): HTTP/1.1 is served by the edge's own
// loop (h1_conn.go) like plain HTTP, HTTP/2 by the edge's own HTTP/2 server
// (h2_conn.go: x/net's framer and HPACK; a GET or HEAD without a body goes
// straight to a pooled backend connection, h2_fast.go, everything else
// through the same ServeHTTP as the plain listener's slow path): same
// routing, drain accounting, upgrades, streaming. Certificates come from the static store (certs add) first,
// then from certmagic (ACME: exact routed hosts managed in the background,
// names under a routed wildcard on demand). Both stores are files under
// <state>/edge/certs (certstore), so a restarted edge serves what it has at
// once and orders nothing it already holds.

// ACMEConfig configures certificate issuance. The zero value uses Let's
// Encrypt production with HTTP-01 and TLS-ALPN-01.
type ACMEConfig struct {
	// Disabled turns ACME off: static certificates only.
	Disabled bool
	// Email is the ACME account contact (optional).
	Email string
	// CA is the ACME directory URL (default Let's Encrypt production).
	CA string
	// CARootPEM is a PEM bundle to trust for the ACME server (private CAs,
	// tests); nil trusts the system roots.
	CARootPEM []byte
	// DisableHTTP01 and DisableTLSALPN01 turn one challenge type off.
	DisableHTTP01, DisableTLSALPN01 bool
	// OnDemandInterval is how often one name under a routed wildcard may
	// start an order (default 10 min; later handshakes wait for it or get
	// the fallback).
	OnDemandInterval time.Duration
	// RenewWindow is the fraction of a certificate's lifetime left at
	// which it is renewed (default certmagic's, 1/3).
	RenewWindow float64
	// RenewCheckInterval is how often certificates are checked for renewal
	// (default certmagic's, 10 min).
	RenewCheckInterval time.Duration
}

// tlsEdge is the HTTPS state of a Server (nil without an HTTPS address).
type tlsEdge struct {
	s        *Server
	logger   hclog.Logger
	stateDir string
	port     int // bound HTTPS port, for redirects

	// ln is the HTTPS listener (serveAccept); conns feeds the net/http
	// server the HTTP/1.1 connections the h1 loop hands off (HTTP/2 never
	// reaches net/http: the edge's own server, h2_conn.go, serves it).
	ln    net.Listener
	conns *handoffListener

	static   atomic.Pointer[staticSet]
	fallback *tls.Certificate

	cache            *certmagic.Cache
	cm, od           *certmagic.Config
	issuer, odIssuer *certmagic.ACMEIssuer
	ctx              context.Context
	cancel           context.CancelFunc

	// have is the set of names with a certificate being served (exact
	// names and "*.suffix" patterns), rebuilt by refresh.
	have atomic.Pointer[map[string]struct{}]

	mu sync.Mutex
	// managed are the exact hosts handed to certmagic.
	managed map[string]bool
	// states are the ACME hosts' states from certmagic's events.
	states map[string]*certstore.Info
	// onDemandAt rate-limits on-demand orders per name.
	onDemandAt map[string]time.Time
	// failures counts consecutive failed orders per host.
	failures   map[string]int
	odInterval time.Duration
	staticSeen string
	// absentSince is when a managed host left the route table.
	absentSince map[string]time.Time
	// lastState is the certs/state.json content last written (refreshMu).
	lastState string
	// lastTick is when Run's loop last refreshed (its goroutine only).
	lastTick time.Time
	// refreshMu serializes refreshes.
	refreshMu sync.Mutex

	handshakes *prometheus.CounterVec
	notAfter   *prometheus.GaugeVec
	protoReqs  *prometheus.CounterVec
	// byProto are protoReqs' children: [https][h2].
	byProto    [2][2]prometheus.Counter
	hsOK       prometheus.Counter
	certEvents *prometheus.CounterVec
}

// staticSet is the loaded static store.
type staticSet struct {
	certs map[string]*tls.Certificate // host or "*.suffix"
	errs  map[string]error
}

func newTLSEdge(s *Server) (*tlsEdge, error) {
	t := &tlsEdge{
		s: s, logger: s.logger.Named("tls"), stateDir: s.cfg.StateDir,
		managed: map[string]bool{}, states: map[string]*certstore.Info{}, onDemandAt: map[string]time.Time{}, failures: map[string]int{}, absentSince: map[string]time.Time{},
		odInterval: s.cfg.ACME.OnDemandInterval,
	}
	if t.odInterval <= 0 {
		t.odInterval = 10 * time.Minute
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	empty := map[string]struct{}{}
	t.have.Store(&empty)
	t.static.Store(&staticSet{certs: map[string]*tls.Certificate{}, errs: map[string]error{}})
	fb, err := selfSigned()
	if err != nil {
		return nil, err
	}
	t.fallback = fb
	t.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "tls_handshakes_total",
		Help: "TLS handshakes by result: ok, fallback (no certificate yet: 503 page), no_certificate, error.",
	}, []string{"result"})
	t.notAfter = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "gordon_edge", Name: "tls_cert_not_after_seconds",
		Help: "Expiry (unix seconds) of the certificate served for a host.",
	}, []string{"host"})
	t.protoReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "http_requests_by_protocol_total",
		Help: "Requests by protocol (HTTP/1.1, HTTP/2.0) and scheme: every HTTPS request, and the plain HTTP requests handled by net/http.",
	}, []string{"proto", "scheme"})
	t.certEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "tls_cert_events_total",
		Help: "Certificate obtain and renewal outcomes: obtained, renewed, failed.",
	}, []string{"event"})
	s.metrics.reg.MustRegister(t.handshakes, t.notAfter, t.protoReqs, t.certEvents)
	for i, scheme := range []string{"http", "https"} {
		for j, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
			t.byProto[i][j] = t.protoReqs.WithLabelValues(proto, scheme)
		}
	}
	t.hsOK = t.handshakes.WithLabelValues("ok")
	if !s.cfg.ACME.Disabled {
		if err := t.setupACME(); err != nil {
			return nil, err
		}
	}
	t.reloadStatic()
	return t, nil
}

// tlsConfig is the HTTPS listener's configuration: TLS 1.2 and 1.3,
// AEAD suites with forward secrecy, ALPN h2, http/1.1 (and acme-tls/1 for
// TLS-ALPN-01).
func (t *tlsEdge) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos:     []string{"h2", "http/1.1", "acme-tls/1"},
		GetCertificate: t.getCertificate,
	}
}

// getCertificate picks host's certificate: a TLS-ALPN-01 challenge goes to
// certmagic; then the static store (exact, then wildcard); then certmagic's
// cache (exact managed hosts; names under a routed wildcard on demand);
// a routed host without one gets the self-signed fallback (so HTTPS can
// answer 503 with a page); an unrouted host fails the handshake.
func (t *tlsEdge) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := normalizeHost(hello.ServerName)
	if t.cm != nil && len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == "acme-tls/1" {
		return t.cm.GetCertificate(hello)
	}
	if name == "" {
		return t.defaultCertificate(hello)
	}
	if c := t.staticFor(name); c != nil {
		t.hsOK.Inc()
		return c, nil
	}
	rt := t.routeFor(name)
	if rt == nil || rt.tls == tlsNever {
		t.handshakes.WithLabelValues("no_certificate").Inc()
		return nil, fmt.Errorf("gordon-edge: no certificate for %q (host not routed over HTTPS)", name)
	}
	if t.cm != nil && name != "" {
		cfg := t.cm
		if rt.suffix != "" {
			cfg = t.od
		}
		if c, err := cfg.GetCertificate(hello); err == nil && c != nil {
			t.hsOK.Inc()
			return c, nil
		}
	}
	t.handshakes.WithLabelValues("fallback").Inc()
	return t.fallback, nil
}

// defaultCertificate serves a handshake without a server name (SNI):
// the certificate of Config.DefaultCertHost, else the only one served
// (static, or ACME's for an exact host); none fails the handshake.
func (t *tlsEdge) defaultCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := normalizeHost(t.s.cfg.DefaultCertHost)
	if name == "" {
		if have := *t.have.Load(); len(have) == 1 {
			for n := range have {
				name = n
			}
		}
	}
	if name != "" {
		if c := t.static.Load().certs[name]; c != nil {
			t.hsOK.Inc()
			return c, nil
		}
		if c := t.staticFor(name); c != nil {
			t.hsOK.Inc()
			return c, nil
		}
		if t.cm != nil && !strings.HasPrefix(name, "*.") {
			h := *hello
			h.ServerName = name
			if c, err := t.cm.GetCertificate(&h); err == nil && c != nil {
				t.hsOK.Inc()
				return c, nil
			}
		}
	}
	t.handshakes.WithLabelValues("no_certificate").Inc()
	return nil, errors.New("gordon-edge: no server name (SNI) and no default certificate: name one with --default-cert HOST")
}

// staticFor returns the static certificate covering name, or nil.
func (t *tlsEdge) staticFor(name string) *tls.Certificate {
	st := t.static.Load()
	if c := st.certs[name]; c != nil {
		return c
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		return st.certs["*"+name[i:]]
	}
	return nil
}

// routeFor resolves name on the serving snapshot.
func (t *tlsEdge) routeFor(name string) *httpRoute {
	snap := t.s.snap.Load()
	if snap == nil {
		return nil
	}
	if r, ok := snap.exact[name]; ok {
		return r
	}
	return snap.matchWildcard(name)
}

// hasCert reports whether a certificate for name is being served.
func (t *tlsEdge) hasCert(name string) bool {
	have := *t.have.Load()
	if _, ok := have[name]; ok {
		return true
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		_, ok := have["*"+name[i:]]
		return ok
	}
	return false
}

// holds reports whether a certificate for name is loaded (static or in
// certmagic's cache), for names refresh has not seen yet (on demand).
func (t *tlsEdge) holds(name string) bool {
	if t.staticFor(name) != nil {
		return true
	}
	if t.cache == nil {
		return false
	}
	for _, c := range t.cache.AllMatchingCertificates(name) {
		if time.Now().Before(c.Leaf.NotAfter) {
			return true
		}
	}
	return false
}

// TLS policies (routetable.HTTPRoute.TLS).
const (
	tlsAuto   = "auto"
	tlsAlways = "always"
	tlsNever  = "never"
)

// plainSlow reports whether a plain HTTP request for rt must go through
// ServeHTTP (redirect, or an h2c backend) instead of the event loop.
func (t *tlsEdge) plainSlow(rt *httpRoute, name string) bool {
	switch rt.tls {
	case tlsNever:
		return false
	case tlsAlways:
		return true
	}
	if rt.suffix != "" {
		return true // decided per name in ServeHTTP
	}
	return t.hasCert(name)
}

// annotate sets every route's redirect flag on snap (before it serves, and
// again at each refresh).
func (t *tlsEdge) annotate(snap *snapshot) {
	for name, r := range snap.exact {
		r.slowPlain.Store(r.h2c || t.plainSlow(r, name))
	}
	for _, r := range snap.wildcards {
		r.slowPlain.Store(r.h2c || t.plainSlow(r, ""))
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
		if t.issuer != nil && t.issuer.HandleHTTPChallenge(w, r) {
			return true
		}
		http.Error(w, "gordon-edge: no pending ACME challenge for this token", http.StatusNotFound)
		return true
	}
	name := normalizeHost(r.Host)
	rt := t.routeFor(name)
	if rt == nil || rt.tls == tlsNever {
		return false
	}
	if r.TLS == nil {
		if rt.tls == tlsAlways || t.hasCert(name) {
			t.redirect(w, r, name)
			return true
		}
		return false
	}
	if !t.hasCert(name) && !t.holds(name) {
		w.Header().Set("Retry-After", "30")
		writeEdgeError(w, http.StatusServiceUnavailable, "gordon-edge: no certificate for "+name+" yet: it is being obtained (see `docker gordon certs ls`); retry shortly\n")
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

// reloadStatic re-reads the static store when its files changed; a bad
// pair is logged and keeps only its own host out.
func (t *tlsEdge) reloadStatic() {
	now := time.Now()
	all := certstore.LoadStatic(t.stateDir, now)
	var stamp strings.Builder
	for _, st := range all {
		stamp.WriteString(st.Host + "=" + st.Stamp + ";")
	}
	t.mu.Lock()
	if stamp.String() == t.staticSeen {
		t.mu.Unlock()
		return
	}
	t.staticSeen = stamp.String()
	t.mu.Unlock()
	set := &staticSet{certs: map[string]*tls.Certificate{}, errs: map[string]error{}}
	for _, st := range all {
		if st.Err != nil {
			set.errs[st.Host] = st.Err
			t.logger.Error("static certificate refused; its host is served without it", "host", st.Host, "error", st.Err)
			t.certEvents.WithLabelValues("failed").Inc()
			continue
		}
		set.certs[st.Host] = st.Cert
	}
	t.static.Store(set)
	t.logger.Info("static certificates loaded", "count", len(set.certs), "refused", len(set.errs))
}

// unmanageAfter is how long an exact host may be absent from the route
// table before its certificate stops being managed.
const unmanageAfter = 10 * time.Minute

// close stops the certificate work: the ACME context, certmagic's cache
// and, once a refresh under way has finished, every later refresh.
func (t *tlsEdge) close() {
	t.cancel()
	if t.cache != nil {
		t.cache.Stop()
	}
	// A refresh under way (they run in the background) finishes before
	// close returns; later ones return at once (ctx).
	t.refreshMu.Lock()
	//lint:ignore SA2001 a barrier, nothing to guard
	t.refreshMu.Unlock()
}

// selfSigned makes the fallback certificate (ECDSA P-256, one day).
func selfSigned() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "gordon-edge fallback (no certificate for this host yet)"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

var errOnDemandRefused = errors.New("gordon-edge: not a name under a routed wildcard")

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
		t.setHTTPPort(ta.Port)
	}
	ln, srv, err := t.listen(lc, s.cfg.HTTPSAddr)
	if err != nil {
		t.close()
		return nil, nil, err
	}
	a := ln.Addr().String()
	s.httpsAddr.Store(&a)
	s.tls = t
	t.refresh(true)
	s.logger.Info("gordon-edge serving https", "https", a, "acme", !s.cfg.ACME.Disabled)
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
			s.logger.Warn("https shutdown incomplete", "error", err)
			_ = srv.Close()
		}
		s.tls.close()
	}()
	return done
}

// validateRouteTLS checks a route's tls policy and backend protocol.
func validateRouteTLS(r *routetable.HTTPRoute) error {
	switch r.TLS {
	case "", tlsAuto, tlsAlways, tlsNever:
	default:
		return fmt.Errorf("route table: http host %q: tls %q: want auto, always or never: %w", r.Host, r.TLS, ErrInvalidTable)
	}
	switch r.Protocol {
	case "", "http1", "h2c":
	default:
		return fmt.Errorf("route table: http host %q: protocol %q: want http1 or h2c: %w", r.Host, r.Protocol, ErrInvalidTable)
	}
	if r.HSTS != "" && (!routetable.ValidHSTS(r.HSTS) || r.TLS == tlsNever) {
		return fmt.Errorf("route table: http host %q: hsts %q: want a Strict-Transport-Security value (max-age=SECONDS[; includeSubDomains][; preload]) on a host served over HTTPS: %w", r.Host, r.HSTS, ErrInvalidTable)
	}
	return nil
}
