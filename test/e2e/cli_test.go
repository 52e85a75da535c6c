package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
)

// `docker gordon version` works through the docker CLI
// and reports the engine it is pointed at.
func TestCLI_VersionThroughDockerCLI(t *testing.T) {
	state := t.TempDir()
	r := fixture.Gordon(t, state, "version", "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var v struct {
		Version        string `json:"version"`
		PluginProtocol int    `json:"plugin_protocol"`
		Engine         struct {
			Version    string `json:"version"`
			APIVersion string `json:"api_version"`
		} `json:"engine"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &v), r.String())
	require.Equal(t, "e2e", v.Version)
	require.Equal(t, 1, v.PluginProtocol)
	require.NotEmpty(t, v.Engine.Version, r.String())
	require.NotEmpty(t, v.Engine.APIVersion, r.String())

	help := fixture.Gordon(t, state, "--help")
	require.Equal(t, 0, help.Code, help.String())
	require.Contains(t, help.Stdout, "deploy")
}

// `plugins ls --format json` launches every built-in
// backend as a subprocess and each answers Describe.
func TestCLI_PluginsListAllBuiltinsOK(t *testing.T) {
	state := t.TempDir()
	r := fixture.Gordon(t, state, "plugins", "ls", "--format", "json")
	require.Equal(t, 0, r.Code, r.String())
	var rows []struct {
		Kind, Name, Source, Status string
		Protocol                   int
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &rows), r.String())
	got := map[string]string{}
	for _, row := range rows {
		got[row.Kind+"/"+row.Name] = row.Status
		if strings.HasPrefix(row.Source, "built-in") {
			require.Equal(t, 1, row.Protocol, "%s/%s", row.Kind, row.Name)
		}
	}
	for _, want := range []string{"runtime/docker", "probe/http", "probe/tcp", "probe/log", "traffic/edge"} {
		require.Equal(t, "ok", got[want], "plugin %s: %s", want, r.String())
	}
}

// Bad input: validate reports every problem with file:line:col and exits 1.
func TestCLI_ValidateReportsEveryProblem(t *testing.T) {
	state := t.TempDir()
	path := t.TempDir() + "/bad.toml"
	fixture.WriteFile(t, path, `name = "Bad_Name"
[services.web]
image = "x"
stop_grace = "10m"
[[services.web.http]]
port = 70000
host = "blog.example.com"
`)
	r := fixture.Gordon(t, state, "validate", "-f", path)
	require.Equal(t, 1, r.Code, r.String())
	out := r.Stdout + r.Stderr
	for _, key := range []string{"name", "stop_grace", "port"} {
		require.Contains(t, out, key, r.String())
	}
	require.Contains(t, out, path+":1:", r.String())
}
