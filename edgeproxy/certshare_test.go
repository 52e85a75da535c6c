package edgeproxy_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certshare"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

const shareToken = "swarm-token"

// startCertShare serves a certshare.Server over <stateDir>/edge/certs of
// a fresh state directory (the manager's), returning the directory and
// the server's URL.
func startCertShare(t *testing.T) (stateDir, url string) {
	t.Helper()
	stateDir = t.TempDir()
	s, err := certshare.NewServer(certstore.Root(stateDir), shareToken)
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return stateDir, srv.URL
}

// startSharingEdge runs an edge whose certificates live in the storage at
// url (tune adjusts the rest).
func startSharingEdge(t *testing.T, url, name string, tune func(*edgeproxy.Config)) *edge {
	t.Helper()
	return startEdge(t, func(c *edgeproxy.Config) {
		c.CertStorage, c.RoutesToken = url, shareToken
		c.HTTPSAddr = "127.0.0.1:0"
		if testing.Verbose() {
			c.Logger = hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: os.Stderr})
		}
		if tune != nil {
			tune(c)
		}
	})
}

// helperEdgeEnv carries a helper edge's configuration (helperEdge) to
// the test binary run as that edge's process.
const helperEdgeEnv = "GORDON_TEST_CERTSHARE_EDGE"

// helperEdge is an edge run in a process of its own (the test binary
// re-executed into TestCertShareHelperEdge): certmagic keeps the
// challenges it is solving in a process-wide map, so two edges in one
// process would answer each other's challenges without the shared
// storage. Its route table is published through its state directory.
type helperEdge struct {
	State     string `json:"state"`
	HTTPAddr  string `json:"http"`
	HTTPSAddr string `json:"https"`
	CA        string `json:"ca"`
	CARootPEM []byte `json:"ca_root"`
	Storage   string `json:"storage"`
}

// TestCertShareHelperEdge is the helper edge's process (it does nothing
// in a normal run): it serves until SIGTERM.
func TestCertShareHelperEdge(t *testing.T) {
	raw := os.Getenv(helperEdgeEnv)
	if raw == "" {
		t.Skip("the helper edge process of TestCertShare_TwoEdgesOrderOneCertificate")
	}
	var h helperEdge
	require.NoError(t, json.Unmarshal([]byte(raw), &h))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	srv := edgeproxy.New(edgeproxy.Config{
		StateDir: h.State, HTTPAddr: h.HTTPAddr, HTTPSAddr: h.HTTPSAddr, PollInterval: 20 * time.Millisecond,
		ACME:        edgeproxy.ACMEConfig{CA: h.CA, CARootPEM: h.CARootPEM, Email: "ops@example.org", DisableTLSALPN01: true},
		CertStorage: h.Storage, RoutesToken: shareToken, NoHandover: true,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "edge-a", Level: hclog.Info, Output: os.Stderr}),
	})
	require.NoError(t, srv.Run(ctx))
}

// startHelperEdge runs h in its own process until the test ends, and
// waits until it serves.
func startHelperEdge(t *testing.T, h helperEdge) {
	t.Helper()
	raw, err := json.Marshal(h)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCertShareHelperEdge$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), helperEdgeEnv+"="+string(raw))
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	require.Eventually(t, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("helper edge exited: %v\n%s", err, logs.String())
		default:
		}
		_, err := os.Stat(filepath.Join(h.State, "edge", edgeproxy.StatusFile))
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "helper edge serving")
}

// publishHelper writes table into the helper edge's state directory and
// waits until it applied it.
func publishHelper(t *testing.T, h helperEdge, table routetable.Table) {
	t.Helper()
	e := &edge{stateDir: h.State}
	e.publish(t, table)
}

// Two edges of a swarm share one certificate storage and route the same
// host: Pebble receives exactly one order and issues one certificate,
// both edges serve it over HTTPS, and the HTTP-01 validation is answered
// by the edge that did not place the order. Edge A (its own process, the
// only edge routing the host when the order starts) orders; Pebble's VA
// reaches only edge B's HTTP port, and B (this process) answers from the
// challenge token A's certmagic stored in the shared storage.
func TestCertShare_TwoEdgesOrderOneCertificate(t *testing.T) {
	mgr, url := startCertShare(t)
	httpB, httpsB := freePort(t), freePort(t)
	p := startPebble(t, portOf(t, httpB), portOf(t, httpsB), 0)
	a := helperEdge{State: t.TempDir(), HTTPAddr: freePort(t), HTTPSAddr: freePort(t), CA: p.dirURL, CARootPEM: p.apiRoot, Storage: url}
	startHelperEdge(t, a)
	acme := edgeproxy.ACMEConfig{CA: p.dirURL, CARootPEM: p.apiRoot, Email: "ops@example.org", DisableTLSALPN01: true}
	b := startSharingEdge(t, url, "edge-b", func(c *edgeproxy.Config) { c.HTTPAddr, c.HTTPSAddr, c.ACME = httpB, httpsB, acme })
	backend := nameBackend(t, "blue")
	table := httpTable(1, tlsRoute("app.test", "", addrOf(backend)))

	start := time.Now()
	publishHelper(t, a, table)
	require.Eventually(t, func() bool { return p.orders.Load() >= 1 }, 30*time.Second, 10*time.Millisecond, "edge A orders")
	b.publish(t, table)
	leafA := waitIssuedAt(t, a.HTTPSAddr, "app.test", p.issuerPool(), 60*time.Second)
	leafB := waitIssued(t, b, "app.test", p.issuerPool(), 60*time.Second)
	t.Logf("both edges serve the one certificate %s after publishing", time.Since(start).Round(time.Millisecond))

	assert.Equal(t, leafA.SerialNumber, leafB.SerialNumber, "the same certificate on both edges")
	assert.Equal(t, int32(1), p.orders.Load(), "one order for the host")
	assert.Equal(t, int32(1), p.finalized.Load(), "one certificate issued")
	resp, err := httpsClient(b, p.issuerPool(), true).Get("https://app.test/")
	require.NoError(t, err)
	assert.Equal(t, "blue", body(t, resp))
	var crts []string
	require.NoError(t, filepath.Walk(filepath.Join(certstore.Root(mgr), certstore.ACMEDir), func(path string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(path, ".crt") {
			crts = append(crts, filepath.Base(path))
		}
		return err
	}))
	assert.Equal(t, []string{"app.test.crt"}, crts, "one certificate in the shared storage")
	for _, dir := range []string{a.State, b.stateDir} {
		_, err := os.Stat(filepath.Join(certstore.Root(dir), certstore.ACMEDir))
		assert.ErrorIs(t, err, os.ErrNotExist, "nothing in an edge's own acme storage")
	}
}

// The storage's static certificates are mirrored into every edge: one
// added on the manager is served after the next apply, replaced and
// removed likewise.
func TestCertShare_EdgeServesTheStoragesStaticCertificates(t *testing.T) {
	mgr, url := startCertShare(t)
	ca := newTestCA(t)
	c1, k1 := ca.valid(t, "static.test")
	_, err := certstore.AddStatic(mgr, "static.test", c1, k1, time.Now())
	require.NoError(t, err)
	e := startSharingEdge(t, url, "edge", func(c *edgeproxy.Config) { c.ACME.Disabled = true })
	backend := nameBackend(t, "blue")
	e.publish(t, httpTable(1, tlsRoute("static.test", "", addrOf(backend))))
	waitServed(t, e, "static.test", ca.pool)

	serial := func() string {
		conn, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{ServerName: "static.test", RootCAs: ca.pool})
		if err != nil {
			return "none"
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	c2, k2 := ca.valid(t, "static.test")
	_, err = certstore.AddStatic(mgr, "static.test", c2, k2, time.Now())
	require.NoError(t, err)
	e.publish(t, httpTable(2, tlsRoute("static.test", "", addrOf(backend))))
	require.Eventually(t, func() bool { s := serial(); return s != first && s != "none" }, 6*time.Second, 20*time.Millisecond, "replaced certificate served")

	require.NoError(t, certstore.RemoveStatic(mgr, "static.test"))
	e.publish(t, httpTable(3, tlsRoute("static.test", "", addrOf(backend))))
	require.Eventually(t, func() bool { return serial() == "none" }, 6*time.Second, 20*time.Millisecond, "removed certificate no longer served")
}

// --cert-storage without the routes token (its bearer token) refuses to
// start.
func TestCertShare_EdgeRefusesStorageWithoutToken(t *testing.T) {
	srv := edgeproxy.New(edgeproxy.Config{StateDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", CertStorage: "http://gordon-reconcile:9190"})
	err := srv.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GORDON_EDGE_ROUTES_TOKEN")
}
