package docker

import (
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// The image's VOLUMEs, STOPSIGNAL and HEALTHCHECK come with ResolveImage.
func TestRuntime_ResolveImageReadsVolumesStopSignalAndHealthcheck(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 5*time.Minute)
	refs, err := testimages.Build(ctx, "voldb", "sigd")
	require.NoError(t, err)
	db, err := f.r.ResolveImage(ctx, refs["voldb"])
	require.NoError(t, err)
	assert.Equal(t, []string{"/data"}, db.Volumes)
	assert.Equal(t, "SIGQUIT", db.StopSignal)
	assert.False(t, db.HasHealthcheck)
	sd, err := f.r.ResolveImage(ctx, refs["sigd"])
	require.NoError(t, err)
	assert.True(t, sd.HasHealthcheck)
	assert.Empty(t, sd.Volumes)
}

// Cmd replaces only the image's CMD; the ENTRYPOINT still runs; the stop
// signal and the container keys reach the engine.
func TestS26_CmdKeepsTheImageEntrypoint(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	netID, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("net"), Labels: f.labels()})
	require.NoError(t, err)
	require.NotEmpty(t, netID)
	spec := f.httpdSpec("cmd")
	spec.Network = f.name("net")
	spec.Cmd = []string{"-version=from-cmd"}
	spec.StopSignal = "SIGINT"
	spec.RestartPolicy = "unless-stopped"
	spec.Options = core.ContainerOptions{Init: true, Resources: core.Resources{Memory: 64 << 20, Pids: 100},
		Logging: &core.Logging{Driver: "json-file", Options: map[string]string{"max-size": "10m", "max-file": "3"}}}
	id := f.createStart(spec)
	raw, err := f.r.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	c := raw.Container
	assert.Equal(t, "/httpd", c.Path, "the image's ENTRYPOINT runs")
	assert.Equal(t, []string{"-version=from-cmd"}, c.Args)
	assert.Equal(t, "SIGINT", c.Config.StopSignal)
	assert.Equal(t, int64(64<<20), c.HostConfig.Memory)
	require.NotNil(t, c.HostConfig.PidsLimit)
	assert.Equal(t, int64(100), *c.HostConfig.PidsLimit)
	assert.Equal(t, "json-file", c.HostConfig.LogConfig.Type)
	assert.Equal(t, "3", c.HostConfig.LogConfig.Config["max-file"])
	require.NotNil(t, c.HostConfig.Init)
	assert.True(t, *c.HostConfig.Init)
	assert.Equal(t, "unless-stopped", string(c.HostConfig.RestartPolicy.Name))
}
