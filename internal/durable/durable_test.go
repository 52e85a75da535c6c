package durable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteFile_ReplacesAtomicallyAndLeavesNoTemp: the new content
// replaces the old (a new file gets the mode asked), no temporary file stays, and a directory that does
// not exist is an error naming it (its fsync cannot be skipped).
func TestWriteFile_ReplacesAtomicallyAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "swarm.json")
	require.NoError(t, WriteFile(p, []byte("old"), 0o644))
	require.NoError(t, WriteFile(p, []byte("new"), 0o600))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
	fresh := filepath.Join(dir, "token")
	require.NoError(t, WriteFile(fresh, []byte("t"), 0o600))
	fi, err := os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2)
	assert.ErrorContains(t, SyncDir(filepath.Join(dir, "absent")), "fsync directory")
}
