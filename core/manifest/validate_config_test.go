package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// writeProject writes files (relative path → content; a name ending in
// ".sh" is executable) under a new directory and returns it.
func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		require.NoError(t, os.WriteFile(full, []byte(c), mode))
	}
	return dir
}

// R82: [[config]] ships a file or a directory's files read-only, by
// content; a file its owner may execute keeps execute bits; mode is the
// manifest's when given.
func TestR82_ConfigFilesRead(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"nginx.conf": "events {}", "initdb/01.sql": "create table t();", "initdb/02.sh": "#!/bin/sh",
		"app.toml": `name = "shop"
[services.web]
image = "nginx:1"
[[services.web.config]]
source = "./nginx.conf"
path = "/etc/nginx/nginx.conf"
[[services.web.config]]
source = "initdb"
path = "/docker-entrypoint-initdb.d"
[[services.web.config]]
source = "nginx.conf"
path = "/etc/copy.conf"
mode = "0440"
`})
	spec, _, err := Load(filepath.Join(dir, "app.toml"))
	require.NoError(t, err)
	cs := spec.Services[0].Configs
	require.Len(t, cs, 4)
	got := map[string]core.ConfigFile{}
	for _, c := range cs {
		got[c.Path] = c
	}
	require.Equal(t, "nginx.conf", got["/etc/nginx/nginx.conf"].Source)
	require.Equal(t, "events {}", string(got["/etc/nginx/nginx.conf"].Data))
	require.Equal(t, uint32(0o444), got["/etc/nginx/nginx.conf"].Mode)
	require.Equal(t, uint32(0o440), got["/etc/copy.conf"].Mode)
	require.Equal(t, "initdb/01.sql", got["/docker-entrypoint-initdb.d/01.sql"].Source)
	require.Equal(t, uint32(0o555), got["/docker-entrypoint-initdb.d/02.sh"].Mode)
	require.Equal(t, got["/etc/nginx/nginx.conf"].Digest, got["/etc/copy.conf"].Digest, "same content, same digest")
	require.NotEqual(t, got["/etc/nginx/nginx.conf"].StoreName(), got["/etc/copy.conf"].StoreName(), "another mode is another stored file")
	require.Equal(t, "/docker-entrypoint-initdb.d/01.sql", cs[0].Path, "sorted by path")
}

// R82: sources outside the project, writable modes, missing keys and
// paths another mount takes are refused at once with their lines; a
// missing or oversized file is refused when the files are read.
func TestR82_ConfigRefusals(t *testing.T) {
	_, err := Parse("app.toml", []byte(`name = "shop"
[services.web]
image = "nginx:1"
[[services.web.volume]]
name = "data"
path = "/data"
[[services.web.config]]
source = "../secret.conf"
path = "/etc/a"
[[services.web.config]]
source = "/etc/passwd"
path = "/data"
[[services.web.config]]
source = "a.conf"
path = "/etc/b"
mode = 0o644
[[services.web.config]]
path = "/etc/c"
`))
	var merr *ManifestError
	require.ErrorAs(t, err, &merr)
	msgs := merr.Error()
	require.Len(t, merr.Problems, 5, msgs)
	require.Contains(t, msgs, "relative to the manifest's directory and inside it")
	require.Contains(t, msgs, "already mounted")
	require.Contains(t, msgs, "read-only")
	require.Contains(t, msgs, "required")

	dir := writeProject(t, map[string]string{"big.conf": strings.Repeat("x", MaxConfigFileSize+1)})
	spec := core.AppSpec{Name: "shop", Services: []core.ServiceSpec{{Name: "web", Configs: []core.ConfigFile{
		{Source: "big.conf", Path: "/etc/big"}, {Source: "missing.conf", Path: "/etc/m"}}}}}
	err = ReadConfigFiles(&spec, dir)
	require.ErrorIs(t, err, core.ErrInvalid)
	require.ErrorContains(t, err, "put it in the image")
	require.ErrorContains(t, err, "no such file")
}

// Swarm placement constraints: each of Swarm's attributes with == or !=,
// kept without spaces; anything else refused with what is valid.
func TestManifest_PlacementConstraints(t *testing.T) {
	spec, err := Parse("app.toml", []byte(`name = "shop"
[services.web]
image = "web:1"
placement = ["node.role == worker", "node.labels.zone!=b", "engine.labels.gpu==yes"]
`))
	require.NoError(t, err)
	require.Equal(t, []string{"node.role==worker", "node.labels.zone!=b", "engine.labels.gpu==yes"}, spec.Services[0].Placement)
	_, err = Parse("app.toml", []byte(`name = "shop"
[services.web]
image = "web:1"
placement = ["node.role == boss", "spread=node.labels.zone", "node.labels.zone"]
`))
	var merr *ManifestError
	require.ErrorAs(t, err, &merr)
	require.Len(t, merr.Problems, 3, merr.Error())
	require.Contains(t, merr.Error(), "node.role is manager or worker")
}
