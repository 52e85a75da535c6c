package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

func volumeWeb(spec core.ServiceSpec) core.ServiceSpec {
	spec.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	return spec
}

// R58 (held, not refused): the sequential replacement of a single-writer
// service publishes its host as held (no backend, bounded by the readiness
// timeout plus the predecessor's grace) before the old container stops,
// and the new generation's route after readiness, which ends the hold.
func TestR58_SequentialReplacementHoldsBetweenGenerations(t *testing.T) {
	h := depSeedWeb(t, volumeWeb(coretest.WebSpec(2*time.Second)))
	h.Runtime.NextIDs = []string{"c-new"}
	before := h.Clock.Now()
	_, err := depDeploy(t, h, engine.DeployRequest{}, volumeWeb(depNewWeb(0)))
	require.NoError(t, err)

	graphs := h.Traffic.Graphs()
	require.Len(t, graphs, 2, "withdraw (held), then route")
	require.Len(t, graphs[0].HTTP, 1)
	held := graphs[0].HTTP[0]
	assert.Equal(t, "blog.example.com", held.Host)
	assert.Empty(t, held.Backends)
	require.NotNil(t, held.Hold)
	// Readiness timeout 1 s + predecessor grace 2 s.
	assert.Equal(t, before.Add(3*time.Second).UTC(), held.Hold.Until)
	assert.Less(t, h.Events.Index("traffic", ""), h.Events.Index("stop", "c-old"), "held before the old container stops")

	require.Len(t, graphs[1].HTTP, 1)
	assert.Nil(t, graphs[1].HTTP[0].Hold, "the new generation's route ends the hold")
	assert.Len(t, graphs[1].HTTP[0].Backends, 1)
	a, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Nil(t, a.Services["web"].HoldUntil)
}

// R58: a service that is not single-writer (a device) is withdrawn as
// before: no held route; during the gap its host answers 503 (an
// unavailable route), not 404.
func TestR58_NonSingleWriterSequentialIsNotHeld(t *testing.T) {
	dev := func(s core.ServiceSpec) core.ServiceSpec { s.Devices = []string{"/dev/dri/renderD128"}; return s }
	h := depSeedWeb(t, dev(coretest.WebSpec(0)))
	h.Runtime.NextIDs = []string{"c-new"}
	_, err := depDeploy(t, h, engine.DeployRequest{}, dev(depNewWeb(0)))
	require.NoError(t, err)
	graphs := h.Traffic.Graphs()
	require.Len(t, graphs, 2)
	assertUnavailable(t, graphs[0])
}

// assertUnavailable: g answers 503 for blog.example.com with no backend
// (R58/R41: a running app's host with no ready instance is never a 404).
func assertUnavailable(t *testing.T, g routetable.Graph) {
	t.Helper()
	assert.Equal(t, []routetable.HTTPRoute{{Host: "blog.example.com", App: "blog", Service: "web", Unavailable: true}}, g.HTTP)
}

// R58: when the replacement fails after the hold began, the hold ends at
// once (its record loses HoldUntil and the graph is rebuilt without the
// host), so held requests get 503 instead of waiting for the bound.
func TestR58_FailedReplacementEndsTheHold(t *testing.T) {
	h := depSeedWeb(t, volumeWeb(coretest.WebSpec(0)))
	h.Runtime.NextIDs = []string{"c-new"}
	h.Runtime.Fail(coretest.MStart, "c-new", errors.New("no such device"), 1)
	_, err := depDeploy(t, h, engine.DeployRequest{}, volumeWeb(depNewWeb(0)))
	require.Error(t, err)

	graphs := h.Traffic.Graphs()
	require.GreaterOrEqual(t, len(graphs), 2)
	require.Len(t, graphs[0].HTTP, 1)
	assert.NotNil(t, graphs[0].HTTP[0].Hold)
	assertUnavailable(t, graphs[len(graphs)-1]) // the hold ended: 503 at once
	a, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Nil(t, a.Services["web"].HoldUntil)
}

// R58, crash safety: a record left held by a crash keeps its hosts held
// until HoldUntil (the edge answers 503 after it); a record with binds is
// routed whatever HoldUntil says, so any publication ends the hold.
func TestR58_BuildGraphHeldRecord(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := coretest.WebSpec(0)
	spec.TCP = []core.L4Interface{{Port: 5432, Publish: "127.0.0.1:15432"}}
	a := core.Active{App: "blog", Services: map[string]*core.ActiveService{
		"web": {Container: "c-old", Spec: spec, HoldUntil: &until},
	}}
	g := engine.BuildGraph([]core.Active{a})
	assert.Equal(t, []routetable.HTTPRoute{{Host: "blog.example.com", App: "blog", Service: "web", Hold: &routetable.Hold{Until: until}}}, g.HTTP)
	assert.Equal(t, []routetable.L4Route{{Listen: "127.0.0.1:15432", App: "blog", Service: "web", Hold: &routetable.Hold{Until: until}}}, g.TCP)

	a.Services["web"].BackendBinds = map[int]int{8080: 17000, 5432: 17001}
	g = engine.BuildGraph([]core.Active{a})
	require.Len(t, g.HTTP, 1)
	assert.Nil(t, g.HTTP[0].Hold)
	assert.Equal(t, "127.0.0.1:17000", g.HTTP[0].Backends[0].Addr)
	require.Len(t, g.TCP, 1)
	assert.Equal(t, "127.0.0.1:17001", g.TCP[0].Backend)
}

// R58: a stopped app answers 503, not 404: stop publishes its public hosts
// as stopped routes (no backend); start routes them again.
func TestR58_StoppedAppHostsAreStoppedRoutes(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	g := h.Traffic.Last()
	assert.Equal(t, []routetable.HTTPRoute{{Host: "blog.example.com", App: "blog", Service: "web", Stopped: true}}, g.HTTP)

	_, err = h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	g = h.Traffic.Last()
	require.Len(t, g.HTTP, 1)
	assert.False(t, g.HTTP[0].Stopped)
	assert.Len(t, g.HTTP[0].Backends, 1)
}

// R58, crash safety: a crash between the withdrawal and the route leaves
// the service held in ACTIVE; the next reconcile ends the hold and
// publishes the real state (here the old container, still running, is
// verified and routed again).
func TestR58_ReconcileEndsAHoldACrashLeft(t *testing.T) {
	h := depSeedWeb(t, volumeWeb(coretest.WebSpec(0)))
	a, err := h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	until := h.Clock.Now().Add(time.Minute)
	a.Services["web"].BackendBinds, a.Services["web"].HoldUntil = nil, &until
	require.NoError(t, h.Store.SaveActive(h.Ctx(), a))

	_, err = h.Engine.Reconcile(h.Ctx(), []string{"blog"})
	require.NoError(t, err)
	a, err = h.Store.LoadActive(h.Ctx(), "blog")
	require.NoError(t, err)
	assert.Nil(t, a.Services["web"].HoldUntil)
	g := h.Traffic.Last()
	require.Len(t, g.HTTP, 1)
	assert.Nil(t, g.HTTP[0].Hold)
	assert.Len(t, g.HTTP[0].Backends, 1, "the running container is routed again")
}
