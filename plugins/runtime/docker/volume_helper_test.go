package docker

import (
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// A volume helper a dead process left (a CLI killed during a restore)
// pins the volume; a restore of that volume first removes the stopped
// helpers of that volume, and no other volume's.
func TestVolumeArchive_ARestoreRemovesTheStaleHelpersOfItsVolume(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 60*time.Second)
	helper := func(vol string) {
		require.NoError(t, f.r.EnsureVolume(ctx, core.VolumeSpec{Name: vol, Labels: f.labels()}))
		_, err := f.r.Client().ContainerCreate(ctx, client.ContainerCreateOptions{Name: vol + "-helper",
			Config:     &container.Config{Image: f.images["kv"], Labels: f.labels(core.LabelRole, "volume-helper", labelHelperVolume, vol)},
			HostConfig: &container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: volumeMount}}}})
		require.NoError(t, err)
	}
	helpers := func(vol string) int {
		res, err := f.r.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilters(map[string]string{labelHelperVolume: vol})})
		require.NoError(t, err)
		return len(res.Items)
	}
	stale, other := f.name("stale"), f.name("other")
	helper(stale)
	helper(other)
	f.r.removeStaleHelpers(ctx, stale)
	assert.Zero(t, helpers(stale), "the stale helper of the volume is removed")
	assert.Equal(t, 1, helpers(other), "another volume's helper is kept")
}
