package edgetls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// table is a route table: exact hosts and wildcard suffixes (".x.org"),
// each with whether it is served over HTTPS.
type table struct {
	exact, wildcard map[string]bool
}

func (t *table) Route(name string) (Route, bool) {
	if https, ok := t.exact[name]; ok {
		return Route{Exact: true, HTTPS: https}, true
	}
	for suffix, https := range t.wildcard {
		if len(name) > len(suffix) && name[len(name)-len(suffix):] == suffix {
			return Route{HTTPS: https}, true
		}
	}
	return Route{}, false
}

func (t *table) ExactHTTPS(fn func(string)) {
	for name, https := range t.exact {
		if https {
			fn(name)
		}
	}
}

// addStatic stores a valid self-signed pair for host (its only DNS name)
// as a static certificate under dir.
func addStatic(t *testing.T, dir, host string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host},
		DNSNames: []string{host}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	_, err = certstore.AddStatic(dir, host,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), time.Now())
	require.NoError(t, err)
}

// newCerts is Certs over dir's store and tab, ACME off unless tune turns
// it on, refreshed once without ACME (with ACME a refresh would start
// ordering the exact hosts).
func newCerts(t *testing.T, dir string, tab *table, tune func(*Options)) *Certs {
	t.Helper()
	opts := Options{StateDir: dir, ACME: ACMEConfig{Disabled: true}, Logger: hclog.NewNullLogger(),
		Registerer: prometheus.NewRegistry(), Routes: func() Table { return tab }}
	if tune != nil {
		tune(&opts)
	}
	c, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	if opts.ACME.Disabled {
		c.Refresh(true)
	}
	return c
}

// subject returns the common name of the certificate a ClientHello for
// sni gets, or the handshake's error.
func subject(c *Certs, sni string) (string, error) {
	crt, err := c.TLSConfig().GetCertificate(&tls.ClientHelloInfo{ServerName: sni, SupportedProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return "", err
	}
	return crt.Leaf.Subject.CommonName, nil
}

// R63: the static store answers first (exact, then the parent's
// wildcard, in any case); a routed host without a certificate gets the
// fallback; a host not routed over HTTPS fails the handshake.
func TestSNIPicksStaticExactThenWildcardElseFallbackForRoutedHostsOnly(t *testing.T) {
	dir := t.TempDir()
	addStatic(t, dir, "a.example.com")
	addStatic(t, dir, "*.example.org")
	tab := &table{exact: map[string]bool{"a.example.com": true, "b.example.com": true, "plain.example.com": false},
		wildcard: map[string]bool{".example.net": true}}
	c := newCerts(t, dir, tab, nil)

	for sni, want := range map[string]string{
		"a.example.com": "a.example.com", "A.Example.COM": "a.example.com",
		"x.example.org": "*.example.org", // static wildcard, routed or not
		"b.example.com": "gordon-edge fallback (no certificate for this host yet)",
		"y.example.net": "gordon-edge fallback (no certificate for this host yet)",
	} {
		got, err := subject(c, sni)
		require.NoError(t, err, sni)
		assert.Equal(t, want, got, sni)
	}
	for _, sni := range []string{"plain.example.com", "unrouted.example.com", "example.org"} {
		_, err := subject(c, sni)
		assert.ErrorContains(t, err, "not routed over HTTPS", sni)
	}
	assert.Equal(t, 3.0, testutil.ToFloat64(c.handshakes.WithLabelValues("ok")))
	assert.Equal(t, 2.0, testutil.ToFloat64(c.handshakes.WithLabelValues("fallback")))
	assert.Equal(t, 3.0, testutil.ToFloat64(c.handshakes.WithLabelValues("no_certificate")))
}

// R63: a ClientHello without SNI gets the named default
// certificate, else the only one served; with several and none named it
// fails.
func TestNoSNIGetsTheNamedDefaultElseTheOnlyCertificate(t *testing.T) {
	dir := t.TempDir()
	addStatic(t, dir, "a.example.com")
	tab := &table{exact: map[string]bool{"a.example.com": true}}
	got, err := subject(newCerts(t, dir, tab, nil), "")
	require.NoError(t, err)
	assert.Equal(t, "a.example.com", got, "the only certificate")

	addStatic(t, dir, "b.example.com")
	_, err = subject(newCerts(t, dir, tab, nil), "")
	assert.ErrorContains(t, err, "no default certificate", "two certificates, none named")

	named := newCerts(t, dir, tab, func(o *Options) { o.DefaultCertHost = "B.example.com:443" })
	got, err = subject(named, "")
	require.NoError(t, err)
	assert.Equal(t, "b.example.com", got, "the named one, normalized")
}

// Refresh serves what the store holds (HasHost: the request's Host, a
// port ignored, an unusual spelling left to the caller), writes
// certs/state.json and hands the table it used to Refreshed.
func TestRefreshServesTheStoreWritesStateAndReportsTheTable(t *testing.T) {
	dir := t.TempDir()
	addStatic(t, dir, "*.example.org")
	tab := &table{exact: map[string]bool{"a.example.org": true}}
	var seen []Table
	c := newCerts(t, dir, tab, func(o *Options) { o.Refreshed = func(tt Table) { seen = append(seen, tt) } })

	s := c.Served()
	assert.True(t, s.Has("a.example.org"))
	assert.False(t, s.Has("example.org"))
	assert.True(t, s.HasHost([]byte("a.example.org:8443")))
	assert.False(t, s.HasHost([]byte("A.example.org")), "upper case: the caller normalizes")
	assert.False(t, s.HasHost([]byte("a.example.org.")), "trailing dot: the caller normalizes")
	assert.False(t, s.HasHost([]byte("a.example.com")))
	require.Len(t, seen, 1)
	assert.Same(t, tab, seen[0])

	infos, err := certstore.ReadState(dir)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, "*.example.org", infos[0].Host)
	assert.Equal(t, certstore.StateValid, infos[0].State)

	addStatic(t, dir, "b.example.com")
	c.Refresh(false)
	assert.NotSame(t, s, c.Served(), "a refresh stores a new set")
	assert.True(t, c.Served().Has("b.example.com"))
}

// ACME on demand orders only names under a wildcard routed over HTTPS,
// never an exact host (managed instead), at most once per interval.
func TestOnDemandOnlyUnderARoutedWildcardAndRateLimited(t *testing.T) {
	tab := &table{exact: map[string]bool{"a.example.com": true},
		wildcard: map[string]bool{".example.net": true, ".plain.example.org": false}}
	c := newCerts(t, t.TempDir(), tab, func(o *Options) {
		o.ACME = ACMEConfig{CA: "https://127.0.0.1:1/directory", OnDemandInterval: time.Hour}
	})
	ctx := context.Background()
	assert.ErrorContains(t, c.onDemandAllowed(ctx, "a.example.com"), "is managed, not on demand")
	assert.True(t, errors.Is(c.onDemandAllowed(ctx, "x.plain.example.org"), errOnDemandRefused))
	assert.True(t, errors.Is(c.onDemandAllowed(ctx, "unrouted.example.com"), errOnDemandRefused))
	require.NoError(t, c.onDemandAllowed(ctx, "x.example.net"))
	assert.ErrorContains(t, c.onDemandAllowed(ctx, "x.example.net"), "rate-limited")
	require.NoError(t, c.onDemandAllowed(ctx, "y.example.net"), "the limit is per name")
}
