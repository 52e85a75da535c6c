package swarmlab

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// labPebble is Debian's pebble (ACME CA) and pebble-challtestsrv (its DNS)
// running in the lab namespace at the bridge address: the edges reach the
// ACME API there, and pebble validates at the nodes' addresses.
type labPebble struct {
	dirURL  string
	apiRoot string // PEM file of the API certificate's CA
	issuer  string // PEM file of the root pebble issues under
}

// startLabPebble starts challtestsrv (every name resolves to answerIP,
// no AAAA) and pebble (validating HTTP-01 on :80, TLS-ALPN-01 on :443).
func startLabPebble(ctx context.Context, t *testing.T, g *gordonLab, answerIP string) *labPebble {
	t.Helper()
	for _, b := range []string{"pebble", "pebble-challtestsrv", "openssl"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is not installed (apt-get install pebble openssl; .ci/run does)", b)
		}
	}
	bridge, _, _ := strings.Cut(g.Registry, ":")
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "swarmlab pebble API CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: bridge}, IPAddresses: []net.IP{net.ParseIP(bridge)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafT, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	kDER, _ := x509.MarshalPKCS8PrivateKey(key)
	p := &labPebble{apiRoot: filepath.Join(dir, "api-root.pem"), issuer: filepath.Join(dir, "issuer.pem")}
	write := func(name string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	write("api-root.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	write("cert.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}))
	write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kDER}))
	cfg, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": bridge + ":14000", "managementListenAddress": bridge + ":15000",
		"certificate": filepath.Join(dir, "cert.pem"), "privateKey": filepath.Join(dir, "key.pem"),
		"httpPort": 80, "tlsPort": 443, "ocspResponderURL": "", "externalAccountBindingRequired": false,
	}})
	write("pebble.json", cfg)

	inLab := func(name string, env []string, args ...string) {
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		require.NoError(t, err)
		cmd := exec.Command("nsenter", append([]string{"--net=/var/run/netns/" + g.LabNS, name}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("%s log:\n%s", name, lastLines(string(b), 30))
			}
		})
	}
	inLab("pebble-challtestsrv", nil, "-defaultIPv4", answerIP, "-defaultIPv6", "", "-dns01", bridge+":8053",
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-management", bridge+":8055")
	inLab("pebble", []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"},
		"-config", filepath.Join(dir, "pebble.json"), "-dnsserver", bridge+":8053")
	var root string
	require.Eventually(t, func() bool {
		out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "2", "--cacert", p.apiRoot, "https://"+bridge+":15000/roots/0")
		root = out
		return err == nil && strings.Contains(out, "BEGIN CERTIFICATE")
	}, 20*time.Second, 100*time.Millisecond, "pebble's management API answers in the lab")
	write("issuer.pem", []byte(root+"\n"))
	p.dirURL = "https://" + bridge + ":14000/dir"
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func secManifest(image string) string {
	return fmt.Sprintf(`name = "sec"

[services.web]
image = %q
replicas = 2
stop_grace = "5s"

[services.web.env]
VERSION = "s1"

[[services.web.http]]
port = 8080
host = "sec.lab"
tls = "auto"

[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "60s"
`, image)
}

// HTTPS on a swarm (R79): system start publishes :443 on every
// edge node; the edges share one certificate storage, served by
// gordon-reconcile on the manager, so Pebble issues ONE certificate for a
// routed host, which every node's edge serves, although Pebble validates
// the challenge at one node only (its DNS answers node 3's address) and
// any edge may have placed the order.
func TestSwarm_HTTPSOnEveryEdgeNodeWithOneSharedCertificate(t *testing.T) {
	need(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := upGordonLab(ctx, t, "gsh", "10.72.0", false)
	pb := startLabPebble(ctx, t, g, g.Nodes[2].IP)

	r := g.must(ctx, t, "system", "start", "--registry", g.Registry, "--http-addr", ":80", "--https-addr", ":443",
		"--acme-ca", pb.dirURL, "--acme-ca-root", pb.apiRoot, "--acme-email", "ops@sec.lab")
	t.Logf("system start:\n%s", r)
	g.must(ctx, t, "deploy", "-f", writeManifest(t, secManifest(g.httpd)))
	t0 := time.Now()
	for _, n := range g.Nodes {
		require.Eventually(t, func() bool {
			out, err := g.InLab(ctx, "curl", "-sf", "--max-time", "3", "--cacert", pb.issuer, "--resolve", "sec.lab:443:"+n.IP, "https://sec.lab/")
			return err == nil && strings.Contains(out, "version=s1")
		}, 90*time.Second, 250*time.Millisecond, "the edge on %s serves sec.lab over HTTPS with a certificate Pebble issued", n.Name)
	}
	t.Logf("every edge serves HTTPS %v after the deploy", time.Since(t0).Round(time.Millisecond))

	fingerprints := map[string]bool{}
	for _, n := range g.Nodes {
		out, err := g.InLab(ctx, "sh", "-c", "openssl s_client -connect "+n.IP+":443 -servername sec.lab </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256")
		require.NoError(t, err)
		require.Contains(t, out, "Fingerprint", "the edge on %s", n.Name)
		fingerprints[out] = true
	}
	assert.Len(t, fingerprints, 1, "every edge serves the same certificate: %v", fingerprints)

	var stored []string
	_ = filepath.WalkDir(filepath.Join(g.state, "edge", "certs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "sec.lab.crt" {
			stored = append(stored, p)
		}
		return nil
	})
	assert.Len(t, stored, 1, "one certificate in the manager's shared storage: %v", stored)
	t.Logf("whole test in %v", time.Since(began).Round(time.Millisecond))
}
