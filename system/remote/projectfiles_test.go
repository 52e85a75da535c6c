package remote

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// R82 through a remote engine: the project files the CLI read travel in
// the bundle beside the manifest, so the runner's loader finds the same
// bytes, sources and modes (a directory's files included) without
// reading anything of the CLI's machine.
func TestR82_ProjectFilesTravelWithTheBundle(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "initdb"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "nginx.conf"), []byte("events {}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "initdb", "01.sh"), []byte("#!/bin/sh"), 0o755))
	toml := []byte(`name = "shop"
[services.web]
image = "nginx:1"
[[services.web.config]]
source = "nginx.conf"
path = "/etc/nginx/nginx.conf"
[[services.web.config]]
source = "nginx.conf"
path = "/etc/copy.conf"
[[services.web.config]]
source = "./initdb"
path = "/docker-entrypoint-initdb.d"
`)
	require.NoError(t, os.WriteFile(filepath.Join(src, "app.toml"), toml, 0o644))
	local, _, err := manifest.Load(filepath.Join(src, "app.toml"))
	require.NoError(t, err)

	files := ProjectFiles(local, "manifest")
	require.Len(t, files, 2, "nginx.conf once, and the directory's file")
	var buf bytes.Buffer
	require.NoError(t, WriteBundle(&buf, Bundle{Files: append(files, File{Path: "manifest/app.toml", Mode: 0o600, Data: toml})}))
	b, err := ReadBundle(&buf)
	require.NoError(t, err)
	runner := t.TempDir()
	for _, f := range b.Files {
		dst := filepath.Join(runner, filepath.FromSlash(f.Path))
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o700))
		require.NoError(t, os.WriteFile(dst, f.Data, f.Mode.Perm()))
	}
	remote, _, err := manifest.Load(filepath.Join(runner, "manifest", "app.toml"))
	require.NoError(t, err)
	require.Equal(t, local.Services[0].Configs, remote.Services[0].Configs)
}
