package docker

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func TestRuntime_NetworkAliasesAndExtraNetworks(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	private, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("app"), Labels: f.labels()})
	require.NoError(t, err)
	shared, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("shared"), Labels: f.labels(), Internal: true})
	require.NoError(t, err)

	spec := f.httpdSpec("aliased")
	spec.Network = f.name("app")
	spec.Aliases = []string{"web"}
	spec.ExtraNetworks = []string{f.name("shared")}
	id := f.createStart(spec)

	raw, err := f.r.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	nets := raw.Container.NetworkSettings.Networks
	require.Contains(t, nets, f.name("app"))
	require.Contains(t, nets, f.name("shared"))
	assert.Equal(t, private, nets[f.name("app")].NetworkID)
	assert.Equal(t, shared, nets[f.name("shared")].NetworkID)
	assert.Contains(t, nets[f.name("app")].Aliases, "web")

	// The port answers at the endpoint BackendBinds reports (the address
	// on the private network, or the loopback fallback).
	binds, err := f.r.BackendBinds(ctx, id, spec.Ports)
	require.NoError(t, err)
	code, _ := get(t, "http://"+bindAddr(binds[0])+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	// A missing extra network fails creation and leaves no container behind.
	bad := f.httpdSpec("badnet")
	bad.Network = f.name("app")
	bad.ExtraNetworks = []string{f.name("missing")}
	_, err = f.r.CreateContainer(ctx, bad)
	assert.ErrorIs(t, err, core.ErrNotFound)
	left, err := f.r.ListManaged(ctx, map[string]string{labelRun: f.run, core.LabelService: "badnet"})
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestRuntime_EnsureNetworkAndVolumeAreIdempotent(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 30*time.Second)
	// A network whose name contains ours must not be mistaken for it.
	longer, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("net-2"), Labels: f.labels()})
	require.NoError(t, err)
	id1, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("net"), Labels: f.labels("k", "v")})
	require.NoError(t, err)
	assert.NotEqual(t, longer, id1)
	id2, err := f.r.EnsureNetwork(ctx, core.NetworkSpec{Name: f.name("net"), Labels: f.labels("k", "v")})
	require.NoError(t, err)
	assert.Equal(t, id1, id2)
	nw, err := f.r.Client().NetworkInspect(ctx, id1, client.NetworkInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bridge", nw.Network.Driver)
	assert.Equal(t, "v", nw.Network.Labels["k"])

	vs := core.VolumeSpec{Name: f.name("vol"), Labels: f.labels("k", "v")}
	require.NoError(t, f.r.EnsureVolume(ctx, vs))
	require.NoError(t, f.r.EnsureVolume(ctx, vs))
	vol, err := f.r.Client().VolumeInspect(ctx, vs.Name, client.VolumeInspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v", vol.Volume.Labels["k"])

	_, err = f.r.EnsureNetwork(ctx, core.NetworkSpec{})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorIs(t, f.r.EnsureVolume(ctx, core.VolumeSpec{}), core.ErrInvalid)
}

// R3: data in a volume survives the container's removal and is seen by
// its replacement; RemoveContainer never removes volumes.
func TestR3_VolumeDataSurvivesRemoval(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t, 60*time.Second)
	vol := f.name("data")
	require.NoError(t, f.r.EnsureVolume(ctx, core.VolumeSpec{Name: vol, Labels: f.labels()}))
	spec := func(suffix string) core.ContainerSpec {
		return core.ContainerSpec{
			Name:   f.name(suffix),
			Image:  f.images["kv"],
			Labels: f.labels(core.LabelService, "db"),
			Ports:  []core.PortSpec{{Port: 8080, Protocol: "tcp"}},
			Mounts: []core.Mount{{Type: core.MountVolume, Source: vol, Target: "/data"}},
		}
	}
	first := f.createStart(spec("db1"))
	binds, err := f.r.BackendBinds(ctx, first, []core.PortSpec{{Port: 8080}})
	require.NoError(t, err)
	base := fmt.Sprintf("http://127.0.0.1:%d", binds[0].HostPort)
	get(t, base+"/healthz")
	req, err := http.NewRequest(http.MethodPut, base+"/k/greeting", strings.NewReader("hello"))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	// Without force a running container is a state conflict.
	assert.ErrorIs(t, f.r.RemoveContainer(ctx, first, false), core.ErrConflict)
	require.NoError(t, f.r.StopContainer(ctx, first, 5*time.Second))
	require.NoError(t, f.r.RemoveContainer(ctx, first, false))
	_, err = f.r.InspectContainer(ctx, first)
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = f.r.Client().VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
	require.NoError(t, err, "volume must survive container removal")

	second := f.createStart(spec("db2"))
	binds, err = f.r.BackendBinds(ctx, second, []core.PortSpec{{Port: 8080}})
	require.NoError(t, err)
	code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/k/greeting", binds[0].HostPort))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "hello", body)

	// Force removes a running container, still keeping the volume.
	require.NoError(t, f.r.RemoveContainer(ctx, second, true))
	_, err = f.r.Client().VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
	require.NoError(t, err)
}

// R25: StopContainer sends SIGTERM and kills after the grace.
