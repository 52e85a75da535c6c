package composeapi

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// TestBindSuggestion_PastesAsValidTOML: the [binds] line suggested for an
// unapproved host path parses as TOML into exactly that one approval, under
// a name the manifest accepts as a bind name, also for dotted and odd file
// names.
func TestBindSuggestion_PastesAsValidTOML(t *testing.T) {
	cases := map[string]struct{ path, name, line string }{
		"plain directory": {"/srv/site", "site", `site = "/srv/site"`},
		"dotted file":     {"/srv/app/app.conf", "app.conf", `"app.conf" = "/srv/app/app.conf"`},
		"hidden file":     {"/srv/app/.env", "env", `env = "/srv/app/.env"`},
		"space and quote": {`/srv/my "site"`, "my--site-", `my--site- = "/srv/my \"site\""`},
		"root":            {"/", "data", `data = "/"`},
		"control char":    {"/srv/a\tb\x01.d", "a-b-.d", `"a-b-.d" = "/srv/a\tb\u0001.d"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			line := BindSuggestion(c.path)
			assert.Equal(t, c.line, line)
			var cfg struct {
				Binds map[string]string `toml:"binds"`
			}
			require.NoError(t, toml.Unmarshal([]byte("[binds]\n"+line+"\n"), &cfg), "pasted under [binds]: %s", line)
			assert.Equal(t, map[string]string{c.name: c.path}, cfg.Binds)
			doc := fmt.Sprintf("name = \"app\"\n[services.web]\nimage = \"web:1\"\n[[services.web.bind]]\nname = %q\npath = \"/etc/app\"\n", c.name)
			_, err := manifest.Parse("app.toml", []byte(doc))
			assert.NoError(t, err, "the suggested name %q is a valid bind name", c.name)
		})
	}
}

// A compose bind is honoured only for a host path the operator approved in
// <state>/config.toml; the refusal says what to add.
func TestBindNameFor_ApprovedPathsOnly(t *testing.T) {
	state := t.TempDir()
	_, err := BindNameFor(state, "/srv/site")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `site = "/srv/site"`)
	assert.Contains(t, err.Error(), filepath.Join(state, "config.toml"))
	_, err = BindNameFor(state, "/srv/app.conf")
	assert.ErrorContains(t, err, `e.g. "app.conf" = "/srv/app.conf"`, "a dotted name is quoted, so the line pastes as TOML")

	require.NoError(t, os.WriteFile(filepath.Join(state, "config.toml"), []byte("[binds]\nweb = \"/srv/site/\"\nother = \"/srv/other\"\n"), 0o600))
	name, err := BindNameFor(state, "/srv/site")
	require.NoError(t, err)
	assert.Equal(t, "web", name)
	_, err = BindNameFor(state, "/srv/elsewhere")
	assert.ErrorContains(t, err, "is not approved for binds")
}
