package edgetls

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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

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
	// OnDemandMaxPending bounds the on-demand orders under way at once
	// (default DefaultOnDemandMaxPending); OnDemandPerHour how many may
	// start an hour (default DefaultOnDemandPerHour). OnDemandAsk, when
	// set, is an http(s) URL asked GET <url>?domain=<name> before each
	// on-demand order: only a 200 within 5 s lets it start (Caddy's
	// on_demand_tls ask).
	OnDemandMaxPending, OnDemandPerHour int
	OnDemandAsk                         string
	// RenewWindow is the fraction of a certificate's lifetime left at
	// which it is renewed (default certmagic's, 1/3).
	RenewWindow float64
	// RenewCheckInterval is how often certificates are checked for renewal
	// (default certmagic's, 10 min).
	RenewCheckInterval time.Duration
}

// A Route is how a route table routes one host name.
type Route struct {
	// Exact: by the name itself, not by a wildcard ("*.suffix") over it.
	Exact bool
	// HTTPS: its TLS policy is not "never".
	HTTPS bool
}

// Table is one route table (the edge's serving snapshot) as the
// certificates see it.
type Table interface {
	// Route returns how name (normalized) is routed: by its exact host if
	// the table names it, else by the longest wildcard covering it; false
	// when neither.
	Route(name string) (Route, bool)
	// ExactHTTPS calls fn with every exact host routed over HTTPS.
	ExactHTTPS(fn func(host string))
}

// Options are what Certs is given by the edge.
type Options struct {
	// StateDir is the edge's state directory (certificates under
	// <StateDir>/edge/certs, certstore).
	StateDir string
	// ACME configures issuance.
	ACME ACMEConfig
	// DefaultCertHost names the certificate served without SNI ("": the
	// only one served, if exactly one is).
	DefaultCertHost string
	Logger          hclog.Logger
	// Registerer takes the certificate metrics.
	Registerer prometheus.Registerer
	// Routes returns the serving route table (nil before the first).
	Routes func() Table
	// Refreshed is called by each refresh, with the table it used, once the
	// served names changed (Served), before it returns; refreshes are
	// serialized.
	Refreshed func(Table)
	// Storage, when set, is certmagic's storage instead of the file
	// storage under <StateDir>/edge/certs/acme: a storage shared by every
	// edge of a cluster (edgeproxy/certshare), whose locks make one edge
	// order each name and whose challenge tokens let any edge answer the
	// HTTP-01 challenge.
	Storage certmagic.Storage
}

// Certs is the edge's certificate state: the static store, certmagic's
// cache and configs, the names served, the per-host ACME states and the
// certificate metrics.
type Certs struct {
	opts     Options
	logger   hclog.Logger
	stateDir string
	// defaultName is Options.DefaultCertHost normalized.
	defaultName string

	static   atomic.Pointer[staticSet]
	fallback *tls.Certificate

	cache            *certmagic.Cache
	cm, od           *certmagic.Config
	issuer, odIssuer *certmagic.ACMEIssuer
	ctx              context.Context
	cancel           context.CancelFunc

	// served is the set of names with a certificate being served, rebuilt
	// by refresh.
	served atomic.Pointer[Served]

	mu sync.Mutex
	// managed are the exact hosts handed to certmagic.
	managed map[string]bool
	// states are the ACME hosts' states from certmagic's events.
	states map[string]*certstore.Info
	// onDemandAt rate-limits on-demand orders per name.
	onDemandAt map[string]time.Time
	// odBounds bound the on-demand orders (nil without ACME);
	// challenges the challenge lookups' storage reads.
	odBounds   *onDemandBounds
	challenges *challengeLookups
	// failures counts consecutive failed orders per host.
	failures   map[string]int
	odInterval time.Duration
	staticSeen string
	// absentSince is when a managed host left the route table.
	absentSince map[string]time.Time
	// lastState is the certs/state.json content last written (refreshMu).
	lastState string
	// refreshMu serializes refreshes.
	refreshMu sync.Mutex

	handshakes *prometheus.CounterVec
	notAfter   *prometheus.GaugeVec
	hsOK       prometheus.Counter
	certEvents *prometheus.CounterVec
	// odRefused counts refused on-demand orders by reason;
	// challengeReads the challenge lookups that read the storage.
	odRefused      *prometheus.CounterVec
	challengeReads prometheus.Counter
}

// staticSet is the loaded static store.
type staticSet struct {
	certs map[string]*tls.Certificate // host or "*.suffix"
	errs  map[string]error
}

// New sets up the certificate state: the self-signed fallback, the
// metrics, certmagic (unless ACME is disabled) and the static store as it
// is on disk. Refresh builds the served names.
func New(opts Options) (*Certs, error) {
	c := &Certs{
		opts: opts, logger: opts.Logger, stateDir: opts.StateDir, defaultName: hostName(opts.DefaultCertHost),
		managed: map[string]bool{}, states: map[string]*certstore.Info{}, onDemandAt: map[string]time.Time{}, failures: map[string]int{}, absentSince: map[string]time.Time{},
		odInterval: opts.ACME.OnDemandInterval, challenges: newChallengeLookups(),
	}
	if c.odInterval <= 0 {
		c.odInterval = 10 * time.Minute
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.served.Store(&Served{names: map[string]struct{}{}})
	c.static.Store(&staticSet{certs: map[string]*tls.Certificate{}, errs: map[string]error{}})
	fb, err := SelfSigned()
	if err != nil {
		return nil, err
	}
	c.fallback = fb
	c.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "tls_handshakes_total",
		Help: "TLS handshakes by result: ok, fallback (no certificate yet: 503 page), no_certificate, error.",
	}, []string{"result"})
	c.notAfter = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "gordon_edge", Name: "tls_cert_not_after_seconds",
		Help: "Expiry (unix seconds) of the certificate served for a host.",
	}, []string{"host"})
	c.certEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "tls_cert_events_total",
		Help: "Certificate obtain and renewal outcomes: obtained, renewed, failed.",
	}, []string{"event"})
	c.odRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "tls_on_demand_refused_total",
		Help: "On-demand certificate orders refused, by reason: not_routed, name_interval, pending, ask, rate.",
	}, []string{"reason"})
	c.challengeReads = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "gordon_edge", Name: "acme_challenge_storage_reads_total",
		Help: "HTTP-01 challenge requests that read the certificate storage (routed HTTPS hosts only, misses remembered 1 s, at most 20 a second).",
	})
	opts.Registerer.MustRegister(c.handshakes, c.notAfter, c.certEvents, c.odRefused, c.challengeReads)
	c.hsOK = c.handshakes.WithLabelValues("ok")
	if !opts.ACME.Disabled {
		if err := c.setupACME(); err != nil {
			return nil, err
		}
	}
	c.reloadStatic()
	return c, nil
}

// TLSConfig is the HTTPS listener's configuration: TLS 1.2 and 1.3,
// AEAD suites with forward secrecy, ALPN h2, http/1.1 (and acme-tls/1 for
// TLS-ALPN-01).
func (c *Certs) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos:     []string{"h2", "http/1.1", "acme-tls/1"},
		GetCertificate: c.getCertificate,
	}
}

// getCertificate picks host's certificate: a TLS-ALPN-01 challenge goes to
// certmagic; then the static store (exact, then wildcard); then certmagic's
// cache (exact managed hosts; names under a routed wildcard on demand);
// a routed host without one gets the self-signed fallback (so HTTPS can
// answer 503 with a page); an unrouted host fails the handshake.
func (c *Certs) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := hostName(hello.ServerName)
	if c.cm != nil && len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == "acme-tls/1" {
		return c.cm.GetCertificate(hello)
	}
	if name == "" {
		return c.defaultCertificate(hello)
	}
	if crt := c.staticFor(name); crt != nil {
		c.hsOK.Inc()
		return crt, nil
	}
	rt, ok := c.route(name)
	if !ok || !rt.HTTPS {
		c.handshakes.WithLabelValues("no_certificate").Inc()
		return nil, fmt.Errorf("gordon-edge: no certificate for %q (host not routed over HTTPS)", name)
	}
	if c.cm != nil && name != "" {
		cfg := c.cm
		if !rt.Exact {
			cfg = c.od
		}
		if crt, err := cfg.GetCertificate(hello); err == nil && crt != nil {
			c.hsOK.Inc()
			return crt, nil
		}
	}
	c.handshakes.WithLabelValues("fallback").Inc()
	return c.fallback, nil
}

// defaultCertificate serves a handshake without a server name (SNI):
// the certificate of Options.DefaultCertHost, else the only one served
// (static, or ACME's for an exact host); none fails the handshake.
func (c *Certs) defaultCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := c.defaultName
	if name == "" {
		name, _ = c.Served().only()
	}
	if name != "" {
		if crt := c.static.Load().certs[name]; crt != nil {
			c.hsOK.Inc()
			return crt, nil
		}
		if crt := c.staticFor(name); crt != nil {
			c.hsOK.Inc()
			return crt, nil
		}
		if c.cm != nil && !strings.HasPrefix(name, "*.") {
			h := *hello
			h.ServerName = name
			if crt, err := c.cm.GetCertificate(&h); err == nil && crt != nil {
				c.hsOK.Inc()
				return crt, nil
			}
		}
	}
	c.handshakes.WithLabelValues("no_certificate").Inc()
	return nil, errors.New("gordon-edge: no server name (SNI) and no default certificate: name one with --default-cert HOST")
}

// route resolves name on the serving route table.
func (c *Certs) route(name string) (Route, bool) {
	tab := c.opts.Routes()
	if tab == nil {
		return Route{}, false
	}
	return tab.Route(name)
}

// staticFor returns the static certificate covering name, or nil.
func (c *Certs) staticFor(name string) *tls.Certificate {
	st := c.static.Load()
	if crt := st.certs[name]; crt != nil {
		return crt
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		return st.certs["*"+name[i:]]
	}
	return nil
}

// Holds reports whether a certificate for name is loaded (static or in
// certmagic's cache), for names refresh has not seen yet (on demand).
func (c *Certs) Holds(name string) bool {
	if c.staticFor(name) != nil {
		return true
	}
	if c.cache == nil {
		return false
	}
	for _, crt := range c.cache.AllMatchingCertificates(name) {
		if time.Now().Before(crt.Leaf.NotAfter) {
			return true
		}
	}
	return false
}

// reloadStatic re-reads the static store when its files changed; a bad
// pair is logged and keeps only its own host out.
func (c *Certs) reloadStatic() {
	now := time.Now()
	all := certstore.LoadStatic(c.stateDir, now)
	var stamp strings.Builder
	for _, st := range all {
		stamp.WriteString(st.Host + "=" + st.Stamp + ";")
	}
	c.mu.Lock()
	if stamp.String() == c.staticSeen {
		c.mu.Unlock()
		return
	}
	c.staticSeen = stamp.String()
	c.mu.Unlock()
	set := &staticSet{certs: map[string]*tls.Certificate{}, errs: map[string]error{}}
	for _, st := range all {
		if st.Err != nil {
			set.errs[st.Host] = st.Err
			c.logger.Error("static certificate refused; its host is served without it", "host", st.Host, "error", st.Err)
			c.certEvents.WithLabelValues("failed").Inc()
			continue
		}
		set.certs[st.Host] = st.Cert
	}
	c.static.Store(set)
	c.logger.Info("static certificates loaded", "count", len(set.certs), "refused", len(set.errs))
}

// Close stops the certificate work: the ACME context, certmagic's cache
// and, once a refresh under way has finished, every later refresh.
func (c *Certs) Close() {
	c.cancel()
	if c.cache != nil {
		c.cache.Stop()
	}
	// A refresh under way (they run in the background) finishes before
	// Close returns; later ones return at once (ctx).
	c.refreshMu.Lock()
	//lint:ignore SA2001 a barrier, nothing to guard
	c.refreshMu.Unlock()
}

// SelfSigned makes the fallback certificate (ECDSA P-256, one day).
func SelfSigned() (*tls.Certificate, error) {
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
