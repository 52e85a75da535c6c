package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// startFlags parses system start's flags from argv.
func startFlags(t *testing.T, argv ...string) (*cobra.Command, edgeContainerFlags, swarmStartOpts) {
	t.Helper()
	var ef edgeContainerFlags
	var so swarmStartOpts
	cmd := &cobra.Command{Use: "start"}
	ef.register(cmd)
	so.register(cmd)
	require.NoError(t, cmd.ParseFlags(argv))
	return cmd, ef, so
}

// resolve runs resolveSwarmEdge on a config with HTTP :80 and admin 9180.
func resolve(t *testing.T, old swarm.Config, argv ...string) (swarm.Config, []byte, error) {
	t.Helper()
	cmd, ef, so := startFlags(t, argv...)
	cfg := swarm.Config{HTTPPort: 80, AdminPort: 9180}
	root, err := resolveSwarmEdge(cmd, &cfg, old, ef.tls, so.tcpPorts)
	return cfg, root, err
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
	u, err := swarmReconcileUnit("/state", "tcp://127.0.0.1:2375", cfg, time.Second, false)
	require.NoError(t, err)
	assert.NotContains(t, u.Cmd, "--cert-storage-addr")
	cfg.HTTPSPort = 443
	u, err = swarmReconcileUnit("/state", "tcp://127.0.0.1:2375", cfg, time.Second, false)
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

// A deploy of a TCP bind the swarm edge does not publish is refused
// before anything changes: exit 1 naming the port and the command to run,
// no revision stored, nothing created in the state directory.
func TestDeploy_ATCPBindTheSwarmEdgeDoesNotPublishChangesNothing(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	state := t.TempDir()
	require.NoError(t, swarm.Save(state, swarm.Config{Registry: "reg:5000", HTTPPort: 80, TCPPorts: []int{9000}}))
	before, err := os.ReadDir(state)
	require.NoError(t, err)
	manifest := filepath.Join(t.TempDir(), "db.toml")
	require.NoError(t, os.WriteFile(manifest, []byte(`name = "db"

[services.db]
image = "reg:5000/db:1"

[[services.db.tcp]]
port = 5432
publish = "0.0.0.0:9001"
`), 0o600))
	var stderr bytes.Buffer
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(io.Discard), command.WithErrorStream(&stderr))
	require.NoError(t, err)
	env := &cliEnv{dockerCli: dcli, logger: hclog.NewNullLogger()}
	env.opts.stateDir = state
	cmd := newDeployCommand(env)
	cmd.SetArgs([]string{"-f", manifest})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err = cmd.ExecuteContext(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the swarm edge does not publish port 9001")
	assert.Contains(t, err.Error(), "docker gordon system start --tcp-ports 9000,9001")
	assert.Contains(t, err.Error(), "nothing was changed")
	after, err := os.ReadDir(state)
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after), "nothing was written to the state directory: %v", after)

	ok := swarm.Config{Network: "gordon-edge", TCPPorts: []int{9000, 9001}}
	env.plat = &system.Platform{Kind: system.Swarm, Config: ok}
	spec := core.AppSpec{Name: "db", Services: []core.ServiceSpec{{Name: "db", TCP: []core.L4Interface{{Port: 5432, Publish: "0.0.0.0:9001"}}}}}
	require.NoError(t, env.platform().CheckBinds(spec), "published now")
	one := &cliEnv{}
	one.opts.stateDir = t.TempDir()
	require.NoError(t, one.platform().CheckBinds(spec), "one engine: the edge listens on any port")
}

// A --tcp-ports list without a port a serving app's TCP bind publishes is
// refused (its bind would stop answering from outside), naming the app,
// service and port; a list that keeps it passes.
func TestSystemStart_UnpublishingAPortAServingAppBindsIsRefused(t *testing.T) {
	state := t.TempDir()
	env := &cliEnv{logger: hclog.NewNullLogger()}
	env.opts.stateDir = state
	store, err := env.openStore()
	require.NoError(t, err)
	ctx := context.Background()
	_, err = store.EnsureApp(ctx, "db")
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
