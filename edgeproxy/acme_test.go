package edgeproxy_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/letsencrypt/challtestsrv"
	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// pebbleCA is an in-process Pebble ACME server whose VA resolves every
// name to 127.0.0.1 through challtestsrv and validates on the edge's ports.
type pebbleCA struct {
	dirURL  string
	apiRoot []byte // PEM of the ACME server's own TLS certificate
	ca      *ca.CAImpl
	srv     *httptest.Server
	// orders and finalized count new-order and finalize requests (each
	// finalize issues one certificate).
	orders, finalized *atomic.Int32
}

// issuerPool trusts Pebble's issuing root.
func (p *pebbleCA) issuerPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.GetRootCert(0).Cert)
	return pool
}

// startPebble runs Pebble validating HTTP-01 on httpPort and TLS-ALPN-01 on
// tlsPort; validity sets the certificate lifetime (0: Pebble's default).
func startPebble(t *testing.T, httpPort, tlsPort int, validity time.Duration) *pebbleCA {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	t.Setenv("PEBBLE_AUTHZREUSE", "0")
	dnsAddr := freePort(t)
	quiet := log.New(io.Discard, "", 0)
	if testing.Verbose() {
		quiet = log.New(os.Stderr, "pebble ", log.LstdFlags)
	}
	cs, err := challtestsrv.New(challtestsrv.Config{DNSAddrs: []string{dnsAddr}, Log: quiet})
	require.NoError(t, err)
	cs.SetDefaultDNSIPv4("127.0.0.1")
	cs.SetDefaultDNSIPv6("") // an AAAA answer would send the VA to ::1
	go cs.Run()
	t.Cleanup(cs.Shutdown)

	store := db.NewMemoryStore()
	profiles := map[string]ca.Profile{"default": {Description: "test", ValidityPeriod: uint64(validity / time.Second)}}
	c := ca.New(quiet, store, "", "ecdsa", 0, 1, profiles)
	v := va.New(quiet, httpPort, tlsPort, false, dnsAddr, store)
	w := wfe.New(quiet, store, v, c, []string{"pebble.letsencrypt.org"}, false, false, 1, 1)
	orders, finalized := &atomic.Int32{}, &atomic.Int32{}
	h := w.Handler()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" {
			orders.Add(1)
		}
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/finalize-order/") {
			finalized.Add(1)
		}
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	root := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &pebbleCA{dirURL: srv.URL + wfe.DirectoryPath, apiRoot: root, ca: c, srv: srv, orders: orders, finalized: finalized}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// acmeEdge starts Pebble and an edge on fixed ports with ACME against it.
func acmeEdge(t *testing.T, stateDir string, validity time.Duration, tune func(*edgeproxy.ACMEConfig)) (*edge, *pebbleCA) {
	t.Helper()
	httpAddr, httpsAddr := freePort(t), freePort(t)
	p := startPebble(t, portOf(t, httpAddr), portOf(t, httpsAddr), validity)
	e := startACMEEdge(t, stateDir, httpAddr, httpsAddr, p, tune)
	return e, p
}

func startACMEEdge(t *testing.T, stateDir, httpAddr, httpsAddr string, p *pebbleCA, tune func(*edgeproxy.ACMEConfig)) *edge {
	t.Helper()
	return startEdge(t, func(c *edgeproxy.Config) {
		if stateDir != "" {
			c.StateDir = stateDir
		}
		c.HTTPAddr, c.HTTPSAddr = httpAddr, httpsAddr
		c.ACME = edgeproxy.ACMEConfig{CA: p.dirURL, CARootPEM: p.apiRoot, Email: "ops@example.org"}
		if testing.Verbose() {
			c.Logger = hclog.New(&hclog.LoggerOptions{Name: "edge", Level: hclog.Debug, Output: os.Stderr})
		}
		if tune != nil {
			tune(&c.ACME)
		}
	})
}

// waitIssued waits until the edge serves host a certificate that Pebble's
// root verifies, and returns its leaf.
func waitIssued(t *testing.T, e *edge, host string, pool *x509.CertPool, within time.Duration) *x509.Certificate {
	t.Helper()
	return waitIssuedAt(t, e.srv.HTTPSAddr(), host, pool, within)
}

// waitIssuedAt is waitIssued for the edge serving HTTPS at httpsAddr.
func waitIssuedAt(t *testing.T, httpsAddr, host string, pool *x509.CertPool, within time.Duration) *x509.Certificate {
	t.Helper()
	var leaf *x509.Certificate
	served := func() error {
		conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: host, RootCAs: pool})
		if err != nil {
			return err
		}
		defer conn.Close()
		leaf = conn.ConnectionState().PeerCertificates[0]
		return nil
	}
	if assert.Eventually(t, func() bool { return served() == nil }, within, 100*time.Millisecond) {
		return leaf
	}
	t.Fatalf("no certificate issued for %s within %s: %v", host, within, served())
	return nil
}

func acmeState(t *testing.T, dir, host string) certstore.Info {
	t.Helper()
	infos, err := certstore.ReadState(dir)
	require.NoError(t, err)
	for _, in := range infos {
		if in.Host == host {
			return in
		}
	}
	return certstore.Info{}
}

// ACME HTTP-01 (R63): a routed exact host gets a certificate in the
// background; then HTTPS serves it over HTTP/2, plain HTTP is redirected;
// storage is 0700/0600 files; an unrouted host is refused without an order.
// After a restart with the CA gone the stored certificate is served at once.
func TestACMEHTTP01IssuesRoutedHostAndRestartReusesIt(t *testing.T) {
	dir := t.TempDir()
	e, p := acmeEdge(t, dir, 0, func(a *edgeproxy.ACMEConfig) { a.DisableTLSALPN01 = true })
	b := protoBackend(t, "blue")
	e.publish(t, httpTable(1, tlsRoute("app.test", "", addrOf(b))))

	leaf := waitIssued(t, e, "app.test", p.issuerPool(), 60*time.Second)
	assert.Equal(t, []string{"app.test"}, leaf.DNSNames)
	assert.Equal(t, x509.ECDSA, leaf.PublicKeyAlgorithm, "ECDSA P-256 keys for obtained certificates")
	resp, err := httpsClient(e, p.issuerPool(), true).Get("https://app.test/")
	require.NoError(t, err)
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, "blue HTTP/1.1 https", body(t, resp))
	require.Eventually(t, func() bool {
		r, err := noRedirect(e).Get("http://app.test/")
		require.NoError(t, err)
		r.Body.Close()
		return r.StatusCode == 308
	}, 5*time.Second, 20*time.Millisecond, "auto: plain HTTP redirected once a certificate is served")
	require.Eventually(t, func() bool { return acmeState(t, dir, "app.test").State == certstore.StateValid }, 5*time.Second, 20*time.Millisecond)

	_, err = tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "unrouted.test", RootCAs: p.issuerPool()})
	assert.Error(t, err, "an unrouted host gets no certificate")

	var keys int
	require.NoError(t, filepath.Walk(filepath.Join(certstore.Root(dir), certstore.ACMEDir), func(path string, fi os.FileInfo, err error) error {
		require.NoError(t, err)
		if fi.IsDir() {
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), path)
		} else {
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), path)
			if strings.HasSuffix(path, ".key") {
				keys++
			}
		}
		assert.NotContains(t, path, "unrouted.test", "nothing ordered for an unrouted host")
		return nil
	}))
	assert.GreaterOrEqual(t, keys, 2, "account key and certificate key stored")

	// Restart with the CA gone: the stored certificate is served at once.
	e.stop()
	p.srv.Close()
	e2 := startACMEEdge(t, dir, freePort(t), freePort(t), p, nil)
	e2.publish(t, httpTable(2, tlsRoute("app.test", "", addrOf(b))))
	conn, err := tls.Dial("tcp", e2.srv.HTTPSAddr(), &tls.Config{ServerName: "app.test", RootCAs: p.issuerPool()})
	require.NoError(t, err, "stored certificate served right after restart")
	assert.Equal(t, leaf.SerialNumber, conn.ConnectionState().PeerCertificates[0].SerialNumber, "the same certificate, nothing re-ordered")
	conn.Close()
}

// ACME TLS-ALPN-01 only: the challenge is answered by the HTTPS listener.
func TestACMETLSALPN01IssuesRoutedHost(t *testing.T) {
	e, p := acmeEdge(t, "", 0, func(a *edgeproxy.ACMEConfig) { a.DisableHTTP01 = true })
	b := nameBackend(t, "green")
	e.publish(t, httpTable(1, tlsRoute("alpn.test", "", addrOf(b))))
	waitIssued(t, e, "alpn.test", p.issuerPool(), 60*time.Second)
	resp, err := httpsClient(e, p.issuerPool(), false).Get("https://alpn.test/")
	require.NoError(t, err)
	assert.Equal(t, "green", body(t, resp))
}

// A wildcard route gets on-demand certificates for names under it only;
// a name outside every routed wildcard is refused (no order).
func TestACMEWildcardOnDemand(t *testing.T) {
	dir := t.TempDir()
	e, p := acmeEdge(t, dir, 0, nil)
	b := nameBackend(t, "tenant")
	e.publish(t, httpTable(1, tlsRoute("*.apps.test", "", addrOf(b))))
	leaf := waitIssued(t, e, "one.apps.test", p.issuerPool(), 60*time.Second)
	assert.Equal(t, []string{"one.apps.test"}, leaf.DNSNames)
	resp, err := httpsClient(e, p.issuerPool(), true).Get("https://one.apps.test/")
	require.NoError(t, err)
	assert.Equal(t, "tenant", body(t, resp))

	_, err = tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "evil.other.test", RootCAs: p.issuerPool()})
	assert.Error(t, err)
	_, err = os.Stat(filepath.Join(certstore.Root(dir), certstore.ACMEDir))
	require.NoError(t, err)
	require.NoError(t, filepath.Walk(filepath.Join(certstore.Root(dir), certstore.ACMEDir), func(path string, _ os.FileInfo, err error) error {
		assert.NotContains(t, path, "other.test")
		return err
	}))
}

// Short-lived certificates are renewed ahead of expiry (slow: set
// GORDON_TEST_ACME_RENEWAL=1).
func TestACMERenewsShortLivedCertificate(t *testing.T) {
	if os.Getenv("GORDON_TEST_ACME_RENEWAL") == "" {
		t.Skip("slow; set GORDON_TEST_ACME_RENEWAL=1")
	}
	e, p := acmeEdge(t, "", 90*time.Second, func(a *edgeproxy.ACMEConfig) {
		a.RenewWindow = 0.9
		a.RenewCheckInterval = 2 * time.Second
		a.DisableTLSALPN01 = true
	})
	b := nameBackend(t, "blue")
	e.publish(t, httpTable(1, tlsRoute("renew.test", "", addrOf(b))))
	first := waitIssued(t, e, "renew.test", p.issuerPool(), 60*time.Second)
	require.Eventually(t, func() bool {
		conn, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "renew.test", RootCAs: p.issuerPool()})
		if err != nil {
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(first.SerialNumber) != 0
	}, 3*time.Minute, 2*time.Second, "certificate not renewed within 3 minutes")
}
