//go:build unix

package edgeproxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// R60: without /proc, a hand-over socket path too long for an address
// lives in a private directory of the edge's user; a directory open to
// others, or made by another user first, is refused.
func TestR60_PrivateHandoverDirRefusesForeignDirs(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	p := filepath.Join("/state", strings.Repeat("x", 120), "edge", HandoverFile)
	dir, err := privateHandoverDir(p)
	require.NoError(t, err)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	require.NoError(t, os.Chmod(dir, 0o755))
	_, err = privateHandoverDir(p)
	assert.ErrorContains(t, err, "not a private directory")

	require.NoError(t, os.Chmod(dir, 0o700))
	if os.Getuid() == 0 {
		require.NoError(t, os.Chown(dir, 65534, 65534))
		_, err = privateHandoverDir(p)
		assert.ErrorContains(t, err, "not a private directory")
	}
}
