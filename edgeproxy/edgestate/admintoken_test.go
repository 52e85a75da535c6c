package edgestate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The admin token is made once (0600) and kept; a token file group or
// others may read is set back to 0600; a missing one reads as "".
func TestAdminTokenMadeOncePrivate(t *testing.T) {
	dir := t.TempDir()
	tok, err := ReadAdminToken(dir)
	require.NoError(t, err)
	assert.Empty(t, tok)

	tok, err = EnsureAdminToken(dir)
	require.NoError(t, err)
	assert.Len(t, tok, 64)
	again, err := EnsureAdminToken(dir)
	require.NoError(t, err)
	assert.Equal(t, tok, again)

	path := filepath.Join(dir, AdminTokenFile)
	require.NoError(t, os.Chmod(path, 0o644))
	_, err = EnsureAdminToken(dir)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	left, _ := filepath.Glob(filepath.Join(dir, ".admin.token-*"))
	assert.Empty(t, left, "no temporary file left")
}
