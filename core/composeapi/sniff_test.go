package composeapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -f files are told apart by content, not by name.
func TestIsComposeFile_ByContent(t *testing.T) {
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
		got, err := IsComposeFile(write(name, tc.content))
		require.NoError(t, err)
		assert.Equal(t, tc.compose, got, name)
	}
	_, err := IsComposeFile(filepath.Join(dir, "missing.yaml"))
	assert.Error(t, err)
}
