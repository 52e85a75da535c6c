package swarm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// TestAdoption_AFailedAdoptionIsRetried: a write failing part-way (ENOSPC
// on the second record) leaves no apps/<app>/ behind, so the next
// adoption, which adopts only apps the state directory has no records
// of, adopts it whole; the failed attempt's private directory is gone.
func TestAdoption_AFailedAdoptionIsRetried(t *testing.T) {
	ctx := context.Background()
	f := &fakeConfigs{configs: map[string]swarm.Config{}}
	src, dst := t.TempDir(), t.TempDir()
	appState(t, src, "web", "r1")
	require.NoError(t, (&Mirror{API: f, StateDir: src, Node: "node-a"}).Sync(ctx))
	list, err := ListAdoptable(ctx, f)
	require.NoError(t, err)
	require.Len(t, list, 1)

	writes := 0
	writeAdopted = func(path string, data []byte, perm os.FileMode) error {
		if writes++; writes == 2 {
			return syscall.ENOSPC
		}
		return durable.WriteFile(path, data, perm)
	}
	t.Cleanup(func() { writeAdopted = durable.WriteFile })
	err = Adopt(ctx, f, dst, list[0])
	require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
	_, err = os.Stat(filepath.Join(dst, "apps", "web"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a failed adoption leaves no app directory: the app is still to adopt")

	writeAdopted = durable.WriteFile
	require.NoError(t, Adopt(ctx, f, dst, list[0]), "adopted on the next attempt")
	for _, name := range []string{"app.json", "desired.json", "active.json", "revisions/r1.json"} {
		want, err := os.ReadFile(filepath.Join(src, "apps", "web", name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dst, "apps", "web", name))
		require.NoError(t, err, name)
		assert.Equal(t, string(want), string(got), name)
	}
	entries, err := os.ReadDir(filepath.Join(dst, "apps"))
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), ".adopt-"), "leftover %s", e.Name())
	}
}
