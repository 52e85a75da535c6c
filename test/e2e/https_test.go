package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/letsencrypt/challtestsrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/loadgen"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// debianPebble runs Debian's pebble binary (ACME CA) on loopback, its VA
// resolving every name to 127.0.0.1 through an in-process challtestsrv and
// validating on the edge's ports. It returns the directory URL, the PEM
// root of its API certificate and a pool with its issuing root.
type debianPebble struct {
	dirURL  string
	apiRoot string // file
	issuers *x509.CertPool
}

func startDebianPebble(t *testing.T, httpPort, tlsPort int) *debianPebble {
	t.Helper()
	bin, err := exec.LookPath("pebble")
	if err != nil {
		t.Skip("Debian's pebble is not installed (apt-get install pebble; .ci/run does)")
	}
	dir := t.TempDir()
	// The API certificate: a throwaway CA and a leaf for 127.0.0.1.
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e pebble API CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafT, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	kDER, _ := x509.MarshalPKCS8PrivateKey(key)
	root := filepath.Join(dir, "api-root.pem")
	fixture.WriteFile(t, root, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	fixture.WriteFile(t, filepath.Join(dir, "cert.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})))
	fixture.WriteFile(t, filepath.Join(dir, "key.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kDER})))

	dnsAddr := fixture.FreeAddr(t)
	cs, err := challtestsrv.New(challtestsrv.Config{DNSAddrs: []string{dnsAddr}})
	require.NoError(t, err)
	cs.SetDefaultDNSIPv4("127.0.0.1")
	cs.SetDefaultDNSIPv6("")
	go cs.Run()
	t.Cleanup(cs.Shutdown)

	listen, mgmt := fixture.FreeAddr(t), fixture.FreeAddr(t)
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": filepath.Join(dir, "cert.pem"), "privateKey": filepath.Join(dir, "key.pem"),
		"httpPort": httpPort, "tlsPort": tlsPort, "ocspResponderURL": "", "externalAccountBindingRequired": false,
	}}
	b, _ := json.Marshal(cfg)
	fixture.WriteFile(t, filepath.Join(dir, "pebble.json"), string(b))
	logf, err := os.Create(filepath.Join(dir, "pebble.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "-config", filepath.Join(dir, "pebble.json"), "-dnsserver", dnsAddr)
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("pebble log:\n%s", fixture.LastLines(string(b), 30))
		}
	})
	apiPool := x509.NewCertPool()
	apiPool.AddCert(ca)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: apiPool}}}
	rootOf := func() ([]byte, bool) {
		resp, err := c.Get("https://" + mgmt + "/roots/0")
		if err != nil {
			return nil, false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b, resp.StatusCode == 200
	}
	assert.Eventually(t, func() bool { _, ok := rootOf(); return ok }, 15*time.Second, 100*time.Millisecond, "pebble's root at %s", mgmt)
	rootPEM, _ := rootOf()
	issuers := x509.NewCertPool()
	require.True(t, issuers.AppendCertsFromPEM(rootPEM), "pebble root from %s: %q", mgmt, rootPEM)
	return &debianPebble{dirURL: "https://" + listen + "/dir", apiRoot: root, issuers: issuers}
}

// tlsClient reaches httpsAddr for any URL host, trusting pool. Modes:
// "h1" keep-alive HTTP/1.1, "h1-new" a new TLS connection per request,
// "h2" HTTP/2.
func tlsClient(httpsAddr string, pool *x509.CertPool, mode string) *http.Client {
	tr := &http.Transport{
		Proxy:           nil,
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", httpsAddr)
		},
		ForceAttemptHTTP2:   mode == "h2",
		MaxIdleConnsPerHost: 4,
		DisableKeepAlives:   mode == "h1-new",
	}
	if mode != "h2" {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// startTLSLoad runs perMode clients in each mode (tlsClient) against url
// until stopped, counting requests per mode and failures (transport
// errors, a status other than 200, a wrong protocol).
func startTLSLoad(t *testing.T, httpsAddr string, pool *x509.CertPool, url string, perMode int) *loadgen.HTTPRun {
	t.Helper()
	modes := []string{"h1", "h1-new", "h2"}
	mode := func(i int) string { return modes[i/perMode] }
	l, err := loadgen.StartHTTP(loadgen.HTTPConfig{URL: url, Addr: httpsAddr, Clients: len(modes) * perMode,
		NewClient: func(i int) *http.Client { return tlsClient(httpsAddr, pool, mode(i)) },
		Label:     mode,
		Check: func(i int, resp *http.Response) error {
			wantProto := "HTTP/1.1"
			if mode(i) == "h2" {
				wantProto = "HTTP/2.0"
			}
			switch {
			case resp.StatusCode != 200:
				return fmt.Errorf("status %d", resp.StatusCode)
			case resp.Proto != wantProto:
				return errors.New("protocol " + resp.Proto)
			}
			return nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { l.Stop() })
	return l
}

func httpsManifest(app, image, host, policy string) string {
	return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "10s"
[[services.web.http]]
port = 8080
host = %q
tls = %q
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "20s"
`, app, image, host, policy)
}

// R62/R63 against the real engine and Debian's pebble: a deployed host
// gets a certificate by ACME, is served over HTTP/2 and HTTP/1.1, plain
// HTTP is redirected (308), certs ls shows it; deploys under HTTPS load
// (keep-alive HTTP/1.1, a new TLS connection per request, HTTP/2) lose no
// request.
func TestHTTPS_ACMECertificateAndZeroDowntimeDeploys(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	httpAddr, httpsAddr := fixture.FreeAddr(t), fixture.FreeAddr(t)
	port := func(a string) int {
		_, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		return n
	}
	pb := startDebianPebble(t, port(httpAddr), port(httpsAddr))
	a := fixture.NewApp(t, "e2ehttps", fixture.WithEdge(fixture.EdgeConfig{HTTPAddr: httpAddr, HTTPSAddr: httpsAddr,
		Extra: []string{"--acme-ca", pb.dirURL, "--acme-ca-root", pb.apiRoot, "--acme-email", "ops@example.org"}}))
	state, app, file := a.State, a.Name, a.File
	op := a.MustDeploy(httpsManifest(app, v1, "secure.test", "auto"))
	require.Equal(t, "success", op.Outcome)

	leafOf := func() *x509.Certificate {
		conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "secure.test", RootCAs: pb.issuers})
		if err != nil {
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	require.Eventually(t, func() bool { return leafOf() != nil }, 45*time.Second, 200*time.Millisecond, "no ACME certificate for secure.test within 45s")
	leaf := leafOf()
	require.NotNil(t, leaf, "the ACME certificate for secure.test is still served")

	resp, err := tlsClient(httpsAddr, pb.issuers, "h2").Get("https://secure.test/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "HTTP/2.0", resp.Proto)
	require.Equal(t, "v1", versionOf(string(b)))

	noFollow := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/p?q=1", nil)
		req.Host = "secure.test"
		resp, err := noFollow.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusPermanentRedirect &&
			resp.Header.Get("Location") == fmt.Sprintf("https://secure.test:%d/p?q=1", port(httpsAddr))
	}, 10*time.Second, 100*time.Millisecond, "plain HTTP redirected to HTTPS once the certificate is served")

	ls := fixture.Gordon(t, state, "certs", "ls", "--format", "json")
	require.Equal(t, 0, ls.Code, ls.String())
	var infos []struct{ Host, Source, State string }
	require.NoError(t, json.Unmarshal([]byte(ls.Stdout), &infos), ls.Stdout)
	require.Contains(t, infos, struct{ Host, Source, State string }{"secure.test", "acme", "valid"}, ls.Stdout)

	// certs add through the traffic backend: a pair that does not cover the
	// host is refused (exit 1, nothing stored); a good one is listed as
	// static and served; status shows each routed host's certificate.
	keyDir := t.TempDir()
	ownCert, ownKey := selfSignedFiles(t, keyDir, "own.test")
	bad := fixture.Gordon(t, state, "certs", "add", "other.test", "--cert", ownCert, "--key", ownKey)
	require.Equal(t, 1, bad.Code, bad.String())
	require.Contains(t, bad.Stderr, "does not cover other.test")
	add := fixture.Gordon(t, state, "certs", "add", "own.test", "--cert", ownCert, "--key", ownKey)
	require.Equal(t, 0, add.Code, add.String())
	ls = fixture.Gordon(t, state, "certs", "ls")
	require.Equal(t, 0, ls.Code, ls.String())
	require.Regexp(t, `own\.test\s+static`, ls.Stdout)
	require.NotContains(t, ls.Stdout, "other.test")
	st := fixture.Gordon(t, state, "status", app)
	require.Equal(t, 0, st.Code, st.String())
	require.Regexp(t, `secure\.test\s+valid\s+acme`, st.Stdout)
	rm := fixture.Gordon(t, state, "certs", "rm", "own.test")
	require.Equal(t, 0, rm.Code, rm.String())
	rm = fixture.Gordon(t, state, "certs", "rm", "own.test")
	require.Equal(t, 1, rm.Code, rm.String())

	l := startTLSLoad(t, httpsAddr, pb.issuers, "https://secure.test/", 4)
	deploys := 6
	if testing.Short() {
		deploys = 2
	}
	for i := 0; i < deploys; i++ {
		img := v2
		if i%2 == 1 {
			img = v1
		}
		fixture.WriteFile(t, file, httpsManifest(app, img, "secure.test", "auto"))
		op, r := fixture.DeployJSON(t, state, file)
		require.Equal(t, 0, r.Code, "deploy %d: %s", i, r.String())
		require.Equal(t, "success", op.Outcome)
	}
	load := l.Stop()
	reqs, failures, errs := load.ByLabel, load.Failed(), load.Errors
	t.Logf("HTTPS load over %d deploys: requests %v, failures %d", deploys, reqs, failures)
	for mode, n := range reqs {
		require.Greater(t, n, int64(20), "mode %s barely ran", mode)
	}
	require.Zero(t, failures, "failed requests over HTTPS during deploys: %v", errs)
}

// selfSignedFiles writes a self-signed ECDSA certificate for name and its
// key as PEM files in dir.
func selfSignedFiles(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	c, k := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	fixture.WriteFile(t, c, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	fixture.WriteFile(t, k, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})))
	return c, k
}
