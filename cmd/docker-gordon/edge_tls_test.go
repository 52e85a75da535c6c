package main

import (
	"github.com/gordon-deploy/docker-gordon/system/remote"

	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/cli/cli/command"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsResolve parses argv with the edge's TLS flags and resolves them
// against last, as edge start and system start do.
func tlsResolve(t *testing.T, last edgeStartTLS, argv ...string) edgeTLSFlags {
	t.Helper()
	var f edgeTLSFlags
	cmd := &cobra.Command{Use: "start", RunE: func(cmd *cobra.Command, _ []string) error {
		f.resolve(cmd, last)
		return nil
	}}
	f.register(cmd)
	cmd.SetArgs(argv)
	require.NoError(t, cmd.Execute())
	return f
}

// A flag given now wins over a remembered one: --acme-email/--acme-ca
// after a start with --no-acme obtain certificates again (the edge's
// arguments change, so edge start replaces it through the hand-over);
// without any ACME flag the remembered --no-acme holds, and --no-acme=false
// turns it off too.
func TestEdgeStart_ACMEFlagGivenNowWinsOverRememberedNoACME(t *testing.T) {
	last := edgeStartTLS{HTTPSAddr: ":443", NoACME: true}
	f := tlsResolve(t, last, "--acme-email", "ops@example.com", "--acme-ca", "https://ca.example/dir")
	assert.False(t, f.noACME, "the ACME flags given now win over the remembered --no-acme")
	args, err := f.args(t.TempDir(), false)
	require.NoError(t, err)
	assert.Equal(t, []string{"--https-addr", ":443", "--acme-email", "ops@example.com", "--acme-ca", "https://ca.example/dir"}, args)
	assert.False(t, f.remembered().NoACME, "the next start remembers ACME on")

	f = tlsResolve(t, last)
	assert.True(t, f.noACME, "no flag: the last start's --no-acme holds")
	f = tlsResolve(t, last, "--no-acme=false")
	assert.False(t, f.noACME)
	f = tlsResolve(t, edgeStartTLS{HTTPSAddr: ":443", ACMEEmail: "ops@example.com"}, "--no-acme")
	assert.True(t, f.noACME, "--no-acme given now wins over remembered ACME settings")
}

// With the edge in a container, --acme-ca-root is copied into the state
// directory and the copy is what the next start remembers (the file the
// flag named may be a remote runner's input, gone after it).
func TestEdgeStart_ACMECARootCopyIsRemembered(t *testing.T) {
	state := t.TempDir()
	root := filepath.Join(t.TempDir(), "root.pem")
	require.NoError(t, os.WriteFile(root, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	f := tlsResolve(t, edgeStartTLS{}, "--https-addr", ":443", "--acme-ca-root", root)
	args, err := f.args(state, true)
	require.NoError(t, err)
	cp := filepath.Join(state, "edge", caRootCopy)
	assert.Equal(t, []string{"--https-addr", ":443", "--acme-ca-root", cp}, args)
	assert.Equal(t, cp, f.remembered().ACMECARoot)
	data, err := os.ReadFile(cp)
	require.NoError(t, err)
	assert.Equal(t, "-----BEGIN CERTIFICATE-----\n", string(data))
}

// remoteVerbCall parses argv with the real command under a gordon root (as
// the docker CLI runs it) and prepares it for a runner of a remote engine,
// as runRemote does.
func remoteVerbCall(t *testing.T, parent string, cmd func(*cliEnv) *cobra.Command, argv ...string) (remoteCall, error) {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	var stderr bytes.Buffer
	dcli, err := command.NewDockerCli(command.WithInputStream(io.NopCloser(strings.NewReader(""))), command.WithOutputStream(io.Discard), command.WithErrorStream(&stderr))
	require.NoError(t, err)
	env := &cliEnv{dockerCli: dcli, logger: hclog.NewNullLogger(),
		target: remote.Target{Context: "prod", Host: "tcp://vps.example:2376", Remote: true}}
	env.opts.stateDir = t.TempDir()
	root := &cobra.Command{Use: "gordon", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVar(&env.opts.stateDir, "state-dir", env.opts.stateDir, "")
	p := &cobra.Command{Use: parent}
	root.AddCommand(p)
	c := cmd(env)
	var rc remoteCall
	var perr error
	c.RunE = func(cmd *cobra.Command, args []string) error {
		rc, perr = prepareBundle(context.Background(), cmd, env, args, remote.ServerPaths{Arch: "x86_64"})
		return nil
	}
	p.AddCommand(c)
	root.SetArgs(argv)
	require.NoError(t, root.Execute())
	return rc, perr
}

// A remote edge start --acme-ca-root FILE and certs add --cert/--key read
// the files on the client and ship them to the runner like the other
// inputs: the runner's flags name its copies, never the client's paths; a
// missing file is refused on the client.
func TestRemote_FilesNamedByFlagsAreReadOnTheClient(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "pebble.minica.pem")
	require.NoError(t, os.WriteFile(root, []byte("root-pem"), 0o644))
	edgeStart := func(env *cliEnv) *cobra.Command { return newEdgeContainerCommands(env)[0] }
	rc, err := remoteVerbCall(t, "edge", edgeStart, "edge", "start", "--https-addr", ":443", "--acme-ca-root", root)
	require.NoError(t, err)
	assert.Contains(t, rc.args, "--acme-ca-root=/tmp/gordon-in/flagfiles/acme-ca-root/pebble.minica.pem")
	assert.NotContains(t, strings.Join(rc.args, " "), dir, "the client's path is not sent")
	assert.Contains(t, rc.bundle.Files, remote.File{Path: "flagfiles/acme-ca-root/pebble.minica.pem", Mode: 0o600, Data: []byte("root-pem")})

	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	require.NoError(t, os.WriteFile(cert, []byte("cert-pem"), 0o644))
	require.NoError(t, os.WriteFile(key, []byte("key-pem"), 0o600))
	rc, err = remoteVerbCall(t, "certs", newCertsAddCommand, "certs", "add", "blog.example.com", "--cert", cert, "--key", key)
	require.NoError(t, err)
	assert.Contains(t, rc.args, "--cert=/tmp/gordon-in/flagfiles/cert/c.pem")
	assert.Contains(t, rc.args, "--key=/tmp/gordon-in/flagfiles/key/k.pem")
	assert.Contains(t, rc.bundle.Files, remote.File{Path: "flagfiles/key/k.pem", Mode: 0o600, Data: []byte("key-pem")})

	_, err = remoteVerbCall(t, "edge", edgeStart, "edge", "start", "--acme-ca-root", filepath.Join(dir, "missing.pem"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--acme-ca-root")
	assert.Contains(t, err.Error(), "nothing was changed")
}
