package sdk

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

func routetableGraph() routetable.Graph {
	return routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "a.example", App: "a", Service: "web", Backends: []routetable.Backend{{Addr: "127.0.0.1:1", Container: "c"}}}}}
}

func writeExec(t *testing.T, dir, name string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode))
}

// ARCHITECTURE §1: custom plugins are executables gordon-<kind>-<name> on
// the plugin path; built-ins and earlier directories shadow later ones.
func TestArch1_DiscoverFindsAndShadows(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	writeExec(t, d1, "gordon-probe-grpc", 0o755)
	writeExec(t, d1, "gordon-runtime-docker", 0o755) // shadowed by the built-in
	writeExec(t, d1, "gordon-probe-noexec", 0o644)   // not executable: ignored
	writeExec(t, d1, "gordon-storage-x", 0o755)      // unknown kind: ignored
	writeExec(t, d1, "gordon-probe-", 0o755)         // no name: ignored
	writeExec(t, d1, "README", 0o755)
	writeExec(t, d2, "gordon-probe-grpc", 0o755) // shadowed by d1
	writeExec(t, d2, "gordon-traffic-nginx", 0o755)

	got := Discover([]string{d1, "/does/not/exist", d2}, []string{"runtime/docker", "probe/http"})
	assert.Equal(t, []Found{
		{Kind: "probe", Name: "grpc", Path: filepath.Join(d1, "gordon-probe-grpc")},
		{Kind: "runtime", Name: "docker", Path: filepath.Join(d1, "gordon-runtime-docker"), Shadowed: true},
		{Kind: "probe", Name: "grpc", Path: filepath.Join(d2, "gordon-probe-grpc"), Shadowed: true},
		{Kind: "traffic", Name: "nginx", Path: filepath.Join(d2, "gordon-traffic-nginx")},
	}, got)
}

func TestArch1_ListShowsBuiltinsThenCustom(t *testing.T) {
	d := t.TempDir()
	writeExec(t, d, "gordon-probe-grpc", 0o755)
	writeExec(t, d, "gordon-probe-http", 0o755)
	h, err := NewHost(HostConfig{SelfExe: "/usr/bin/docker-gordon", Builtins: []string{"runtime/docker", "probe/http"}, PluginDirs: []string{d}})
	require.NoError(t, err)
	defer h.Close()
	assert.Equal(t, []Found{
		{Kind: "probe", Name: "http", Path: "/usr/bin/docker-gordon", Builtin: true},
		{Kind: "runtime", Name: "docker", Path: "/usr/bin/docker-gordon", Builtin: true},
		{Kind: "probe", Name: "grpc", Path: filepath.Join(d, "gordon-probe-grpc")},
		{Kind: "probe", Name: "http", Path: filepath.Join(d, "gordon-probe-http"), Shadowed: true},
	}, h.List())
}

func TestParseID(t *testing.T) {
	k, n, err := ParseID("probe/http")
	require.NoError(t, err)
	assert.Equal(t, "probe", k)
	assert.Equal(t, "http", n)
	for _, bad := range []string{"", "probe", "probe/", "disk/x", "probe/a/b"} {
		_, _, err := ParseID(bad)
		assert.Error(t, err, bad)
	}
}

func TestArch1_NewHostDefaultsAndValidatesBuiltins(t *testing.T) {
	h, err := NewHost(HostConfig{SelfExe: "/x"})
	require.NoError(t, err)
	var ids []string
	for _, f := range h.List() {
		ids = append(ids, f.ID())
	}
	assert.Equal(t, DefaultBuiltins, ids)
	_, err = NewHost(HostConfig{Builtins: []string{"disk/x"}})
	assert.ErrorIs(t, err, core.ErrInvalid)
}
