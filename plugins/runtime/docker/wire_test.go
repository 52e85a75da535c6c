package docker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
)

// The Docker runtime behind the plugin protocol (in-process gRPC): the
// engine side sees the same results and error classes as a direct caller
// (STYLE "What we take" 2, 4).
func TestRuntime_ThroughTheWire(t *testing.T) {
	f := newFixture(t)
	w := sdktest.ServeRuntime(t, f.r)
	ctx := ctxT(t, 60*time.Second)

	info, err := w.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, "docker", info.Name)
	assert.NotEmpty(t, info.APIVersion)

	img, err := w.ResolveImage(ctx, f.images["httpd"])
	require.NoError(t, err)
	assert.True(t, img.Local)
	assert.Equal(t, img.ID, img.Ref)
	_, err = w.ResolveImage(ctx, "gordon-test/missing:none")
	assert.ErrorIs(t, err, core.ErrNotFound)

	netID, err := w.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("wire"), Labels: f.labels()})
	require.NoError(t, err)
	again, err := w.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("wire"), Labels: f.labels()})
	require.NoError(t, err)
	assert.Equal(t, netID, again)
	require.NoError(t, w.EnsureVolume(ctx, core.VolumeSpec{Name: f.name("wirevol"), Labels: f.labels()}))

	spec := f.httpdSpec("wire", "VERSION=wire")
	spec.Image = img.Ref
	spec.Network = f.name("wire")
	spec.Aliases = []string{"web"}
	id, err := w.CreateContainer(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, w.StartContainer(ctx, id))

	viaWire, err := w.InspectContainer(ctx, id)
	require.NoError(t, err)
	direct, err := f.r.InspectContainer(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, core.StatusRunning, viaWire.Status)
	assert.True(t, direct.StartedAt.Equal(viaWire.StartedAt), "%v vs %v", direct.StartedAt, viaWire.StartedAt)
	assert.Equal(t, direct.Labels, viaWire.Labels)
	assert.Equal(t, direct.Env, viaWire.Env)

	binds, err := w.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	require.Len(t, binds, 1)
	_, body := get(t, "http://"+bindAddr(binds[0])+"/")
	assert.Contains(t, body, "version=wire")
	_, err = w.BackendBinds(ctx, id, []core.PortSpec{{Port: 1234, Protocol: "tcp"}})
	assert.ErrorIs(t, err, core.ErrConflict)

	listed, err := w.ListManaged(ctx, map[string]string{labelRun: f.run})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, id, listed[0].ID)

	require.NoError(t, w.StopContainer(ctx, id, 5*time.Second))
	var lines []string
	require.NoError(t, w.Logs(ctx, id, core.LogOptions{Tail: 2}, func(l core.LogLine) error {
		lines = append(lines, l.Stream+" "+l.Text)
		assert.False(t, l.Time.IsZero())
		return nil
	}))
	assert.Equal(t, []string{"stderr received terminated, draining for 0s", "stderr stopped"}, lines)

	require.NoError(t, w.RemoveContainer(ctx, id, false))
	_, err = w.InspectContainer(ctx, id)
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.ErrorIs(t, w.StartContainer(ctx, id), core.ErrNotFound)
	assert.ErrorIs(t, w.StopContainer(ctx, id, time.Second), core.ErrNotFound)
	assert.ErrorIs(t, w.RemoveContainer(ctx, id, true), core.ErrNotFound)
	err = w.Logs(ctx, id, core.LogOptions{}, func(core.LogLine) error { return nil })
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.True(t, strings.Contains(err.Error(), id[:12]), err.Error())
}
