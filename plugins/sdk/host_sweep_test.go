package sdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A socket directory whose owner died (kill -9) is swept; one of a live
// process, an unrelated directory and a fresh legacy one are kept.
func TestHost_SweepsSocketDirsOfDeadOwners(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	mk := func(name, owner string) string {
		d := filepath.Join(tmp, name)
		require.NoError(t, os.Mkdir(d, 0o700))
		if owner != "" {
			require.NoError(t, os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o600))
		}
		return d
	}
	deadDir := mk("gordon-plugins-dead", strconv.Itoa(dead.ProcessState.Pid()))
	liveDir := mk("gordon-plugins-live", strconv.Itoa(os.Getpid()))
	freshLegacy := mk("gordon-plugins-fresh", "")
	oldLegacy := mk("gordon-plugins-old", "")
	old := time.Now().Add(-2 * legacyStaleAge)
	require.NoError(t, os.Chtimes(oldLegacy, old, old))
	other := mk("not-ours", strconv.Itoa(dead.ProcessState.Pid()))

	sweepDir(tmp)
	assert.NoDirExists(t, deadDir)
	assert.NoDirExists(t, oldLegacy)
	assert.DirExists(t, liveDir)
	assert.DirExists(t, freshLegacy)
	assert.DirExists(t, other)
}

// A host writes its owner file, and Close removes the directory.
func TestHost_SocketDirHasOwnerAndIsRemovedOnClose(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	h, err := NewHost(HostConfig{})
	require.NoError(t, err)
	dir, err := h.socketDir()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(os.Getpid())+"\n", string(data))
	h.Close()
	assert.NoDirExists(t, dir)
}
