package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// -f files are told apart by content, not by name.
func TestSniffCompose_ByContent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	for name, tc := range map[string]struct {
		content string
		compose bool
	}{
		"app.yml":          {"services:\n  web:\n    image: x\n", true},
		"compose.toml":     {"services:\n  web:\n    image: x\n", true},
		"compose.yaml":     {"name = \"blog\"\n[services.web]\nimage = \"x\"\n", false},
		"app.json":         {`{"services": {"web": {"image": "x"}}}`, true},
		"include.yaml":     {"include:\n  - other.yaml\n", true},
		"kubernetes.yml":   {"apiVersion: v1\nkind: Pod\n", true}, // YAML, not TOML: the compose loader says what is wrong
		"misindented.yaml": {"services:\n  web:\n    image: x\n   ports: [\"80\"]\n", true},
		"typo.yml":         {"service:\n  web:\n    image: x\n", true},
	} {
		got, err := sniffCompose(write(name, tc.content))
		require.NoError(t, err)
		assert.Equal(t, tc.compose, got, name)
	}
	_, err := sniffCompose(filepath.Join(dir, "missing.yaml"))
	assert.Error(t, err)
}

// An unmapped image VOLUME of a compose service is explained in compose
// terms too.
func TestComposeVolumeHint(t *testing.T) {
	err := errors.Join(&engine.ImageVolumeError{App: "shop", Service: "db", Image: "postgres:16", Paths: []string{"/var/lib/postgresql/data"}},
		errors.New("unrelated"))
	assert.Equal(t, "\nIn the compose file, map it to a named volume:\n\nservices:\n  db:\n    volumes:\n      - db-data:/var/lib/postgresql/data\nvolumes:\n  db-data:\n", composeVolumeHint(err))
	assert.Equal(t, "", composeVolumeHint(errors.New("other")))
}
