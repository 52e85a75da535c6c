package system

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/journal"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// recordsEnv is an Env over a fresh state directory's journal.
func recordsEnv(t *testing.T) (Env, *journal.Store) {
	t.Helper()
	dir := t.TempDir()
	store, err := journal.Open(dir)
	require.NoError(t, err)
	return Env{StateDir: dir, Records: func() (Records, error) { return store, nil }}, store
}

// resolve runs resolveSwarmEdge on a config with HTTP :80 and admin 9180,
// as system start's flags argv ("--name value", or "--no-acme") set it.
func resolve(t *testing.T, old swarm.Config, argv ...string) (swarm.Config, []byte, error) {
	t.Helper()
	set := map[string]string{}
	for i := 0; i < len(argv); i++ {
		name := strings.TrimPrefix(argv[i], "--")
		if name == "no-acme" {
			set[name] = "true"
			continue
		}
		require.Less(t, i+1, len(argv), "flag %s needs a value", name)
		set[name] = argv[i+1]
		i++
	}
	tls := TLSOptions{HTTPSAddr: set["https-addr"], ACMEEmail: set["acme-email"], ACMECA: set["acme-ca"], ACMECARoot: set["acme-ca-root"], NoACME: set["no-acme"] == "true"}
	changed := func(flag string) bool { _, ok := set[flag]; return ok }
	cfg := swarm.Config{HTTPPort: 80, AdminPort: 9180}
	root, err := resolveSwarmEdge(changed, &cfg, old, tls, set["tcp-ports"])
	return cfg, root, err
}

// TestSystemUnit_ReconcileUnitRunsCLIDirectly: the reconcile container runs
// this binary as `docker-gordon gordon reconcile --watch --boot`, reaches the
// engine through the socket mounted at /var/run/docker.sock, and gets
// TMPDIR, GORDON_STATE_DIR and the state directory at the same path.
func TestSystemUnit_ReconcileUnitRunsCLIDirectly(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	state := t.TempDir()

	u, err := ReconcileUnit(state, "unix://"+sock, ReconcileOptions{Interval: 7 * time.Second, Boot: true})
	require.NoError(t, err)
	assert.Equal(t, docker.ReconcileName, u.Name)
	assert.Equal(t, []string{"/docker-gordon"}, u.Entrypoint)
	assert.Equal(t, []string{"gordon", "reconcile", "--watch", "--interval", "7s", "--boot"}, u.Cmd)
	assert.Contains(t, u.Binds, state+":"+state)
	assert.Contains(t, u.Binds, sock+":/var/run/docker.sock")
	assert.Contains(t, u.Env, "DOCKER_HOST=unix:///var/run/docker.sock")
	assert.Contains(t, u.Env, "TMPDIR=/tmp")
	assert.Contains(t, u.Env, "GORDON_STATE_DIR="+state)
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	assert.Equal(t, map[string]string{"/docker-gordon": self}, u.Binaries)

	noBoot, err := ReconcileUnit(state, "unix://"+sock, ReconcileOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon", "reconcile", "--watch"}, noBoot.Cmd)

	_, err = ReconcileUnit(state, "unix://"+filepath.Join(t.TempDir(), "missing.sock"), ReconcileOptions{})
	assert.ErrorIs(t, err, core.ErrUnavailable)
	_, err = ReconcileUnit(state, "ssh://user@host", ReconcileOptions{})
	assert.ErrorIs(t, err, core.ErrInvalid)
	tcp, err := ReconcileUnit(state, "tcp://127.0.0.1:2375", ReconcileOptions{})
	require.NoError(t, err)
	assert.Contains(t, tcp.Env, "DOCKER_HOST=tcp://127.0.0.1:2375")
}

// system start --dashboard: the reconcile container serves the dashboard
// (reconcile --watch --dashboard ADDR) on a loopback address only, since it
// has no token; another address is refused before any container changes.
func TestSystemUnit_ReconcileUnitServesTheDashboardOnLoopbackOnly(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	state := t.TempDir()
	u, err := ReconcileUnit(state, "unix://"+sock, ReconcileOptions{Boot: true, Dashboard: "127.0.0.1:9190"})
	require.NoError(t, err)
	assert.Equal(t, []string{"gordon", "reconcile", "--watch", "--boot", "--dashboard", "127.0.0.1:9190"}, u.Cmd)
	assert.Empty(t, u.Network, "the host network: the engine host's loopback")
	for _, bad := range []string{"0.0.0.0:9190", ":9190", "10.0.0.1:9190", "9190"} {
		_, err := ReconcileUnit(state, "unix://"+sock, ReconcileOptions{Dashboard: bad})
		require.ErrorIs(t, err, core.ErrInvalid, bad)
		assert.Contains(t, err.Error(), "loopback", bad)
	}
}

// On a swarm the edge publishes one port on every edge node: --http-addr
// must be :PORT (or a wildcard host); a loopback or specific address is
// refused with the reason.
func TestSwarmHTTPPort_OnlyAPortOnEveryNode(t *testing.T) {
	for addr, want := range map[string]int{":80": 80, "0.0.0.0:8080": 8080, "[::]:81": 81} {
		got, err := swarmHTTPPort(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, want, got, addr)
	}
	for _, addr := range []string{"127.0.0.1:8080", "80", ":0", ":http"} {
		_, err := swarmHTTPPort(addr)
		require.ErrorIs(t, err, core.ErrInvalid, addr)
		assert.Contains(t, err.Error(), "host mode", addr)
	}
}

// What a swarm edge cannot do is refused before anything changes: no
// registry, an unknown --edge-nodes.
func TestCheckSwarmStart_RefusesWhatASwarmEdgeCannotDo(t *testing.T) {
	ok := SwarmStartOptions{Registry: "reg:5000", EdgeNodes: "all"}
	require.NoError(t, checkSwarmStart(ok))
	err := checkSwarmStart(SwarmStartOptions{EdgeNodes: "all"})
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "--registry")
	bad := ok
	bad.EdgeNodes = "some"
	require.ErrorIs(t, checkSwarmStart(bad), core.ErrInvalid)
}

// A state directory that serves one-engine apps is not turned into a
// swarm's (their containers would be neither found nor routed); one whose
// apps were all removed, or that has none, may be.
func TestRefuseOneEngineApps_AStateDirectoryServingOneEngineAppsStaysOne(t *testing.T) {
	env, store := recordsEnv(t)
	require.NoError(t, refuseOneEngineApps(context.Background(), env), "no apps")
	ctx := context.Background()
	_, err := store.EnsureApp(ctx, "gone")
	require.NoError(t, err)
	require.NoError(t, refuseOneEngineApps(ctx, env), "an app with nothing serving")
	_, err = store.EnsureApp(ctx, "blog")
	require.NoError(t, err)
	require.NoError(t, store.SaveActive(ctx, core.Active{App: "blog", Services: map[string]*core.ActiveService{"web": {Container: "c1"}}}))
	err = refuseOneEngineApps(ctx, env)
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "one-engine apps (blog)")
	assert.Contains(t, err.Error(), "--state-dir")
}

// system start on a swarm: --https-addr, the ACME flags and --tcp-ports
// set swarm.json; a later start without them keeps the last start's, a
// flag given now replaces it (--tcp-ports "" and --https-addr "" clear);
// --acme-ca-root's content names its content-addressed Docker config; an
// --acme-* flag turns a remembered --no-acme off.
func TestResolveSwarmEdge_FlagsWinTheLastStartIsRemembered(t *testing.T) {
	pem := filepath.Join(t.TempDir(), "root.pem")
	require.NoError(t, os.WriteFile(pem, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600))
	cfg, root, err := resolve(t, swarm.Config{}, "--https-addr", ":443", "--acme-email", "ops@example.com", "--acme-ca-root", pem, "--tcp-ports", "9001,9000")
	require.NoError(t, err)
	assert.Equal(t, 443, cfg.HTTPSPort)
	assert.Equal(t, []int{9000, 9001}, cfg.TCPPorts)
	assert.Equal(t, "ops@example.com", cfg.ACME.Email)
	assert.Equal(t, swarm.CARootConfigName(root), cfg.ACME.CARootConfig)
	assert.Equal(t, "-----BEGIN CERTIFICATE-----\n", string(root))

	again, root2, err := resolve(t, cfg)
	require.NoError(t, err)
	assert.Nil(t, root2, "the config exists: nothing to read")
	assert.Equal(t, cfg.HTTPSPort, again.HTTPSPort)
	assert.Equal(t, cfg.TCPPorts, again.TCPPorts)
	assert.Equal(t, cfg.ACME, again.ACME)

	cleared, _, err := resolve(t, cfg, "--tcp-ports", "", "--https-addr", "")
	require.NoError(t, err)
	assert.Empty(t, cleared.TCPPorts)
	assert.Zero(t, cleared.HTTPSPort)

	off, _, err := resolve(t, cfg, "--no-acme")
	require.NoError(t, err)
	assert.True(t, off.ACME.Off)
	on, _, err := resolve(t, off, "--acme-ca", "https://acme.example/dir")
	require.NoError(t, err)
	assert.False(t, on.ACME.Off, "an --acme-* flag means ACME")
	assert.Equal(t, "https://acme.example/dir", on.ACME.CA)
}

// Invalid ports are refused before the swarm is touched: --https-addr
// with a host, HTTPS on the HTTP port, a TCP port that is the HTTPS
// port, an unreadable CA root.
func TestResolveSwarmEdge_RefusesPortsTheEdgeCannotPublish(t *testing.T) {
	for _, argv := range [][]string{
		{"--https-addr", "127.0.0.1:443"},
		{"--https-addr", ":80"},
		{"--https-addr", ":443", "--tcp-ports", "443"},
		{"--tcp-ports", "80"},
		{"--tcp-ports", "9180"},
		{"--tcp-ports", "9000,9000"},
		{"--tcp-ports", "70000"},
		{"--https-addr", ":443", "--acme-ca-root", filepath.Join(t.TempDir(), "missing.pem")},
	} {
		_, _, err := resolve(t, swarm.Config{}, argv...)
		require.ErrorIs(t, err, core.ErrInvalid, "%v", argv)
	}
	_, _, err := resolve(t, swarm.Config{HTTPSPort: 443}, "--tcp-ports", "443")
	require.ErrorIs(t, err, core.ErrInvalid, "the remembered HTTPS port is taken too")
}

// With HTTPS gordon-reconcile serves the edges' certificate storage on
// the overlay (--cert-storage-addr :9190); without, it does not.
func TestSwarmReconcileUnit_ServesTheCertStorageWithHTTPS(t *testing.T) {
	t.Setenv("DOCKER_TLS_VERIFY", "")
	cfg := swarm.Config{Network: "gordon-edge", HTTPPort: 80}
	u, err := SwarmReconcileUnit("/state", "tcp://127.0.0.1:2375", cfg, time.Second, false)
	require.NoError(t, err)
	assert.NotContains(t, u.Cmd, "--cert-storage-addr")
	cfg.HTTPSPort = 443
	u, err = SwarmReconcileUnit("/state", "tcp://127.0.0.1:2375", cfg, time.Second, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"--cert-storage-addr", ":9190"}, u.Cmd[len(u.Cmd)-2:])
	assert.Equal(t, "gordon-edge", u.Network)
}

// An update of the edge service says the published ports changed and
// that Swarm replaces each node's edge task once.
func TestPrintEdgeServiceAction_APortChangeSaysEachTaskIsReplaced(t *testing.T) {
	old := swarm.Config{Service: "gordon-edge", HTTPPort: 80}
	cfg := old
	cfg.HTTPSPort, cfg.TCPPorts = 443, []int{9000}
	var b bytes.Buffer
	printEdgeServiceAction(&b, cfg, old, true, "updated")
	assert.Contains(t, b.String(), "global service updated (HTTP :80, HTTPS :443, TCP :9000 on every edge node, host mode)")
	assert.Contains(t, b.String(), "published ports changed from HTTP :80")
	assert.Contains(t, b.String(), "Swarm replaces the edge task of each node once")
	b.Reset()
	printEdgeServiceAction(&b, cfg, cfg, true, "already running")
	assert.NotContains(t, b.String(), "replaces")
}

// A --tcp-ports list without a port a serving app's TCP bind publishes is
// refused (its bind would stop answering from outside), naming the app,
// service and port; a list that keeps it passes.
func TestSystemStart_UnpublishingAPortAServingAppBindsIsRefused(t *testing.T) {
	env, store := recordsEnv(t)
	ctx := context.Background()
	_, err := store.EnsureApp(ctx, "db")
	require.NoError(t, err)
	require.NoError(t, store.SaveActive(ctx, core.Active{App: "db", Services: map[string]*core.ActiveService{
		"pg": {Container: "svc1", Spec: core.ServiceSpec{Name: "pg", TCP: []core.L4Interface{{Port: 5432, Publish: "0.0.0.0:9000"}}}}}}))

	err = refuseUnpublishingBoundPorts(ctx, env, []int{9001})
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "app db service pg binds TCP :9000")
	assert.Contains(t, err.Error(), "nothing was changed")
	assert.NoError(t, refuseUnpublishingBoundPorts(ctx, env, []int{9000, 9001}), "a list that keeps the port")
}
