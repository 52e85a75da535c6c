package system

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsResolve resolves o against last as edge start and system start do,
// with the flags named in given given now.
func tlsResolve(last edgeStartTLS, o TLSOptions, given ...string) TLSOptions {
	o.resolve(func(name string) bool { return slices.Contains(given, name) }, last)
	return o
}

// A flag given now wins over a remembered one: --acme-email/--acme-ca
// after a start with --no-acme obtain certificates again (the edge's
// arguments change, so edge start replaces it through the hand-over);
// without any ACME flag the remembered --no-acme holds, and --no-acme=false
// turns it off too.
func TestEdgeStart_ACMEFlagGivenNowWinsOverRememberedNoACME(t *testing.T) {
	last := edgeStartTLS{HTTPSAddr: ":443", NoACME: true}
	f := tlsResolve(last, TLSOptions{ACMEEmail: "ops@example.com", ACMECA: "https://ca.example/dir"}, "acme-email", "acme-ca")
	assert.False(t, f.NoACME, "the ACME flags given now win over the remembered --no-acme")
	args, err := f.EdgeArgs(t.TempDir(), false)
	require.NoError(t, err)
	assert.Equal(t, []string{"--https-addr", ":443", "--acme-email", "ops@example.com", "--acme-ca", "https://ca.example/dir"}, args)
	assert.False(t, f.remembered().NoACME, "the next start remembers ACME on")

	f = tlsResolve(last, TLSOptions{})
	assert.True(t, f.NoACME, "no flag: the last start's --no-acme holds")
	f = tlsResolve(last, TLSOptions{}, "no-acme")
	assert.False(t, f.NoACME)
	f = tlsResolve(edgeStartTLS{HTTPSAddr: ":443", ACMEEmail: "ops@example.com"}, TLSOptions{NoACME: true}, "no-acme")
	assert.True(t, f.NoACME, "--no-acme given now wins over remembered ACME settings")
}

// With the edge in a container, --acme-ca-root is copied into the state
// directory and the copy is what the next start remembers (the file the
// flag named may be a remote runner's input, gone after it).
func TestEdgeStart_ACMECARootCopyIsRemembered(t *testing.T) {
	state := t.TempDir()
	root := filepath.Join(t.TempDir(), "root.pem")
	require.NoError(t, os.WriteFile(root, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	f := tlsResolve(edgeStartTLS{}, TLSOptions{HTTPSAddr: ":443", ACMECARoot: root}, "https-addr", "acme-ca-root")
	args, err := f.EdgeArgs(state, true)
	require.NoError(t, err)
	cp := filepath.Join(state, "edge", caRootCopy)
	assert.Equal(t, []string{"--https-addr", ":443", "--acme-ca-root", cp}, args)
	assert.Equal(t, cp, f.remembered().ACMECARoot)
	data, err := os.ReadFile(cp)
	require.NoError(t, err)
	assert.Equal(t, "-----BEGIN CERTIFICATE-----\n", string(data))
}

// A start without flags comes back where the last successful one
// listened, with its drain bound and access log, and says so; flags given
// now win.
func TestEdgeStart_StartWithoutFlagsComesBackWhereTheLastListened(t *testing.T) {
	state := t.TempDir()
	o := EdgeOptions{HTTPAddr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9181", Drain: 5e9,
		Access: AccessLogOptions{Dest: AccessLogOff, MaxSize: DefaultAccessLogMaxSize, Keep: 2}}
	o.Remember(state)
	defaults := func() EdgeOptions {
		return EdgeOptions{HTTPAddr: ":80", AdminAddr: "127.0.0.1:9180", Drain: DefaultEdgeDrain,
			Access: AccessLogOptions{Dest: AccessLogStdout, MaxSize: DefaultAccessLogMaxSize, Keep: DefaultAccessLogKeep}}
	}
	got := defaults()
	assert.True(t, got.Resolve(state, func(string) bool { return false }))
	assert.Equal(t, o, got)
	got = defaults()
	got.HTTPAddr = ":8081"
	got.Resolve(state, func(name string) bool { return name == "http-addr" })
	assert.Equal(t, ":8081", got.HTTPAddr, "a flag given now wins")
	assert.Equal(t, "127.0.0.1:9181", got.AdminAddr)
	got = defaults()
	assert.False(t, got.Resolve(t.TempDir(), func(string) bool { return false }), "no last start")
}
