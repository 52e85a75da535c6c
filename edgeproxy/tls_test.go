package edgeproxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// testCA is a throwaway CA that signs leaf certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gordon test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &testCA{cert: c, key: key, pool: pool}
}

// leaf returns PEM cert and key for names, valid from nb to na.
func (ca *testCA) leaf(t testing.TB, nb, na time.Time, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: nb, NotAfter: na,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

func (ca *testCA) valid(t testing.TB, names ...string) ([]byte, []byte) {
	return ca.leaf(t, time.Now().Add(-time.Hour), time.Now().Add(12*time.Hour), names...)
}

// startTLSEdge runs an edge with an HTTPS listener and ACME off.
func startTLSEdge(t *testing.T, stateDir string) *edge {
	t.Helper()
	return startEdge(t, func(c *edgeproxy.Config) {
		if stateDir != "" {
			c.StateDir = stateDir
		}
		c.HTTPSAddr = "127.0.0.1:0"
		c.ACME.Disabled = true
	})
}

// httpsClient dials the edge's HTTPS address whatever the URL host,
// trusting pool; H2 selects HTTP/2.
func httpsClient(e *edge, pool *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", e.srv.HTTPSAddr())
		},
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func noRedirect(e *edge) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", e.srv.HTTPAddr())
		}}}
}

func tlsRoute(host, policy string, addrs ...string) routetable.HTTPRoute {
	r := route(host, addrs...)
	r.TLS = policy
	return r
}

// protoBackend answers "name proto" (the protocol the edge used to reach it).
func protoBackend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name+" "+r.Proto+" "+r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(s.Close)
	return s
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// R62/R63: a static certificate is served over HTTP/2 and HTTP/1.1 with
// the same routing; plain HTTP to an auto host with a certificate gets a
// 308 to HTTPS; the ACME challenge path is not redirected.
func TestHTTPSStaticCertificateH2AndRedirect(t *testing.T) {
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	certPEM, keyPEM := ca.valid(t, "app.test")
	_, err := certstore.AddStatic(e.stateDir, "app.test", certPEM, keyPEM, time.Now())
	require.NoError(t, err)
	b := protoBackend(t, "blue")
	e.publish(t, httpTable(1, tlsRoute("app.test", "", addrOf(b))))
	waitServed(t, e, "app.test", ca.pool)

	for _, h2 := range []bool{true, false} {
		resp, err := httpsClient(e, ca.pool, h2).Get("https://app.test/x")
		require.NoError(t, err)
		want := "HTTP/1.1"
		if h2 {
			want = "HTTP/2.0"
		}
		assert.Equal(t, want, resp.Proto)
		assert.Equal(t, "blue HTTP/1.1 https", body(t, resp), "backend reached over HTTP/1.1 with X-Forwarded-Proto https")
	}

	// The redirect appears once the certificate is served (refresh after apply).
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp, err = noRedirect(e).Get("http://app.test/a/b?c=d")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode == http.StatusPermanentRedirect
	}, 5*time.Second, 20*time.Millisecond)
	_, port, _ := net.SplitHostPort(e.srv.HTTPSAddr())
	assert.Equal(t, "https://app.test:"+port+"/a/b?c=d", resp.Header.Get("Location"))

	resp, err = noRedirect(e).Get("http://app.test/.well-known/acme-challenge/tok")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "challenge path answered by the edge, never redirected")

	// TLS 1.1 is refused.
	_, err = tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "app.test", RootCAs: ca.pool, MaxVersion: tls.VersionTLS11})
	assert.Error(t, err)
}

// R62: always redirects plain HTTP at once and answers HTTPS 503 with a
// page while no certificate exists; never keeps plain HTTP and refuses
// the handshake.
func TestHTTPSPolicyAlwaysAndNever(t *testing.T) {
	e := startTLSEdge(t, "")
	b := nameBackend(t, "blue")
	e.publish(t, httpTable(1, tlsRoute("always.test", "always", addrOf(b)), tlsRoute("never.test", "never", addrOf(b)), tlsRoute("auto.test", "auto", addrOf(b))))

	resp, err := noRedirect(e).Get("http://always.test/p")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusPermanentRedirect, resp.StatusCode)

	insecure := httpsClient(e, nil, true)
	insecure.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	resp, err = insecure.Get("https://always.test/p")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body(t, resp), "no certificate for always.test yet")

	for _, h := range []string{"never.test", "auto.test"} {
		code, got := e.get(t, h, "/")
		assert.Equal(t, http.StatusOK, code, h)
		assert.Equal(t, "blue", got, h+": plain HTTP served (auto without a certificate is not redirected)")
	}
	_, err = tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "never.test", InsecureSkipVerify: true})
	assert.Error(t, err, "never: no certificate, handshake refused")
	_, err = tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "unrouted.test", InsecureSkipVerify: true})
	assert.Error(t, err, "unrouted host: handshake refused")
}

// R63: one unreadable or mismatched certificate affects its own host only;
// a wildcard static certificate covers names under it.
func TestHTTPSBadCertificateIsolatedToItsHost(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	good, goodKey := ca.valid(t, "good.test")
	_, err := certstore.AddStatic(dir, "good.test", good, goodKey, time.Now())
	require.NoError(t, err)
	wc, wcKey := ca.valid(t, "*.wild.test")
	_, err = certstore.AddStatic(dir, "*.wild.test", wc, wcKey, time.Now())
	require.NoError(t, err)
	// A corrupt pair written behind the store's back (disk damage).
	badDir := filepath.Join(certstore.Root(dir), certstore.StaticDir, "bad.test")
	require.NoError(t, os.MkdirAll(badDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(badDir, "cert.pem"), []byte("garbage"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(badDir, "key.pem"), goodKey, 0o600))

	e := startTLSEdge(t, dir)
	b := nameBackend(t, "blue")
	e.publish(t, httpTable(1, tlsRoute("good.test", "", addrOf(b)), tlsRoute("bad.test", "", addrOf(b)), tlsRoute("*.wild.test", "", addrOf(b))))
	for _, h := range []string{"good.test", "a.wild.test"} {
		resp, err := httpsClient(e, ca.pool, true).Get("https://" + h + "/")
		require.NoError(t, err, h)
		assert.Equal(t, "blue", body(t, resp), h)
	}
	_, err = tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "bad.test", RootCAs: ca.pool})
	assert.Error(t, err, "bad.test has no valid certificate (fallback is self-signed)")

	require.Eventually(t, func() bool {
		infos, err := certstore.ReadState(dir)
		require.NoError(t, err)
		for _, in := range infos {
			if in.Host == "bad.test" {
				return in.State == certstore.StateFailed && strings.Contains(in.Error, "CERTIFICATE")
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "state.json reports bad.test failed")
	fi, err := os.Stat(certstore.Root(dir))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(certstore.Root(dir), certstore.StaticDir, "good.test", "key.pem"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// A certificate added while the edge runs is served without a restart.
func TestHTTPSStaticCertificateAddedLive(t *testing.T) {
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	b := nameBackend(t, "blue")
	e.publish(t, httpTable(1, tlsRoute("live.test", "", addrOf(b))))
	c, k := ca.valid(t, "live.test")
	_, err := certstore.AddStatic(e.stateDir, "live.test", c, k, time.Now())
	require.NoError(t, err)
	waitServed(t, e, "live.test", ca.pool)
}

// waitServed waits until the edge serves host a certificate pool trusts
// (static certificates are picked up by the refresh after an apply or
// within 2 s).
func waitServed(t *testing.T, e *edge, host string, pool *x509.CertPool) {
	t.Helper()
	require.Eventually(t, func() bool {
		conn, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: host, RootCAs: pool})
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}, 6*time.Second, 20*time.Millisecond, "certificate for %s not served", host)
}

// A WebSocket-style HTTP/1.1 upgrade works over TLS, and a drain waits for
// HTTPS requests exactly as for plain ones (in flight counted).
func TestHTTPSUpgradeAndInFlight(t *testing.T) {
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	c, k := ca.valid(t, "ws.test")
	_, err := certstore.AddStatic(e.stateDir, "ws.test", c, k, time.Now())
	require.NoError(t, err)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "echo" {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "echo")
			w.WriteHeader(http.StatusSwitchingProtocols)
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			line, _ := brw.ReadString('\n')
			_, _ = conn.Write([]byte("echo:" + line))
			return
		}
		started <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "slow")
	}))
	t.Cleanup(b.Close)
	e.publish(t, httpTable(1, tlsRoute("ws.test", "", addrOf(b))))
	waitServed(t, e, "ws.test", ca.pool)

	conn, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "ws.test", RootCAs: ca.pool, NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	require.NoError(t, err)
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "101 Switching Protocols")
	_, err = io.WriteString(conn, "hello\n")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err = conn.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "echo:hello\n", string(buf[:n]))

	done := make(chan string, 1)
	go func() {
		resp, err := httpsClient(e, ca.pool, true).Get("https://ws.test/slow")
		if err != nil {
			done <- err.Error()
			return
		}
		done <- body(t, resp)
	}()
	<-started
	st := e.srv.Status()
	var inFlight int64
	for _, bs := range st.Backends {
		if bs.Addr == addrOf(b) {
			inFlight = bs.InFlight
		}
	}
	assert.Equal(t, int64(1), inFlight, "an HTTP/2 request counts in flight on its backend")
	close(release)
	assert.Equal(t, "slow", <-done)
}

// protocol = "H2C": the edge reaches the backend over cleartext HTTP/2
// end to end, trailers included (gRPC's shape).
func TestHTTPSH2CBackendWithTrailers(t *testing.T) {
	ca := newTestCA(t)
	e := startTLSEdge(t, "")
	c, k := ca.valid(t, "grpc.test")
	_, err := certstore.AddStatic(e.stateDir, "grpc.test", c, k, time.Now())
	require.NoError(t, err)
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	b := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		_, _ = io.WriteString(w, "backend saw "+r.Proto)
		w.Header().Set("Grpc-Status", "0")
	}))
	b.Config.Protocols = protos
	b.Start()
	t.Cleanup(b.Close)
	r := tlsRoute("grpc.test", "", addrOf(b))
	r.Protocol = "h2c"
	e.publish(t, httpTable(1, r))
	waitServed(t, e, "grpc.test", ca.pool)

	req, _ := http.NewRequest(http.MethodPost, "https://grpc.test/svc/Method", strings.NewReader("x"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := httpsClient(e, ca.pool, true).Do(req)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, "backend saw HTTP/2.0", body(t, resp))
	assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"), "trailer relayed end to end")
}

// An edge restarted on the same addresses (--reuse-port: the new one binds
// before the old one stops) serves the stored certificate at once and no
// HTTPS request of keep-alive HTTP/1.1 and HTTP/2 clients fails. (A client
// opening a connection per request can still meet a reset: connections
// queued unaccepted on the old socket when it closes are reset by the
// kernel, as for plain HTTP; the listener hand-over removes that.)
func TestHTTPSRestartWithReusePortLosesNoRequest(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	c, k := ca.valid(t, "keep.test")
	_, err := certstore.AddStatic(dir, "keep.test", c, k, time.Now())
	require.NoError(t, err)
	httpAddr, httpsAddr := freePort(t), freePort(t)
	start := func() *edge {
		return startEdge(t, func(cfg *edgeproxy.Config) {
			cfg.StateDir, cfg.HTTPAddr, cfg.HTTPSAddr, cfg.ReusePort = dir, httpAddr, httpsAddr, true
			cfg.ACME.Disabled = true
		})
	}
	old := start()
	b := nameBackend(t, "blue")
	old.publish(t, httpTable(1, tlsRoute("keep.test", "", addrOf(b))))

	ctx, cancel := context.WithCancel(context.Background())
	var failures, requests atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for _, mode := range []string{"h1", "h2"} {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := httpsClient(old, ca.pool, mode == "h2")
				tr := cl.Transport.(*http.Transport)
				tr.DisableKeepAlives = mode == "h1-new"
				tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", httpsAddr)
				}
				defer tr.CloseIdleConnections()
				for ctx.Err() == nil {
					resp, err := cl.Get("https://keep.test/")
					if err == nil {
						var got string
						got, err = readAll(resp)
						if err == nil && (resp.StatusCode != 200 || got != "blue") {
							err = fmt.Errorf("status %d body %q", resp.StatusCode, got)
						}
					}
					requests.Add(1)
					if err != nil && ctx.Err() == nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, mode+": "+err.Error())
					}
				}
			}()
		}
	}
	moreRequests := func(n int64) {
		from := requests.Load()
		require.Eventually(t, func() bool { return requests.Load() >= from+n }, 10*time.Second, 5*time.Millisecond, "%d more requests", n)
	}
	moreRequests(50) // load on the old edge
	next := start()  // binds the same addresses next to the old edge
	next.publish(t, httpTable(2, tlsRoute("keep.test", "", addrOf(b))))
	old.stop()
	moreRequests(50) // load on the new edge alone
	cancel()
	wg.Wait()
	require.Greater(t, requests.Load(), int64(50))
	require.Zero(t, failures.Load(), "first failure: %v", firstErr.Load())
}

func readAll(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
